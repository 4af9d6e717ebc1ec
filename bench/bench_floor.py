"""The relevance floor: does a query that cannot be answered find nothing, while the real
questions keep their answers?

Two corpora of ../shared/bench (LongMemEval oracle, SciFact), each indexed as in
bench_retrieval.py, and four kinds of query run against each:

* `real`: the corpus's own questions, with relevance judgments;
* `cross`: the other corpus's questions (SciFact claims asked of chat turns, questions
  about a person's past asked of abstracts): nothing there answers them;
* `nonsense`: bench/data/floor_nonsense.jsonl (random letters, keyboard mash, salads of
  rare words; written by bench/floor_queries.py);
* `everyday`: bench/data/floor_unrelated.jsonl, everyday questions on topics absent
  from both corpora, written by hand.

Every query is split by a hash of its id into a calibration half and a held-out half.
On the calibration half the floor is swept and the highest one that costs the real
questions at most `TOLERANCE` (LongMemEval R@10, SciFact nDCG@10) is reported beside the
shipped `fusion.RELEVANCE_FLOOR`; then, at the shipped floor, the answer gate
(`fusion.answers`: a query is answered only when one result matches enough of it and is
about it) is swept over its matched share, relevance and cosine (`meaning`), and the
strictest one within `TOLERANCE` on both corpora is reported beside the shipped one and
the gate on words alone; the held-out half is then run through cortex's query
path with the floor off (`min_score=0`) and on (the default), and the share of each
kind of unanswerable query that finds nothing is printed with the real questions'
figures side by side.

The rare-word rule (a query holding a rare word no note has asks a closer cosine) is swept
on its own table. `--fraction 0.1` runs it all on vaults a tenth the size.

    .venv/bin/python bench/bench_floor.py [lme|scifact ...] [--fraction F]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _data import lme_date, load  # noqa: E402
from bench_retrieval import metrics, parse_with_time_option  # noqa: E402

from cortex.search import fusion  # noqa: E402
from cortex.search.index import SearchIndex  # noqa: E402
from cortex.search.query import meaning_lookup, rare_unseen, search  # noqa: E402
from cortex.search.records import NoteRecord  # noqa: E402

NAMES = {"lme": "LongMemEval oracle", "scifact": "SciFact"}
METRIC = {"lme": "R@10", "scifact": "nDCG@10"}
TOLERANCE = 0.005  # what "unchanged" allows on the real questions' metric
SWEEP = [round(0.01 * i, 2) for i in range(31)]
KINDS = ("cross", "letters", "mash", "salad", "everyday")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def held_out(kind: str, qid: str) -> bool:
    """Half of each kind, by a hash of its id: the same split on every run."""
    return zlib.crc32(f"{kind}:{qid}".encode()) % 2 == 1


def query_sets(name: str, data: dict) -> list[tuple[str, dict]]:
    other = "scifact" if name == "lme" else "lme"
    nonsense = _lines(HERE / "data" / "floor_nonsense.jsonl")
    everyday = _lines(HERE / "data" / "floor_unrelated.jsonl")
    return ([("real", q) for q in data[name][1]] + [("cross", q) for q in data[other][1]]
            + [(q["kind"], q) for q in nonsense] + [("everyday", q) for q in everyday])


def build(name: str, docs: list[dict]) -> tuple[SearchIndex, dict[str, str]]:
    root = Path(tempfile.mkdtemp(prefix=f"cortex-bench-floor-{name}-"))
    records = [
        NoteRecord(path=f"vault/resources/{i}.md", body=d["text"], id=d["id"], type="resource", category="entity",
                   partition="vault", created_ts=lme_date(d.get("session_date")), importance=0.5, confidence=0.9)
        for i, d in enumerate(docs)
    ]
    idx = SearchIndex(root)
    idx.build(records)
    return idx, {r.path: r.id for r in records}


def question_time(q: dict) -> datetime | None:
    """When a LongMemEval question was asked (recency counts from then), else now."""
    return datetime.fromtimestamp(lme_date(q.get("question_date")), timezone.utc) if q.get("question_date") else None


def ask(idx, q: dict, min_score: float | None) -> list:
    return search(idx, q["question"], limit=10, now=question_time(q), min_score=min_score)


def real_metric(name: str, rows: list[tuple[list[str], set[str]]]) -> float:
    return sum(metrics(ranking, rel)[METRIC[name]] for ranking, rel in rows) / max(1, len(rows))


def calibrate(name: str, idx, ids: dict, queries: list[tuple[str, dict]]) -> tuple[float, list[str]]:
    """On the calibration half: the metric and each kind's share found-nothing at every
    floor of the sweep (applied to the floor-off top 10: the floor only removes results),
    and the highest floor within `TOLERANCE`."""
    real, negatives = [], defaultdict(list)
    for kind, q in queries:
        if held_out(kind, q["qid"]):
            continue
        found = ask(idx, q, 0.0)
        GATE_ROWS[name, "calibration"].append((kind, gate_hits(idx, ids, q, found), set(q.get("relevant_ids", ())),
                                               rare_words(idx, q)))
        hits = [(ids[h.path], h.why["relevance"]) for h in found]
        if kind == "real":
            real.append((hits, set(q["relevant_ids"])))
        else:
            negatives[kind].append(max((r for _, r in hits), default=0.0))
    base = real_metric(name, [([d for d, _ in hits], rel) for hits, rel in real])
    lines = [f"| floor | {METRIC[name]} | " + " | ".join(KINDS) + " |", "|---|---|" + "---|" * len(KINDS)]
    picked = 0.0
    for floor in SWEEP:
        value = real_metric(name, [([d for d, r in hits if r >= floor], rel) for hits, rel in real])
        if base - value <= TOLERANCE:
            picked = floor
        shares = [sum(best < floor for best in negatives[k]) / max(1, len(negatives[k])) for k in KINDS]
        lines.append(f"| {floor:.2f} | {value:.3f} | " + " | ".join(f"{s:.2f}" for s in shares) + " |")
    return picked, lines


# floor off, per corpus and half ("calibration", "held-out"):
# (kind, [(id, why, cosine)], relevant ids, how many of its words are rare and in no note)
GATE_ROWS: dict[tuple[str, str], list] = defaultdict(list)
GATE_MATCHED = [round(0.05 * i, 2) for i in range(9)]
GATE_RELEVANCE = [0.1, 0.15, 0.2, 0.25, 0.3]
GATE_MEANING = [-1.0, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5]  # -1: no cosine asked
GATE_UNSEEN = [-1.0, 0.4, 0.45, 0.5, 0.55, 0.6]  # -1: a word no note has asks nothing more


def rare_words(idx, q: dict) -> int:
    """How many of the query's words are rare words no note has (`query.rare_unseen`)."""
    return rare_unseen(idx, idx.lexical.search_evidence(q["question"], 1).unknown)


