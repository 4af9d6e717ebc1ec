"""``source_hash`` → note, for dedup without scanning note files per observation.

Answered from the HEAD-following cache (``cortex/headcache.py``): brought up to date by
diffing the HEAD it last saw against the new one, so a run reads only the notes committed
since the last run — by people, by an earlier run, by maintenance or by a pull — however
many the vault holds. Notes committed during this run are added in memory.
"""

from __future__ import annotations

import os

from cortex.gitrepo import GitRepo
from cortex.headcache import identify  # noqa: F401 (where callers have found it)
from cortex.layout import PARTITIONS


class HashIndex:
    def __init__(self, repo: GitRepo) -> None:
        from cortex.headcache import HeadCache

        self.repo = repo
        self._root = str(repo.root)
        self.cache = HeadCache(repo.root)
        self.by_hash: dict[str, tuple[str, str]] = {}  # committed during this run
        self.paths: set[str] = set()

    def load(self) -> "HashIndex":
        self.cache.sync()
        return self

    def add(self, hash_hex: str, note_id: str, path: str) -> None:
        """A note committed since ``load``."""
        self.by_hash.setdefault(hash_hex, (note_id, path))
        self.paths.add(path)

    # VaultView
    def lookup(self, hash_hex: str) -> tuple[str, str] | None:
        found = self.cache.by_hash(hash_hex, PARTITIONS)
        if found is not None:
            ident, path = found
            return ident or f"path:{path}", path
        return self.by_hash.get(hash_hex)

    def path_taken(self, path: str) -> bool:
        return path in self.paths or self.cache.has_path(path) or os.path.lexists(os.path.join(self._root, path))
