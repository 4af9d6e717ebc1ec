"""The contract between cortex's search and its lexical engine.

Everything above this line (`index.py`, `query.py`, `session.py`) speaks of notes by
their vault path and of their stored fields as plain dicts; nothing there knows the
engine's document numbers, files or exception types. Whoosh stands behind it in
`lexical.py`, the only module that imports Whoosh. Another engine (tantivy, SQLite
FTS5) is one new module implementing `LexicalBackend`, chosen in `index.lexical_backend`.

An engine reports any failure to read its own files as `IndexDamaged`: the index is a
cache rebuilt from the notes, so a damaged one is rebuilt, never a traceback.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, Protocol

from cortex.search.records import NoteRecord


class LexicalHits(NamedTuple):
    """A query's lexical answer on an absolute scale (docs/query.md, "Scores").

    `hits`: (path, BM25F score, coverage) best first, where coverage is the idf-weighted
    share of the query's terms the note contains (0..1): how much of what the query asks
    the note speaks of, whatever the other notes. `ceiling`: the BM25F score no note can
    reach, each term's idf times (k1 + 1), the limit of its saturation; a score divided by
    it is on 0..1 for any query. Both count the query's terms no note has (the vault cannot
    answer them) and leave out the common words the engine prunes from a query (no
    evidence either way).
    """

    hits: list[tuple[str, float, float]]
    ceiling: float
    unknown: tuple[str, ...] = ()  # the query's words (lower-cased, accents off) whose terms no note has


class IndexDamaged(Exception):
    """The engine could not read its own files (cut short, overwritten, deleted)."""


class LexicalBackend(Protocol):
    """A full-text index of the notes plus their stored fields, keyed by vault path.

    Stored fields are those `lexical.fields_of` lists (path, hash, title, snippet, id,
    type, tags, ts, importance, mtime, size, ...): filters, ranking, output and the
    change finder read them back instead of the note files.
    """

    FOLDER: str  # its folder in the search index's (`layout.search_dir`)

    @classmethod
    def create(cls, directory: Path) -> "LexicalBackend":
        """A new, empty index in `directory`."""

    @classmethod
    def open(cls, directory: Path) -> "LexicalBackend":
        """The index stored in `directory`; any failure means it must be rebuilt."""

    def doc_count(self) -> int:
        """How many notes are indexed."""

    def search(self, text: str, limit: int) -> list[tuple[str, float]]:
        """(path, BM25 score) of the best `limit` notes for a free-text query, best first."""

    def search_evidence(self, text: str, limit: int, *,
                        created: tuple[float | None, float | None] | None = None) -> LexicalHits:
        """The best `limit` notes for a free-text query with their scores, the share of the
        query each matches, and the query's ceiling (`LexicalHits`); only notes created
        in [since, until) when `created` gives them (either end None: open)."""

    def naming(self, name: str, limit: int) -> list[str] | None:
        """The best `limit` notes holding every word of `name`; None when its words are
        too common to visit within the query's postings budget."""

    def stored(self, path: str) -> dict | None:
        """The stored fields of the note at `path`, or None when it is not indexed."""

    def newest(self, since_ts: float | None = None) -> Iterator[str]:
        """Paths newest first by creation time, only those created since `since_ts` if given."""

    def created_between(self, since_ts: float | None, until_ts: float | None, at_most: int) -> list[str] | None:
        """Paths of the notes created at or after `since_ts` and before `until_ts` (either
        None: open), newest first; None when there are more than `at_most` (without
        reading them)."""

    def paths_in(self, folder: str) -> dict[str, dict]:
        """Stored fields of every note directly in `folder` (vault-relative), by path."""

    def writer(self, *, bulk: bool = False) -> AbstractContextManager[Callable[[NoteRecord], None]]:
        """A function adding one record, committed when the block ends (bulk: a new index)."""

    def write(self, upserts: Iterable[NoteRecord], deletes: Iterable[str] = ()) -> None:
        """Replace or add `upserts` and remove the notes at `deletes`, in one commit."""

    def refresh(self) -> None:
        """See what other writers committed since (the next read reopens)."""

    def close(self) -> None:
        """Let go of open files."""
