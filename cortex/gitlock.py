"""git's lock protocol, kept by cortex beside the people who use the same repository.

The rules (README, "Beside people"):

1. cortex moves HEAD only while it holds ``.git/index.lock``, taken the way git takes
   it (``O_CREAT | O_EXCL``), and writes the new index before it moves HEAD: a person's
   git, which reads HEAD and the index before it takes the lock, never sees HEAD ahead
   of the index (``GitRepo.materializing``). The index is changed on a copy, the
   process's own, that keeps the index's time, so git's racy check (an entry whose file
   changed in the second the index was written) holds across cortex's writes
   (``GitRepo._scratch_index``).
2. cortex never removes a lock it did not take. It waits a bounded time, then gives up
   with exit 75 (``LockBusy``) and nothing half-done. The one exception is a lock its own
   killed process left: the owner record (``.git/cortex-lock.json``: pid, process start,
   the lock file's inode; for the branch's lock, its inode and content too) proves it,
   and the next cortex command removes it. cortex moves the branch itself, git's way
   (``IndexLock.move_branch``), so that the branch's lock is one it made and recorded.
3. While a person's ``git commit`` runs — from its pre-commit hook (pre-commit's stash of
   unstaged changes, the hooks) through the commit editor — cortex does not touch the
   index or the working tree. The guard hook (``python -m cortex.gitlock guard``, run
   before pre-commit's own hooks) records that commit's git process; cortex waits while
   it lives. A short flock (``.git/cortex-guard.lock``) makes "check for a commit, take
   the index lock" and "record a commit" exclude each other.
4. A plain ``git commit`` that started in the instant between cortex's check and its
   lock, and read the index before cortex replaced it, writes that older index back once
   cortex lets go (git reads the index before it takes the lock): its commit is refused,
   HEAD having moved, but the person's next one would delete cortex's new notes. cortex
   records its moves of HEAD (``.git/cortex-moves``); the guard stages again, as
   committed, the changes of those moves such an index dropped (``restore_dropped``).

Standard library only: the guard runs inside every commit a person makes.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from cortex.errors import LockBusy
from cortex.fsutil import flock_within, own as shared, share_as  # `own` names the lock file below
from cortex.layout import escaped_name, misnamed_reason, not_utf8

OWNER = "cortex-lock.json"
OWN_LOCK_PREFIX = "cortex-index.lock."  # the lock as made, before it is linked into place
OWN_REF_PREFIX = "cortex-ref.lock."  # the branch's lock as made (in the refs' git directory, no ref)
GUARD_LOCK = "cortex-guard.lock"
COMMIT_MARK = "cortex-commit.json"
GUARD_MARK = "cortex: guard"  # in the hook script, so install can recognise its own
GUARD_WAIT = 30.0  # how long a person's commit waits for a cortex commit in flight


# --- processes ------------------------------------------------------------------------

def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux), so a reused pid is not taken for it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])


def alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start is None or _start_time(pid) in (None, start)


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


@contextmanager
def _guard_flock(git_dir: Path, timeout: float) -> Iterator[None]:
    fd = os.open(git_dir / GUARD_LOCK, os.O_RDWR | os.O_CREAT, shared(0o600))  # every commit's, whoever commits
    try:
        if not flock_within(fd, timeout, poll=0.02):
            raise OSError(errno.EAGAIN, f"{GUARD_LOCK} is held", str(git_dir / GUARD_LOCK))
        yield
    finally:
        os.close(fd)


# git commands that read HEAD, then move it (or the index) a while later.
MOVING = {"commit", "merge", "rebase", "cherry-pick", "revert", "am", "pull", "stash", "reset", "checkout", "switch"}


def _git_at_work(work_tree: Path) -> dict | None:
    """A person's git command that will move HEAD, running in ``work_tree`` (Linux: read
    from /proc). It covers the instant between ``git commit`` reading HEAD and its hook
    starting, before the guard could say anything."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if (entry / "comm").read_text().strip() != "git":
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not MOVING.intersection(a.decode(errors="replace") for a in argv[1:4]):
                continue
            if Path(os.readlink(entry / "cwd")) != work_tree:
                continue
        except OSError:
            continue
        return {"pid": int(entry.name), "command": " ".join(a.decode(errors="replace") for a in argv if a)}
    return None


