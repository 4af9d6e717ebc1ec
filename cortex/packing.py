"""Keeping the object store compact.

pygit2 writes every blob, tree and commit of cortex's commits as a loose object (about
4.7 KB a note on disk) and never packs them; plain git packs when a command of its own
finds too many loose objects (`git gc --auto`). After committing, cortex asks git the
same question, cheaply: like git, it counts one of the 256 fan-out folders
(``objects/17``) and multiplies, and only when that estimate reaches the repository's
``gc.auto`` (git's default: 6,700) does it run ``git gc --auto --quiet`` — git's own
decision, locks (``gc.pid``) and settings (``gc.auto=0`` turns it off; ``gc.autoDetach``
runs it in the background); it also asks when more than ``gc.autoPackLimit`` packs
gathered. A big run writes its blobs as one pack itself (`write_pack`), as `git add`
of many files would cost a loose file each. Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

GC_AUTO_DEFAULT = 6700  # git's own default for gc.auto


def loose_sample(objects: Path) -> int:
    """Loose objects in the fan-out folder ``objects/17``: git's sample of the whole."""
    try:
        names = os.listdir(objects / "17")
    except OSError:
        return 0
    return sum(1 for name in names if len(name) == 38)


def too_many_loose(objects: Path, gc_auto: int = GC_AUTO_DEFAULT) -> bool:
    """git's own test (``too_many_loose_objects``): the sample over gc.auto / 256."""
    return gc_auto > 0 and loose_sample(objects) > -(-gc_auto // 256)


AUTO_PACK_LIMIT = 50  # git's own default for gc.autoPackLimit


def too_many_packs(objects: Path, limit: int = AUTO_PACK_LIMIT) -> bool:
    """git's other test (``too_many_packs``): more packs without a ``.keep`` than the limit
    (cortex's big runs each add one)."""
    try:
        names = set(os.listdir(objects / "pack"))
    except OSError:
        return False
    packs = [n for n in names if n.endswith(".idx") and n[:-4] + ".keep" not in names]
    return limit > 0 and len(packs) > limit


def common_dir(root: Path) -> Path | None:
    """The repository's shared git directory (a linked worktree's ``.git`` is a file)."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    git_dir = (root / text[len("gitdir:"):].strip()).resolve()
    try:
        return (git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except OSError:
        return git_dir


def pack_if_due(root: Path, gc_auto: int | None = None) -> bool:
    """Run ``git gc --auto`` when git would want to; True when it was asked to.

    ``gc_auto`` is the repository's setting when the caller read it already (pygit2's
    config); otherwise git's default. A failing or missing git is no error: packing is
    an optimisation, and the next commit asks again."""
    git_dir = common_dir(root)
    if git_dir is None:
        return False
    objects = git_dir / "objects"
    if not (too_many_loose(objects, GC_AUTO_DEFAULT if gc_auto is None else gc_auto) or too_many_packs(objects)):
        return False
    from cortex import gitcli

    return gitcli.run_bytes(root, "gc", "--auto", "--quiet") is not None


def configured_gc_auto(repo) -> int | None:
    """``gc.auto`` from a pygit2 repository's configuration (None: git's default)."""
    import pygit2

    try:
        return repo.config.get_int("gc.auto")
    except (KeyError, ValueError, pygit2.GitError):
        return None


# --- writing a run's blobs as one pack ------------------------------------------------------

PACK_AT = 100  # git's transfer.unpackLimit: from this many objects on, one pack beats loose files
OBJ_BLOB = 3


def blob_id(data: bytes) -> str:
    """git's object id of a blob (SHA-1 of ``blob <size>\\0`` and the bytes)."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _entry_header(kind: int, size: int) -> bytes:
    """A pack entry's type and size: 3 type bits and 4 size bits, then 7 bits a byte."""
    out = bytearray()
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


SMALL_BLOB = 1 << 12  # bytes: a note this size or smaller is deflated with a window of its size


def _deflated(data: bytes) -> bytes:
    """``data`` as a zlib stream (level 1), as a pack entry holds it. zlib's default 32 KB
    window and 64 KB hash table take longer to set up (~75 µs) than a note of half a KB
    takes to compress: a small note gets a 4 KB window, which reaches every byte of it,
    and a smaller table. Any window is a valid stream for git (inflate reads the size
    from the stream's header). 1,000 notes of ~0.5 KB: ~88 -> ~12 ms."""
    import zlib

    if len(data) > SMALL_BLOB:
        return zlib.compress(data, 1)
    deflate = zlib.compressobj(1, zlib.DEFLATED, 12, 4)
    return deflate.compress(data) + deflate.flush()


