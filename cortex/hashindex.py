"""``source_hash`` → note, for dedup without scanning note files per observation.

Built from HEAD's tree (the committed vault), cached in ``.cortex/hashes.json`` by tree
oid: a folder whose tree did not change since the last run is not read again, so a
50,000-note vault costs one walk of ~30 trees plus the blobs of new notes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pygit2

from cortex.fsutil import atomic_write
from cortex.gitrepo import GitRepo
from cortex.notes import note_body, source_hash

PARTITIONS = ("vault", "mind")
_HASH_RE = re.compile(rb"^source_hash:\s*[\"']?([0-9a-f]{64})", re.M)
_ID_RE = re.compile(rb"^id:\s*[\"']?([0-9a-f-]{36})", re.M)
CACHE_VERSION = 1


def identify(data: bytes) -> tuple[str, str | None]:
    """(source hash, id) of a note blob; hashes the body when the field is missing."""
    head = data[:4096]
    m = _HASH_RE.search(head)
    hash_hex = m.group(1).decode() if m else source_hash(note_body(data.decode("utf-8", errors="replace")))
    i = _ID_RE.search(head)
    return hash_hex, (i.group(1).decode() if i else None)


class HashIndex:
    def __init__(self, repo: GitRepo, cache_path: Path) -> None:
        self.repo = repo
        self.cache_path = cache_path
        self.by_hash: dict[str, tuple[str, str]] = {}
        self.by_id: dict[str, str] = {}
        self.paths: set[str] = set()
        self._cache: dict[str, dict] = {}
        self._used: set[str] = set()
        self._dirty = False

    def load(self) -> "HashIndex":
        try:
            data = json.loads(self.cache_path.read_text())
            if data.get("version") == CACHE_VERSION:
                self._cache = data["trees"]
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            self._cache = {}
        for partition in PARTITIONS:
            tree = self.repo.subtree(partition)
            if tree is not None:
                self._walk(tree, partition)
        if self._dirty or set(self._cache) != self._used:
            self._cache = {k: v for k, v in self._cache.items() if k in self._used}
            atomic_write(self.cache_path, json.dumps({"version": CACHE_VERSION, "trees": self._cache}).encode())
        return self

    def _walk(self, tree: pygit2.Tree, prefix: str) -> None:
        key = str(tree.id)
        entry = self._cache.get(key)
        if entry is None:
            files, dirs = [], []
            for obj in tree:
                if obj.type == pygit2.enums.ObjectType.TREE:
                    dirs.append([obj.name, str(obj.id)])
                elif obj.name.endswith(".md"):
                    files.append([obj.name, *identify(obj.data)])
            entry = {"files": files, "dirs": dirs}
            self._cache[key] = entry
            self._dirty = True
        self._used.add(key)
        for name, hash_hex, note_id in entry["files"]:
            path = f"{prefix}/{name}"
            self.paths.add(path)
            ident = note_id or f"path:{path}"
            # the first note found wins a hash shared by several (dedup merges them)
            self.by_hash.setdefault(hash_hex, (ident, path))
            self.by_id[ident] = path
        for name, oid in entry["dirs"]:
            self._walk(self.repo.repo[oid], f"{prefix}/{name}")

    def add(self, hash_hex: str, note_id: str, path: str) -> None:
        """A note committed since ``load``."""
        self.by_hash.setdefault(hash_hex, (note_id, path))
        self.by_id[note_id] = path
        self.paths.add(path)

    # VaultView
    def lookup(self, hash_hex: str) -> tuple[str, str] | None:
        return self.by_hash.get(hash_hex)

    def path_taken(self, path: str) -> bool:
        return path in self.paths or (self.repo.root / path).exists()
