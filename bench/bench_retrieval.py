"""Retrieval quality on ../shared/bench: LongMemEval (oracle) and SciFact.

Each doc becomes a note record (its text the body; LongMemEval's session date its
`created`), indexed by cortex's own index; each query runs through cortex's own query
path (filters, fusion, memory priors) in three modes. Prints Recall@5, Recall@10,
MRR@10 and nDCG@10, overall and per category, plus plain RRF (k=60, top 100 a side) as
the reference the fusion has to beat, and hybrid with the time a question names ignored
(what `cortex.search.when` adds: docs/query.md, step 8) and without pseudo-relevance
feedback (what `query.FEEDBACK_SHARE` adds: step 9). Hybrid's main metric is also
printed per half of the questions, split by a hash of their id: a setting is chosen on
half A and reported on half B, which it never saw.

    .venv/bin/python bench/bench_retrieval.py [lme|scifact ...]

The data is read from ../shared/bench/data beside the repository, or from the folder
CORTEX_BENCH_DATA names.
"""

from __future__ import annotations

import hashlib
import math
import sys
from contextlib import contextmanager
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data import DATA, data_files, lme_date, load  # noqa: E402

from cortex.search import fusion, query, when  # noqa: E402
from cortex.search.index import SearchIndex  # noqa: E402
from cortex.search.query import search  # noqa: E402
from cortex.search.records import NoteRecord  # noqa: E402

# Issue 15's targets for hybrid (the semantic side alone should match a MiniLM transformer: 0.47 / 0.645).
TARGETS = {"lme": ("R@10", 0.75), "scifact": ("nDCG@10", 0.72)}
NAMES = {"lme": "LongMemEval oracle", "scifact": "SciFact"}


def metrics(ranking: list[str], relevant: set[str]) -> dict[str, float]:
    top = ranking[:10]
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(top) if d in relevant)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return {
        "R@5": len(relevant & set(ranking[:5])) / len(relevant),
        "R@10": len(relevant & set(top)) / len(relevant),
        "MRR@10": next((1 / (i + 1) for i, d in enumerate(top) if d in relevant), 0.0),
        "nDCG@10": dcg / idcg if idcg else 0.0,
    }


def mean(rows: list[dict]) -> dict[str, float]:
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]} if rows else {}


def half(qid: str) -> str:
    """"A" (where settings are chosen) or "B" (held out), by a hash of the question's id."""
    return "AB"[hashlib.sha256(str(qid).encode()).digest()[0] & 1]


def run(name: str) -> dict:
    docs, queries = load(name)
    root = Path(tempfile.mkdtemp(prefix=f"cortex-bench-{name}-"))
    records = [
        NoteRecord(path=f"vault/resources/{i}.md", body=d["text"], id=d["id"], type="resource", category="entity",
                   partition="vault", created_ts=lme_date(d.get("session_date")), importance=0.5, confidence=0.9)
        for i, d in enumerate(docs)
    ]
    ids = {r.path: r.id for r in records}
    idx = SearchIndex(root)
    start = time.perf_counter()
    idx.build(records)
    build_s = time.perf_counter() - start
    per_mode: dict[str, list] = defaultdict(list)
    per_cat: dict[tuple[str, str], list] = defaultdict(list)
    per_half: dict[str, list] = defaultdict(list)
    timing = defaultdict(float)
    for q in queries:
        relevant = set(q["relevant_ids"])
        now = datetime.fromtimestamp(lme_date(q.get("question_date")), timezone.utc) if q.get("question_date") else None
        for mode in ("lexical", "semantic", "hybrid"):
            t = time.perf_counter()
            hits = search(idx, q["question"], limit=10, mode=mode, now=now)
            timing[mode] += time.perf_counter() - t
            m = metrics([ids[h.path] for h in hits], relevant)
            per_mode[mode].append(m)
            per_cat[(mode, q.get("category") or "-")].append(m)
        with no_feedback():  # what the feedback adds (docs/query.md, step 9)
            hits = search(idx, q["question"], limit=10, mode="hybrid", now=now)
        per_mode[NO_FEEDBACK].append(metrics([ids[h.path] for h in hits], relevant))
        per_half[half(q["qid"])].append(per_mode["hybrid"][-1])
        per_half[half(q["qid"]) + NO_FEEDBACK].append(per_mode[NO_FEEDBACK][-1])
        if when.span(q["question"], (now or datetime.now(timezone.utc)).timestamp()) is not None:
            with no_time_in_questions():  # what the time in the question adds (docs/query.md, step 8)
                hits = search(idx, q["question"], limit=10, mode="hybrid", now=now)
            per_mode[NO_TIME].append(metrics([ids[h.path] for h in hits], relevant))
        else:
            per_mode[NO_TIME].append(per_mode["hybrid"][-1])
        # reference: plain RRF of each side's top 100, no priors
        lex = idx.lexical.search(q["question"], 100)
        sem = idx.vectors.top(idx.embedder.encode([q["question"]])[0], 100)
        per_mode["plain RRF"].append(metrics([ids[p] for p, _ in fusion.rrf(lex, sem)], relevant))
    return {"name": name, "docs": len(docs), "queries": len(queries), "build_s": build_s,
            "modes": {m: mean(rows) for m, rows in per_mode.items()},
            "cats": {k: mean(rows) for k, rows in per_cat.items()},
            "halves": {h: mean(rows) for h, rows in sorted(per_half.items())},
            "ms_per_query": {m: 1000 * t / len(queries) for m, t in timing.items()}}


