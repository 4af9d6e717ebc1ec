"""The only module that talks to pygit2.

Commits are built from HEAD's tree plus exactly the paths cortex changes, never from
the index: a person's staged or unstaged work is neither committed nor disturbed. A
commit and the index entries of its paths (and only those) change together under
``.git/index.lock``, taken as git takes it (cortex/gitlock.py), so ``git status``
shows nothing of cortex's and a person's git never sees HEAD without the index.
"""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import pygit2

from cortex import gitcli
from cortex.errors import CortexError, LockBusy
from cortex.fsutil import NEW, Before, share_as, still_ours as _still_ours  # noqa: F401
from cortex.gitlock import IndexLock, branch_lock, held_since, if_left, record_move
from cortex.layout import link_on_path, require_git_link

MOVE_JOURNAL = gitcli.MOVE_JOURNAL

BLOB = pygit2.enums.FileMode.BLOB
TREE = pygit2.enums.FileMode.TREE
LINK = pygit2.enums.FileMode.LINK
TRAILER_RE = re.compile(r"^Cortex-([A-Za-z-]+): (.+)$", re.M)


def cortex_made(message: str, author: tuple, committer: tuple) -> bool:
    """Committed by cortex itself: its trailer (a run's batch, a job's token: observe,
    reinforce, decay, dedup, forget, a sync's settling), and no one else committed it
    since (a cherry-pick or rebase of cortex's commit keeps the trailer, not the committer)."""
    return bool(set(dict(TRAILER_RE.findall(message))) & {"Job", "Batch"}) and author == committer

# How long cortex waits for git's locks (a person's commit, a GUI client's refresh)
# before it gives up with exit 75; see cortex/gitlock.py for the protocol.
LOCK_WAIT = 10.0


@dataclass(frozen=True)
class CommitInfo:
    oid: str
    message: str
    trailers: dict[str, str]


def repository(root: Path | str) -> pygit2.Repository:
    """The repository at ``root`` (``pygit2.GitError`` as pygit2 raises it), this process
    then creating in it what a group that shares it can use (``shared_umask``): under a
    person's umask 022, the object folders cortex's commits made were the owner's alone,
    and a teammate's `git add` then failed ("insufficient permission for adding an object
    to repository database")."""
    repo = pygit2.Repository(str(root))
    try:
        value = repo.config["core.sharedRepository"]
    except (KeyError, pygit2.GitError):
        return repo
    share_as(None, str(value), git_dir=Path(repo.path))
    return repo