def commit_in_progress(git_dir: Path) -> dict | None:
    """The person's ``git commit`` the guard recorded, while its process lives (or, on
    Linux, any git command of a person's that is about to move HEAD here)."""
    mark = _read_json(git_dir / COMMIT_MARK)
    recorded = None if mark is None else commit_recorded(git_dir, mark)
    if recorded is not None:
        return recorded
    # No commit recorded, or the record of one that ended (the guard's mark stays until
    # it is read): a person's next `git commit` may be on its way to its guard, so look
    # for it as when nothing was ever recorded.
    return _git_at_work(git_dir.parent.resolve()) if git_dir.name == ".git" else None


def commit_recorded(git_dir: Path, mark: dict | None = None) -> dict | None:
    """The person's ``git commit`` the guard recorded, while its process lives: from its
    pre-commit hook on, when pre-commit may have set unstaged changes aside."""
    mark = mark if mark is not None else _read_json(git_dir / COMMIT_MARK)
    if mark is None:
        return None
    if alive(int(mark.get("pid", 0)), mark.get("start")):
        return mark
    try:
        (git_dir / COMMIT_MARK).unlink()  # cortex's own record of a commit that ended
    except FileNotFoundError:
        pass
    return None


def wait_for_file(path: Path, root: Path, timeout: float) -> None:
    """Wait (at most ``timeout``) for ``path`` to be there again while a person's commit
    is recorded in the repository at ``root``: pre-commit's stash rewrites the working
    files meanwhile, so a tracked file can be missing for an instant."""
    git_dir = git_dir_of(root)
    deadline = time.monotonic() + timeout
    while not path.exists() and commit_recorded(git_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.02)


# --- cortex's side: the index lock -------------------------------------------------------

