"""``source_hash`` → note, for dedup without scanning note files per observation.

Answered from the HEAD-following cache (``cortex/headcache.py``): brought up to date by
diffing the HEAD it last saw against the new one, so a run reads only the notes committed
since the last run — by people, by an earlier run, by maintenance or by a pull — however
many the vault holds. Notes committed during this run are added in memory. A memory a
person moved out of ``vault/`` and ``mind/`` still carries its ``source_hash``: a repeat
reinforces it there (``HeadCache.by_hashes``) rather than memorizing it twice.
"""

from __future__ import annotations

import os
from pathlib import Path

from cortex.headcache import identify  # noqa: F401 (where callers have found it)
from cortex.layout import PARTITIONS


class HashIndex:
    """Of the vault at ``root`` (git's CLI, not pygit2: a run assesses its first lines
    before it opens the repository)."""

    def __init__(self, root: Path) -> None:
        from cortex.headcache import HeadCache

        self._root = str(root)
        self.cache = HeadCache(root)
        self.by_hash: dict[str, tuple[str, str]] = {}  # committed during this run
        self.paths: set[str] = set()
        self._at_head: dict[str, tuple[str, str] | None] = {}  # the cache's answers, asked in advance
        self._head_paths: dict[str, bool] = {}
        self._deleted: dict[str, str | None] = {}

    def load(self) -> "HashIndex":
        self.cache.sync()
        return self

    def add(self, hash_hex: str, note_id: str, path: str) -> None:
        """A note committed since ``load``."""
        self.by_hash.setdefault(hash_hex, (note_id, path))
        self.paths.add(path)

    # VaultView
    def prefetch(self, hashes: list[str], paths: list[str] = ()) -> None:
        """Ask the cache about many hashes and paths at once (a chunk's), so that the
        ``lookup`` and ``path_taken`` of each line that follow are answered from memory
        (4,000 queries of a 1,000-line run become a handful). The cache stands as ``load``
        left it for the whole run, so an answer asked early is the one asked later."""
        found = self.cache.by_hashes(list(hashes), PARTITIONS)
        self._at_head.update({h: _as_hit(found[h]) if h in found else None for h in hashes})
        present = self.cache.present(list(paths))
        self._head_paths.update({p: p in present for p in paths})
        gone = self.cache.deleted([h for h in hashes if h not in found])
        self._deleted.update({h: gone.get(h) for h in hashes if h not in found})

    def lookup(self, hash_hex: str) -> tuple[str, str] | None:
        if hash_hex in self._at_head:
            hit = self._at_head[hash_hex]
        else:
            found = self.cache.by_hash(hash_hex, PARTITIONS)
            hit = _as_hit(found) if found is not None else None
        return hit or self.by_hash.get(hash_hex)

    def deleted(self, hash_hex: str) -> str | None:
        """The path a commit deleted this hash's note from, when no note carries it since."""
        if hash_hex in self.by_hash:
            return None
        if hash_hex not in self._deleted:
            self._deleted[hash_hex] = self.cache.deleted([hash_hex]).get(hash_hex)
        return self._deleted[hash_hex]

    def path_taken(self, path: str) -> bool:
        if path in self.paths:
            return True
        at_head = self._head_paths.get(path)
        if at_head is None:
            at_head = self.cache.has_path(path)
        return at_head or os.path.lexists(os.path.join(self._root, path))


def _as_hit(found: tuple[str | None, str]) -> tuple[str, str]:
    ident, path = found
    return ident or f"path:{path}", path