KEEP_MARK = "cortex: blobs of a commit in the making\n"


def write_pack(objects: Path, blobs: list[bytes]) -> list[str]:
    """Write ``blobs`` as one pack (version 2) and its index into ``objects/pack``;
    returns their ids, in order.

    Until a commit reaches them, nothing references these blobs, and ``git repack -a
    -d`` or ``git gc --prune=now`` would delete them under a run that is about to commit
    them (or that a kill left for its recovery): the pack comes with a ``.keep`` file, as
    git's own packs in the making do, which ``release_packs`` removes once committed.

    git and libgit2 use a pack only once its ``.idx`` exists, so the pack is renamed into
    place first and the index last: a kill before that leaves an unused temporary file
    (or a ``.pack`` without index, which git ignores and `git gc` removes), never a pack
    that names missing data. One file instead of one per blob is most of what a plain
    ``git add`` of new files saves over loose objects; `git gc` repacks as it likes."""
    import hashlib
    import struct
    import tempfile
    import zlib

    from cortex.fsutil import own

    pack_dir = objects / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    ids = [blob_id(data) for data in blobs]
    unique: dict[str, bytes] = {}
    for oid, data in zip(ids, blobs):
        unique.setdefault(oid, data)
    digest = hashlib.sha1()
    entries: list[tuple[bytes, int, int]] = []  # (raw id, crc32, offset)
    fd, tmp_pack = tempfile.mkstemp(prefix="tmp_pack_", dir=pack_dir)
    tmp_idx = None
    try:
        with os.fdopen(fd, "wb") as fh:
            def put(chunk: bytes) -> None:
                fh.write(chunk)
                digest.update(chunk)

            put(b"PACK" + struct.pack(">II", 2, len(unique)))
            offset = 12
            for oid, data in unique.items():
                entry = _entry_header(OBJ_BLOB, len(data)) + _deflated(data)
                entries.append((bytes.fromhex(oid), zlib.crc32(entry), offset))
                put(entry)
                offset += len(entry)
            pack_sum = digest.digest()
            fh.write(pack_sum)
            fh.flush()
            os.fsync(fh.fileno())
        entries.sort()
        idx = hashlib.sha1()
        fd, tmp_idx = tempfile.mkstemp(prefix="tmp_idx_", dir=pack_dir)
        with os.fdopen(fd, "wb") as fh:
            def put_idx(chunk: bytes) -> None:
                fh.write(chunk)
                idx.update(chunk)

            fanout, i = [], 0
            for first in range(256):
                while i < len(entries) and entries[i][0][0] <= first:
                    i += 1
                fanout.append(i)
            put_idx(b"\xfftOc" + struct.pack(">I", 2) + struct.pack(">256I", *fanout))
            put_idx(b"".join(raw for raw, _, _ in entries))
            put_idx(b"".join(struct.pack(">I", crc) for _, crc, _ in entries))
            big = [off for _, _, off in entries if off >= 0x80000000]
            small = b"".join(struct.pack(">I", off if off < 0x80000000 else 0x80000000 | big.index(off))
                             for _, _, off in entries)
            put_idx(small + b"".join(struct.pack(">Q", off) for off in big))
            put_idx(pack_sum)
            fh.write(idx.digest())
            fh.flush()
            os.fsync(fh.fileno())
        name = pack_dir / f"pack-{pack_sum.hex()}"
        os.chmod(tmp_pack, own(0o444))  # as git's packs: read-only, read by whom the vault is shared with
        os.chmod(tmp_idx, own(0o444))
        Path(f"{name}.keep").write_text(KEEP_MARK, encoding="utf-8")  # before git can see the pack
        os.replace(tmp_pack, f"{name}.pack")
        os.replace(tmp_idx, f"{name}.idx")
    except BaseException:
        for leftover in (tmp_pack, tmp_idx):
            if leftover is not None:
                try:
                    os.unlink(leftover)
                except OSError:
                    pass
        raise
    return ids


def release_packs(objects: Path) -> None:
    """Remove the ``.keep`` files of cortex's packs (``write_pack``): called once the
    commits of what they hold are made, under the vault's lock (no other cortex process
    is writing one). A pack kept by git or by a person keeps its own."""
    for keep in (objects / "pack").glob("pack-*.keep"):
        try:
            if keep.read_text(encoding="utf-8") == KEEP_MARK:
                keep.unlink()
        except OSError:
            pass  # gone meanwhile, or unreadable: not ours to judge
