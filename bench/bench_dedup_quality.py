"""Near-duplicate detection quality on a labelled set of memory pairs.

`bench/data/dedup_pairs.jsonl`: pairs of memory bodies of the same type, hand-written
in the example vault's world. `duplicate: true` — paraphrases an agent produces for one
memory on different days, which `cortex dedup` should merge; `duplicate: false` —
related but different memories it must keep apart (`kind`: the same words about another
entity, an opposite preference or reversed comparison, other dates or times, other
numbers, or a related claim).

Each pair goes through the very decision `cortex dedup` makes (`dedup.verdict`: static
embedding cosine at the threshold, then the lexical check). Printed: precision and recall
at the default threshold (targets: precision ≥ 0.95, recall ≥ 0.70), misses per kind,
and a sweep of thresholds. Figures only.

Run: `.venv/bin/python bench/bench_dedup_quality.py [--show-errors]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cortex.embed import get_model  # noqa: E402
from cortex.maintenance.settings import DEFAULT_DEDUP_THRESHOLD  # noqa: E402
from cortex.maintenance.dedup_check import verdict  # noqa: E402

PAIRS = ROOT / "bench" / "data" / "dedup_pairs.jsonl"


def score(rows, cosines, threshold: float):
    tp = fp = fn = tn = 0
    wrong = []
    for row, cos in zip(rows, cosines):
        merged, why = verdict(float(cos), row["a"], row["b"], threshold)
        if merged and row["duplicate"]:
            tp += 1
        elif merged:
            fp += 1
            wrong.append((row, cos, why))
        elif row["duplicate"]:
            fn += 1
            wrong.append((row, cos, why))
        else:
            tn += 1
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, tp, fp, fn, tn, wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-errors", action="store_true", help="Print every misjudged pair.")
    args = parser.parse_args()
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = time.perf_counter()
    model = get_model()
    a = model.encode([r["a"] for r in rows])
    b = model.encode([r["b"] for r in rows])
    cosines = (a * b).sum(axis=1)
    kinds = Counter(r["kind"] for r in rows)
    print(f"dedup quality: {len(rows)} labelled pairs ({sum(r['duplicate'] for r in rows)} duplicates; "
          + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")")
    p, r, tp, fp, fn, tn, wrong = score(rows, cosines, DEFAULT_DEDUP_THRESHOLD)
    print(f"  default threshold {DEFAULT_DEDUP_THRESHOLD:.2f}: precision {p:.3f} (target ≥ 0.95)   "
          f"recall {r:.3f} (target ≥ 0.70)   [tp {tp}  fp {fp}  fn {fn}  tn {tn}]")
    missed = Counter(row["kind"] for row, _, _ in wrong)
    print("  misjudged by kind: " + (", ".join(f"{k} {n}/{kinds[k]}" for k, n in sorted(missed.items())) or "none"))
    print("  threshold sweep:")
    for t in (0.75, 0.80, 0.82, 0.85, 0.88, 0.90, 0.92):
        sp, sr, *_ = score(rows, cosines, t)
        print(f"    {t:.2f}  precision {sp:.3f}  recall {sr:.3f}")
    cos_only = sum(1 for row, c in zip(rows, cosines) if c >= DEFAULT_DEDUP_THRESHOLD and not row["duplicate"])
    print(f"  without the lexical check, {cos_only} different-memory pairs would pass the cosine threshold")
    if args.show_errors:
        for row, cos, why in wrong:
            label = "missed " if row["duplicate"] else "merged!"
            print(f"    {label} {cos:.3f} [{row['kind']}] {why}: {row['a']!r} / {row['b']!r}")
    print(f"  ({time.perf_counter() - start:.2f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