def gate_hits(idx, ids: dict, q: dict, hits) -> list[tuple[str, dict, float | None]]:
    """(id, why, cosine with the question) of each result, the cosine as the gate reads it."""
    ranked = [(h.score, h.path, dict(h.why)) for h in hits]
    idx.ensure_vectors()
    meaning_of = meaning_lookup(idx, idx.embedder.encode([q["question"]])[0], ranked)
    return [(ids[path], why, meaning_of(i)) for i, (_, path, why) in enumerate(ranked)]


def gate_effect(name: str, matched: float, relevance: float, meaning: float = fusion.ANSWER_MEANING,
                half: str = "calibration", unseen: float = fusion.ANSWER_UNSEEN_MEANING) -> tuple[float, dict[str, float]]:
    """On one half, at the shipped floor: what the answer gate (matched, relevance,
    meaning, the meaning asked when a word is in no note; the cosine escape and the
    whole-query rule as shipped) costs the real questions, and each kind's share finding
    nothing."""
    def answered(hits, rare) -> bool:
        over = [(w, cos) for _, w, cos in hits if w["relevance"] >= fusion.RELEVANCE_FLOOR]
        return fusion.answers("hybrid", None, [w for w, _ in over], meaning_of=lambda i: over[i][1],
                              matched=matched, relevance=relevance, meaning=meaning, unseen=rare,
                              unseen_meaning=unseen)

    base, gated, empty = [], [], defaultdict(list)
    for kind, hits, relevant, rare in GATE_ROWS[name, half]:
        kept = [d for d, w, _ in hits if w["relevance"] >= fusion.RELEVANCE_FLOOR]
        if kind == "real":
            base.append((kept, relevant))
            gated.append((kept if answered(hits, rare) else [], relevant))
        else:
            empty[kind].append(not answered(hits, rare))
    cost = real_metric(name, base) - real_metric(name, gated)
    return cost, {k: sum(v) / max(1, len(v)) for k, v in empty.items()}


