"""The only module that talks to pygit2.

Commits are built from HEAD's tree plus exactly the paths cortex changes, never from
the index: a person's staged or unstaged work is neither committed nor disturbed. After
a commit, the index entries of those paths (and only those) are refreshed, so
``git status`` shows nothing of cortex's.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping

import pygit2

from cortex.errors import CortexError
from cortex.layout import link_on_path

BLOB = pygit2.enums.FileMode.BLOB
TREE = pygit2.enums.FileMode.TREE
TRAILER_RE = re.compile(r"^Cortex-([A-Za-z-]+): (.+)$", re.M)

# A kill -9 between libgit2 taking a lock file and renaming it leaves the lock behind.
# git holds a ref lock for milliseconds, but index.lock for as long as a commit editor
# is open, so a lock is removed only when it is plainly stale or was left inside the
# window of the interrupted cortex run that is being completed.
LOCK_WAIT = 2.0
REF_LOCK_STALE = 5.0
INDEX_LOCK_STALE = 600.0
INTERRUPTED_WINDOW = 600.0  # how long after its decision a killed run could have held a lock


@dataclass(frozen=True)
class CommitInfo:
    oid: str
    message: str
    trailers: dict[str, str]


class GitRepo:
    def __init__(self, root: Path) -> None:
        try:
            self.repo = pygit2.Repository(str(root))
        except pygit2.GitError:
            raise CortexError(f"{root} is not a git repository", f"run `cortex init {root}`") from None
        if self.repo.workdir is None:
            raise CortexError(f"{root} is a bare repository", "cortex needs a working tree")
        self.root = Path(self.repo.workdir)
        self.interrupted_since: float | None = None  # set while completing a killed run
        self.cleared_locks: list[str] = []

    # --- reading -------------------------------------------------------------------

    def head_oid(self) -> str | None:
        return None if self.repo.head_is_unborn else str(self.repo.head.target)

    def head_tree(self) -> pygit2.Tree | None:
        return None if self.repo.head_is_unborn else self.repo.head.peel(pygit2.Commit).tree

    def subtree(self, path: str) -> pygit2.Tree | None:
        tree = self.head_tree()
        if tree is None:
            return None
        try:
            obj = tree[path]
        except KeyError:
            return None
        return obj if obj.type == pygit2.enums.ObjectType.TREE else None

    def blob_text(self, oid: str) -> str:
        return self.repo[oid].data.decode("utf-8", errors="replace")

    def file_at_head(self, path: str) -> bytes | None:
        tree = self.head_tree()
        if tree is None:
            return None
        try:
            return tree[path].data
        except KeyError:
            return None

    def commits_since(self, stop: str | None, limit: int = 10_000) -> Iterator[CommitInfo]:
        """First-parent commits from HEAD back to (not including) ``stop``."""
        if self.repo.head_is_unborn:
            return
        commit = self.repo.head.peel(pygit2.Commit)
        for _ in range(limit):
            if stop is not None and str(commit.id) == stop:
                return
            message = commit.message
            yield CommitInfo(str(commit.id), message, dict(TRAILER_RE.findall(message)))
            if not commit.parents:
                return
            commit = commit.parents[0]

    # --- locks ---------------------------------------------------------------------

    def _head_ref(self) -> str:
        target = self.repo.lookup_reference("HEAD").target
        return target if isinstance(target, str) else "HEAD"

    def _await_lock(self, rel: str, stale_after: float) -> None:
        path = Path(self.repo.path) / f"{rel}.lock"
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                mtime = path.stat().st_mtime
            except FileNotFoundError:
                return
            since = self.interrupted_since
            ours = since is not None and since - 1 <= mtime <= since + INTERRUPTED_WINDOW
            if ours or time.time() - mtime > stale_after:
                path.unlink(missing_ok=True)
                self.cleared_locks.append(str(path.relative_to(self.root)))
                return
            if time.monotonic() > deadline:
                raise CortexError(
                    f"git is busy: {path} exists",
                    "let the other git command finish (an open commit editor holds the index); "
                    "if none is running, delete that file",
                )
            time.sleep(0.05)

    # --- writing -------------------------------------------------------------------

    def write_blob(self, data: bytes) -> str:
        return str(self.repo.create_blob(data))

    def require_branch(self) -> None:
        """Refuse to commit on a detached HEAD: the commit would be reachable from no
        branch, and the memory lost at the next checkout."""
        if self.repo.head_is_detached:
            raise CortexError(
                "the vault's HEAD is detached (no branch is checked out), so a commit would belong to no branch",
                "check out a branch (`git switch main`), then run again; nothing was committed",
            )

    def commit(self, changes: Mapping[str, str | None], message: str, author: tuple[str, str]) -> str:
        """Commit HEAD's tree with ``changes`` applied (path → blob oid, or None to delete).

        Retries when a person's commit moves HEAD underneath us.
        """
        self.require_branch()
        signature = pygit2.Signature(*author)
        self._await_lock(self._head_ref(), REF_LOCK_STALE)
        for _ in range(5):
            base = self.head_tree()
            parents = [] if self.repo.head_is_unborn else [self.repo.head.target]
            tree = self._apply(base, _nest(changes))
            try:
                oid = self.repo.create_commit("HEAD", signature, signature, message, tree, parents)
                return str(oid)
            except pygit2.GitError as exc:
                if "current tip" not in str(exc) and "not the first parent" not in str(exc):
                    raise
        raise CortexError("HEAD kept moving while cortex committed", "retry when other git work is done")

    def _apply(self, base: pygit2.Tree | None, nested: dict) -> pygit2.Oid:
        builder = self.repo.TreeBuilder(base) if base is not None else self.repo.TreeBuilder()
        for name, change in nested.items():
            if isinstance(change, dict):
                sub = None
                if base is not None and name in base:
                    obj = base[name]
                    sub = obj if obj.type == pygit2.enums.ObjectType.TREE else None
                oid = self._apply(sub, change)
                if len(self.repo[oid]) == 0:
                    if builder.get(name) is not None:
                        builder.remove(name)
                else:
                    builder.insert(name, oid, TREE)
            elif change is None:
                if builder.get(name) is not None:
                    builder.remove(name)
            else:
                builder.insert(name, pygit2.Oid(hex=change), BLOB)
        return builder.write()

    def materialize(self, changes: Mapping[str, str | None]) -> None:
        """Make the working tree and the index agree with committed ``changes``."""
        self._await_lock("index", INDEX_LOCK_STALE)
        index = self.repo.index
        index.read()
        for path, oid in changes.items():
            target = self.root / path
            link = link_on_path(self.root, path)
            if link:  # planning refuses these; a link made since must not be followed either
                raise CortexError(f"cannot write {path}: {link}", "replace it with a folder and run again")
            if oid is None:
                if target.exists():
                    target.unlink()
                if path in index:
                    index.remove(path)
                continue
            data = self.repo[oid].data
            try:
                # One call for the common case, a new note; an existing file (a run
                # completed after a crash) is compared and rewritten only if it differs.
                with open(target, "xb") as fh:
                    fh.write(data)
            except FileNotFoundError:
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "xb") as fh:
                    fh.write(data)
            except FileExistsError:
                if target.is_dir():
                    raise CortexError(f"{path} is a directory in the working tree", "move it away and run again") from None
                if target.read_bytes() != data:
                    # Written in place: a torn write is rewritten by the recovery that
                    # follows any crash, since the commit (the truth) already holds it.
                    with open(target, "wb") as fh:
                        fh.write(data)
            index.add(path)
        index.write()

    def stage_committed(self, path: str, oid: str, previous: bytes | None,
                        restage: Callable[[bytes], bytes] | None = None) -> None:
        """Point the index entry of ``path`` at the committed blob ``oid``, leaving the
        working file (which holds a person's uncommitted edits besides) alone. An entry a
        person staged themselves (not ``previous``, HEAD's old content) stays theirs, with
        ``restage`` applied to it (cortex's part added), so their next commit keeps both."""
        self._await_lock("index", INDEX_LOCK_STALE)
        index = self.repo.index
        index.read()
        entry = index[path] if path in index else None
        staged = self.repo[entry.id].data if entry is not None else None
        if staged == previous:
            target = oid
        elif staged is not None and restage is not None:
            target = self.write_blob(restage(staged))
        else:
            return
        index.add(pygit2.IndexEntry(path, pygit2.Oid(hex=target), pygit2.enums.FileMode.BLOB))
        index.write()

    def is_dirty(self, path: str) -> bool:
        """True when a person has staged or unstaged changes to ``path``."""
        try:
            flags = self.repo.status_file(path)
        except KeyError:
            return False
        return flags != pygit2.enums.FileStatus.CURRENT


def init_repository(root: Path) -> None:
    """A new repository at ``root`` whose first branch is ``main``."""
    pygit2.init_repository(str(root), initial_head="main")


def _nest(changes: Mapping[str, str | None]) -> dict:
    root: dict = {}
    for path, oid in changes.items():
        parts = path.split("/")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = oid
    return root


def trailer_lines(trailers: Mapping[str, str]) -> str:
    return "\n".join(f"Cortex-{k}: {v}" for k, v in trailers.items())
