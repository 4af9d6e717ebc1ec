"""Pure work spread over the machine's cores by ``fork``.

``fork_map(fn, parts)`` returns ``[fn(p) for p in parts]``: the first part computed in
this process, each other in a forked child that inherits everything already loaded
(the security models, compiled schemas, the hash index) and sends back only its result;
``fork_all`` runs every part in a child and leaves this process free until it joins.
``fn`` must be pure — a child writes nothing — so a child that dies, is killed or
fails leaves nothing behind: its part is simply computed again here, where a real
error is raised as it would have been without children.

Linux only (``fork`` after numpy is loaded is not safe on macOS); elsewhere, or with
one core, everything runs here.
"""

from __future__ import annotations

import os
import pickle
import sys
import warnings
from typing import Callable, Sequence, TypeVar

P = TypeVar("P")
R = TypeVar("R")


def available_cores() -> int:
    if sys.platform != "linux":
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except OSError:
        return 1


def split(items: Sequence[P], parts: int) -> list[Sequence[P]]:
    """``items`` in ``parts`` contiguous slices of near-equal size, order kept."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for k in range(parts):
        end = start + size + (1 if k < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def fork_map(fn: Callable[[P], R], parts: Sequence[P]) -> list[R]:
    """``[fn(p) for p in parts]``, the first part here while the others run in children."""
    if len(parts) <= 1 or available_cores() <= 1:
        return [fn(p) for p in parts]
    join = fork_all(fn, parts[1:])
    first = fn(parts[0])
    return [first, *join()]


def fork_all(fn: Callable[[P], R], parts: Sequence[P]) -> Callable[[], list[R]]:
    """Start ``fn(p)`` for every part in a child of its own and return at once; the
    function returned waits for the results (this process is free meanwhile). Where
    nothing may fork, the parts are computed here when joined."""
    if available_cores() <= 1:
        return lambda: [fn(p) for p in parts]
    children = [_spawn(fn, part) for part in parts]

    def join() -> list[R]:
        results = []
        for (pid, read_fd), part in zip(children, parts):
            result = _collect(pid, read_fd)
            results.append(fn(part) if result is _FAILED else result)
        return results

    return join


_FAILED = object()


def _spawn(fn: Callable[[P], R], part: P) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns when forking with other threads alive (numpy's BLAS pool);
        # the child runs only pure Python and numpy work, which is fork-safe on Linux.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without running the parent's exit handlers
        code = 1
        try:
            os.close(read_fd)
            data = pickle.dumps(fn(part), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _collect(pid: int, read_fd: int):
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()  # read before waiting: a large result fills the pipe
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or not data:
        return _FAILED
    try:
        return pickle.loads(data)
    except Exception:  # a truncated result: computed again here
        return _FAILED
