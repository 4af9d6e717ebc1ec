"""Small durable-file primitives: atomic replace, locked append, advisory locks."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from cortex.errors import CortexError, LockBusy


class NotRegularFile(CortexError):
    """A file cortex reads or writes in place is something else: a named pipe would
    block the open (or swallow the bytes written into it), a folder or a device is not
    data. A person made it so: the message says what it is and how to put it right."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.what = path, kind  # not `kind`: that is the failure's, in `--json`
        super().__init__(f"{path} is {kind}, not a file: cortex reads and writes only regular files",
                         "remove it (cortex makes the file again when it needs one), or put the file itself there")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def folder_in_the_way(exc: OSError) -> NotRegularFile | None:
    """A folder where cortex reads or replaces a file (a cache in .git/cortex/ made a
    folder), said as `open_regular` says it, with what to do: "Is a directory: PATH"
    alone told the person nothing (and named the temp file, when a replace met it)."""
    where = [name for name in (exc.filename2, exc.filename) if name and os.path.isdir(name)]
    if not isinstance(exc, IsADirectoryError) or not where:
        return None
    return NotRegularFile(Path(os.fsdecode(where[0])), "a folder")

# --- a vault a group shares -----------------------------------------------------------
# git makes each file and folder it creates in a repository shared by a group (`git init
# --shared`, core.sharedRepository = group, all or an octal mode) as usable by the group as
# by its owner, whatever the person's umask, and each folder setgid so the group stays.
# cortex does the same with the files of its own (its caches in .git/cortex/, its runtime
# files in observer/): under the usual umask 022 they were the owner's alone, and a
# teammate's commit was refused by the hook, their run, query and maintain stopped on
# "Permission denied". Decided here, once per vault and process (`share_as`); applied by
# the process's umask (what Whoosh, numpy and json caches create) and by `own` (the modes
# cortex passes itself). What cortex keeps from others (0o600) is never given to others,
# only to the group, which shares the notes and observations already.

_shared: dict[str, str | None] = {}  # vault root: its core.sharedRepository (None: unset)
_perm = 0  # git's reading of the setting in force: 0 none, 0o660 group, 0o664 all, -MODE an octal mode
_umask: int | None = None  # the process's umask before any vault's sharing


def shared_perm(value: str | None) -> int:
    """core.sharedRepository read as git reads it (``git_config_perm``): 0 (umask, false,
    unset), 0o660 (group, true, 1), 0o664 (all, world, everybody, 2), or an octal mode
    (0660), negated; one git refuses (no owner read and write, not a number) is 0."""
    word = "" if value is None else value.strip().lower()
    if word in ("", "umask", "false", "no", "off", "0"):
        return 0
    if word in ("group", "true", "yes", "on", "1"):
        return 0o660
    if word in ("all", "world", "everybody", "2"):
        return 0o664
    try:
        mode = int(word, 8) & 0o666
    except ValueError:
        return 0
    return -mode if mode & 0o600 == 0o600 else 0


def shared_umask(value: str, umask: int) -> int:
    """The umask under which what a process creates in the repository is shared as
    ``core.sharedRepository = value`` asks (``shared_perm``): ``group`` gives the group
    what the owner has, ``all`` lets others read too, an octal mode (0660) is that mode
    exactly; ``umask`` (false, 0, or a value git refuses) keeps ``umask``. git adjusts
    each file it creates; libgit2 does not (its object folders are 0777 less the umask),
    nor do Whoosh, numpy or sqlite, so cortex sets the umask instead."""
    perm = shared_perm(value)
    if perm == 0:
        return umask
    if perm == 0o660:
        return umask & ~0o070
    if perm == 0o664:
        return umask & ~0o075
    mode = -perm
    return 0o777 & ~(mode | (mode & 0o444) >> 2)