class GitRepo:
    def __init__(self, root: Path, lock_wait: float = LOCK_WAIT) -> None:
        try:
            self.repo = repository(root)
        except pygit2.GitError as exc:
            if "not owned by current user" in str(exc):
                raise gitcli.not_owned(root) from None
            require_git_link(root)
            raise CortexError(f"{root} is not a git repository", f"run `cortex init {root}`") from None
        if self.repo.workdir is None:
            raise CortexError(f"{root} is a bare repository", "cortex needs a working tree")
        self.root = Path(self.repo.workdir)
        self.git_dir = Path(self.repo.path)
        self.lock_wait = lock_wait
        self.cleared_locks: list[str] = []  # locks our own killed process left, removed
        self._lock: IndexLock | None = None
        self._written: dict[str, bytes] = {}  # the blobs of the last write_blobs, by id
        self.kept: list[tuple[str, str]] = []  # working files materialize left as they are, and why
        self._sparse: set[str] = set()  # paths of the commit in the making outside a sparse checkout

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

    def at_head(self, path: str) -> bool:
        """Whether HEAD's tree holds ``path``, a file or a folder."""
        tree = self.head_tree()
        return tree is not None and path in tree

    def file_at_head(self, path: str) -> bytes | None:
        tree = self.head_tree()
        if tree is None:
            return None
        try:
            return tree[path].data
        except KeyError:
            return None

    def file_at(self, commit: str, path: str) -> bytes | None:
        """The blob at ``path`` in ``commit`` (None: no such file, or no such commit)."""
        try:
            return self.repo[commit].peel(pygit2.Commit).tree[path].data
        except (KeyError, ValueError, AttributeError):
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

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold ``.git/index.lock`` (git's own protocol, cortex/gitlock.py) for a step
        that moves HEAD and the index together. Re-entrant."""
        if self._lock is not None:
            yield
            return
        lock = IndexLock(self.git_dir, self.lock_wait)
        lock.acquire()
        self.cleared_locks += lock.removed
        self._lock = lock
        try:
            yield
        finally:
            self._lock = None
            lock.release()

    def _write_index(self, *steps: "IndexStep", hint: str = "nothing was lost: the next cortex command writes the index again") -> None:
        """Write a new index while holding ``index.lock``: ``_changed_index`` of the
        current one, replacing ``.git/index`` atomically."""
        tmp, index = self._changed_index(*steps, hint=hint)
        os.replace(tmp, index)

    def _changed_index(self, *steps: "IndexStep", hint: str) -> tuple[Path, Path]:
        """(a copy of the index changed by ``git update-index``, one call per step, the
        index it is to replace). A step's entries given as paths come with their working
        files, so their stat data is right (``paths_step``); as ``info_step``, from their
        blobs alone. Raises ``CortexError`` with ``hint`` (the copy removed) when git
        refuses."""
        assert self._lock is not None, "the index is written only under index.lock"
        import subprocess

        tmp, index = self._scratch_index()
        env = {**gitcli.environment(self.root),
               "GIT_INDEX_FILE": str(tmp), "GIT_DIR": str(self.git_dir), "GIT_WORK_TREE": str(self.root)}
        for args, stdin in steps:
            done = subprocess.run(["git", "update-index", *args], cwd=self.root, env=env, input=stdin,
                                  capture_output=True, check=False)
            if done.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise CortexError(f"git update-index failed: {done.stderr.decode(errors='replace').strip()}", hint)
        return tmp, index

    def _scratch_index(self) -> tuple[Path, Path]:
        """(a copy of the index to change, the index it replaces once changed): git's own
        commands write the copy, ``os.replace`` swaps it in whole.

        The copy keeps the index's modification time: git reads an entry whose file
        changed in the second the index was written as racy (its stat data cannot vouch
        for the content) by comparing that entry's time with the index file's. A copy
        dated now would vouch for it, and a person's same-size edit made in that second
        would never be seen again: their `git commit -a` would leave it out.

        The copy is this process's own (``cortex-scratch.<pid>.index``): a cortex killed
        while its ``git update-index`` ran leaves that git running on the copy, holding the
        copy's ``.lock``; with one shared name the next cortex found the lock taken and
        failed until someone removed it by hand. Copies left that way are removed once
        they are a minute old (the git that wrote them is long done)."""
        import shutil

        _clear_scratch(self.git_dir)
        tmp, index = self.git_dir / f"{SCRATCH}.{os.getpid()}.index", self.git_dir / "index"
        Path(f"{tmp}.lock").unlink(missing_ok=True)  # our own name: a git of a dead process of our pid
        if index.exists():
            shutil.copy2(index, tmp)  # with its times
        else:
            tmp.unlink(missing_ok=True)
        return tmp, index

    def move_tree(self, old: str, new: str, reason: str) -> tuple[str, str] | None:
        """Working tree, index and HEAD from commit ``old`` to ``new`` as one step under
        ``index.lock``: ``git read-tree -m -u`` on a copy of the index (git refuses to
        overwrite a person's uncommitted change), the index replaced, then HEAD moved by
        compare-and-swap. None when done; else ("changes", git's message) with nothing
        changed, ("failed", git's message) when git failed midway (a full disk) and what
        it wrote was taken back, or ("moved", ...) when HEAD is no longer ``old``. A journal
        (``.git/cortex-move``) names the move while it runs: killed after git wrote some
        working files, it is finished by ``finish_move``."""

        from cortex.fsutil import atomic_write

        with self.locked():
            if self.head_oid() != old:
                return ("moved", "HEAD moved")
            tmp, index = self._scratch_index()
            journal = self.git_dir / MOVE_JOURNAL
            atomic_write(journal, f"{old} {new}\n".encode())
            moving = self._entries_between(old, new)
            stamps = {p: _stamp(self.root / p) for p in moving}
            done = gitcli.run(self.root, "read-tree", "-m", "-u", old, new, env={"GIT_INDEX_FILE": str(tmp)})
            if not done.ok:
                tmp.unlink(missing_ok=True)
                # git checks every path before it writes one, so a refusal changed nothing;
                # a write that failed midway (a full disk) left some files: taken back
                written = self._take_back(moving, stamps)
                journal.unlink(missing_ok=True)
                return ("failed" if written else "changes", done.err.strip() or _how_git_stopped(done.code))
            os.replace(tmp, index)  # a kill from here on leaves the index ahead: a rerun moves HEAD
            refused = self._move_head(new, old, reason)
            journal.unlink(missing_ok=True)
            if refused is not None:
                return ("moved", refused)
            record_move(self.git_dir, old, new)
        return None

    def _move_head(self, new: str, old: str, reason: str) -> str | None:
        """HEAD's branch from ``old`` to ``new`` under ``index.lock`` (``move_branch``:
        its lock cortex's own, provably); a detached HEAD by ``git update-ref``. None when
        moved, else why not."""
        why = self._lock.move_branch(new, old, reason, self._reflog_who(), log=self._logs_refs())
        if why == "detached":
            done = gitcli.run(self.root, "update-ref", "-m", reason, "HEAD", new, old)
            return None if done.ok else done.err.strip()
        if why == "locked":
            lock = branch_lock(self.git_dir)
            return f"cannot lock the branch: {lock} exists{held_since(lock) if lock else ''}"
        return None if why is None else f"HEAD is no longer {old}"

    def _reflog_who(self) -> tuple[str, str] | bytes:
        """Who moves a ref, for its reflog: git's identity here and the time, as `git
        update-ref` writes them (``gitcli.committer_ident``: the ``GIT_COMMITTER_*``
        environment first); else the config's user, now."""
        ident = gitcli.committer_ident(self.root)
        if ident:
            return ident
        try:
            sig = self.repo.default_signature
            return (sig.name, sig.email)
        except (KeyError, ValueError, pygit2.GitError):
            return ("cortex", "")

    def _logs_refs(self) -> bool:
        """git's ``core.logAllRefUpdates`` (true unless set otherwise, in a repository with a
        working tree): a branch's reflog is made where there is none yet."""
        try:
            return self.repo.config.get_bool("core.logAllRefUpdates")
        except (KeyError, ValueError, pygit2.GitError):
            return True

    def _entries_between(self, old: str, new: str) -> dict[str, tuple[str | None, str | None]]:
        """{path: (blob in ``old``, blob in ``new``)} of each path the move changes (None: none)."""
        listed = gitcli.run_bytes(self.root, *gitcli.tree_diff_args(old, new))
        if listed is None or listed.code != 0:
            return {}
        return {path: (None if set(a[1]) == {"0"} else a[1], None if set(b[1]) == {"0"} else b[1])
                for path, a, b in gitcli.raw_entries(listed.out)}

    def _take_back(self, moving: dict[str, tuple[str | None, str | None]],
                   stamps: dict[str, tuple[int, int, int] | None]) -> list[str]:
        """Undo what a ``read-tree -u`` that failed midway wrote (the index copy it wrote
        is dropped): of the paths the move changes, the files it touched (their stamps
        differ from before it ran; git replaces a file, never edits it) are removed where
        ``old`` has none, else given ``old``'s content again from the index, which git
        checked they matched. A file git did not touch, a person's edit among them, stays.
        The paths taken back."""
        touched = [p for p in moving if _stamp(self.root / p) != stamps.get(p)]
        made = [p for p in touched if moving[p][0] is None and stamps.get(p) is None]
        for path in made:
            (self.root / path).unlink(missing_ok=True)
        restored = [p for p in touched if moving[p][0] is not None]
        if restored:
            gitcli.run_bytes(self.root, "checkout-index", "-f", "-z", "--stdin",
                             input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in restored))
        return made + restored

    def finish_move(self) -> bool:
        """Finish a ``move_tree`` killed midway, named by its journal: while HEAD is still
        its ``old`` and the index still holds old's entries for the paths the move
        changes, every such path whose working file is still old's is written as new's,
        the index takes new's entries for those paths (the rest of it, a person's staged
        work included, stays), and HEAD moves. A working file that is neither old's nor
        new's is a person's and stays as it is; a move whose paths were staged since is
        dropped, and the next one says which files. True when a move was finished."""

        from cortex import gitcli

        journal = self.git_dir / MOVE_JOURNAL
        try:
            old, new = journal.read_text(encoding="ascii").split()
        except (OSError, ValueError):
            return False
        with self.locked():
            if self.head_oid() != old:  # done, or HEAD moved on since: nothing to finish
                journal.unlink(missing_ok=True)
                return False
            listed = gitcli.run_bytes(self.root, "diff", "--name-only", "-z", "--no-renames", old, new)
            paths = [] if listed is None or listed.code != 0 else \
                [p for p in listed.out.decode("utf-8", "surrogateescape").split("\0") if p]
            before = {p: oid for p, (_, oid) in self._entries_at(old, paths).items()}
            if not paths or self._staged_blobs(paths) != before:
                journal.unlink(missing_ok=True)  # staged since (or unreadable): the person's to settle
                return False
            after = self._entries_at(new, paths)
            working = self._working_blobs(paths)
            stale = [p for p in paths if working.get(p, "?") == before[p]]
            try:
                self._write_index(info_step(after, len(old)))
            except CortexError:
                return False
            for p in stale:
                if after[p][1] is None:
                    (self.root / p).unlink(missing_ok=True)
            written = [p for p in stale if after[p][1] is not None]
            if written:
                gitcli.run_bytes(self.root, "checkout-index", "-f", "-z", "--stdin",
                                 input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in written))
            if self._move_head(new, old, "cortex: an interrupted move finished") is None:
                record_move(self.git_dir, old, new)
            journal.unlink(missing_ok=True)
        return True

    def _staged_blobs(self, paths: list[str]) -> dict[str, str | None]:
        from cortex import gitcli

        out: dict[str, str | None] = {p: None for p in paths}
        # git matches every index entry against every pathspec: past a few, the whole
        # index listed once and looked up here costs less (both read the whole index)
        pathspecs = ["--", *(f":(literal){p}" for p in paths)] if len(paths) <= PATHSPECS_MAX else []
        done = gitcli.run_bytes(self.root, "ls-files", "-s", "-z", *pathspecs)
        for entry in (done.out.decode("utf-8", "surrogateescape").split("\0") if done and done.code == 0 else ()):
            if "\t" in entry:
                meta, path = entry.split("\t", 1)
                if path in out:
                    out[path] = meta.split()[1]
        return out

    def changed(self, paths: Iterable[str] | None = None) -> set[str]:
        """The paths a person has changed, staged or not, as their own ``git status``
        sees them: of ``paths``, or all. git's view honours what pygit2's does not, such
        as a sparse checkout (a note outside it is absent, not deleted). Asked under
        ``index.lock``, the staged part holds until cortex lets go; a working file can
        change at any moment (an editor takes no lock), which ``materialize`` checks
        again as it writes."""
        from cortex import gitcli

        wanted = None if paths is None else set(paths)
        if wanted is not None and not wanted:
            return set()
        # git status matches each path against every pathspec (500 cost 2.5 s at 200,000
        # notes): past a handful, the whole status (0.5 s there), filtered here
        spec = ["--", *(f":(literal){p}" for p in wanted)] if wanted is not None and len(wanted) <= STATUS_PATHSPECS else []
        done = gitcli.run_bytes(self.root, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--no-renames",
                                "--untracked-files=no", "--ignore-submodules=all", *spec)
        if done is None or not done.ok:  # git cannot tell: libgit2's view, and every path it names
            found = set(self.repo.status(untracked_files="no"))
        else:
            found = {entry[3:] for entry in done.out.decode("utf-8", "surrogateescape").split("\0") if len(entry) > 3}
        return found if wanted is None else found & wanted

    def outside_checkout(self, paths: list[str]) -> set[str]:
        """Of ``paths``, those a sparse checkout leaves out of the working tree (their
        index entries carry git's skip-worktree bit); none unless one is configured."""
        from cortex import gitcli, sparse

        try:
            if not paths or not self.repo.config.get_bool("core.sparseCheckout"):
                return set()
        except (KeyError, ValueError, pygit2.GitError):
            return set()
        spec = ["--", *(f":(literal){p}" for p in paths)] if len(paths) <= PATHSPECS_MAX else []
        done = gitcli.run_bytes(self.root, "ls-files", "-t", "-z", *spec)
        listed = done.out.decode("utf-8", "surrogateescape").split("\0") if done is not None and done.ok else []
        tags = {entry[2:]: entry[0] for entry in listed if len(entry) > 2}
        out = {p for p in paths if tags.get(p) == "S"}
        new = [p for p in paths if p not in tags]
        if not new:
            return out
        # a new note goes where the checkout's patterns say, as git would put it
        if self._cone_mode():
            cone = gitcli.run(self.root, "sparse-checkout", "list")
            if cone is not None and cone.ok:
                out.update(p for p in new if not in_cone(p, cone.out.splitlines()))
        else:  # gitignore-like patterns, matched here as git's dir.c does (no process per note)
            patterns = sparse.read_patterns(self.git_dir, self._config_bool("core.ignoreCase"))
            if patterns is not None:
                out.update(p for p in new if not sparse.included(p, patterns))
        return out

    def _cone_mode(self) -> bool:
        return self._config_bool("core.sparseCheckoutCone")

    def _config_bool(self, name: str) -> bool:
        try:
            return self.repo.config.get_bool(name)
        except (KeyError, ValueError, pygit2.GitError):
            return False

    def _entries_at(self, commit: str | None, paths: Iterable[str]) -> dict[str, tuple[int, str | None]]:
        """``(mode, blob id)`` of each of ``paths`` in ``commit``'s tree, ``(0, None)``
        where it has none. Each folder is read once: libgit2 parses every tree on a path
        at each lookup by path (2 ms for a month's folder of a big vault, per note)."""
        root = self.repo[commit].peel(pygit2.Tree) if commit else None
        folders: dict[str, pygit2.Tree | None] = {"": root}
        out = {}
        for path in paths:
            parent, _, name = path.rpartition("/")
            if parent not in folders:
                try:
                    found = root[parent] if root is not None else None
                except (KeyError, ValueError):
                    found = None
                folders[parent] = found if isinstance(found, pygit2.Tree) else None
            folder = folders[parent]
            try:
                entry = folder[name] if folder is not None else None
            except (KeyError, ValueError):
                entry = None
            out[path] = (0, None) if entry is None else (entry.filemode, str(entry.id))
        return out

    def _working_blobs(self, paths: list[str]) -> dict[str, str | None]:
        """The blob id git gives each working file, its filters applied (None: no file;
        absent from the result: git could not read it)."""
        from cortex import gitcli

        there = [p for p in paths if os.path.isfile(self.root / p) and not os.path.islink(self.root / p)]
        out: dict[str, str | None] = {p: None for p in paths if not os.path.lexists(self.root / p)}
        if there:
            done = gitcli.run_bytes(self.root, "hash-object", "--stdin-paths",
                                    input="\n".join(there).encode("utf-8", "surrogateescape") + b"\n")
            if done is not None and done.code == 0:
                out.update(zip(there, done.out.decode().split()))
        return out

    # --- writing -------------------------------------------------------------------

    def write_blob(self, data: bytes) -> str:
        return _retried(lambda: str(self.repo.create_blob(data)))

    def write_blobs(self, blobs: list[bytes]) -> list[str]:
        """Write ``blobs``, returning their ids in order: as one pack when there are many
        (``packing.PACK_AT``, git's own threshold for keeping a fetch packed), else as
        loose objects. libgit2 rescans the packs when it misses an object, so the new
        pack is seen by the commit that follows."""
        from cortex import packing

        objects = self._objects_dir()
        if objects is None or len(blobs) < packing.PACK_AT:
            oids = [self.write_blob(data) for data in blobs]
        else:
            oids = _retried(lambda: packing.write_pack(objects, blobs))
        self._written = dict(zip(oids, blobs))  # what materialize writes next, read from memory
        return oids

    def release_packs(self) -> None:
        """The packs ``write_blobs`` wrote may go the way of any other now (``packing.release_packs``)."""
        from cortex import packing

        objects = self._objects_dir()
        if objects is not None:
            packing.release_packs(objects)

    def missing(self, oids: Iterable[str]) -> set[str]:
        """Of the object ids ``oids``, those the object store does not have (a `git gc
        --prune=now` or `git repack -a -d` removed blobs no commit referenced yet)."""
        return {oid for oid in oids if oid not in self.repo}

    def _objects_dir(self) -> Path | None:
        """Where new objects go, when cortex may write a pack there itself: not in a
        SHA-256 repository (pack ids are SHA-1 here) nor when ``GIT_OBJECT_DIRECTORY``
        sends objects elsewhere; None then, and pygit2 writes loose objects."""
        from cortex import packing

        if os.environ.get("GIT_OBJECT_DIRECTORY"):
            return None
        try:
            if str(self.repo.config["extensions.objectformat"]).lower() != "sha1":
                return None
        except KeyError:
            pass
        common = packing.common_dir(self.root)
        return None if common is None else common / "objects"

    def require_branch(self, *, merge: bool = True, then: str = "run again") -> None:
        """Refuse to commit on a detached HEAD (the commit would be reachable from no
        branch, and the memory lost at the next checkout) or beside a person's git
        operation that expects HEAD to move only by it (``gitop.require_committable``)."""
        from cortex.gitop import require_committable

        require_committable(self.git_dir, merge=merge, then=then, detached=self.repo.head_is_detached)

    def commit(self, changes: Mapping[str, str | None], message: str, author: tuple[str, str]) -> str:
        """Commit HEAD's tree with ``changes`` applied (path → blob oid, or None to delete).

        Runs under ``index.lock`` (the caller's ``locked()`` block, or its own), inside
        ``materializing(changes)``, which puts the index in step with it. Retries when
        a person's commit moves HEAD underneath us, and waits a bounded time for a ref
        lock another git process holds.
        """
        signature = pygit2.Signature(*author)
        with self.locked():
            self.require_branch()  # under the lock: as late as can be before HEAD moves
            deadline = time.monotonic() + self.lock_wait
            while True:
                try:
                    base = self.head_tree()
                    parents = [] if self.repo.head_is_unborn else [self.repo.head.target]
                    tree = self._apply(base, _nest(changes))
                    oid = str(self.repo.create_commit(None, signature, signature, message, tree, parents))
                except (pygit2.GitError, OSError) as exc:
                    if not _object_store_race(exc):
                        raise
                else:
                    old = str(parents[0]) if parents else None
                    subject = message.strip().splitlines()[0] if message.strip() else ""
                    why = self._lock.move_branch(oid, old, f"commit{'' if parents else ' (initial)'}: {subject}",
                                                 author, log=self._logs_refs())
                    if why is None:
                        record_move(self.git_dir, old, oid)
                        return oid
                    # "moved": a person's commit came first, made again on it; "locked": waited for
                if time.monotonic() >= deadline:
                    lock = branch_lock(self.git_dir)
                    raise LockBusy("git is busy: the branch stayed locked or kept moving while cortex committed"
                                   + (f" ({lock} is there{held_since(lock)})" if lock and lock.exists() else ""),
                                   "nothing was committed; cortex tries again at its next run (exit 75). "
                                   "cortex never removes a lock it did not take" + (if_left(lock) if lock else ""))
                time.sleep(0.05)

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

    @contextmanager
    def materializing(self, changes: Mapping[str, str | None], before: str | None = None) -> Iterator[None]:
        """For a block that commits ``changes`` (under ``locked()``): the index takes them
        first, from their blobs, before the block moves HEAD; the working files follow
        (``materialize``), still under the lock. (A failed block: see the end.)

        Why the index first: git reads HEAD, then the index, and only then takes
        ``index.lock`` (``git commit -a`` does). A person's commit that read HEAD after
        cortex moved it and the index before cortex replaced it, and got the lock once
        cortex let go, wrote a tree without cortex's new notes on top of cortex's commit:
        deleted them (the soak, under load, when the index came after the commits). With
        the index first, a commit that read the old HEAD is refused by git (HEAD is no
        longer what it read), and one that read the new HEAD read the new index. Killed
        in between, the index is ahead of HEAD: cortex's changes staged, nothing lost,
        and the run's or the job's recovery commits or redoes them. A block that fails
        having committed nothing puts the index back; one that committed part of it leaves
        the index ahead, for the recovery to finish."""
        assert self._lock is not None, "the index is written only under index.lock"
        head_before = self.head_oid()
        before = head_before if before is None else before
        self._sparse = self.outside_checkout(list(changes))
        entries = {path: (0o100644, oid) for path, oid in changes.items()}
        tmp, index = self._changed_index(info_step(entries, len(head_before or "0" * 40)),
                                         hint="nothing was committed: cortex tries again at its next run")
        old = self.git_dir / "cortex-index.old"
        old.unlink(missing_ok=True)
        had_index = index.exists()
        if had_index:
            os.link(index, old)  # the index as it was, kept by a second name (no copy)
        os.replace(tmp, index)
        try:
            yield
        except BaseException:
            if self.head_oid() == head_before:  # nothing committed: as it was
                if had_index:
                    os.replace(old, index)
                else:
                    index.unlink(missing_ok=True)
            # else part committed: the index stays ahead (never behind HEAD), recovery commits the rest
            raise
        old.unlink(missing_ok=True)
        self.materialize(changes, before)

    def unstage(self, changes: Mapping[str, str | None]) -> None:
        """Undo what ``materializing`` staged for ``changes`` that were never committed (a
        kill between the index and the commit): each path whose index entry is still
        cortex's planned one takes HEAD's entry back; a path staged otherwise since (a
        person's ``git add``) stays as it is."""
        with self.locked():
            head = self.head_oid()
            staged = self._staged_blobs(list(changes))
            back = self._entries_at(head, [p for p, oid in changes.items() if staged.get(p) == oid]) if head else {}
            if not back:
                return
            try:
                self._write_index(info_step(back, len(head)))
            except CortexError:
                return

    def still_staged(self, changes: Mapping[str, str | None]) -> dict[str, str | None]:
        """Of ``changes`` a commit already made (a killed command's, being finished), those
        the index still holds as that commit's ``materializing`` staged them (a removal: no
        entry). Any other entry was put there since, with its working file: a person's
        commit of an edit to the note, their ``git add``, a ``cortex forget`` archiving it;
        that stays as it is, where the commit's content written again over it undid it (the
        person's next commit reverted their edit, or brought the forgotten note back).
        Asked under ``index.lock``."""
        assert self._lock is not None, "the index is read for a write only under index.lock"
        staged = self._staged_blobs(list(changes))
        return {path: oid for path, oid in changes.items() if staged.get(path) == oid}

    def materialize(self, changes: Mapping[str, str | None], before: str | None) -> None:
        """Make the working tree and the index agree with committed ``changes``: files
        written, then one new index, all under ``index.lock``.

        A working file is replaced (or removed) only while it is still cortex's: the one
        ``before`` (the commit the changes were made on) had, the new one, or a start of
        a new one (a write of cortex's that a kill cut short). Anything else is a
        person's, done after cortex looked (an editor saving takes no lock): an edit, or
        a note they deleted (``before`` had it; no file now). It stays as it is, beside
        the committed note, its index entry the committed one; so does a file cortex
        cannot write (permissions). Each is listed in ``kept`` with why.

        A path a sparse checkout leaves out (git's skip-worktree bit, found before the
        index changed) gets no working file: its index entry is the committed one,
        still marked so."""
        with self.locked():
            writes, removals = [], []
            written, self._written = self._written, {}
            sparse, self._sparse = self._sparse, set()
            safe: set[str] = set()  # folders already looked at: a run's notes share a few
            for path, oid in changes.items():
                if path in sparse:
                    continue
                target = self.root / path
                link = link_on_path(self.root, path, safe)
                if link:  # planning refuses these; a link made since must not be followed either
                    raise CortexError(f"cannot write {path}: {link}", "replace it with a folder and run again")
                if oid is None:
                    if target.is_file() or target.is_symlink():
                        removals.append((path, target))
                    continue
                data = written.get(oid)
                if data is None:  # after a crash, or another process's blobs: from the object store
                    data = self.repo[oid].data  # here: pygit2 stays on one thread
                writes.append((path, target, data))
            # What was there before, for each path: read here (pygit2 stays on one thread),
            # its content only where a file is there to compare.
            known = self._entries_at(before, [path for path, _, _ in writes] + [path for path, _ in removals])
            theirs = {path: Before(oid is not None, self.repo[oid].data if oid and mode != LINK else None)
                      for path, (mode, oid) in known.items()
                      if oid is not None or os.path.lexists(os.path.join(self.root, path))}
            kept = _write_files(writes, theirs)
            for path, target in removals:
                why = _remove_file(target, theirs[path])
                if why is not None:
                    kept.append((path, why))
            self.kept += kept
            left = {path for path, _ in kept}
            step = paths_step(sorted(set(changes) - left - sparse), "--add", "--remove")
            held = info_step({p: (0o100644, changes[p]) for p in [*left, *sparse]}, len(before or "0" * 40))
            marked = paths_step(sorted(p for p in sparse if changes[p] is not None), "--skip-worktree")
            self._write_index(step, *([held] if left or sparse else []), *([marked] if sparse else []))

    def kept_warnings(self) -> list[str]:
        """What the commits so far left in a person's hands (``materialize``), once."""
        kept, self.kept = self.kept, []
        return [f"{path}: {why}" for path, why in kept]

    def _blobs_at(self, commit: str | None, paths: list[str]) -> dict[str, bytes | None]:
        """The content of each of ``paths`` in ``commit`` (None: no file there, or a link)."""
        return {path: self.repo[oid].data if oid and mode != LINK else None
                for path, (mode, oid) in self._entries_at(commit, paths).items()}

    def stage_committed(self, path: str, oid: str, previous: bytes | None,
                        restage: Callable[[bytes], bytes] | None = None) -> None:
        """Point the index entry of ``path`` at the committed blob ``oid``, leaving the
        working file (which holds a person's uncommitted edits besides) alone. An entry a
        person staged themselves (not ``previous``, HEAD's old content) stays theirs, with
        ``restage`` applied to it (cortex's part added), so their next commit keeps both."""
        with self.locked():
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
            self._write_index((("--add", "--cacheinfo", f"100644,{target},{path}"), None))

    def is_dirty(self, path: str) -> bool:
        """True when a person has staged or unstaged changes to ``path``."""
        return bool(self.changed([path]))


SCRATCH = "cortex-scratch"  # cortex's copies of the index: <SCRATCH>.<pid>.index (and git's .lock of one)
SCRATCH_STALE = 60.0  # seconds: a copy this old has no git writing it any more


def _clear_scratch(git_dir: Path) -> None:
    """Remove the index copies (and their git locks) killed processes left, once stale;
    and the single-name copy of older versions."""
    now = time.time()
    for left in [*git_dir.glob(f"{SCRATCH}.*"), git_dir / "cortex-index.tmp", git_dir / "cortex-index.tmp.lock"]:
        try:
            if now - left.lstat().st_mtime > SCRATCH_STALE:
                left.unlink()
        except OSError:
            pass  # gone meanwhile, or not ours to remove


IndexStep = tuple[tuple[str, ...], "bytes | None"]  # one `git update-index`: its arguments, its standard input


def info_step(entries: Mapping[str, tuple[int, str | None]], oid_length: int) -> IndexStep:
    """Index entries set from blobs, ``{path: (mode, blob id or None to remove)}``."""
    zero = "0" * oid_length
    info = "".join(f"{mode:o} {blob}\t{path}\n" if blob else f"0 {zero}\t{path}\n"
                   for path, (mode, blob) in entries.items())
    return ("--index-info",), info.encode("utf-8", "surrogateescape")


def paths_step(paths: list[str], *flags: str) -> IndexStep:
    """Index entries set from the working files at ``paths`` (stat data included)."""
    return (*flags, "-z", "--stdin"), b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


WRITE_THREADS_FROM = 500  # files: a big run's notes are written by one thread per core
PATHSPECS_MAX = 500  # paths given to `git ls-files` as pathspecs; more: the whole index, filtered here
STATUS_PATHSPECS = 8  # the same for `git status`, which costs more per pathspec


OBJECT_TRIES = 3  # writes of objects a `git gc` or `git prune` beside cortex made fail


def _object_store_race(exc: Exception) -> bool:
    """An object write that failed because git's own maintenance ran beside it: `git
    gc` removes an empty fan-out folder between libgit2's mkdir and its rename, `git
    prune --expire=now` a pack file being written. Written again, it succeeds."""
    return isinstance(exc, FileNotFoundError) or "No such file or directory" in str(exc)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of a working file, None where there is none."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _how_git_stopped(code: int) -> str:
    """git's exit said in words where it said none: killed by a signal (SIGXFSZ: a file
    size limit), or its exit code."""
    import signal

    try:
        return f"git was stopped by {signal.Signals(-code).name}" if code < 0 else f"git exited {code}"
    except ValueError:
        return f"git exited {code}"


def _retried(write: Callable[[], Any]) -> Any:
    for attempt in range(OBJECT_TRIES):
        try:
            return write()
        except (pygit2.GitError, OSError) as exc:
            if not _object_store_race(exc):
                raise
            if attempt == OBJECT_TRIES - 1:
                raise LockBusy(f"git's object store kept changing while cortex wrote to it ({exc})",
                               "a `git gc` or `git prune` ran beside cortex; nothing was committed, "
                               "cortex tries again at its next run (exit 75)") from None
            time.sleep(0.05)



EDITED = "edited while cortex committed it; the edit is left as it is, an unstaged change over the committed note"
EDITED_GONE = "edited while cortex moved or removed it; the edit is left where it was, an untracked file"


def _write_files(writes: list[tuple[str, Path, bytes]], theirs: Mapping[str, Before]) -> list[tuple[str, str]]:
    """Each ``(path, target, data)`` written, unless the file there is a person's
    (``materialize``; ``theirs``: each path as the replaced commit had it, where it had
    it or a file is there); the paths left alone, and why. Creating a file costs the
    kernel more than writing it, and several threads create files side by side (the
    GIL is released)."""
    from cortex.parallel import available_cores

    threads = min(4, available_cores()) if len(writes) >= WRITE_THREADS_FROM else 1
    if threads == 1:
        return _write_slice(writes, theirs)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        parts = [pool.submit(_write_slice, writes[k::threads], theirs) for k in range(threads)]
        return [kept for part in parts for kept in part.result()]  # the first failure is raised, as from one thread


def _write_slice(writes: list[tuple[str, Path, bytes]], theirs: Mapping[str, Before]) -> list[tuple[str, str]]:
    out = []
    for path, target, data in writes:
        why = _write_file(path, target, data, theirs.get(path, NEW))
        if why is not None:
            out.append((path, why))
    return out


def _write_file(path: str, target: Path, data: bytes, before: Before) -> str | None:
    """Write ``data`` to ``target``; why not when the file there is a person's."""
    try:
        if before.tracked and not os.path.lexists(target):  # a person deleted the note since cortex looked
            return f"deleted while cortex committed it; it stays deleted (`git checkout -- {path}` brings it back)"
        try:
            # One call for the common case, a new note; an existing file is rewritten
            # only while it is cortex's (``_still_ours``).
            with open(target, "xb") as fh:
                fh.write(data)
        except FileNotFoundError:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as fh:
                fh.write(data)
        except FileExistsError:
            if target.is_dir():
                raise CortexError(f"{path} is a directory in the working tree", "move it away and run again") from None
            if not _still_ours(target, before, data):
                return EDITED
            if target.read_bytes() != data:
                # Written in place: a torn write is a start of ``data``, which the recovery
                # that follows any crash writes again (the commit, the truth, holds it).
                target.write_bytes(data)
    except OSError as exc:  # permissions, a read-only folder: the person's to sort out
        return f"could not be written ({exc.strerror or exc}); the note is committed (`git checkout -- {path}` once it can be)"
    return None


def _remove_file(target: Path, before: Before) -> str | None:
    """Remove ``target`` while it is still cortex's; why not otherwise."""
    if not _still_ours(target, before, None):
        return EDITED_GONE
    try:
        target.unlink(missing_ok=True)
    except OSError as exc:
        return f"could not be removed ({exc.strerror or exc}); it is no longer in git"
    return None


def in_cone(path: str, folders: list[str]) -> bool:
    """Whether a cone-mode sparse checkout of ``folders`` has ``path`` in the working
    tree: everything under a folder, and the files directly in the top folder and in each
    folder above one (git's cone patterns)."""
    parent = path.rpartition("/")[0]
    if not parent:
        return True
    return any(path.startswith(f + "/") or f.startswith(parent + "/") for f in (f.strip("/") for f in folders))


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
