"""Fusing the lexical and semantic rankings, and the memory priors that order the result.

Pure functions over (key, score) lists: no index, no numpy.

Plain reciprocal-rank fusion treats both sides as equally trustworthy, which drags the
result down wherever one side is weak (on SciFact, static embeddings sit far below BM25).
Here each side's scores are put on a common 0..1 scale and combined with weights that
say how far each side is trusted:

* lexical BM25 scores are min-max scaled over the side's candidate list: BM25 has no
  fixed range, only the spread within one query means something;
* semantic cosines are kept as they are (clipped at 0): a cosine has a meaning of its
  own, and min-max over a static model's narrow band of cosines would turn tiny
  differences into large ones;
* a candidate that one side did not return scores 0 on that side;
* BM25 is trusted more (0.7 against 0.3). Measured on ../shared/bench with 100
  candidates a side (bench/bench_retrieval.py): this beats both single modes on
  LongMemEval and SciFact, where plain RRF loses 0.13 nDCG@10 to BM25 on SciFact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class FusionWeights:
    lexical: float = 0.7
    semantic: float = 0.3


DEFAULT_WEIGHTS = FusionWeights()

# Below this cosine a note the lexical side did not find is not returned at all: between
# unrelated texts the shipped model's cosines sit mostly under 0.3, between a question
# and its answer mostly above 0.5, and a string of nonsense ("zzzqqq", "12345") reaches
# 0.45 against some note, so a query that matches nothing still finds nothing (exit 1).
# 0.35 and 0.5 score the same on ../shared/bench (bench/bench_retrieval.py).
MIN_COSINE = 0.5


def scale_lexical(hits: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Min-max over the list; a single hit (or all equal) scales to 1."""
    if not hits:
        return {}
    best = max(score for _, score in hits)
    worst = min(score for _, score in hits)
    spread = best - worst
    if spread <= 0:
        return {key: 1.0 for key, _ in hits}
    return {key: (score - worst) / spread for key, score in hits}


def scale_semantic(hits: Sequence[tuple[str, float]]) -> dict[str, float]:
    return {key: max(0.0, min(1.0, score)) for key, score in hits}


def fuse(
    lexical: Sequence[tuple[str, float]],
    semantic: Sequence[tuple[str, float]],
    weights: FusionWeights = DEFAULT_WEIGHTS,
) -> list[tuple[str, float, dict]]:
    """(key, fused score, {side: scaled score or None}) best first."""
    lex = scale_lexical(lexical)
    sem = scale_semantic(semantic)
    out = []
    for key in dict.fromkeys([*lex, *sem]):
        parts = {"lexical": lex.get(key), "semantic": sem.get(key)}
        score = weights.lexical * lex.get(key, 0.0) + weights.semantic * sem.get(key, 0.0)
        out.append((key, score, parts))
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