class IndexLock:
    """``.git/index.lock``, held by cortex for one commit-and-index step."""

    def __init__(self, git_dir: Path, timeout: float) -> None:
        self.git_dir = git_dir
        self.path = git_dir / "index.lock"
        self.owner = git_dir / OWNER
        self.timeout = timeout
        self.ino: int | None = None
        self.removed: list[str] = []  # locks our own killed process left, now removed
        self.busy: Path | None = None  # the other git's lock that made the last try wait

    def acquire(self) -> None:
        self._clear_own_leftovers()
        deadline = time.monotonic() + self.timeout
        while True:
            why = self._try()
            if why is None:
                return
            if time.monotonic() >= deadline:
                held = self.busy or self.path
                raise LockBusy(
                    f"git is busy: {why}{held_since(held)}",
                    "nothing was changed; cortex tries again at its next run (exit 75). "
                    "cortex never removes a lock it did not take" + if_left(held),
                )
            time.sleep(0.05)

    def _try(self) -> str | None:
        """Take the lock, or say who holds it."""
        self.busy = None
        with _guard_flock(self.git_dir, self.timeout):
            mark = commit_in_progress(self.git_dir)
            if mark is not None:
                what = mark.get("command") or "git commit"
                return f"a person's `{what}` is in progress (pid {mark.get('pid')})"
            # The lock is made as a file of cortex's own, recorded with its inode, then
            # linked into place (as exclusive as O_EXCL): killed at any instant, a lock
            # that is there is provably this process's, so the next command removes it.
            me = {"pid": os.getpid(), "start": _start_time(os.getpid())}
            own = self.git_dir / f"{OWN_LOCK_PREFIX}{os.getpid()}"
            fd = os.open(own, os.O_RDWR | os.O_CREAT | os.O_TRUNC, shared(0o644))
            ino = os.fstat(fd).st_ino
            os.close(fd)
            _write_json(self.owner, {**me, "ino": ino})
            try:
                try:
                    os.link(own, self.path)
                except FileExistsError:
                    raise
                except OSError:  # a file system without hard links: create it in place
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, shared(0o644))
                    ino = os.fstat(fd).st_ino
                    os.close(fd)
                    _write_json(self.owner, {**me, "ino": ino})
            except FileExistsError:
                self.owner.unlink(missing_ok=True)
                self.busy = self.path
                return f"{self.path} exists (a git command holds the index, or one that crashed left it)"
            finally:
                own.unlink(missing_ok=True)
            self.ino = ino
            # A git command moving HEAD (a checkout or switch between writing the index
            # and HEAD, `git symbolic-ref`, `git update-ref HEAD`) holds HEAD.lock, which
            # git's own commit honours ("cannot lock ref 'HEAD'") and libgit2 does not.
            head_lock = self.git_dir / "HEAD.lock"
            if head_lock.exists():
                self.release()
                self.busy = head_lock
                return f"{head_lock} exists (a git command is moving HEAD, or one that crashed left it)"
            return None

    def move_branch(self, new: str, old: str | None, message: str, who: tuple[str, str] | bytes, *,
                    log: bool = True) -> str | None:
        """Move the branch HEAD names from ``old`` (None: a branch yet to be born) to
        ``new`` the way git does: its lock ``refs/heads/<branch>.lock`` holding the new
        id, a line in the branch's and HEAD's reflogs (``log``: made where missing, as
        git's ``core.logAllRefUpdates``), the lock renamed onto the ref. The lock is made
        as a file of cortex's own, recorded (inode, content) and linked into place, as
        ``index.lock`` is: one a kill leaves is provably cortex's and the next command
        removes it; any other lock there, however recent, is a person's git. None when
        moved; else "moved" (the branch is not at ``old``), "locked" (another git holds
        its lock) or "detached" (HEAD names no branch: nothing done). ``who``: (name,
        email), moving now, or git's own ident line (``gitcli.committer_ident``)."""
        lock = branch_lock(self.git_dir)
        if lock is None:
            return "detached"
        refs = _refs_dir(self.git_dir)
        name = lock.relative_to(refs).as_posix().removesuffix(".lock")
        data = f"{new}\n".encode()
        own = refs / f"{OWN_REF_PREFIX}{os.getpid()}"
        fd = os.open(own, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)  # not synced, as git and libgit2 by default do not either
            ino = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        self._note_ref({"ref_lock": str(lock), "ref_ino": ino, "ref_to": new})
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(own, lock)
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links: create it in place
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    self._note_ref({"ref_lock": str(lock), "ref_ino": os.fstat(fd).st_ino, "ref_to": new})
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except FileExistsError:
            self._note_ref(None)
            return "locked"
        finally:
            own.unlink(missing_ok=True)
        moved = False
        try:
            if _ref_value(refs, name) != old:
                return "moved"
            line = _reflog_line(old, new, who, message)
            for path in (refs / "logs" / name, self.git_dir / "logs" / "HEAD"):
                if log or path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with open(path, "ab") as fh:
                        fh.write(line)
            os.replace(lock, refs / name)
            moved = True
        finally:
            if not moved:
                lock.unlink(missing_ok=True)  # ours: it was linked (or created) above
            self._note_ref(None)
        return None

    def _note_ref(self, lock: dict | None) -> None:
        """Record in the owner record the branch's lock about to be linked into place
        (None: let go of)."""
        record = {k: v for k, v in (_read_json(self.owner) or {}).items() if not k.startswith("ref_")}
        _write_json(self.owner, {**record, **(lock or {})})

    def release(self) -> None:
        try:
            if self.ino is not None and os.stat(self.path).st_ino == self.ino:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.owner.unlink(missing_ok=True)
        self.ino = None

    def _clear_own_leftovers(self) -> None:
        record = _read_json(self.owner)
        if record is None or alive(int(record.get("pid", 0)), record.get("start")):
            return
        try:
            if record.get("ino") is not None and os.stat(self.path).st_ino == record["ino"]:
                os.unlink(self.path)
                self.removed.append(".git/index.lock")
        except FileNotFoundError:
            pass
        if record.get("ref_lock") and record.get("ref_ino") is not None:
            self._clear_ref_lock(Path(record["ref_lock"]), record["ref_ino"], str(record.get("ref_to")))
        (self.git_dir / f"{OWN_LOCK_PREFIX}{record.get('pid')}").unlink(missing_ok=True)
        (_refs_dir(self.git_dir) / f"{OWN_REF_PREFIX}{record.get('pid')}").unlink(missing_ok=True)
        self.owner.unlink(missing_ok=True)

    def _clear_ref_lock(self, lock: Path, ino: int, new: str) -> None:
        """The branch's lock the killed process made (``move_branch``): the very file it
        recorded, holding the id it was writing. Any other lock there — another branch's,
        or this one's taken by a person's git since the kill, however soon after — is
        never ours to remove."""
        try:
            with open(lock, "rb") as fh:
                ours = os.fstat(fh.fileno()).st_ino == ino and fh.read(128) == f"{new}\n".encode()
            if ours:
                lock.unlink()
                top = self.git_dir.parent  # the vault: `.git/refs/heads/main.lock`
                self.removed.append(str(lock.relative_to(top) if lock.is_relative_to(top) else lock))
        except FileNotFoundError:
            pass


