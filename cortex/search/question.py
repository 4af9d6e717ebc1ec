"""What a query asks: the question and its filters, and nothing else.

Kept apart from the code that answers them (`cortex.search.query`, `cortex.search.session`)
so that a query the watcher answers (`cortex.search.served`) states its question without
loading the search engines' modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Filters:
    """Each field lists accepted values (any of them); different fields must all hold."""

    types: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    attributions: tuple[str, ...] = ()
    since: float | None = None  # created at or after (epoch seconds)
    until: float | None = None  # created before
    archived: bool = False  # include mind/archive/

    @property
    def narrowing(self) -> bool:
        return any((self.types, self.categories, self.partitions, self.tags, self.entities, self.attributions,
                    self.since is not None, self.until is not None))


@dataclass(frozen=True)
class Question:
    """What to look for. Without `text` it is a listing, newest first: the notes the
    filters select (`filters.since` for the last days)."""

    text: str = ""
    filters: Filters = field(default_factory=Filters)
    limit: int = 10
    mode: str = "hybrid"  # hybrid, lexical, semantic
    min_score: float | None = None  # the relevance floor; None: the default (fusion.floor_for), 0: none

    @property
    def listing(self) -> bool:
        return not self.text.strip()

    @property
    def needs_vectors(self) -> bool:
        return self.mode != "lexical" and not self.listing