def share_as(root: Path | None, value: str | None | type[Ellipsis] = ..., *, git_dir: Path | None = None) -> None:
    """Make this process create files as the repository of the vault at ``root`` (or
    whose git directory is ``git_dir``) is shared: ``value`` as pygit2 read
    core.sharedRepository, else read once per repository and process from its config
    file (``gitlock.shared_repository``: no git, no pygit2, the hook runs on every
    commit). A vault not shared leaves the umask and the modes as they were."""
    global _perm, _umask
    key = str(git_dir or root)
    if value is ...:
        if key not in _shared:
            from cortex.gitlock import git_dir_of, shared_repository

            try:
                _shared[key] = shared_repository(git_dir or git_dir_of(root))
            except (OSError, UnicodeDecodeError):  # an unreadable `.git` file: git says so, not this
                _shared[key] = None
        value = _shared[key]
    else:
        _shared[key] = value
    perm = shared_perm(value)
    if _umask is None:
        if not perm:
            return
        _umask = os.umask(0)
    _perm = perm
    os.umask(shared_umask(value or "", _umask))


def own(mode: int) -> int:
    """The mode of a file cortex makes for itself (``mode`` where no group shares the
    vault), as git's ``calc_shared_perm`` adjusts its own: the group gets what the owner
    has, others what ``all`` or the octal mode gives them, but never of a file cortex keeps
    from others (no bit for others in ``mode``: the observations, the quarantine)."""
    if not _perm:
        return mode
    tweak = -_perm if _perm < 0 else _perm
    if not mode & 0o200:
        tweak &= ~0o222
    if mode & 0o100:
        tweak |= (tweak & 0o444) >> 2
    shared = (mode & ~0o777) | tweak if _perm < 0 else mode | tweak
    return shared if mode & 0o007 else shared & ~0o007


def make_dirs(path: Path) -> None:
    """``path.mkdir(parents=True, exist_ok=True)``; in a vault a group shares, each folder
    made is then setgid and the group's (as git makes its own), so what is made in it
    later keeps the folder's group, whoever makes it."""
    if not _perm:
        path.mkdir(parents=True, exist_ok=True)
        return
    missing = []
    here = path
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    path.mkdir(parents=True, exist_ok=True)
    for folder in reversed(missing):
        try:
            os.chmod(folder, own(0o755) | stat.S_ISGID)
        except OSError:  # made by another process meanwhile: theirs to share
            pass


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int | None = None) -> int:
    """``os.open`` for a file of the vault a person could replace: never blocks (a named
    pipe opened for reading waits for a writer for ever) and refuses anything but a
    regular file with ``NotRegularFile``, a symbolic link included. The descriptor
    comes back blocking, as ``os.open`` gives it. A file it creates is cortex's own,
    ``mode`` (by default 0o600) as the vault is shared (``own``)."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC,
                     own(0o600) if mode is None else mode)
    except IsADirectoryError:
        raise NotRegularFile(path, "a folder") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise NotRegularFile(path, f"a symbolic link (to {os.readlink(path)})") from None
        if exc.errno == errno.ENXIO:  # a named pipe opened for writing, no reader
            raise NotRegularFile(path, "a named pipe (FIFO)") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFile(path, _kind(st.st_mode))
    os.set_blocking(fd, True)
    return fd


def read_regular(path: Path) -> bytes:
    """The bytes of a file a person could replace (``open_regular``)."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read()


