"""Effective importance: importance minus decay rate × months since last reinforced."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from cortex.taxonomy import Taxonomy
from cortex.timefmt import parse_time

SECONDS_PER_MONTH = 30.4375 * 86400  # a mean Gregorian month


def months_between(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds() / SECONDS_PER_MONTH)


def effective_importance(meta: Mapping[str, Any], taxonomy: Taxonomy, now: datetime) -> float:
    """Importance after decay, floored at 0. Vault types and unknown types never decay."""
    try:
        importance = float(meta.get("importance", 0.5))
    except (TypeError, ValueError):
        importance = 0.5
    spec = taxonomy.get(str(meta.get("type", "")))
    if spec is None or spec.partition != "mind" or not spec.decay:
        return max(0.0, min(1.0, importance))
    anchor = meta.get("last_reinforced") or meta.get("created")
    try:
        since = parse_time(anchor)
    except ValueError:
        return max(0.0, min(1.0, importance))
    return max(0.0, min(1.0, importance - spec.decay * months_between(since, now)))