def _ref_value(refs: Path, name: str) -> str | None:
    """The id the ref ``name`` (``refs/heads/main``) holds in the repository whose refs
    live in ``refs``: its loose file, else its line in ``packed-refs``; None when it has
    neither (a branch yet to be born)."""
    try:
        return (refs / name).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    try:
        with open(refs / "packed-refs", encoding="utf-8") as fh:
            return next((line.split()[0] for line in fh if line.rstrip("\n").endswith(" " + name)), None)
    except FileNotFoundError:
        return None


def _reflog_line(old: str | None, new: str, who: tuple[str, str] | bytes, message: str) -> bytes:
    """A reflog entry as git writes one: "<old> <new> Name <email> <time> <zone>\\t<message>";
    ``who`` an ident line git made is written as it is."""
    if not isinstance(who, bytes):
        now = time.time()
        offset = time.localtime(now).tm_gmtoff
        zone = f"{'-' if offset < 0 else '+'}{abs(offset) // 3600:02d}{abs(offset) % 3600 // 60:02d}"
        name, email = (" ".join(part.replace("<", "").replace(">", "").split()) for part in who)
        who = f"{name} <{email}> {int(now)} {zone}".encode("utf-8", "surrogateescape")
    return f"{old or '0' * len(new)} {new} ".encode() + who + f"\t{' '.join(message.split())}\n".encode("utf-8", "surrogateescape")


# --- an index a person's git read before cortex's move and wrote after it ---------------

MOVES = "cortex-moves"  # in .git: cortex's latest moves of HEAD, "<old> <new>" a line, oldest first
MOVES_KEPT = 16
MOVES_CHECKED = 8
KEEP_INDEX = "CORTEX_KEEP_INDEX"  # set (to anything) for one commit: the guard leaves the index alone


def record_move(git_dir: Path, old: str | None, new: str) -> None:
    """Note a move of HEAD cortex just made (under ``index.lock``), for
    ``restore_dropped``; the last ``MOVES_KEPT`` are kept. Best effort: the move is made,
    and a record that cannot be written only means that move cannot be mended."""
    path = git_dir / MOVES
    try:
        lines = path.read_text(encoding="ascii").splitlines()[-(MOVES_KEPT - 1):]
    except (OSError, UnicodeDecodeError):
        lines = []
    lines.append(f"{old or '0' * len(new)} {new}")
    tmp = path.with_name(f".{MOVES}.{os.getpid()}")
    try:
        tmp.write_text("\n".join(lines) + "\n", encoding="ascii")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _moves_to(git_dir: Path, head: str) -> list[tuple[str, str]]:
    """cortex's moves that lead, one after the other, to ``head``: newest first; none
    when HEAD's last move was someone else's."""
    try:
        lines = (git_dir / MOVES).read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    chain: list[tuple[str, str]] = []
    want = head
    for line in reversed(lines):
        parts = line.split()
        if len(parts) != 2 or parts[1] != want or set(parts[0]) == {"0"}:
            break
        chain.append((parts[0], parts[1]))
        want = parts[0]
        if len(chain) == MOVES_CHECKED:
            break
    return chain