def calibrate_gate(names: list[str]) -> list[str]:
    best = None
    for matched in GATE_MATCHED:
        for relevance in GATE_RELEVANCE:
            for meaning in GATE_MEANING:
                effects = {n: gate_effect(n, matched, relevance, meaning) for n in names}
                if max(cost for cost, _ in effects.values()) > TOLERANCE:
                    continue
                caught = sum(sum(shares.values()) for _, shares in effects.values())
                if best is None or caught > best[0]:
                    best = (caught, matched, relevance, meaning)
    lines = [f"answer gate at the shipped floor, picked on the calibration half, shown on both (cost: "
             f"{' / '.join(METRIC[n] for n in names)} lost to the gate; shares finding nothing; meaning -1: "
             f"no cosine asked)\n",
             "| matched, relevance, meaning | half | cost | " + " | ".join(KINDS) + " |",
             "|---|---|---|" + "---|" * len(KINDS)]
    shown = [(fusion.ANSWER_MATCHED, fusion.ANSWER_RELEVANCE, -1.0, -1.0, "words only"),
             (fusion.ANSWER_MATCHED, fusion.ANSWER_RELEVANCE, fusion.ANSWER_MEANING, -1.0, "no rare-word rule"),
             (fusion.ANSWER_MATCHED, fusion.ANSWER_RELEVANCE, fusion.ANSWER_MEANING, fusion.ANSWER_UNSEEN_MEANING,
              "shipped")]
    if best is not None:
        shown.append((*best[1:], fusion.ANSWER_UNSEEN_MEANING, "picked"))
    lines += _gate_rows(names, shown)
    # the cosine asked of the answering note when the query holds a word no note has,
    # the rest of the gate as shipped
    lines += ["", "rare-word rule at the shipped gate (meaning asked when the query holds a rare word no note has; "
              "-1: no more than the gate's)\n",
              "| matched, relevance, meaning, unseen | half | cost | " + " | ".join(KINDS) + " |",
              "|---|---|---|" + "---|" * len(KINDS)]
    lines += _gate_rows(names, [(fusion.ANSWER_MATCHED, fusion.ANSWER_RELEVANCE, fusion.ANSWER_MEANING, unseen,
                                 "shipped" if unseen == fusion.ANSWER_UNSEEN_MEANING else "")
                                for unseen in GATE_UNSEEN], unseen_column=True)
    return lines


def _gate_rows(names: list[str], shown: list[tuple], unseen_column: bool = False) -> list[str]:
    lines = []
    for matched, relevance, meaning, unseen, label in shown:
        for half in ("calibration", "held-out"):
            effects = {n: gate_effect(n, matched, relevance, meaning, half, unseen) for n in names}
            cost = " / ".join(f"{effects[n][0]:.3f}" for n in names)
            cells = " | ".join(" / ".join(f"{effects[n][1].get(k, 0.0):.2f}" for n in names) for k in KINDS)
            values = f"{matched:.2f}, {relevance:.2f}, {meaning:.2f}" + (f", {unseen:.2f}" if unseen_column else "")
            lines.append(f"| {values}{f' ({label})' if label else ''} | {half} | {cost} | {cells} |")
    return lines