def version(path: Path) -> tuple[int, int, int] | None:
    """Which version of a file this is: (inode, mtime_ns, size), a file replaced whole
    getting a new inode; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, unless_changed: Before | None = None) -> bool:
    """Write to a temp file in the same folder, fsync, rename over ``path``: readers (and
    a process killed meanwhile) see old or new, never half.

    ``unless_changed``: a compare-and-swap for a file someone else may save meanwhile (an
    editor takes no lock): the rename happens only while the file is still ``before`` or
    already ``data`` (``still_ours``), looked at after the temp file is written and
    synced, just before the rename; otherwise the temp file goes, the file stays as it
    is, and the result is False. The window left is that look and the rename.

    ``mode``: exactly (a person's file keeps its own); by default a file of cortex's own,
    0o644 as the vault is shared (``own``)."""
    if mode is None:
        mode = own(0o644)
    make_dirs(path.parent)
    tmp = path.with_name(_temp_name(path.name))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # exactly: a rewritten note keeps its mode whatever the umask
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        # a full disk: the half-written copy would stay (a new name at each attempt)
        # holding the space a person frees, hidden beside the file
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    if unless_changed is not None and not still_ours(path, unless_changed, data):
        os.unlink(tmp)
        return False
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return True


class Before(NamedTuple):
    """A file as the writer last saw it: whether it was there (for cortex's commits: in
    the commit its changes were made on), and its content (None for a link)."""

    tracked: bool
    data: bytes | None


NEW = Before(False, None)


def still_ours(target: Path, before: Before, data: bytes | None) -> bool:
    """Whether the file at ``target`` holds what a writer may replace (``data``) or remove
    (None): the content it saw (``before``), ``data`` itself, or a start of ``data``
    where the file is new (a write cut short; an empty file where one was is an editor
    between truncating and saving). A link is never replaced. Line endings do not count:
    git's checkout on Windows (``core.autocrlf``) gives every note CRLF where the commit
    has LF, and that is no person's edit."""
    if target.is_symlink():
        return False
    try:
        content = read_regular(target)
    except (OSError, NotRegularFile):
        return False
    if _same_text(content, before.data) or (data is not None and _same_text(content, data)):
        return True
    return data is not None and not before.tracked and data.startswith(content)


def _same_text(content: bytes, other: bytes | None) -> bool:
    """``content`` is ``other``, line endings aside."""
    if content == other:
        return True
    return other is not None and b"\r\n" in content + other \
        and content.replace(b"\r\n", b"\n") == other.replace(b"\r\n", b"\n")


def _temp_name(name: str) -> str:
    """``.NAME.PID.tmp``: beside the file, hidden, named after it; a name near the file
    system's 255-byte limit (a person's long note title) is named by its digest instead."""
    tmp = f".{name}.{os.getpid()}.tmp"
    if len(tmp.encode("utf-8", "surrogateescape")) <= 255:
        return tmp
    import hashlib

    return f".{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}.{os.getpid()}.tmp"


def atomic_write_json(path: Path, obj: Any, mode: int | None = None) -> None:
    """A JSON file of cortex's own, 0o600 as the vault is shared (``own``) by default."""
    atomic_write(path, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode(), own(0o600) if mode is None else mode)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_locked(path: Path, data: bytes, mode: int | None = None) -> None:
    """Append ``data`` under an exclusive flock (``locked_live``)."""
    with locked_live(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode) as fd:
        write_all(fd, mended(fd, data))


@contextmanager
def locked_live(path: Path, flags: int, mode: int | None = None) -> Iterator[int]:
    """A descriptor on the file at ``path`` (``open_regular``), under an exclusive flock.

    The lock also serialises against buffer rotation: if the file we opened was renamed
    away while we waited, reopen the path so the caller works on the live file.
    """
    if flags & os.O_CREAT:
        make_dirs(path.parent)
    while True:
        fd = open_regular(path, flags, mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            if current is None or current.st_ino != os.fstat(fd).st_ino:
                continue  # rotated while we waited: try again on the new file
            yield fd
            return
        finally:
            os.close(fd)


def mended(fd: int, data: bytes) -> bytes:
    """``data`` to append to the file ``fd``: after a newline when its last line is cut
    (a ``>>`` writer died mid-line), so that fragment cannot swallow it (the fragment is
    then quarantined as a parse error, not lost)."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        return b"\n" + data
    return data


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # one os.write may write less than asked
        view = view[os.write(fd, view):]


def flock_within(fd: int, timeout: float, poll: float = 0.05) -> bool:
    """Take an exclusive ``flock`` on ``fd``, trying for up to ``timeout`` seconds;
    False when another process still holds it then."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)


@contextmanager
def file_lock(path: Path, timeout: float, what: str) -> Iterator[None]:
    """An exclusive advisory lock on ``path``; waits up to ``timeout`` seconds."""
    make_dirs(path.parent)
    fd = open_regular(path, os.O_RDWR | os.O_CREAT)
    try:
        if not flock_within(fd, timeout):
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise LockBusy(
                f"{what} is busy: {holder} holds {path.name}",
                "wait for it to finish, or retry later (cortex waits "
                f"{timeout:g}s; set lock_timeout in observer/config.yml)",
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
