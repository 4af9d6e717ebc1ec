"""The file-system monitor hook git runs for cortex's own probes of a watched vault.

cortex's freshness probe runs ``git -c core.fsmonitor=<this> status`` on its own copy of
the index while ``cortex watch`` runs (never the person's git: see ``cortex/watcher.py``).
git then runs ``<hook> 2 <token>`` in the working tree before it would stat every tracked
file, and reads on stdout a new token, a NUL, then the paths changed since ``token``,
each ending in a NUL (a folder ends in ``/``; the path ``/`` alone means "anything may
have changed", and git stats every file as it does without a watcher). git stores the
new token in the index copy and stats only the paths named.

The answer comes from the watcher over a unix socket in the git directory. When no
watcher runs — stopped, killed — the connection fails at once and the answer is ``/``.
A reply cut short (the watcher killed mid-answer) is refused by its length prefix, and
is ``/`` too: a path left out would be a change git never sees.

Standard library only, run as ``python -I -S fsmonitor.py``: git runs it on every
command that reads the working tree, so it must start in milliseconds.
"""

from __future__ import annotations

import _socket  # the C module: `socket` would import enum and cost more than the rest together
import os
import sys

SOCKET = "cortex-watch/sock"  # relative to the git directory (a socket path is limited to ~100 bytes)
NO_WATCHER = b"cortex:none:0\0/\0"
TIMEOUT = 5.0  # seconds; a watcher that does not answer by then is treated as gone
VERB = b"query"  # a `cortex query` or `cortex index` asked of the watcher (cortex/search/served.py)
MAX_QUESTION = 1 << 16  # bytes of such a question


def command() -> str:
    """How cortex's probe names this hook to git: this Python on this script, quietly (a
    Python gone since — a venv removed — fails silently, and git stats every file)."""
    import shlex

    return f"{shlex.quote(sys.executable)} -I -S {shlex.quote(os.path.abspath(__file__))} 2>/dev/null"


def git_dir() -> str:
    """The git directory, seen from the working tree git runs the hook in."""
    if os.path.isdir(".git"):
        return ".git"
    try:
        with open(".git", encoding="utf-8") as fh:  # a linked worktree: "gitdir: <path>"
            text = fh.read().strip()
    except OSError:
        return ".git"
    return text[len("gitdir:"):].strip() if text.startswith("gitdir:") else ".git"


def ask(token: str, where: str | None = None) -> bytes:
    """The watcher's answer for ``token`` (its body: the length prefix checked), asked
    from the working tree git runs the hook in, or of the git directory ``where`` (cortex's
    own probe: ``freshness.watcher_changes``)."""
    body = exchange(f"2 {token}\n".encode("utf-8", "surrogateescape"), where)
    return NO_WATCHER if body is None else body


def exchange(line: bytes, where: str | None = None, timeout: float = TIMEOUT) -> bytes | None:
    """Send one question line to the watcher and return its reply's body, the length
    prefix checked; None when no watcher answers in ``timeout`` or the reply is cut short.
    Asked from the working tree git runs the hook in, or of the git directory ``where``."""
    if stopped(os.path.join(where or git_dir(), os.path.dirname(SOCKET))):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(timeout)
    folder = -1
    data = bytearray()
    try:
        if where is None:
            os.chdir(git_dir())
            sock.connect(SOCKET)
        else:  # no chdir in a process that goes on: a socket's path is limited to ~100 bytes,
            folder = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # a folder's fd is not
            sock.connect(f"/proc/self/fd/{folder}/{SOCKET}")
        sock.sendall(line)
        while chunk := sock.recv(1 << 16):
            data += chunk
    except OSError:
        return None
    finally:
        sock.close()
        if folder >= 0:
            os.close(folder)
    head, sep, body = bytes(data).partition(b"\n")
    if not sep or not head.isdigit() or int(head) != len(body):
        return None
    return body


def stopped(state: str) -> bool:
    """Whether the watcher whose folder is ``state`` is stopped (Ctrl-Z on a `cortex watch`
    in a terminal, SIGSTOP): the kernel still takes the connection, but no answer comes
    until it is continued, and every query waited out its whole timeout (two minutes)."""
    try:
        with open(os.path.join(state, "pid"), "rb") as fh:
            pid = int(fh.read())
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except (OSError, ValueError):  # none running, or no /proc: asked as ever
        return False
    return stat[stat.rindex(b")") + 2:][:1] in (b"T", b"t")

def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "2":
        return 1  # not the protocol this speaks: git falls back to stat-ing every file
    sys.stdout.buffer.write(ask(argv[1]))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
