"""Contradiction detection on labelled pairs of memories: the rule `cortex dedup` uses to
archive a memory the newest one of its subject contradicts (`dedup_check.changed_value`).

Two sets, printed apart:

- `bench/data/contradiction_pairs.jsonl` — written together with the rule (so a
  development set): `contradiction: true` when `b`, written later, states another value
  for the very thing `a` states (a time, a number, a date, the polarity, one state
  swapped for its opposite); `false` for another subject with another value, a value
  added, a detail added, a related claim, a paraphrase, other units for the same value.
- held out: the near-duplicate set's 134 pairs that are *not* duplicates
  (`bench/data/dedup_pairs.jsonl`, written in an earlier round for another purpose),
  each judged contradiction or not by a separate annotator who saw neither the rule nor
  its code (`bench/data/contradiction_heldout.jsonl`; `ambiguous` marks the pairs the
  annotator found arguable, printed with and without them); and the same set's 128
  paraphrases, where any pair flagged is a false alarm.

Also printed: how many of the pairs found share a subject key (`subject_key`, the
blocking that keeps the job linear), which the job needs to compare them at all.
Targets: precision ≥ 0.95 on both sets. Figures, not pass/fail.

Run: `.venv/bin/python bench/bench_contradiction.py [--show-errors]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cortex.maintenance.dedup_check import changed_value, subject_key  # noqa: E402

DATA = ROOT / "bench" / "data"


def _load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def measure(title: str, rows: list[dict], show: bool) -> None:
    tp = fp = fn = tn = blocked = 0
    misses: Counter = Counter()
    for row in rows:
        found = changed_value(row["a"], row["b"])
        if found and subject_key(row["a"]) == subject_key(row["b"]):
            blocked += 1
        if found and row["contradiction"]:
            tp += 1
        elif found:
            fp += 1
            if show:
                print(f"  false alarm ({found}): {row['a']!r} / {row['b']!r}")
        elif row["contradiction"]:
            fn += 1
            misses[row.get("kind", "?")] += 1
            if show:
                print(f"  missed: {row['a']!r} / {row['b']!r}")
        else:
            tn += 1
    precision = f"{tp / (tp + fp):.3f}" if tp + fp else "—"
    recall = f"{tp / (tp + fn):.3f}" if tp + fn else "—"
    print(f"{title:<56} {len(rows):>5} {tp + fn:>7} {precision:>9} {recall:>7}   {fp} false alarm(s), "
          f"{blocked}/{tp + fp} found within one subject key")
    if misses:
        print(f"{'':<56} missed by kind: {dict(sorted(misses.items()))}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show-errors", action="store_true", help="print every false alarm and miss")
    args = parser.parse_args()
    print(f"{'set':<56} {'pairs':>5} {'contra':>7} {'precision':>9} {'recall':>7}")
    measure("development (contradiction_pairs.jsonl)", _load("contradiction_pairs.jsonl"), args.show_errors)
    heldout = _load("contradiction_heldout.jsonl")
    measure("held out: dedup set's non-duplicates, judged apart", heldout, args.show_errors)
    measure("  the same, less the pairs the annotator found ambiguous", [r for r in heldout if not r["ambiguous"]],
            False)
    paraphrases = [dict(r, contradiction=False) for r in _load("dedup_pairs.jsonl") if r["duplicate"]]
    measure("held out: dedup set's paraphrases (all false)", paraphrases, args.show_errors)
    print("targets: precision ≥ 0.95 (a memory archived wrongly is worse than one kept)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