def report(name: str, idx, ids: dict, queries: list[tuple[str, dict]]) -> list[str]:
    """The held-out half through the real query path, floor off and on."""
    real = {"off": [], "on": []}
    empty = {"off": defaultdict(list), "on": defaultdict(list)}
    for kind, q in queries:
        if not held_out(kind, q["qid"]):
            continue
        for state, min_score in (("off", 0.0), ("on", None)):
            hits = ask(idx, q, min_score)
            if state == "off":
                GATE_ROWS[name, "held-out"].append((kind, gate_hits(idx, ids, q, hits), set(q.get("relevant_ids", ())),
                                                    rare_words(idx, q)))
            if kind == "real":
                real[state].append(([ids[h.path] for h in hits], set(q["relevant_ids"])))
            else:
                empty[state][kind].append(not hits)
    keys = ["R@5", "R@10", "MRR@10", "nDCG@10"]
    out = ["| held-out, floor | real: " + " | ".join(keys) + " | " + " | ".join(f"{k}: nothing found" for k in KINDS) + " |",
           "|---|" + "---|" * (len(keys) + len(KINDS))]
    for state in ("off", "on"):
        rows = real[state]
        means = {k: sum(metrics(r, rel)[k] for r, rel in rows) / max(1, len(rows)) for k in keys}
        shares = [sum(empty[state][k]) / max(1, len(empty[state][k])) for k in KINDS]
        label = "off (--min-score 0)" if state == "off" else f"on ({fusion.RELEVANCE_FLOOR}, answer gate)"
        out.append(f"| {label} | " + " | ".join(f"{means[k]:.3f}" for k in keys) + " | "
                   + " | ".join(f"{s:.2f}" for s in shares) + " |")
    counts = {k: len(empty["on"][k]) for k in KINDS}
    out.append(f"\nheld-out queries: real {len(real['on'])}, " + ", ".join(f"{k} {n}" for k, n in counts.items()))
    return out


def smaller(data: dict, fraction: float) -> dict:
    """Each corpus as a smaller vault: a random `fraction` of its questions with their
    answers, and the same fraction of its other documents (the same draw every run)."""
    out = {}
    for name, (docs, queries) in data.items():
        rng = random.Random(7)
        queries = rng.sample(queries, int(len(queries) * fraction))
        wanted = {i for q in queries for i in q["relevant_ids"]}
        others = [d for d in docs if d["id"] not in wanted]
        out[name] = ([d for d in docs if d["id"] in wanted] + rng.sample(others, int(len(others) * fraction)), queries)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", metavar="lme|scifact", help="the corpora to run (default: both)")
    parser.add_argument("--fraction", type=float, default=1.0,
                        help="vaults of this fraction of each corpus (its questions with their answers, and the rest)")
    args = parse_with_time_option(parser, argv)
    names = args.corpora or ["lme", "scifact"]
    if set(names) - set(NAMES):
        parser.error(f"unknown corpus: {', '.join(sorted(set(names) - set(NAMES)))} (lme, scifact)")
    data = {n: load(n) for n in ("lme", "scifact")}
    if args.fraction < 1.0:
        data = smaller(data, args.fraction)
    for name in names:
        start = time.perf_counter()
        idx, ids = build(name, data[name][0])
        queries = query_sets(name, data)
        picked, sweep = calibrate(name, idx, ids, queries)
        held = report(name, idx, ids, queries)
        print(f"\n### {NAMES[name]}: the relevance floor ({time.perf_counter() - start:.0f}s)\n")
        print(f"calibration half: share of each kind finding nothing, and the real questions' {METRIC[name]}, by floor "
              f"(floor off: 0.00)\n")
        print("\n".join(sweep))
        print(f"\nhighest floor costing at most {TOLERANCE} {METRIC[name]} on the calibration half: {picked:.2f} "
              f"(shipped: fusion.RELEVANCE_FLOOR = {fusion.RELEVANCE_FLOOR})\n")
        print("\n".join(held), flush=True)
    print()
    print("\n".join(calibrate_gate(names)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