def restore_dropped(root: Path, git_dir: Path | None = None) -> list[str]:
    """Stage again, as committed, the changes of cortex's latest moves of HEAD that an
    index written from an older read has dropped; returns their paths.

    How an index drops them: a person's plain ``git commit`` reads HEAD, then the index,
    and only then takes ``index.lock`` (and writes the index it read, refreshed, before
    its hooks run). When cortex replaces the index, moves HEAD and lets go of the lock
    in that instant, the person's git writes the index as it was before cortex's commit,
    its commit is refused (HEAD moved), and their next commit would delete cortex's new
    notes and undo its changes: the index no longer holds them. (Seen once in a soak,
    under load; reproduced with the person's git held between its read and its lock by
    strace, `cortex run` committing 300 notes meanwhile: all 300 deleted.)

    What counts as dropped: cortex's moves (``record_move``) leading to HEAD say what
    every path they changed held before each of them. The index was read before the
    newest move, or before the one before it, ...: the point most of those paths agree
    with (and more of them for it than against, below) wins, and each path held as at
    that point goes back to HEAD's entry — a new note only while its file is there (a
    person who deletes a note deletes the file), a removed one only while it stays
    removed. A path the person staged otherwise is theirs and stays. ``git rm --cached``
    of some of cortex's notes is outvoted by the rest; of every note of cortex's latest
    move (one note, say) it looks the same: ``CORTEX_KEEP_INDEX=1`` for that commit.
    Runs in the guard hook, before pre-commit sets unstaged work aside, with git's
    ``GIT_INDEX_FILE`` in its environment (``git commit -a`` commits a new index of its
    own, and this mends that one)."""
    from cortex import gitcli
    from cortex.gitop import in_progress

    git_dir = git_dir or git_dir_of(root)
    operation = in_progress(git_dir)
    if operation is not None and operation.name != "bisect":
        return []  # a merge or replay the person is resolving: its index is theirs to settle
    head = head_oid(root)
    moves = _moves_to(git_dir, head) if head else []
    if not moves:
        return []

    def git(*args: str, data: bytes | None = None) -> bytes | None:
        return gitcli.stdout_bytes(root, "--literal-pathspecs", *args, input=data)

    per_move: list[dict[str, tuple[gitcli.Entry, gitcli.Entry]]] = []  # newest first
    for old, new in moves:
        out = git(*gitcli.tree_diff_args(old, new))
        if out is None:
            return []
        per_move.append(gitcli.raw_diff(out))
    at_head: dict[str, gitcli.Entry] = {}
    for changes in per_move:
        for p, (_, after) in changes.items():
            at_head.setdefault(p, after)  # the newest move that changed it says what HEAD holds
    # what is staged, as the guard's check of names asked it a moment ago: git's answer
    # kept for this index (git reads the whole index for any pathspec)
    out = gitcli.staged_diff(root)
    if out is None:
        return []
    staged = {p: after for p, (_, after) in gitcli.raw_diff(out).items()}  # the index, where it is not HEAD

    def indexed(p: str) -> gitcli.Entry:
        return staged.get(p, at_head[p])

    # Where was the index read? Before the newest move, or the one before it, ...: each
    # guess says what every path changed since should hold (as before the oldest move after
    # the read that changed it). Paths held so, where HEAD holds otherwise, speak for it;
    # paths held as one of those moves left them speak against it (the index was read
    # later, or the person staged them: `git commit -a` stages cortex's changed notes
    # again from their files). The guess with the most paths for it and more for than
    # against wins; its paths go back to HEAD's entries.
    at_read: dict[str, gitcli.Entry] = {}
    since: dict[str, set[gitcli.Entry]] = {}  # each path's entries as the moves after the guessed read left it
    dropped: dict[str, gitcli.Entry] = {}
    for changes in per_move:
        for p, (was, after) in changes.items():
            at_read[p] = was  # older moves overwrite
            since.setdefault(p, set()).add(after)
        agree = {p: was for p, was in at_read.items() if indexed(p) == was != at_head[p]}
        against = sum(1 for p, was in at_read.items() if indexed(p) != was and indexed(p) in since[p])
        if len(agree) > against and len(agree) >= len(dropped):
            dropped = agree
    zero = "0" * len(head)
    back: dict[str, gitcli.Entry] = {}
    for p, was in dropped.items():  # a path staged otherwise than both is the person's, and stays
        there = os.path.lexists(root / p)
        if at_head[p][1] != zero and was[1] == zero and not there:
            continue  # a new note whose file is gone: deleted since
        if at_head[p][1] == zero and there:
            continue  # a note cortex removed, made again since
        back[p] = at_head[p]
    if not back:
        return []
    # --index-info: "mode blob\tpath", mode 0 removing the path
    lines = b"".join(f"{mode if blob != zero else '0'} {blob}\t".encode() + p.encode("utf-8", "surrogateescape") + b"\0"
                     for p, (mode, blob) in sorted(back.items()))
    if git("update-index", "-z", "--index-info", data=lines) is None:
        return []
    return sorted(back)


