"""The observation buffer: ``observer/observations.jsonl``.

Writers append one line per ``write()`` under a flock (``fsutil.append_locked``). The
runner reads complete lines from a byte offset; a partial last line waits for the next
run. A fully consumed buffer is rotated into ``observer/archive/``.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Iterator

from cortex.fsutil import append_locked
from cortex.model import Line


def append(path: Path, lines: list[str]) -> None:
    data = "".join(line.rstrip("\n") + "\n" for line in lines).encode("utf-8")
    append_locked(path, data)


def read_lines(path: Path, start: int, limit: int | None = None) -> Iterator[Line]:
    """Complete lines from ``start``; stops before a partial last line."""
    if not path.exists():
        return
    with open(path, "rb") as fh:
        fh.seek(start)
        offset = start
        count = 0
        for raw in fh:
            if not raw.endswith(b"\n"):
                return  # a writer is mid-line (or died mid-line): leave it for later
            end = offset + len(raw)
            yield Line(offset, end, raw.rstrip(b"\r\n"))
            offset = end
            count += 1
            if limit is not None and count >= limit:
                return


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def rotate_if_consumed(path: Path, offset: int, archive: Path) -> bool:
    """Move the buffer to ``archive`` if every byte was consumed; holds the writers' lock
    so no append can land in between the size check and the rename."""
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_size != offset or offset == 0:
            return False
        archive.parent.mkdir(parents=True, exist_ok=True)
        os.rename(path, archive)
        return True
    finally:
        os.close(fd)


def archive_scrubbed(raw: Path, archive: Path, transform) -> None:
    """Write ``archive`` from the rotated buffer ``raw``, each line through ``transform``
    (bytes in, bytes out), then delete ``raw``. A crash leaves ``raw`` in place, and the
    next run calls this again: the raw lines never become the kept archive."""
    tmp = archive.with_name(f".{archive.name}.tmp")
    with open(raw, "rb") as src, open(tmp, "wb") as dst:
        os.fchmod(dst.fileno(), 0o600)
        for line in src:
            dst.write(transform(line))
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, archive)
    raw.unlink()
