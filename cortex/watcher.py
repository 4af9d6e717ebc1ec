"""``cortex watch``: a file watcher, so that cortex's checks need not stat every note.

Every freshness check — the search index's update before a query, ``cortex status`` —
asks ``git status`` which tracked notes changed, and git stats every tracked file to find
the ones edited in place (an edit does not change its folder's mtime): 0.14 s at 200,000
notes, the one cost that still grew with the vault. git's remedy is ``core.fsmonitor``: a
hook that names the files changed since the last call, so that git stats only those.
git brings a watcher of its own on macOS and Windows, not on Linux; this is one for
Linux (inotify, standard library only; the search engines load only to answer a query).

**cortex's own git calls use it; the person's git never does.** The watcher is named to
git with ``-c core.fsmonitor=<hook>`` on cortex's probe alone, run on cortex's own copy of
the index (``cortex/search/freshness.py``), and never set in the repository's config:
before git 2.44, ``git diff-index <tree>`` under an fsmonitor reports files the monitor
calls unchanged as deleted — pre-commit stashes unstaged work with exactly that command,
and re-applying the stash then deletes the person's files (reproduced here with git
2.39: a vault's whole working tree gone after one ``git commit -a``).

How it fits together:

- **The daemon** (``Watcher.run``) watches every folder of the working tree (not ``.git``
  which holds cortex's caches, nor a ``.cortex`` an earlier cortex left) and numbers each change in a journal, in the order the
  kernel reports them. A folder created or moved in is watched, then named whole
  (``dir/``): whatever was written into it before its watch existed is covered.
- **The hook** (``cortex/fsmonitor.py``) asks over a unix socket in the git directory:
  "what changed since token T". A token is ``cortex:<daemon>:<n>``; one from another
  daemon (restarted, or none) gets "everything".
- **No event is missed by timing.** Before answering, the daemon creates a cookie file in
  a folder it watches and waits to read that cookie's own event: the kernel queues events
  in order, so every change made before the question has then been journalled.
- **When in doubt, everything.** A kernel queue overflow, a watch the kernel refused (the
  ``max_user_watches`` limit), a token older than the journal keeps: the answer is ``/``
  and git stats every file — as correct as without a watcher, and as slow. An overflow
  answers so every question still waiting for its cookie: the cookie's event may have
  been dropped with the rest.
- **A new index version is seeded by the daemon**: it watches ``.git`` for git's index
  being replaced (by anyone) and, once the index is quiet for ``SEED_QUIET``, makes the
  probe's copy of it and lets git record a token in it (``freshness.seed_probe_copy``),
  never while a probe that found no copy stats every file itself, nor just after.
- **The search index asks it directly**, not through git (``freshness.watcher_changes``):
  with the token of its last update, it is told every path changed since, whatever git's
  index did meanwhile, so the first query after a commit stats only what changed.
- **It answers `cortex query` too** (``cortex/search/served.py``): a question sent as
  ``query <json>`` is answered by a worker thread that keeps the search index loaded and
  brings it up to date first with the watcher's word, as a cold query would; whatever it
  cannot answer the same way is declined and the query answers itself.
- **One daemon per vault**: an exclusive ``flock`` on ``.git/cortex-watch/lock``, held for
  the daemon's life and released by the kernel however it ends, so a kill -9 leaves no
  lock to clean and the socket it left is provably stale.
- **Started by itself in a large vault** (``autostart``, ``watch: auto`` in
  ``observer/config.yml``, the default): ``cortex query``, ``cortex index`` and ``cortex
  status`` in a vault whose git index holds ``watch.notes`` files or more (20,000: below,
  git's stat of every note costs a query under 15 ms, docs/scale.md) start a daemon
  detached when none runs, and answer without waiting for it, as git's own fsmonitor
  daemon starts on ``core.fsmonitor=true``. Never from a git hook or a command git runs,
  nor ``cortex run``, ``maintain``, ``sync``; never on a remote file system. The lock
  decides between two started at once; a person's foreground `cortex watch` (a systemd
  unit's) ends such a one and takes its place (``_take_lock``). Such a daemon ends after ``watch.idle`` seconds
  (an hour) with no ``cortex query`` or ``cortex index`` asking it (git's questions, which
  a cron's `cortex run` and `maintain` bring, are not such), so cron and CI leave nothing
  running for long;
  a failed start is said once, on stderr, and tried again a day later.
- **A vault deleted ends its daemon**: the lock and log files it holds open keep the
  deleted folders alive in the kernel, so ``rm -rf`` of the vault brings no event for the
  working tree itself; the daemon sees its lock file unlinked instead (checked at every
  wake-up, at least once a second), ends, and removes nothing at that path, where a new
  clone's own watcher may run already.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import struct
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from cortex.errors import CortexError, os_said
from cortex.fsmonitor import MAX_QUESTION, VERB  # the query protocol

if TYPE_CHECKING:  # the daemon's own modules: `cortex status` asks only whether one runs
    import socket

# inotify(7)
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

CODE_EVENTS = IN_MODIFY | IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW  # a file of cortex's own written over
TREE_EVENTS = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
               | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
_EVENT = struct.Struct("iIII")

SKIPPED = frozenset({".git", ".cortex"})  # never tracked: git's own directory (cortex's caches too), an old `.cortex`
STATE_DIR = "cortex-watch"  # in the git directory: lock, sock, pid, log, cookies
COOKIE = "cookie-"
SEED_QUIET = 1.0  # seconds git's index stays unchanged before its probe copy is seeded (a commit through pre-commit rewrites it several times)
SEED_RETRY = 0.02  # seconds before trying again when a probe held the seed off
JOURNAL_LIMIT = 200_000  # changes kept; a token older than the oldest kept gets "everything"


class Inotify:
    """The kernel's inotify, through libc (no dependency)."""

    def __init__(self) -> None:
        import ctypes

        self._ctypes = ctypes
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            err = self._ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")

    def add(self, path: bytes, mask: int) -> int:
        wd = self._libc.inotify_add_watch(self.fd, path, mask)
        if wd < 0:
            err = self._ctypes.get_errno()
            raise OSError(err, os.strerror(err), os.fsdecode(path))
        return wd

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)  # already gone (the folder deleted) is fine

    def read(self) -> list[tuple[int, int, bytes]]:
        """The events queued now: (watch, mask, name)."""
        try:
            data = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return []
        events, pos = [], 0
        while pos + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, pos)
            pos += _EVENT.size
            events.append((wd, mask, data[pos:pos + size].rstrip(b"\0")))
            pos += size
        return events

    def close(self) -> None:
        os.close(self.fd)


