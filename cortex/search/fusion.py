"""Fusing the lexical and semantic rankings, the relevance floor, and the memory priors
that order the result.

Pure functions over (key, score) lists: no index, no numpy.

Plain reciprocal-rank fusion treats both sides as equally trustworthy, which drags the
result down wherever one side is weak (on SciFact, static embeddings sit far below BM25).
Here each side's scores are put on an absolute 0..1 scale, one that does not depend on
the other results, and combined with weights that say how far each side is trusted:

* a lexical BM25 score is divided by the query's ceiling, the score no note can reach
  (`backend.LexicalHits`): the share of the most this query could score. A note of
  average length holding every query term once reaches 1 / (k1 + 1) = 0.45;
* semantic cosines are kept as they are (clipped at 0): a cosine has a meaning of its
  own;
* a candidate that one side did not return scores 0 on that side;
* BM25 is trusted far more (0.93 against 0.07: the lexical scale is compressed, the
  cosines of related and unrelated texts differ by a few tenths). Measured on
  ../shared/bench (bench/bench_retrieval.py) this ranks as well as the min-max scaling
  it replaced (LongMemEval R@10, SciFact nDCG@10 within 0.005), and unlike min-max a
  note's relevance says how well it matches whatever else the vault holds.

Because relevance is absolute, a floor on it means something: `RELEVANCE_FLOOR`, below
which a note is not returned (bench/bench_floor.py calibrates it).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence


class FusionWeights(NamedTuple):
    lexical: float = 0.93
    semantic: float = 0.07


DEFAULT_WEIGHTS = FusionWeights()

# Below this relevance a note is not returned: the notes that answer the real questions
# of ../shared/bench score above it, and most answers to questions the corpus cannot
# answer, or to nonsense, score under it (bench/bench_floor.py, which picks it on one
# half of its queries and reports on the other). A note only the embedding side found
# scores at most 0.07 and never passes it: a string of nonsense reaches a cosine of 0.7
# against some note of a large corpus (a small vault returns such a note by its meaning
# once the query is answered: SMALL_VAULT_SHARE below).
RELEVANCE_FLOOR = 0.10

# A query is answered only when one of its results speaks of a good part of it: at least
# ANSWER_MATCHED of the query's idf-weighted terms (`why.matched`), and either a
# relevance of ANSWER_RELEVANCE or a meaning close to the query's (cosine ANSWER_COSINE:
# a paraphrase), or a vault of fewer than SMALL_VAULT notes: there idf cannot tell a
# rare word from a common one (a word the only note holds weighs less than one no note
# holds), so relevance says how many of the query's words no note has, not whether a
# note answers it, and a note matching enough of the query is shown, as a search of a
# handful of notes would show it (nonsense matches no word and still finds nothing).
# Otherwise nothing is returned, however many notes share a word or two with it: a question the vault cannot answer
# usually finds notes that each match one of its rarer words, a real question one note
# matching several. bench/bench_floor.py sweeps it on its calibration half: the
# strictest gate there within its tolerance (relevance 0.20 with the trained embedding
# table, 0.30 with the plain one) costs the real questions on the held-out half (0.010
# R@10, 0.007 nDCG@10; 0.037 nDCG@10), so what ships is the one that holds on both
# (0.15): on the held-out half it turns 17-28 % of the everyday questions, 35-87 % of
# the other corpus's questions and 90-100 % of nonsense into "nothing found", for 0.002
# R@10. The remaining everyday questions share rare words with notes on a related
# topic: telling them apart needs more than word overlap and a static embedding.
# Only where the lexical side judges (hybrid and lexical modes), and only by default:
# `--min-score` replaces both rules.
ANSWER_MATCHED = 0.2
ANSWER_RELEVANCE = 0.15
ANSWER_COSINE = 0.55
SMALL_VAULT = 50
# Where the embedding is at hand (hybrid mode), the note that answers by its words must
# also be about the question: a cosine of at least ANSWER_MEANING between the two. A
# question on a topic the vault lacks shares a rare word or two with some note, but the
# note speaks of something else. bench/bench_floor.py sweeps it on its calibration half
# (the strictest within tolerance there, 0.45, costs SciFact 0.016 nDCG@10 on the
# held-out half); what ships holds on both halves: on the held-out half it turns
# 25 % / 65 % of the everyday questions (LongMemEval / SciFact; 17 % / 28 % without it),
# 87 % / 49 % of the other corpus's and 97-100 % of nonsense into "nothing found", for
# 0.002 R@10 / 0.004 nDCG@10 (with the rare-word rule below, 42 % / 82 % and 89 % / 55 %).
ANSWER_MEANING = 0.35
# Except for a note that holds the query whole (every word it counts, `matched` at least
# WHOLE): the words are the evidence. A name ("Ingrid Quist"), a ticket or a code has no
# meaning a static embedding can place (its cosine with the note naming it sits at
# 0.2-0.35), and a long note that answers a question among other things ("what did
# Rasmus want swapped", a daily note of several topics: cosine 0.21) is diluted by them.
# A question the vault cannot answer lacks some word, and nonsense matches no note whole.
# First for queries of one or two words; for every length it changed no figure of
# bench/bench_floor.py or bench_floor_scoped.py (neither a hit nor a refusal).
WHOLE = 0.999
# A query holding a rare word no note has — a word the vault never used that is not one
# of everyday English either (not whole in the embedding model's vocabulary:
# `query.rare_unseen`) — asks about something the vault never named: the note that
# answers by the query's other words must then be about it by meaning alone, a cosine of
# at least ANSWER_UNSEEN_MEANING, where `--semantic-only` puts its floor (MIN_COSINE),
# not ANSWER_MEANING. "How do I tune a sitar?" in a vault without "sitar" finds the note
# on open D guitar tuning by "tune" (cosine 0.41). A common word the vault happens not to
# use ("size", "total", "previously") does not count: a small vault of short notes lacks
# many such words of the questions it can answer (44 % of LongMemEval's questions asked of
# vaults of their own sessions cut into observations, bench/bench_floor_scoped.py), and
# counting them cost those vaults 0.014-0.019 R@10; counting rare words only costs them
# nothing. Held-out half of bench/bench_floor.py: everyday questions finding nothing
# 25 % -> 42 % (LongMemEval) and 65 % -> 82 % (SciFact), for one SciFact claim (docs/query.md).
ANSWER_UNSEEN_MEANING = 0.5


def answers(mode: str, min_score: float | None, results: Sequence[dict], *, notes: int | None = None,
            meaning_of: Callable[[int], float | None] | None = None, matched: float = ANSWER_MATCHED,
            relevance: float = ANSWER_RELEVANCE, meaning: float = ANSWER_MEANING, unseen: int = 0,
            unseen_meaning: float = ANSWER_UNSEEN_MEANING) -> bool:
    """Whether a query's results (their `why`, over the floor) in a vault of `notes`
    notes may be returned: by default, in the modes with a lexical side, only when one
    of them is an answer (see ANSWER_MATCHED, ANSWER_MEANING and ANSWER_UNSEEN_MEANING;
    `meaning_of(i)`: result i's cosine with the query, asked only of the results that
    answer by their words, None where the embedding is not used; `unseen`: the query's
    rare words in no note, `query.rare_unseen`; the bench sweeps
    `matched`, `relevance`, `meaning` and `unseen_meaning`); always when `min_score` is
    given (the caller's floor replaces the rule)."""
    if min_score is not None or mode == "semantic":
        return True
    small = notes is not None and notes < SMALL_VAULT
    needed = max(meaning, unseen_meaning) if unseen else meaning

    def about_it(i: int, w: dict) -> bool:
        if w.get("matched", 0.0) >= WHOLE:
            return True  # the query held whole: the words are the evidence
        cos = meaning_of(i) if meaning_of is not None else None
        return cos is None or cos >= needed

    return any(w.get("matched", 0.0) >= matched
               and (small or w.get("semantic", 0.0) >= ANSWER_COSINE
                    or (w.get("relevance", 0.0) >= relevance and about_it(i, w)))
               for i, w in enumerate(results))


# `--semantic-only`, where relevance is the cosine itself: the floor is a cosine. Between
# unrelated texts the shipped model's cosines sit mostly under 0.3, between a question and
# its answer mostly above 0.5 (nonsense can pass it: the mode is for comparison).
MIN_COSINE = 0.5


# How far the order trusts meaning depends on how many notes could match by chance. In a
# vault of a few hundred notes a note whose embedding is close to the question's is rarely
# there by accident; in one of thousands some unrelated note always is (a string of
# nonsense reaches a cosine of 0.7 against a large corpus), and BM25's evidence is worth
# more. So the cosine's share of the order (`fit`) is SMALL_VAULT_SHARE at SHARE_SMALL
# notes and fewer, falls with the log of the vault's size, and is the fusion's own weight
# (DEFAULT_WEIGHTS.semantic, 0.07) from SHARE_LARGE notes on; and where it is larger than
# that, a note the embedding alone finds with a cosine of at least MIN_COSINE is returned
# as well, once the query is answered (`answers`), though its relevance, which the floor
# and `--min-score` compare, stays under the floor. Only the order and those notes change:
# relevance, the floor and the gate are the same at every size. Measured
# (bench/bench_floor_scoped.py, bench/bench_floor.py --fraction): LongMemEval cut into
# observations, a vault per 20 questions (145-729 notes), R@10 with floor and gate
# 0.829 -> 0.862; both corpora at a tenth of their size (550-600 notes) LongMemEval
# R@10 0.882 -> 0.890, SciFact nDCG@10 0.836 -> 0.865; at 1,600-1,800 notes a share of
# 0.15 or 0.3 no longer helps (SciFact 0.769 -> 0.755-0.758), and at 5,000 it costs
# SciFact 0.025: hence the knots.
SMALL_VAULT_SHARE = 0.3
SHARE_SMALL = 600
SHARE_LARGE = 1500


def semantic_share(notes: int) -> float:
    """The cosine's share of the order in a vault of `notes` notes (see SMALL_VAULT_SHARE)."""
    large = DEFAULT_WEIGHTS.semantic
    if notes <= SHARE_SMALL:
        return SMALL_VAULT_SHARE
    if notes >= SHARE_LARGE:
        return large
    t = (math.log(notes) - math.log(SHARE_SMALL)) / (math.log(SHARE_LARGE) - math.log(SHARE_SMALL))
    return SMALL_VAULT_SHARE + t * (large - SMALL_VAULT_SHARE)


def order_weights(notes: int) -> FusionWeights:
    """The weights the order of results uses in a vault of `notes` notes (`fit`)."""
    share = semantic_share(notes)
    return FusionWeights(lexical=1.0 - share, semantic=share)


def fit(parts: dict, weights: FusionWeights = DEFAULT_WEIGHTS) -> float:
    """The scaled lexical and semantic scores (`fuse`'s parts, a side that did not
    return the note counting 0) weighed: with the fusion's own weights, the relevance;
    with `order_weights`, what a small vault orders its results by."""
    return weights.lexical * (parts.get("lexical") or 0.0) + weights.semantic * (parts.get("semantic") or 0.0)


def floor_for(mode: str, min_score: float | None) -> float:
    """The relevance a result needs: `min_score` when given (0 keeps everything), else the
    mode's default."""
    if min_score is not None:
        return max(0.0, min_score)
    return MIN_COSINE if mode == "semantic" else RELEVANCE_FLOOR


def scale_lexical(hits: Sequence[tuple[str, float]], ceiling: float) -> dict[str, float]:
    """BM25 over the query's ceiling: 0..1 whatever the other hits."""
    if ceiling <= 0:
        return {key: 0.0 for key, _ in hits}
    return {key: max(0.0, min(1.0, score / ceiling)) for key, score in hits}


def scale_semantic(hits: Sequence[tuple[str, float]]) -> dict[str, float]:
    return {key: max(0.0, min(1.0, score)) for key, score in hits}


def fuse(
    lexical: dict[str, float],
    semantic: dict[str, float],
    weights: FusionWeights = DEFAULT_WEIGHTS,
) -> list[tuple[str, float, dict]]:
    """(key, fused score, {side: scaled score or None}) best first, from each side's
    scaled scores (`scale_lexical`, `scale_semantic`)."""
    out = []
    for key in dict.fromkeys([*lexical, *semantic]):
        parts = {"lexical": lexical.get(key), "semantic": semantic.get(key)}
        out.append((key, fit(parts, weights), parts))
    out.sort(key=lambda item: -item[1])
    return out


def rrf(*rankings: Sequence[tuple[str, float]], k: int = 60, weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Weighted reciprocal-rank fusion (plain RRF with equal weights), for comparison."""
    weights = weights or [1.0] * len(rankings)
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, (key, _) in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


# --- memory priors -------------------------------------------------------------------

RECENCY_HALF_LIFE_DAYS = 90.0
PRIOR_WEIGHT = 0.2  # how far priors can move a relevance score (±10 %)


def recency(ts: float, now_ts: float, half_life_days: float = RECENCY_HALF_LIFE_DAYS) -> float:
    """1.0 for a note from now, 0.5 after one half-life; 0.5 when the date is unknown."""
    if ts <= 0:
        return 0.5
    age_days = max(0.0, (now_ts - ts) / 86400.0)
    return math.pow(0.5, age_days / half_life_days)


def prior(effective_importance: float, confidence: float, recency_score: float) -> float:
    """0..1: how much a memory deserves to come first among equally relevant ones."""
    return 0.5 * effective_importance + 0.25 * confidence + 0.25 * recency_score


def ranked(relevance: float, prior_score: float, weight: float = PRIOR_WEIGHT) -> float:
    """Relevance moved by at most ±weight/2 of itself by the prior (0.5 is neutral)."""
    return relevance * (1.0 + weight * (prior_score - 0.5))

