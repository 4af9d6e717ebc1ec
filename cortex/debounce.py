"""Calling a function once after a burst: the MCP server's `cortex run` after writes."""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable


LONGEST = 10.0  # seconds a burst that never pauses waits at most, from its first poke


class Debouncer:
    """Calls `fn` once, `delay` seconds after the last `poke()`, on its own thread; and
    `LONGEST` seconds (or `delay`, if longer) after the first poke of a burst at the
    latest: an agent writing more often than `delay`, for hours, saw none of its
    writes processed until it paused."""

    def __init__(self, delay: float, fn: Callable[[], None]) -> None:
        self.delay = delay
        self.fn = fn
        self._due: float | None = None
        self._latest: float | None = None  # the burst's first poke + LONGEST
        self._busy = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="cortex-run-after-writes", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> bool:
        with self._cond:
            return self._due is not None or self._busy

    def poke(self, delay: float | None = None) -> None:
        with self._cond:
            now = time.monotonic()
            if self._due is None:  # the first of a burst
                self._latest = now + max(LONGEST, self.delay)
            self._due = now + (self.delay if delay is None else delay)
            if delay is None:
                self._due = min(self._due, self._latest)
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._due is None or time.monotonic() < self._due:
                    self._cond.wait(None if self._due is None else max(0.0, self._due - time.monotonic()))
                self._due = None
                self._busy = True
            try:
                self.fn()
            except Exception:  # a bug in one run must not stop every later one
                import traceback

                traceback.print_exc(file=sys.stderr)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def flush(self, timeout: float) -> None:
        """Run a pending call now and wait (up to `timeout`) until none is pending or running."""
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._due is not None:
                self._due = time.monotonic()
                self._cond.notify_all()
            while (self._due is not None or self._busy) and time.monotonic() < deadline:
                self._cond.wait(max(0.0, deadline - time.monotonic()))