class Journal:
    """The paths changed, numbered in the order they were reported.

    ``since(n)`` is every path changed after change ``n``, or None for "anything may have
    changed" — when ``n`` is older than what is kept (``floor``)."""

    def __init__(self, limit: int = JOURNAL_LIMIT) -> None:
        self.seq = 0
        self.floor = 0
        self.limit = limit
        self._entries: deque[tuple[int, bytes]] = deque()

    def add(self, path: bytes) -> None:
        self.seq += 1
        self._entries.append((self.seq, path))
        if len(self._entries) > self.limit:
            for _ in range(self.limit // 2):
                self.floor = self._entries.popleft()[0]

    def everything(self) -> None:
        """From here on, a question about any earlier moment is answered "everything"."""
        self.seq += 1
        self.floor = self.seq
        self._entries.clear()

    def since(self, n: int) -> list[bytes] | None:
        if n < self.floor or n > self.seq:
            return None
        out: dict[bytes, None] = {}
        for seq, path in reversed(self._entries):
            if seq <= n:
                break
            out[path] = None
        return list(reversed(out))


class _Question:
    """One connection's question, read in pieces."""

    __slots__ = ("conn", "buf", "token")

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.buf, self.token = conn, b"", None


class Watcher:
    """The daemon: inotify on the working tree, the journal, the socket git's hook asks."""

    def __init__(self, root: Path, git_dir: Path, *, journal_limit: int = JOURNAL_LIMIT, lock: int | None = None,
                 idle: float | None = None) -> None:
        self.root = root
        self.idle = idle  # seconds without a question before the daemon ends (started automatically); None: never
        self._asked = time.monotonic()  # when a command last asked
        self.lock = lock  # the open lock file (`serve`): unlinked, the vault is gone
        self.state = git_dir / STATE_DIR
        self.instance = f"{os.getpid()}.{time.time_ns()}"
        self.journal = Journal(journal_limit)
        self.inotify = Inotify()
        self.paths: dict[int, bytes] = {}  # watch → folder, relative to root ("" for root)
        self.blind = ""  # why every answer is "everything" (a watch the kernel refused)
        self._cookies = 0
        self._cookie_wd = self._index_wd = -1
        self._code: dict[int, str] = {}  # watch → a folder of cortex's own code (`watch_code`)
        self._seed_at: float | None = None  # when to seed the probe's copy of git's index
        self._waiting: dict[bytes, _Question] = {}  # cookie name → question it answers
        self._stop = False
        self.overflows = 0
        self.answered = {"paths": 0, "everything": 0}  # git's questions, by kind of answer
        self._query_service = None  # cortex.search.served.QueryService, once a query asks

    # -- watches ----------------------------------------------------------------------

    def watch_tree(self, rel: bytes) -> None:
        """Watch ``rel`` and every folder below it (a folder already watched keeps its watch)."""
        stack = [rel]
        while stack:
            folder = stack.pop()
            absolute = os.path.join(os.fsencode(self.root), folder) if folder else os.fsencode(self.root)
            try:
                wd = self.inotify.add(absolute, TREE_EVENTS)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    continue  # gone already: its parent's event names it
                if exc.errno == errno.ENOSPC:
                    self.blind = ("the kernel's limit on watched folders was reached "
                                  "(raise fs.inotify.max_user_watches)")
                    return
                raise
            self.paths[wd] = folder
            try:
                with os.scandir(absolute) as entries:
                    for entry in entries:
                        if entry.name not in SKIPPED_B and entry.is_dir(follow_symlinks=False):
                            stack.append(os.path.join(folder, entry.name) if folder else entry.name)
            except OSError:
                continue

    def watch_code(self) -> None:
        """Watch the folders of the code this daemon runs for a file written over in place
        (an editor's save into an editable install): the build stamp tells a new file by
        its inode, not such a write, and the daemon went on answering with the code it had
        loaded (``served.code_edited``). A folder inside the vault is left to the tree's
        own watch (one watch per folder: a second would replace its events)."""
        from cortex.search.served import code_folder

        vault = os.path.realpath(self.root)
        for folder, subfolders, _ in os.walk(code_folder()):
            if os.path.commonpath([vault, os.path.realpath(folder)]) == vault:
                subfolders.clear()
                continue
            subfolders[:] = [name for name in subfolders if name != "__pycache__"]
            try:
                self._code[self.inotify.add(os.fsencode(folder), CODE_EVENTS)] = folder
            except OSError:
                continue  # (no watch left: an upgrade's new files still show in the stamp)

    def _unwatch_tree(self, rel: bytes) -> None:
        prefix = rel + b"/"
        for wd, folder in list(self.paths.items()):
            if folder == rel or folder.startswith(prefix):
                del self.paths[wd]
                self.inotify.remove(wd)

    # -- events -----------------------------------------------------------------------

    def handle(self, events: list[tuple[int, int, bytes]]) -> None:
        for wd, mask, name in events:
            if mask & IN_Q_OVERFLOW:  # the kernel dropped events: nobody knows what changed
                self.overflows += 1
                self.journal.everything()
                self.watch_tree(b"")  # and folders made meanwhile may lack a watch
                self._answer_waiting()  # a cookie's event may be among those dropped
                continue
            if wd == self._cookie_wd:
                if mask & IN_CREATE and name.startswith(COOKIE_B):
                    self._cookie_seen(name)
                continue
            if wd == self._index_wd:
                if name == b"index":
                    self._seed_at = time.monotonic() + SEED_QUIET
                continue
            if wd in self._code:
                if name and not mask & (IN_ISDIR | IN_IGNORED):
                    from cortex.search.served import code_edited

                    code_edited(os.path.join(self._code[wd], os.fsdecode(name)))
                continue
            folder = self.paths.get(wd)
            if folder is None:
                continue
            if mask & IN_IGNORED:  # the folder is gone; its parent named it
                del self.paths[wd]
                continue
            if not name:
                if mask & (IN_DELETE_SELF | IN_MOVE_SELF) and folder == b"":
                    self.journal.everything()  # the working tree itself was removed or moved:
                    self._stop = True  # nothing left to watch under this name
                continue
            if name in SKIPPED_B:  # git's own folder (a nested repository's too), cortex's caches
                continue
            path = os.path.join(folder, name) if folder else name
            if mask & IN_ISDIR:
                if mask & (IN_CREATE | IN_MOVED_TO):
                    self.watch_tree(path)
                elif mask & (IN_DELETE | IN_MOVED_FROM):
                    self._unwatch_tree(path)
                elif not mask & (IN_ATTRIB | IN_MODIFY):
                    continue
                self.journal.add(path + b"/")
            else:
                self.journal.add(path)

    # -- questions --------------------------------------------------------------------

    def _ask(self, question: _Question) -> None:
        """Sync on a cookie, then answer: every event before the question is read first."""
        self._cookies += 1
        name = f"{COOKIE}{os.getpid()}-{self._cookies}".encode()
        try:
            fd = os.open(os.path.join(os.fsencode(self.state), name), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:  # the state folder removed under the daemon: no sync, so no promise
            self.blind = "the watcher's folder in .git was removed (restart: `cortex watch --stop`, then start it)"
            self._answer(question)
            return
        os.close(fd)
        self._waiting[name] = question

    def _cookie_seen(self, name: bytes) -> None:
        try:
            os.unlink(os.path.join(os.fsencode(self.state), name))
        except FileNotFoundError:
            pass
        question = self._waiting.pop(name, None)
        if question is not None:
            self._answer(question)

    def _answer_waiting(self) -> None:
        """Answer every question still waiting for its cookie, "everything" now: a cookie
        made while the kernel's queue was full lost its event with the rest, and its
        question went unanswered (the asker waited out its timeout, and the connection and
        the cookie file stayed for the daemon's life)."""
        waiting, self._waiting = self._waiting, {}
        for name, question in waiting.items():
            try:
                os.unlink(os.path.join(os.fsencode(self.state), name))
            except FileNotFoundError:
                pass
            self._answer(question)

    def answer_for(self, token: str) -> bytes:
        """The hook's reply body for ``token``: new token, NUL, then the changed paths."""
        _, _, rest = token.partition("cortex:")
        instance, _, seq = rest.rpartition(":")
        paths = None
        if not self.blind and instance == self.instance and seq.isdigit():
            paths = self.journal.since(int(seq))
        body = f"cortex:{self.instance}:{self.journal.seq}".encode() + b"\0"
        if paths is None:
            self.answered["everything"] += 1
            return body + b"/\0"
        self.answered["paths"] += 1
        return body + b"".join(p + b"\0" for p in paths)

    def status(self) -> dict:
        from cortex.search.served import build

        return {"pid": os.getpid(), "instance": self.instance, "build": build(), "folders": len(self.paths),
                "changes": self.journal.seq, "everything_since": self.journal.floor,
                "overflows": self.overflows, "blind": self.blind or None, "answered": dict(self.answered),
                "queries": self._query_service.status() if self._query_service else {"state": "idle"},
                "auto": None if self.idle is None else {
                    "idle": self.idle, "ends_at": time.time() + self.idle - (time.monotonic() - self._asked)}}

    def _answer(self, question: _Question) -> None:
        self._reply(question.conn, self.answer_for(question.token or ""))

    def _queries(self):
        """The search service, started on the first query (only then are the search
        engines imported: a watcher nobody queries stays small)."""
        if self._query_service is None:
            from cortex.search.served import QueryService

            self._query_service = QueryService(self.root, self._reply_from_thread)
        return self._query_service

    @staticmethod
    def _reply_from_thread(conn: socket.socket, body: bytes) -> None:
        """``_reply`` for a connection the loop no longer selects on (any thread may call it)."""
        _send(conn, body)
        conn.close()

    def _reply(self, conn: socket.socket, body: bytes) -> None:
        _send(conn, body)
        self._close(conn)

    def _close(self, conn: socket.socket) -> None:
        try:
            self._selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    # -- the loop ---------------------------------------------------------------------

    def run(self, listener: socket.socket, on_ready=None) -> None:
        import selectors

        self._cookie_wd = self.inotify.add(os.fsencode(self.state), IN_CREATE | IN_ONLYDIR)
        # git's index, replaced whole by whoever writes it (a person's git, cortex): a new
        # version gets its probe copy seeded once writes settle (`_seed_when_quiet`)
        self._index_wd = self.inotify.add(os.fsencode(self.state.parent), IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR)
        self._seed_at = time.monotonic()  # the version there now
        self.watch_tree(b"")
        self.watch_code()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.inotify.fd, selectors.EVENT_READ, "inotify")
        listener.setblocking(False)
        self._selector.register(listener, selectors.EVENT_READ, "listener")
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        if on_ready:
            on_ready()
        from cortex.search.freshness import search_state

        if search_state(self.root).exists():
            self._queries().preload()  # in the background: the first query is served warm
        while not self._stop and not self.orphaned() and not self.idle_out():
            self._seed_when_quiet()
            wait = 1.0 if self._seed_at is None else max(0.0, self._seed_at - time.monotonic())
            for key, _ in self._selector.select(timeout=wait):
                if key.data == "inotify":
                    self.handle(self.inotify.read())
                elif key.data == "listener":
                    self._accept(listener)
                else:
                    self._read_question(key.data)

    def _seed_when_quiet(self) -> None:
        """Once git's index has not changed for SEED_QUIET seconds: make and seed the
        probe's copy of the version there now (``freshness.seed_probe_copy``, detached),
        so that the first query after any commit or ``git add`` already asks the watcher."""
        if self._seed_at is None or time.monotonic() < self._seed_at:
            return
        from cortex.search.freshness import seed_probe_copy

        if seed_probe_copy(self.root):
            self._seed_at = None
        else:  # a probe stats every file now: soon after it
            self._seed_at = time.monotonic() + SEED_RETRY

    def orphaned(self) -> bool:
        """Whether the lock this daemon holds was unlinked: its vault deleted (`rm -rf`, then
        maybe cloned again at the same path), or its folder in .git removed. Nobody can ask
        it any more (its socket went too), and the working tree's own deletion brings no
        event while the files it holds open keep the folders alive: it ran on for ever."""
        return self.lock is not None and os.fstat(self.lock).st_nlink == 0

    def idle_out(self) -> bool:
        """Whether an automatically started daemon has gone ``idle`` seconds without a
        question (the loop wakes at least once a second to see)."""
        if self.idle is None or time.monotonic() - self._asked < self.idle:
            return False
        print(f"ended: no question for {self.idle:g}s (started automatically)", file=sys.stderr, flush=True)
        return True

    def _on_signal(self, signum, frame) -> None:
        self._stop = True

    def _accept(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn.setblocking(False)
        self._selector.register(conn, 1, _Question(conn))  # selectors.EVENT_READ

    def _read_question(self, question: _Question) -> None:
        try:
            chunk = question.conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(question.conn)
            return
        question.buf += chunk
        if b"\n" not in question.buf:
            if len(question.buf) > (MAX_QUESTION if question.buf.startswith(VERB + b" ") else 4096):
                self._close(question.conn)
            return
        raw = question.buf.split(b"\n", 1)[0]
        version, _, token = raw.decode("utf-8", "replace").partition(" ")
        if version == VERB.decode():
            # a person's question: `cortex query` or `cortex index` (answered or declined).
            # Not git's (the probes of `cortex maintain`'s hourly index job, the seed after
            # a cron's `cortex run`: they would keep it running for ever), nor `--status`:
            # `cortex status` starts it again if it ended
            self._asked = time.monotonic()
        self._selector.unregister(question.conn)
        if version == "status":
            question.token = None
            self._reply(question.conn, json.dumps(self.status()).encode())
            return
        if version == VERB.decode():  # `cortex query`, answered from the index this daemon keeps loaded
            self._queries().submit(question.conn, raw[len(VERB) + 1:])
            return
        if version != "2":
            question.conn.close()
            return
        question.token = token
        self._ask(question)


def _send(conn: socket.socket, body: bytes) -> None:
    """A reply as the hook reads it: its length, a newline, the body."""
    try:
        conn.setblocking(True)
        conn.sendall(f"{len(body)}\n".encode() + body)
    except OSError:
        pass  # the asker went away (git killed, a query interrupted): nothing to answer


SKIPPED_B = frozenset(os.fsencode(name) for name in SKIPPED)
COOKIE_B = COOKIE.encode()


# -- the daemon's life, and git's configuration ----------------------------------------

def state_dir(root: Path) -> Path:
    from cortex.gitlock import git_dir_of

    return git_dir_of(root) / STATE_DIR


def _refuse_another_accounts(state: Path) -> None:
    """The watcher's folder is its owner's alone (its socket names the vault's changed
    files): in a vault a group shares, a teammate's start met "Permission denied"."""
    owner = state.stat().st_uid
    if owner != os.geteuid() and not os.access(state, os.W_OK | os.X_OK):
        raise CortexError(f"{state} belongs to another account (uid {owner}), whose watcher serves its own cortex "
                          "alone: this account's queries and checks go on without one",
                          "nothing to do; that account stops it with `cortex watch --stop`")


def _locked(state: Path) -> int | None:
    """The running daemon's pid, or None: the lock is taken exactly while one runs."""
    try:
        fd = os.open(state / "lock", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, PermissionError):  # none, or another account's: not this one's to use
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return int((state / "pid").read_text().strip())
            except (OSError, ValueError):
                return -1  # starting: the lock is taken, the pid not written yet
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def running(root: Path) -> int | None:
    return _locked(state_dir(root))


# File systems whose changes may come from another machine (or a VM's host), which
# inotify never reports: a watcher there would call a changed note unchanged.
REMOTE = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "afs", "ceph", "glusterfs", "lustre", "gpfs")


def _remote_file_system(root: Path, mountinfo: str | None = None) -> str | None:
    """The type of the file system holding ``root`` when it is a remote one (or FUSE,
    as sshfs is), from /proc/self/mountinfo; None when local or unknown."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    target, best, kind = os.path.realpath(root), "", None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, right.split()[0]
    if kind and (kind in REMOTE or kind.startswith("fuse")):
        return kind
    return None


def serve(root: Path, on_ready=None, idle: float | None = None) -> None:
    """Run the daemon in this process until SIGTERM / SIGINT (or ``idle`` seconds without
    a question: an automatically started one)."""
    if not sys.platform.startswith("linux"):
        raise CortexError("cortex watch uses Linux's inotify",
                          "on macOS and Windows git brings its own watcher: `git config core.fsmonitor true`")
    from cortex.search.served import build

    build()  # which cortex answers here, taken now: an upgrade in place while it runs must not pass for it
    state = state_dir(root)
    git_dir = state.parent
    state.mkdir(mode=0o700, exist_ok=True)  # the socket names the vault's changed files: the owner's alone
    _refuse_another_accounts(state)
    remote = _remote_file_system(root)
    if remote:
        raise CortexError(f"{root} is on a {remote} file system: inotify sees only this machine's own changes there",
                          "run cortex without a watcher on this vault (git then stats every note)")
    lock = os.open(state / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        _take_lock(lock, root, state, by_hand=idle is None)
    except BaseException:
        os.close(lock)
        raise
    # Ours now: whatever socket, pid or cookie files are here were left by a daemon that ended.
    for leftover in state.iterdir():
        if leftover.name in ("sock", AUTO_FAILED, AUTO_SAID) or leftover.name.startswith(COOKIE):
            leftover.unlink(missing_ok=True)
    (state / "pid").write_text(f"{os.getpid()}\n")
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cwd = os.getcwd()
    try:
        os.chdir(state)  # bind a relative name: no limit on the vault's path length
        listener.bind("sock")
    finally:
        os.chdir(cwd)
    listener.listen(64)
    watcher = Watcher(root, git_dir, lock=lock, idle=idle)
    try:
        watcher.run(listener, on_ready)
    finally:
        if watcher._query_service is not None:
            watcher._query_service.close()
        listener.close()
        if not watcher.orphaned():  # else the files at that path are another daemon's (a new clone's)
            (state / "sock").unlink(missing_ok=True)
            (state / "pid").unlink(missing_ok=True)
        watcher.inotify.close()
        os.close(lock)


TAKE_OVER_TRIES = 3  # automatic watchers ended in turn for a person's (each a command's start that came between)


def _take_lock(lock: int, root: Path, state: Path, *, by_hand: bool) -> None:
    """The daemon's lock, or "a watcher already runs". A watcher a person starts in the
    foreground (`cortex watch`, a systemd unit's ExecStart) takes the place of one started
    automatically: that one is ended as `--stop` ends it (the queries it holds answered
    first, git's left to their askers' own stat), and its clients find this one from
    then on. A watcher a person started is never ended so, nor one that does not say
    what it is (stopped by Ctrl-Z). (`--background` keeps a running one and says how to
    replace it.)"""
    for _ in range(TAKE_OVER_TRIES):
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            daemon = daemon_status(root) if by_hand else None
            if not (daemon and daemon.get("auto") and stop(root, pid=daemon.get("pid"))):
                break
            print(f"the watcher started automatically (pid {daemon['pid']}) ended: this one takes its place",
                  file=sys.stderr, flush=True)
    raise CortexError(f"a watcher already runs for {root} (pid {_locked(state)})",
                      "`cortex watch --status` says more; `cortex watch --stop` stops it")


def start_background(root: Path, timeout: float = 60.0) -> int:
    """Start the daemon detached from this terminal; return its pid once it answers."""
    import subprocess

    state = state_dir(root)
    state.mkdir(mode=0o700, exist_ok=True)
    _refuse_another_accounts(state)
    pid = _locked(state)
    if pid:
        return pid
    with open(state / "log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cortex", "--vault", str(root.resolve()), "watch"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                close_fds=True, cwd="/")  # a daemon pins no folder of the person's
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # the one that answers: started at the same moment (a login script and a systemd
        # unit), another took the lock and this one ended ("a watcher already runs")
        running_pid = _locked(state)
        if proc.poll() is not None and not (running_pid and running_pid != proc.pid):
            tail = (state / "log").read_text(errors="replace").strip().splitlines()[-3:]
            raise CortexError("the watcher stopped as it started: " + " / ".join(tail),
                              f"the whole log is {state / 'log'}")
        if running_pid and running_pid > 0 and answers(root):
            return running_pid
        time.sleep(0.02)
    raise CortexError(f"the watcher did not answer within {timeout:.0f}s", f"see {state / 'log'}")


def _question(root: Path, line: bytes) -> bytes | None:
    """The daemon's reply body to one line, or None when none answers."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5.0)
    cwd = os.getcwd()
    try:
        os.chdir(state_dir(root))  # a relative socket name, as the hook does
        sock.connect("sock")
        sock.sendall(line)
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    except OSError:
        return None
    finally:
        os.chdir(cwd)
        sock.close()
    head, _, body = data.partition(b"\n")
    return body if head.isdigit() and int(head) == len(body) else None


def answers(root: Path) -> bool:
    """Whether a watcher answers the hook's question now."""
    return _question(root, b"2 cortex:ping:0\n") is not None


def daemon_status(root: Path) -> dict | None:
    """What the running watcher says of itself (folders watched, changes, overflows)."""
    body = _question(root, b"status\n")
    return json.loads(body) if body else None


def other_cortex(daemon: dict | None) -> str | None:
    """What to say when the running watcher is another cortex than this one (another
    install, or this one before an upgrade): it leaves every query to itself
    (`served.build`), so a person saw queries as slow as without it and no reason."""
    if not daemon:
        return None
    from cortex.search.served import build

    if daemon.get("build") == build():  # a watcher that does not say is older than this cortex
        return None
    return ("it runs another cortex than this one (another install, or this one before an upgrade), so every "
            "query answers alone: restart it (`cortex watch --stop`, then `cortex watch --background`)")


def stop(root: Path, timeout: float = 10.0, pid: int | None = None) -> int | None:
    """Stop the running daemon (SIGTERM, then wait for its lock); its pid, or None (none
    runs; with ``pid``, the one running is not that one)."""
    state = state_dir(root)
    running_pid = _locked(state)
    if not running_pid or running_pid < 0 or pid not in (None, running_pid):
        return None
    pid = running_pid
    try:
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGCONT)  # a watcher stopped by Ctrl-Z gets the TERM only once continued
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while _locked(state) and time.monotonic() < deadline:
        time.sleep(0.02)
    if _locked(state):
        raise CortexError(f"the watcher (pid {pid}) did not stop within {timeout:.0f}s", f"kill {pid}")
    return pid


# -- started by itself (`watch: auto`) --------------------------------------------------

AUTO_FAILED = "auto-failed"  # in the state folder: why the last automatic start failed
AUTO_SAID = "auto-failed.said"  # the same, once a command has said it
AUTO_RETRY = 24 * 3600.0  # seconds before a failed automatic start is tried again
# Set for every command git runs (hooks, `rebase -x`, aliases) and by pre-commit: such a
# command never starts a watcher (a person's post-commit `cortex index` included).
FROM_GIT = ("GIT_EXEC_PATH", "GIT_DIR", "GIT_INDEX_FILE", "PRE_COMMIT")
# auto | off: overrides `watch:` for one command (scripts, benches). Read before the
# settings: `off` decides without importing cortex.config (its five dataclasses, ~25M
# instructions of a cold query).
WATCH_ENV = "CORTEX_WATCH"


def tracked_files(root: Path) -> int | None:
    """How many files git's index holds: its header's count, 12 bytes read (no scan). The
    files git stats on each check without a watcher; None when unreadable."""
    from cortex.gitlock import git_dir_of

    try:
        with open(git_dir_of(root) / "index", "rb") as fh:
            head = fh.read(12)
    except OSError:
        return None
    if len(head) < 12 or head[:4] != b"DIRC":
        return None
    return int.from_bytes(head[8:12], "big")


def autostart(root: Path) -> None:
    """Start the daemon detached, without waiting for it, when ``watch: auto`` (the
    default; ``$CORTEX_WATCH`` overrides it) and the vault holds ``watch.notes`` tracked
    files or more, unless one runs, git or pre-commit runs this command, or the vault is on
    a file system inotify cannot follow. Called by `cortex query`, `index` and `status`
    once they have answered. Never an error: a start that failed is one line on stderr,
    said once, and tried again after ``AUTO_RETRY``."""
    if not sys.platform.startswith("linux") or any(name in os.environ for name in FROM_GIT):
        return
    forced = os.environ.get(WATCH_ENV, "").strip().lower()
    if forced and forced != "auto":
        return
    from cortex.config import settings_or_defaults

    settings = settings_or_defaults(root)
    if (forced or settings.watch) != "auto":
        return
    count = tracked_files(root)
    if count is None or count < settings.watch_notes:
        return
    try:
        state = state_dir(root)
    except (OSError, CortexError):  # no git directory to be found: nothing to watch
        return
    try:
        if _locked(state) or _remote_file_system(root) or _failed_lately(state):
            return
        _spawn(root, state)
    except Exception as exc:  # never an error: the command has answered already
        _say_failed(state, os_said(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}")


def auto_failure(state: Path) -> str | None:
    """Why the last automatic start failed (said or not yet), None when none did."""
    for name in (AUTO_FAILED, AUTO_SAID):
        try:
            return (state / name).read_text(encoding="utf-8", errors="replace").strip() or None
        except OSError:
            continue
    return None


def _failed_lately(state: Path) -> bool:
    """Whether the last automatic start failed less than ``AUTO_RETRY`` ago (said once,
    the first time a command finds it)."""
    for name in (AUTO_FAILED, AUTO_SAID):
        try:
            age = time.time() - (state / name).stat().st_mtime
        except OSError:
            continue
        if 0 <= age < AUTO_RETRY:
            if name == AUTO_FAILED:
                _say_failed(state, auto_failure(state) or "")
            return True
        (state / name).unlink(missing_ok=True)
    return False


def _say_failed(state: Path, reason: str) -> None:
    print(f"cortex: the watcher did not start by itself ({reason}); cortex's checks stat every note "
          f"(`cortex watch --status`, {state / 'log'})", file=sys.stderr)
    try:
        (state / AUTO_SAID).write_text(reason + "\n", encoding="utf-8")
        (state / AUTO_FAILED).unlink(missing_ok=True)
    except OSError:
        pass


def _spawn(root: Path, state: Path) -> None:
    import subprocess

    state.mkdir(mode=0o700, exist_ok=True)
    with open(state / "log", "ab") as log:
        subprocess.Popen([sys.executable, "-m", "cortex", "--vault", str(root.resolve()), "watch", "--auto"],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                         close_fds=True, cwd="/")


def serve_auto(root: Path) -> None:
    """The daemon ``autostart`` starts: it ends after ``watch.idle`` seconds without a
    question; another already running (started at the same moment) ends it quietly; a
    failure to start is left in ``AUTO_FAILED`` for the next command to say."""
    from cortex.config import settings_or_defaults

    idle = settings_or_defaults(root).watch_idle
    print(f"started automatically: ends after {idle:g}s without a question", file=sys.stderr, flush=True)
    try:
        serve(root, idle=idle)
    except CortexError as exc:
        if _locked(state_dir(root)):
            return  # another start took the lock first: that one watches
        _record_failure(root, str(exc))
        raise
    except Exception as exc:
        _record_failure(root, f"{type(exc).__name__}: {exc}")
        raise


def _record_failure(root: Path, reason: str) -> None:
    try:
        (state_dir(root) / AUTO_FAILED).write_text(reason + "\n", encoding="utf-8")
    except OSError:
        pass