# --- the person's side: the guard hook ----------------------------------------------------

# What tells git which repository, index and objects to use (`git rev-parse
# --local-env-vars`, less the `-c` settings, which name no repository).
LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE",
            "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX", "GIT_CONFIG")


def caller_env(root: Path | None) -> dict[str, str]:
    """This process's environment for a git cortex runs on ``root``. git's locating
    variables stay only where they are the vault's own (cortex run by the vault's hooks,
    at its top); set by another repository — cortex called from its hook (a linked
    worktree's hooks get ``GIT_DIR`` and ``GIT_INDEX_FILE``) or from a `git rebase -x`
    script — they made ``git -C vault`` read, commit or push that repository instead."""
    env = dict(os.environ)
    if root is None or not any(name in env for name in LOCATING) or _callers_repository_is(root):
        return env
    for name in LOCATING:
        env.pop(name, None)
    return env


def _callers_repository_is(root: Path) -> bool:
    """Whether git's locating variables in this environment describe ``root``: the
    working directory inside it and ``GIT_DIR``, if set, its git directory."""
    top = os.path.realpath(root)
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # a working directory removed: no hook of the vault's runs there
        return False
    if os.path.commonpath([top, here]) != top:
        return False
    named = os.environ.get("GIT_DIR")
    return not named or os.path.realpath(named) == os.path.realpath(git_dir_of(Path(top)))


def git_dir_of(root: Path) -> Path:
    dot = root / ".git"
    if dot.is_file():  # a worktree or submodule: "gitdir: <path>"
        target = dot.read_text().strip().removeprefix("gitdir:").strip()
        return (root / target).resolve()
    return dot


def head_oid(root: Path) -> str | None:
    """HEAD's commit, read from git's files as git writes them (a loose or a packed ref;
    a linked worktree's branches live in the main repository), without starting git:
    None where they do not say (an unborn branch, a ref store of another kind)."""
    try:
        git_dir = git_dir_of(root)
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head if len(head) in (40, 64) else None
        oid = _ref_value(_refs_dir(git_dir), head[len("ref: "):]) or ""
        return oid if len(oid) in (40, 64) else None
    except (OSError, UnicodeDecodeError):
        return None


def held_since(lock: Path) -> str:
    """", made 3 h ago" of a lock file that is there."""
    try:
        age = time.time() - os.stat(lock).st_mtime
    except FileNotFoundError:
        return ""
    return f", made {_duration(age)} ago"


