"""A search index kept loaded and in step with the notes, for a long-lived process.

The MCP server answers many queries from one process: `LiveIndex` loads a `Session`
once (in the background, so the server answers meanwhile). While `cortex watch` runs,
each question first asks it what changed (exact, a few milliseconds); besides, a thread
keeps the index current: cheap stamps every second (folder mtimes, git's index and HEAD log, the index's
own state file, which another process's `cortex index` rewrites), and a `git status`
sweep every 30 s that catches in-place edits the stamps cannot see; git's own stamps are
looked at before each question as well, so a commit is never answered from before it.

Threads: the MCP SDK runs tools on worker threads; every use of the index holds one lock.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

from cortex.search.question import Question
from cortex.search.session import Answer, BuildStopped, Session

FULL_CHECK_EVERY = 30.0  # seconds between `git status` sweeps that catch in-place edits
GIT_STAMPS = ("index", "HEAD", "logs/HEAD")  # files of .git/ that every commit, checkout or `git add` rewrites
STOP_WAIT = 10.0  # seconds `stop` waits for the loader thread: a rebuild gives up within a batch


class NotReady(Exception):
    """The index is still loading, or could not be loaded (the message says which)."""


class LiveIndex:
    def __init__(self, root: Path, *, model: str | None = None, say: Callable[[str], None] = lambda _m: None,
                 interval: float = 1.0) -> None:
        self.root = Path(root)
        self.say = say
        self._stop = threading.Event()
        self.session = Session(root, model=model, say=say, stopping=self._stop)
        self.index = self.session.index
        self.interval = interval
        self.lock = threading.RLock()  # queries and updates take turns
        self.error: str | None = None  # why the index could not be loaded
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._signature: tuple | None = None
        self._git_seen: tuple | None = None
        self._git_dir: Path | None = None  # where git's index and HEAD are (`_git_stamps`)
        self._state_stamp: tuple | None = None
        self._last_full = 0.0
        self._was_gone = False

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> "LiveIndex":
        """Load in the background, then watch until `stop()`."""
        self._thread = threading.Thread(target=self._load_then_watch, name="cortex-index", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = STOP_WAIT) -> None:
        """Stop watching, and wait for the loader thread to end (a rebuild gives up
        between two batches). A daemon thread still inside native code when the
        interpreter finalises (the tokenizer, with the GIL released) is unwound by force
        there, and the process aborts ("FATAL: exception not rethrown", SIGABRT)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if thread is None or not thread.is_alive():
            with self.lock:  # the index's files closed, not left to the collector (a ResourceWarning each)
                self.index.close()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def gone(self) -> bool:
        """Whether the vault's repository is gone from its path (deleted, moved away; maybe
        cloned there again later). Nothing is written then: the index's files would be
        made again at the deleted path (a `.git/cortex/search` of their own), and the
        person's `git clone URL VAULT` refused the folder as not empty."""
        return not os.path.lexists(self.root / ".git")

    def wait_ready(self, timeout: float | None = 30.0) -> None:
        if not self._ready.wait(timeout):
            raise NotReady("the search index is still being loaded or built (progress on the server's stderr): "
                           "try again in a minute")
        if self.error:
            raise NotReady(f"search is unavailable: {self.error}")

    def _load_then_watch(self) -> None:
        try:
            self.load()
        except BuildStopped:
            self.error = "the server is stopping"
        except Exception as exc:  # reported to every query; the server keeps serving writes
            self.error = f"{type(exc).__name__}: {exc}"
            self.say(f"could not load the search index ({self.error})")
        finally:
            self._ready.set()
        while not self.error and not self._stop.wait(self.interval):
            if self.gone() != self._was_gone:
                self._was_gone = not self._was_gone
                self.say(f"the vault at {self.root} is gone (deleted or moved): the index waits for it"
                         if self._was_gone else f"the vault at {self.root} is back: reading it again")
            try:
                self.refresh_if_changed()
            except Exception as exc:  # a failed refresh must not end the watcher
                self.say(f"index refresh failed ({type(exc).__name__}: {exc}); retrying")

    def load(self) -> None:
        """Open (or rebuild) the index, bring it up to date, and warm every part a query touches."""
        from cortex.search.freshness import GitProbe, search_token

        probe = GitProbe.start(self.root, since=search_token(self.root))
        with self.lock:
            try:
                if not self.session.open(vectors=True).rebuilt:
                    self.session.refresh(probe)
            finally:
                probe.close()  # read, or git waited for when the index was rebuilt instead
            self.session.ask(Question("warm up", limit=1))  # model, vectors and searcher paged in now
            self._mark()
        self._ready.set()
        self.say(f"search index ready: {self.index.lexical.doc_count()} notes")

    # --- questions ----------------------------------------------------------------------

    def ask(self, question: Question) -> Answer:
        """Answer from the loaded index. While `cortex watch` runs, its word on what changed
        since the index's last update is asked first (a few milliseconds), so the answer is
        as fresh as a cold query's; without it, a commit since the last stamp check (git's
        index and HEAD, three stats) is read first, and a note saved but not committed is
        seen at the next check (every second; within 30 s for an edit in place)."""
        self.wait_ready()
        if self.gone():
            raise NotReady(f"the vault at {self.root} is gone (deleted or moved): nothing to search until it is back")
        with self.lock:
            try:
                self.session.reread_if_rewritten()  # before reading a file changed under it
            except Exception as exc:  # damaged: rebuilt, as a cold query would
                self.session.recover(exc)
                self._mark()
            probe = self._watcher_probe()
            if probe is None and self._git_stamps() != self._git_seen:
                try:  # a commit since the last look (a `cortex run`, a sync, a person's): read before answering
                    self.refresh()
                except Exception as exc:  # answered from the index as it is; the thread tries again
                    self.say(f"index refresh failed ({type(exc).__name__}: {exc}); retrying")
            answer = self.session.ask(question, probe=probe)
            if answer.report.rebuilt or answer.report.touched:
                self._mark()
            return answer

    def _watcher_probe(self):
        """The watcher's probe since the index's own token, or None when no watcher runs
        (a `git status` per question would cost what the stamps are there to save)."""
        from cortex.search.freshness import WATCH_SOCKET

        if self.index.state is None or not (self.root / WATCH_SOCKET).exists():
            return None
        return self.session.watcher_probe()

    def doc_count(self) -> int:
        with self.lock:
            return self.index.lexical.doc_count()

    # --- freshness ----------------------------------------------------------------------

    def _mark(self) -> None:
        self._state_stamp = self.index.state_version()
        self._signature = self._changes_signature()
        self._git_seen = self._signature[-len(GIT_STAMPS):]
        self._last_full = time.monotonic()

    def _changes_signature(self) -> tuple:
        """Cheap signs that notes changed: folder mtimes, git's index and HEAD log."""
        sig = []
        for rel in sorted(self.index.state.dirs) if self.index.state else ():
            try:
                sig.append(os.stat(self.root / rel).st_mtime_ns)
            except OSError:
                sig.append(None)
        return (*sig, *self._git_stamps())

    def _git_stamps(self) -> tuple:
        """git's index, HEAD and HEAD log: moved by every commit, checkout, merge and `git
        add`. Three stats, looked at before each question too: an answer right after a
        `cortex run` or a person's commit must not wait for the thread's next look."""
        git_dir = self._git_dir
        if git_dir is None:  # found once, not per question: a linked worktree's own, where its index and HEAD are
            from cortex.gitlock import git_dir_of

            try:
                git_dir = self._git_dir = git_dir_of(self.root)
            except (OSError, UnicodeDecodeError):
                git_dir = self.root / ".git"  # not kept: looked for again, once the vault is back
        sig = []
        for name in GIT_STAMPS:
            try:
                st = os.stat(git_dir / name)
                sig.append((st.st_mtime_ns, st.st_size))
            except OSError:
                sig.append(None)
        return tuple(sig)

    def _rewritten(self) -> bool:
        return self.index.state_version() != self._state_stamp or self.index.rewritten()

    def refresh_if_changed(self) -> bool:
        with self.lock:
            changed = self._changes_signature() != self._signature or self._rewritten()
        if changed or time.monotonic() - self._last_full >= FULL_CHECK_EVERY:
            self.refresh()
            return True
        return False

    def refresh(self) -> None:
        """Bring the loaded index up to date (git runs before the lock, so queries go on)."""
        from cortex.search.freshness import GitProbe, search_token

        if self.gone():
            return
        probe = GitProbe.start(self.root, since=search_token(self.root)).result()
        with self.lock:
            try:
                if self._rewritten():
                    # Another process (`cortex query`, `cortex index --rebuild`) rewrote the index on
                    # disk, or changed a file of it in place: reopen it whole, even when no note
                    # changed, so no searcher outlives its files.
                    self.index.load(vectors=True)
                report = self.session.refresh(probe, quiet=True)
            except Exception as exc:  # deleted (`rm -rf .git/cortex/search`) or damaged
                report = self.session.recover(exc)
            self._mark()
        if report.touched:
            self.say(f"index updated: {report.summary()}")