NO_TIME = "hybrid, time in questions ignored"
NO_FEEDBACK = "hybrid, no feedback"


def parse_with_time_option(parser, argv: list[str]):
    """`parser`'s arguments plus `--time-ignored`: when given, every question from here on
    is asked as if it named no time (for the rest of this one-shot bench process)."""
    parser.add_argument("--time-ignored", action="store_true",
                        help="ask every question as if it named no time (the figures before docs/query.md's step 8)")
    args = parser.parse_args(argv)
    if args.time_ignored:
        when.span = _names_no_time
    return args


def _names_no_time(text: str, now_ts: float) -> None:
    return None


@contextmanager
def no_feedback():
    """Queries ranked without pseudo-relevance feedback: the figures of before
    docs/query.md's step 9, for comparison."""
    share = query.FEEDBACK_SHARE
    query.FEEDBACK_SHARE = 0.0
    try:
        yield
    finally:
        query.FEEDBACK_SHARE = share


@contextmanager
def no_time_in_questions():
    """Questions asked as if they named no time (`cortex.search.when`): the figures of
    before docs/query.md's step 8, for comparison."""
    span = when.span
    when.span = _names_no_time
    try:
        yield
    finally:
        when.span = span


def table(res: dict) -> str:
    keys = ["R@5", "R@10", "MRR@10", "nDCG@10"]
    out = [f"\n### {NAMES[res['name']]}: {res['docs']} docs, {res['queries']} queries "
           f"(index built in {res['build_s']:.1f}s)\n",
           "| mode | " + " | ".join(keys) + " | ms/query |", "|---|" + "---|" * (len(keys) + 1)]
    for mode in ("lexical", "semantic", "hybrid", NO_TIME, NO_FEEDBACK, "plain RRF"):
        row = res["modes"].get(mode)
        if row is None:
            continue
        ms = res["ms_per_query"].get(mode)
        out.append(f"| {mode} | " + " | ".join(f"{row[k]:.3f}" for k in keys) + f" | {'' if ms is None else f'{ms:.1f}'} |")
    cats = sorted({c for _, c in res["cats"]})
    if len(cats) > 1:
        out += ["", f"per category ({keys[1]} / nDCG@10):", "",
                "| category | lexical | semantic | hybrid |", "|---|---|---|---|"]
        for c in cats:
            cells = [f"{res['cats'][(m, c)]['R@10']:.3f} / {res['cats'][(m, c)]['nDCG@10']:.3f}"
                     for m in ("lexical", "semantic", "hybrid")]
            out.append(f"| {c} | " + " | ".join(cells) + " |")
    metric, target = TARGETS[res["name"]]
    hyb, lex, sem = (res["modes"][m] for m in ("hybrid", "lexical", "semantic"))
    best_single = {k: max(lex[k], sem[k]) for k in keys}
    met = "met" if hyb[metric] >= target else "not met"
    out += ["", f"hybrid {metric} {hyb[metric]:.3f} (target >= {target}: {met}); "
            f"hybrid >= best single mode on {sum(hyb[k] >= best_single[k] - 1e-9 for k in keys)}/4 metrics, "
            f"strictly better on {sum(hyb[k] > best_single[k] + 1e-9 for k in keys)}/4",
            f"hybrid {metric} by half: all {hyb[metric]:.3f}, "
            + ", ".join(f"{h} {res['halves'][h][metric]:.3f}" for h in "AB")
            + f"; {NO_FEEDBACK}: all {res['modes'][NO_FEEDBACK][metric]:.3f}, "
            + ", ".join(f"{h} {res['halves'][h + NO_FEEDBACK][metric]:.3f}" for h in "AB")
            + " (A: where settings are chosen; B: held out)"]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="SET", help="lme, scifact or both (default both)")
    names = parser.parse_args(argv).names or ["lme", "scifact"]
    if unknown := sorted(set(names) - set(NAMES)):
        parser.error(f"unknown set {', '.join(unknown)} (choose from {', '.join(sorted(NAMES))})")
    missing = [name for name in names if not data_files(name)[0].exists()]
    if missing:
        parser.exit(2, f"bench_retrieval: no data for {', '.join(missing)} in {DATA}: "
                       "put ../shared/bench beside the repository or set CORTEX_BENCH_DATA\n")
    for name in names:
        print(table(run(name)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