def if_left(lock: Path) -> str:
    """How to remove a lock no process holds any more (a git, an editor or a GUI client
    that crashed), which stays for ever: every later run would stop on it as "busy"."""
    if not lock.exists():
        return ""
    return (". If no git command is running in the vault (a commit whose message editor is open, a GUI client), "
            f"a git that crashed left it: remove it, as git itself says (`rm {lock}`)")


def branch_lock(git_dir: Path) -> Path | None:
    """The lock git and libgit2 take to move the branch HEAD names: in the common git
    directory (a linked worktree's branches live in the main repository's); None on a
    detached HEAD or where git's files do not say."""
    try:
        head = (git_dir / "HEAD").read_text().strip()
        return _refs_dir(git_dir) / f"{head[len('ref: '):]}.lock" if head.startswith("ref: ") else None
    except (OSError, UnicodeDecodeError):
        return None

def _duration(seconds: float) -> str:
    """``seconds`` as a person reads an age: 40 s, 12 min, 3 h, 2 days."""
    for size, unit in ((86400, " days"), (3600, " h"), (60, " min")):
        if seconds >= 2 * size or (size == 60 and seconds >= size):
            return f"{seconds // size:.0f}{unit}"
    return f"{max(seconds, 0):.0f} s"

def shared_repository(git_dir: Path) -> str | None:
    """core.sharedRepository of the repository of ``git_dir`` as its config file says it
    (the last value in ``[core]``; a bare key is true), read without starting git: the
    hook runs on every commit. None when unset or unreadable. The repository's own file
    only, where `git init --shared` and `git config` write it (fsutil.share_as)."""
    try:
        text = (_refs_dir(git_dir) / "config").read_text(encoding="utf-8", errors="replace")
    except (OSError, UnicodeDecodeError):
        return None
    value, section = None, ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            name, _, line = line[1:].partition("]")
            section = name.strip().lower()
            line = line.strip()
        if section != "core" or not line or line[0] in "#;":
            continue
        key, eq, raw = line.partition("=")
        if key.strip().lower() == "sharedrepository":
            value = _config_text(raw) if eq else "true"
    return value


def _config_text(raw: str) -> str:
    """A git config value as written after ``=``: quotes dropped, a comment cut."""
    kept, quoted = [], False
    for ch in raw:
        if ch == '"':
            quoted = not quoted
        elif ch in "#;" and not quoted:
            break
        else:
            kept.append(ch)
    return "".join(kept).strip()


def _refs_dir(git_dir: Path) -> Path:
    """Where the branches of the worktree whose git directory is ``git_dir`` live."""
    common = git_dir / "commondir"
    return (git_dir / common.read_text().strip()).resolve() if common.exists() else git_dir


def _git_ancestor() -> int | None:
    """The ``git`` process above this one (git → hook script → pre-commit → guard)."""
    pid = os.getppid()
    for _ in range(6):
        if pid is None or pid <= 1:
            return None
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "git":
                return pid
        except OSError:
            return None
        pid = _parent(pid)
    return None


def guard(git_dir: Path) -> None:
    """Record the running ``git commit`` (an ancestor: git runs the hook, which runs
    pre-commit, which runs this; where /proc is missing, the nearest parent stands for
    it) so cortex leaves the index and working tree alone until it ends. A cortex commit
    already in flight is let finish first."""
    pid = _git_ancestor() or os.getppid()
    deadline = time.monotonic() + GUARD_WAIT
    while True:
        with _guard_flock(git_dir, GUARD_WAIT):
            record = _read_json(git_dir / OWNER)
            busy = record is not None and alive(int(record.get("pid", 0)), record.get("start"))
            if not busy or time.monotonic() >= deadline:
                _write_json(git_dir / COMMIT_MARK, {"pid": pid, "start": _start_time(pid), "at": time.time()})
                return
        time.sleep(0.05)


