"""The observation buffer: ``observer/observations.jsonl``.

Writers append under a flock (``append``), a batch all or nothing even across a kill:
the kernel writes a large append in pieces, and a writer killed between two leaves a
start of its batch, which an agent sending the batch again would double. So the batch
is first recorded beside the buffer (``observer/.observations.jsonl.append``: where it
starts, and its bytes), the record removed once it is appended; whoever takes the lock
next and finds a record left (``settle``) cuts the buffer back to where the batch began.
The runner reads complete lines from a byte offset up to where the last batch appended
ends (``settle``, under the same lock: never a batch in the middle of its append); a
partial last line waits for the next run. A fully consumed buffer is rotated into
``observer/archive/`` (renamed: a writer that kept the old file open goes on appending
to it, and the runner goes on reading it until no process has it open; only then is it
scrubbed into the kept archive).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Iterator

from cortex.fsutil import locked_live, make_dirs, mended, open_regular, own, read_regular, write_all
from cortex.model import Line


def append(path: Path, lines: list[str]) -> list[str]:
    """Append ``lines``, all or none of them even if this process is killed meanwhile
    (the module's docstring says how). Returns what was found and put right of a batch
    an earlier writer left unfinished."""
    data = "".join(line.rstrip("\n") + "\n" for line in lines).encode("utf-8")
    with locked_live(path, os.O_RDWR | os.O_APPEND | os.O_CREAT) as fd:
        _, said = _settle(fd, path, repair=True)
        data = mended(fd, data)
        record = _record_path(path)
        _record(record, fd, data)
        write_all(fd, data)
        record.unlink()
    return said


def settle(path: Path, *, repair: bool = True) -> tuple[int, list[str]]:
    """Where the appended batches of the buffer end, and what was said on the way: takes
    the writers' lock, so a batch being appended is waited for, and a batch whose writer
    was killed before it finished is cut away (``repair``) or left out of the answer."""
    try:
        with locked_live(path, os.O_RDONLY) as fd:
            return _settle(fd, path, repair=repair)
    except FileNotFoundError:
        return 0, []


def _record_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.append")


def _record(record: Path, fd: int, data: bytes) -> None:
    """Write down, before appending ``data`` to the buffer ``fd``, where it will start
    and what it is. Not synced: it guards against a kill, which loses no written byte."""
    st = os.fstat(fd)
    head = json.dumps({"inode": st.st_ino, "offset": st.st_size, "length": len(data)}).encode() + b"\n"
    out = open_regular(record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        write_all(out, head)
        write_all(out, data)
    finally:
        os.close(out)


def _settle(fd: int, path: Path, *, repair: bool) -> tuple[int, list[str]]:
    """``settle`` with the lock held on ``fd``: a record found now is a writer's that was
    killed (a writer holds the lock from its record to its removal)."""
    size = os.fstat(fd).st_size
    record = _record_path(path)
    try:
        head, _, batch = read_regular(record).partition(b"\n")
    except FileNotFoundError:
        return size, []
    try:
        fields = json.loads(head)
        inode, offset, length = int(fields["inode"]), int(fields["offset"]), int(fields["length"])
    except (ValueError, TypeError, KeyError):
        inode = offset = length = -1
    if len(batch) != length or inode != os.fstat(fd).st_ino or offset > size:
        # Killed while writing the record, so before appending; or the buffer was
        # replaced since (by hand): nothing of that batch is in this buffer.
        if repair:
            record.unlink(missing_ok=True)
        return size, []
    there = os.pread(fd, min(size - offset, length + 1), offset)
    if not there:  # killed before a byte of it was appended: nothing to cut
        if repair:
            record.unlink()
        return size, []
    newline = b"\n"
    batch_of = f"a batch of {_plural(batch.count(newline), 'observation')}"
    # A newline after the cut line is no other writer's line: an empty line (``echo >>``)
    # loses nothing. (A run settles before it ends a dead writer's line: never this one.)
    ours = there[:-1] if there.endswith(newline) and not batch.startswith(there) else there
    only_ours = len(ours) <= length and batch.startswith(ours)
    if only_ours and repair:
        only_ours = _cut(path, fd, offset, size)
    if repair:
        record.unlink()
    if only_ours:
        done = "removed from the buffer" if repair else "to be removed from the buffer (by the next run or write)"
        return offset, [
            f"{len(there):,} bytes ({there.count(newline):,} whole lines) {done}: the start of {batch_of} whose writer "
            "was killed while appending it; a batch is all or nothing, so none of it is read (its writer reported "
            "no success and may send it again)"]
    return size, [
        f"a writer was killed while appending {batch_of}, and another process appended after it: the lines are "
        "kept, so as to lose none of the other's; the part of the batch that was appended is read, a line of it "
        "cut in the middle held in the quarantine"]


def _cut(path: Path, fd: int, offset: int, size: int) -> bool:
    """Truncate the buffer ``fd`` (locked) back to ``offset``, unless it grew past
    ``size`` meanwhile (a ``>>`` writer takes no lock: its line is never cut away)."""
    out = open_regular(path, os.O_WRONLY)
    try:
        if os.fstat(out).st_ino != os.fstat(fd).st_ino or os.fstat(out).st_size != size:
            return False
        os.ftruncate(out, offset)
        return True
    finally:
        os.close(out)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


EXCERPT_BYTES = 4096  # what an over-size line keeps for its quarantine entry
_SKIP = 1 << 20


def bounded_lines(fh, max_bytes: int) -> Iterator[tuple[bytes, int, bool]]:
    """``(raw, length, oversize)`` for each line of a binary file, newline included in
    ``raw`` and ``length``. At most ``max_bytes + 1`` bytes of a line are ever held: the
    rest of an over-size line is skipped in fixed steps and ``raw`` keeps its start only.
    A last line without a newline comes back as it is (the caller decides)."""
    while True:
        head = fh.readline(max_bytes + 1)
        if not head:
            return
        if head.endswith(b"\n") or len(head) <= max_bytes:
            yield head, len(head), False
            continue
        length, tail = len(head), b""
        while not tail.endswith(b"\n"):
            tail = fh.readline(_SKIP)
            if not tail:
                break
            length += len(tail)
        yield head[:EXCERPT_BYTES] + (b"\n" if tail.endswith(b"\n") else b""), length, True


def read_lines(
    path: Path, start: int, limit: int | None = None, *, max_line_bytes: int = 1 << 20, max_bytes: int | None = None,
    end: int | None = None,
) -> Iterator[Line]:
    """Complete lines from ``start``; stops before a partial last line or one that runs
    past ``end`` (``settle``), after ``limit`` lines or once ``max_bytes`` were read (one
    line at least). A line over ``max_line_bytes`` comes as its first bytes with
    ``oversize`` set."""
    if not path.exists():
        return
    with os.fdopen(open_regular(path), "rb") as fh:
        fh.seek(start)
        offset = start
        count = 0
        for raw, length, oversize in bounded_lines(fh, max_line_bytes):
            if not raw.endswith(b"\n"):
                return  # a writer is mid-line (or died mid-line): leave it for later
            if end is not None and offset + length > end:
                return  # a batch appended since ``end`` was settled: the next run's
            yield Line(offset, offset + length, raw.rstrip(b"\r\n"), oversize)
            offset += length
            count += 1
            if limit is not None and count >= limit:
                return
            if max_bytes is not None and offset - start >= max_bytes:
                return


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


MARK_BYTES = 4096  # of the line before the offset: enough to tell it from another


def mark(path: Path, start: int, end: int) -> dict[str, object]:
    """What identifies the line at ``start``..``end`` of the buffer, kept with the offset
    ``end`` (``State.last_line``): where it starts and a digest of its first bytes."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return {"offset": start, "sha256": _digest(fh, start, end)}


def unread_from(path: Path, offset: int, last_line: dict | None) -> int:
    """Where the buffer's unread lines start: ``offset``, or 0 when the line before it is
    no longer the one ``last_line`` (``mark``) names — the buffer was replaced, or
    truncated (``: >``, logrotate's ``copytruncate``) and perhaps written again past the
    offset since: its size alone would not tell, and the new lines before the offset
    would be skipped."""
    if offset == 0 or size(path) < offset:
        return 0
    if last_line is None:
        return offset  # recorded by a cortex that kept no mark: its size is all there is
    start = last_line["offset"]
    if start >= offset:
        return 0
    with os.fdopen(open_regular(path), "rb") as fh:
        fh.seek(offset - 1)
        if fh.read(1) != b"\n":
            return 0
        return offset if _digest(fh, start, offset) == last_line["sha256"] else 0


def _digest(fh, start: int, end: int) -> str:
    fh.seek(start)
    return hashlib.sha256(fh.read(min(end - start, MARK_BYTES))).hexdigest()


def unfinished_tail(path: Path) -> dict[str, object] | None:
    """The size and time of a buffer whose last line has no newline yet (None: it ends
    with one, or is empty). The same at the next run, the line's writer has stopped."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_size == 0 or os.pread(fd, 1, st.st_size - 1) == b"\n":
            return None
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    finally:
        os.close(fd)


def end_unfinished_line(path: Path, size_seen: int) -> tuple[bool, list[str]]:
    """End the buffer's last line with a newline, under the writers' lock (as ``append``
    ends one before its data), if the buffer is still ``size_seen`` bytes long and that
    line still has none: the next line appended is then a line of its own. Returns
    whether it was ended, and what ``settle`` said: as every writer does under that lock,
    a batch a killed writer left is settled first, so its cut end is cut away (the size
    then differs), never ended and read as a line of its own."""
    with locked_live(path, os.O_RDWR | os.O_APPEND) as fd:
        _, said = _settle(fd, path, repair=True)
        size_now = os.fstat(fd).st_size
        if size_now != size_seen or size_now == 0 or os.pread(fd, 1, size_now - 1) == b"\n":
            return False, said
        os.write(fd, b"\n")
        return True, said


def rotate_if_consumed(path: Path, offset: int, archive: Path) -> bool:
    """Move the buffer to ``archive`` if every byte was consumed; holds the writers' lock
    so no append can land in between the size check and the rename."""
    if not path.exists():
        return False
    fd = open_regular(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_size != offset or offset == 0 or _record_path(path).exists():
            return False  # more to read, or a killed writer's batch the next run settles
        make_dirs(archive.parent)  # observer/archive/, shared as the vault is
        os.rename(path, archive)
        return True
    finally:
        os.close(fd)


def archive_scrubbed(raw: Path, archive: Path, transform, max_line_bytes: int = 1 << 20) -> None:
    """Write ``archive`` from the rotated buffer ``raw``, each line through ``transform``
    (bytes in, bytes out), then delete ``raw``. A crash leaves ``raw`` in place, and the
    next run calls this again: the raw lines never become the kept archive. A line over
    ``max_line_bytes`` keeps only its start, as its quarantine entry does."""
    from cortex.parallel import available_cores

    tmp = archive.with_name(f".{archive.name}.tmp")
    cores = available_cores()
    with os.fdopen(open_regular(raw), "rb") as src, open(tmp, "wb") as dst:
        os.fchmod(dst.fileno(), own(0o600))
        block: list[bytes] = []
        for line, _, _ in bounded_lines(src, max_line_bytes):
            block.append(line)
            if len(block) == ARCHIVE_BLOCK:
                dst.writelines(_transformed(block, transform, cores))
                block = []
        dst.writelines(_transformed(block, transform, cores))
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, archive)
    raw.unlink()


ARCHIVE_BLOCK = 20_000  # lines transformed at a time (memory stays flat), on every core


def _transformed(lines: list[bytes], transform, cores: int) -> list[bytes]:
    from cortex.parallel import fork_map, split

    if cores == 1 or len(lines) < 2_000:
        return [transform(line) for line in lines]
    return [out for part in fork_map(lambda part: [transform(line) for line in part], split(lines, cores)) for out in part]


def held_open(path: Path, quiet_after: float) -> bool:
    """Whether a process other than this one may still have ``path`` open (a writer
    that opened the buffer before it was rotated). Linux answers exactly: a write lease
    is granted only when no other descriptor is open on the file. Elsewhere a file is
    taken as held until it has been quiet for ``quiet_after`` seconds."""
    import time

    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return False
    try:
        setlease = getattr(fcntl, "F_SETLEASE", None)
        if setlease is not None:
            try:
                fcntl.fcntl(fd, setlease, fcntl.F_WRLCK)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EBUSY):
                    return True
            else:
                fcntl.fcntl(fd, setlease, fcntl.F_UNLCK)
                return False
        return time.time() - os.fstat(fd).st_mtime < quiet_after
    finally:
        os.close(fd)
