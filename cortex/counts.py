"""A note's ``reinforced`` count, kept so that any order of folds and merges adds each
repeat exactly once.

A note absorbs other notes of the same memory: a sync folds the same observation
memorized on two machines (``cortex.settle``, the merge driver's add/add), maintenance
merges a near-duplicate (``dedup``). Each absorbed note is recorded by its id in
``merged_counts`` with what it brought — one for its own observation plus its own
reinforcements — and

    reinforced = own + sum(merged_counts.values())

where ``own`` counts the repeats this note collected itself. Machines that fold
overlapping sets of notes before they sync record the same ids: the merge takes the
union of the maps (an id once) and adds up only the ``own`` increments, so the total is
the number of repeats, whatever the order. The format before this field (a count alone)
reads as ``own`` = ``reinforced``, an empty map.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

KEY = "merged_counts"


@dataclass(frozen=True)
class Count:
    total: int
    merged: dict[str, int] = field(default_factory=dict)  # absorbed note id -> what it brought

    @property
    def own(self) -> int:
        return self.total - sum(self.merged.values())


def parse_merged(value: Any) -> dict[str, int]:
    """The ``merged_counts`` mapping as YAML read it; what is not an id and a whole
    positive number is ignored (a hand edit gone wrong must not stop a merge)."""
    if not isinstance(value, dict):
        return {}
    out = {}
    for key, n in value.items():
        if isinstance(key, str) and key and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            out[key] = n
    return out


def render_merged(merged: dict[str, int]) -> str:
    """A YAML flow mapping, ids in order: the same map is always the same bytes."""
    from cortex.notes import quote

    return "{" + ", ".join(f"{quote(i)}: {merged[i]}" for i in sorted(merged)) + "}"


def fields(count: Count) -> dict[str, str]:
    """The frontmatter values that hold ``count``."""
    return {"reinforced": str(count.total), KEY: render_merged(count.merged)}


def _union(*maps: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in maps:
        for key, n in m.items():
            out[key] = max(n, out.get(key, 0))  # the later fold saw more of that note's repeats
    return out


def fold(keep: Count, others: Iterable[tuple[str, Count]]) -> Count:
    """``keep`` absorbing each ``(id, count)`` of ``others``: every absorbed note's map
    joins keep's, and the note itself is recorded with 1 + its own repeats."""
    merged = dict(keep.merged)
    for note_id, other in others:
        merged = _union(merged, other.merged, {note_id: 1 + max(0, other.own)})
    return Count(max(0, keep.own) + sum(merged.values()), merged)


def merge3(base: Count, ours: Count, theirs: Count) -> Count:
    """Two machines' counts from a common base: the own repeats each side added, plus
    every absorbed note once."""
    own = base.own + (ours.own - base.own) + (theirs.own - base.own)
    merged = _union(base.merged, ours.merged, theirs.merged)
    return Count(max(0, own) + sum(merged.values()), merged)