def guard_script(python: str) -> str:
    import shlex

    return (
        "#!/bin/sh\n"
        f"# {GUARD_MARK}: while this commit runs, `cortex run` leaves the index and the\n"
        "# working tree alone (pre-commit runs this before its own hooks). See docs/hooks.md.\n"
        f"{shlex.quote(python)} -m cortex.gitlock guard 2>/dev/null || true\n"
        'next="$(dirname "$0")/pre-commit.legacy.before-cortex"\n'
        'if [ -x "$next" ]; then exec "$next" "$@"; fi\n'
        "exit 0\n"
    )


def install_guard(hooks_dir: Path, python: str) -> str | None:
    """Install the guard as pre-commit's legacy hook (pre-commit runs a
    ``pre-commit.legacy`` before anything else, stash included). A legacy hook of the
    person's own is kept and run after the guard. Returns what was done, if anything."""
    legacy = hooks_dir / "pre-commit.legacy"
    text = guard_script(python)
    if legacy.exists():
        current = legacy.read_text(errors="replace")
        if current == text:
            return None
        if GUARD_MARK not in current:
            os.replace(legacy, hooks_dir / "pre-commit.legacy.before-cortex")
    hooks_dir.mkdir(parents=True, exist_ok=True)
    tmp = legacy.with_name(".pre-commit.legacy.tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, legacy)
    return "commit guard installed (.git/hooks/pre-commit.legacy)"


def misnamed_staged(root: Path) -> list[str]:
    """The files staged to be committed whose names are not UTF-8. pre-commit, which runs
    the note checks, stops at such a name with a bare UnicodeDecodeError (the commit is
    refused, by nobody saying why): the guard, which runs first, names them. Asked as
    the hook asks what is staged (``gitcli.staged_diff``), which then finds git's answer
    kept: git reads its whole index once for both."""
    from cortex import gitcli

    raw = gitcli.staged_diff(root)
    if raw is None:  # no HEAD yet: the first commit
        out = gitcli.stdout_bytes(root, "diff", "--cached", "--name-only", "-z", "--no-renames", "--diff-filter=d")
    else:  # "<:modes ids status>\0<path>\0" a path; a removal's status is D
        items = raw.split(b"\0")
        out = b"\0".join(path for meta, path in zip(items[0::2], items[1::2]) if not meta.endswith(b" D"))
    try:
        (out or b"").decode("utf-8")
        return []  # every name is UTF-8: the usual commit, one decode
    except UnicodeDecodeError:
        names = out.decode("utf-8", "surrogateescape").split("\0")
        return [name for name in names if not_utf8(name)]


def main(argv: list[str]) -> int:
    if argv[:1] != ["guard"]:
        sys.stderr.write("usage: python -m cortex.gitlock guard\n")
        return 2
    git_dir = Path(os.environ["GIT_DIR"]) if os.environ.get("GIT_DIR") else git_dir_of(Path.cwd())
    share_as(None, git_dir=git_dir)  # the guard's lock is every committer's, a teammate's too
    try:
        guard(git_dir)
    except OSError:
        pass  # the guard never blocks a person's commit
    for name in misnamed_staged(Path.cwd()):
        what, hint = misnamed_reason(name)
        sys.stdout.write(f"cortex: {escaped_name(name)}: {what}: the commit is refused — {hint}, then commit again\n")
    index = os.path.basename(os.environ.get("GIT_INDEX_FILE", ""))
    if not os.environ.get(KEEP_INDEX) and not index.startswith("next-index"):  # `git commit PATH`: an index from HEAD
        try:
            restored = restore_dropped(Path.cwd(), git_dir)
        except (OSError, ValueError):
            restored = []
        if restored:
            n = len(restored)
            sys.stdout.write(
                f"cortex: {n} {'change' if n == 1 else 'changes'} cortex last committed (or synced) "
                f"{'was' if n == 1 else 'were'} missing from the index (a git command wrote an index it had read "
                f"before), staged again as committed so this commit keeps "
                f"{'it' if n == 1 else 'them'}: {', '.join(restored[:3])}{' …' if n > 3 else ''}. "
                f"To leave the index as it is for one commit: {KEEP_INDEX}=1 git commit\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
