"""The relevance floor where an agent's memory actually lives: small vaults of short
observations, one per conversation.

bench_floor.py asks its questions of one large corpus of whole documents. An agent's
vault is more often a few hundred observations of a sentence or two, and a question is
asked of its own conversation's vault. Here LongMemEval's user turns are cut into
observation-sized notes (sentences joined up to 300 characters) and each block of 20
questions gets a vault of its own sessions' notes (~300–900 notes, past the gate's
SMALL_VAULT); each vault is asked its 20 real questions (a hit counts for the turn it was
cut from) and 10 each of SciFact claims, generated nonsense and everyday questions on
absent topics (bench/data). Small vaults lack many words of the questions they can
answer, which is what a rule about words no note has must survive.

Printed: the real questions' R@10 and each kind's share finding nothing, floor off and on
(cortex's query path, held-out half), then the answer gate's rules swept on both halves
as in bench_floor.py.

    .venv/bin/python bench/bench_floor_scoped.py [--block 20]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_floor as bf  # noqa: E402
from _data import lme_date, load  # noqa: E402
from bench_retrieval import metrics, parse_with_time_option  # noqa: E402

from cortex.search import fusion  # noqa: E402
from cortex.search.index import SearchIndex  # noqa: E402
from cortex.search.query import search  # noqa: E402
from cortex.search.records import NoteRecord  # noqa: E402

NAME = "scoped"
OBSERVATION = 300  # characters a note holds at most, as sentences joined
NEGATIVES = 10  # of each kind, per vault


def observations(text: str) -> list[str]:
    """A turn cut into observation-sized notes: whole sentences, joined up to OBSERVATION."""
    out, current = [], ""
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        if current and len(current) + len(sentence) >= OBSERVATION:
            out.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    return out + [current] if current else out


def vault_for(block: list[dict], sessions: dict[str, list[dict]]) -> tuple[SearchIndex, dict[str, str]]:
    """An index of the block's sessions cut into notes, and each note's turn id."""
    records, turn_of = [], {}
    for session in dict.fromkeys(s for q in block for s in q["answer_session_ids"]):
        for doc in sessions.get(session, []):
            for k, text in enumerate(observations(doc["text"])):
                path = f"mind/facts/{len(records)}.md"
                turn_of[path] = doc["id"]
                records.append(NoteRecord(path=path, body=text, id=f"{doc['id']}/{k}", type="fact",
                                          category="concept", partition="mind",
                                          created_ts=lme_date(doc.get("session_date")), importance=0.5,
                                          confidence=0.9))
    idx = SearchIndex(Path(tempfile.mkdtemp(prefix="cortex-bench-floor-scoped-")))
    idx.build(records)
    return idx, turn_of


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--block", type=int, default=20, help="questions per vault (default 20)")
    args = parse_with_time_option(parser, argv)
    start = time.perf_counter()
    docs, questions = load("lme")
    claims = load("scifact")[1]
    nonsense = bf._lines(HERE / "data" / "floor_nonsense.jsonl")
    everyday = bf._lines(HERE / "data" / "floor_unrelated.jsonl")
    sessions: dict[str, list[dict]] = defaultdict(list)
    for doc in docs:
        sessions[doc["session_id"]].append(doc)
    rng = random.Random(3)
    bf.METRIC[NAME] = "R@10"
    real = {"off": [], "on": []}
    alone: dict[str, list[float]] = defaultdict(list)
    by_category: dict[tuple[str, str], list[float]] = defaultdict(list)
    empty = {"off": defaultdict(list), "on": defaultdict(list)}
    sizes = []
    for b in range(0, len(questions), args.block):
        block = questions[b:b + args.block]
        idx, turn_of = vault_for(block, sessions)
        sizes.append(len(turn_of))
        asked = ([("real", q) for q in block] + [("cross", q) for q in rng.sample(claims, NEGATIVES)]
                 + [(q["kind"], q) for q in rng.sample(nonsense, NEGATIVES)]
                 + [("everyday", q) for q in rng.sample(everyday, NEGATIVES)])
        for kind, q in asked:
            qid = f"{b}:{q['qid']}"
            half = "held-out" if bf.held_out(kind, qid) else "calibration"
            found = bf.ask(idx, q, 0.0)
            hits = bf.gate_hits(idx, turn_of, q, found)  # (turn id, why, cosine) of each result
            bf.GATE_ROWS[NAME, half].append((kind, hits, set(q.get("relevant_ids", ())), bf.rare_words(idx, q)))
            if half != "held-out":
                continue
            for state, min_score in (("off", 0.0), ("on", None)):
                result = found if state == "off" else bf.ask(idx, q, min_score)
                turns = list(dict.fromkeys(turn_of[h.path] for h in result))
                if kind == "real":
                    real[state].append(metrics(turns, set(q["relevant_ids"]))["R@10"])
                    by_category[q["category"], state].append(metrics(turns, set(q["relevant_ids"]))["R@10"])
                    if state == "on":
                        by_category[q["category"], "refused"].append(float(not result))
                else:
                    empty[state][kind].append(not result)
            if kind == "real":  # each side alone, for comparison (no floor)
                for mode in ("lexical", "semantic"):
                    result = search(idx, q["question"], limit=10, mode=mode, min_score=0.0, now=bf.question_time(q))
                    turns = list(dict.fromkeys(turn_of[h.path] for h in result))
                    alone[mode].append(metrics(turns, set(q["relevant_ids"]))["R@10"])
        idx.close()
    print(f"\n### LongMemEval cut into observations, a vault per {args.block} questions: {len(sizes)} vaults of "
          f"{min(sizes)}–{max(sizes)} notes ({time.perf_counter() - start:.0f}s)\n")
    kinds = bf.KINDS
    print("| held-out, floor | real: R@10 | " + " | ".join(f"{k}: nothing found" for k in kinds) + " |")
    print("|---|---|" + "---|" * len(kinds))
    for state in ("off", "on"):
        label = "off (--min-score 0)" if state == "off" else f"on ({fusion.RELEVANCE_FLOOR}, answer gate)"
        shares = [sum(empty[state][k]) / max(1, len(empty[state][k])) for k in kinds]
        print(f"| {label} | {sum(real[state]) / max(1, len(real[state])):.3f} | "
              + " | ".join(f"{s:.2f}" for s in shares) + " |")
    print(f"\neach side alone, held-out real questions, no floor: R@10 lexical "
          f"{sum(alone['lexical']) / max(1, len(alone['lexical'])):.3f}, semantic "
          f"{sum(alone['semantic']) / max(1, len(alone['semantic'])):.3f}")
    print("\nby category, held-out real questions: R@10 floor off → on, and how many the gate refused whole\n")
    print("| category | questions | off | on | refused |\n|---|---|---|---|---|")
    for category in sorted({c for c, _ in by_category}):
        off, on, refused = (by_category[category, k] for k in ("off", "on", "refused"))
        print(f"| {category} | {len(on)} | {sum(off) / len(off):.3f} | {sum(on) / len(on):.3f} | {int(sum(refused))} |")
    print(f"\nheld-out queries: real {len(real['on'])}, " + ", ".join(f"{k} {len(empty['on'][k])}" for k in kinds))
    print("\nanswer gate at the shipped floor, both halves (cost: R@10 lost to the gate, over the floor's own "
          "results; shares finding nothing; meaning -1: no cosine asked, unseen -1: no more than meaning)\n")
    print("| matched, relevance, meaning, unseen | half | cost | " + " | ".join(kinds) + " |")
    print("|---|---|---|" + "---|" * len(kinds))
    shown = [(fusion.ANSWER_MATCHED, fusion.ANSWER_RELEVANCE, -1.0, -1.0, "words only"),
             (fusion.ANSWER_MATCHED, fusion.ANSWER_RELEVANCE, fusion.ANSWER_MEANING, -1.0, "no rare-word rule")]
    shown += [(fusion.ANSWER_MATCHED, fusion.ANSWER_RELEVANCE, fusion.ANSWER_MEANING, unseen,
               "shipped" if unseen == fusion.ANSWER_UNSEEN_MEANING else "") for unseen in bf.GATE_UNSEEN[1:]]
    print("\n".join(bf._gate_rows([NAME], shown, unseen_column=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
