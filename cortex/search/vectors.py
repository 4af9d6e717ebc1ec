"""The semantic side: one L2-normalised embedding row per note, keyed by vault path.

Stored as `vectors.npy` (float32, memory-mapped for queries) and `vector_keys.txt` (the
path of each row; an empty line is a free row), mapped as bytes and never split: a row's
path is found by a binary search over `vector_keys.order.npy` (the rows in path order and
each line's offset, written with the base; without it, a byte search) and a row's key by
its line offsets (`Keys`), so opening the store and looking up or updating one row do not
build a list and a map of every path. An update does not rewrite them: new and
changed rows go to a small `vectors_delta.bin`, with the base rows they supersede or
delete (tombstones), so one new note costs the same in a vault of any size. Once the
delta passes a tenth of the base, the next save folds it in (a full rewrite, under new
names renamed into place; amortised, a constant per note). The delta names the base it
belongs to (the keys file's inode, size and mtime): a delta left by a save killed after
the fold is ignored, since the base holds it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from cortex.fsutil import version

if TYPE_CHECKING:
    import mmap

MATRIX = "vectors.npy"
HEAD = "vectors_head.npy"
KEYS = "vector_keys.txt"
ORDER = "vector_keys.order.npy"  # the keys file's token, its rows in path order, its line starts
DELTA = "vectors_delta.bin"  # a JSON line (base token, keys, dead rows, shape), then float32 rows
OLD_DELTA = "vectors_delta.npz"  # the format before: read when it is the only one, removed by the next save
EXACT_LIMIT = 20_000  # up to this many rows every query is exact
HEAD_CANDIDATES = 1000
FOLD_SHARE = 0.1  # the delta is folded into the base past this share of it
FOLD_MIN = 2048  # ... and past this many rows


class VectorStore:
    """`head_dims` > 0 (models whose dimensions are PCA components, strongest first, as
    model2vec distils them): large stores also keep the first `head_dims` columns as a
    contiguous matrix, and a query scores all rows on those, then rescores the best
    1,000 on every dimension. On 50,000 notes that reads a quarter of the memory; the
    top 10 agree with exact search 99 % of the time (measured with 96 of 256 dims)."""

    def __init__(self, directory: Path, matrix: np.ndarray, keys: "Sequence[str] | Keys", head_dims: int = 0, head=None):
        self.directory = directory
        self.matrix = matrix  # the base rows (memory-mapped when loaded)
        self.keys = keys if isinstance(keys, Keys) else Keys.of(keys)
        self.head_dims = head_dims if 0 < head_dims < matrix.shape[1] else 0
        self._head = head
        self._rows: dict[str, int] | None = None  # path -> row of every live row (tests, folds)
        self._in_delta: dict[str, int] | None = None  # path -> delta row
        self.delta = np.zeros((0, matrix.shape[1]), dtype=np.float32)
        self.delta_keys: list[str] = []
        self.dead: set[int] = set()  # base rows superseded or deleted
        self._base_token: list[int] | None = None  # the saved base this store extends
        self._mapped: dict[str, tuple[int, int, int] | None] = {}  # file name -> its version when mapped

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def rows(self) -> dict[str, int]:
        """{path: row} of every live row (delta rows follow the base's); built in full,
        so only for whole-store work: a single path is `row_of`'s."""
        if self._rows is None:
            dead, n = self.dead, len(self.keys)
            self._rows = {k: i for i, k in enumerate(self.keys) if k and i not in dead}
            self._rows.update((k, n + j) for j, k in enumerate(self.delta_keys) if k)
        return self._rows

    @property
    def in_delta(self) -> dict[str, int]:
        if self._in_delta is None:
            self._in_delta = {k: j for j, k in enumerate(self.delta_keys) if k}
        return self._in_delta

    def row_of(self, path: str) -> int | None:
        """The live row of `path` (delta rows numbered after the base's), or None."""
        j = self.in_delta.get(path)
        if j is not None:
            return len(self.keys) + j
        row = self.keys.row(path)
        return None if row is None or row in self.dead else row

    def __len__(self) -> int:
        if self._rows is not None:
            return len(self._rows)
        # without building the path index; base rows are never free (a build writes
        # notes only, a fold drops free rows), delta rows may be
        return len(self.keys) - len(self.dead) + len(self.delta_keys) - self.delta_keys.count("")

    @classmethod
    def empty(cls, directory: Path, dim: int) -> "VectorStore":
        return cls(directory, np.zeros((0, dim), dtype=np.float32), [])

    @classmethod
    def load(cls, directory: Path, *, head_dims: int = 0) -> "VectorStore":
        seen = {name: version(directory / name) for name in (MATRIX, HEAD, ORDER, KEYS)}  # before mapping (`intact`)
        matrix = _mapped(directory / MATRIX)
        token = _token(directory)
        keys = Keys(_mapped_bytes(directory / KEYS), _order(directory, token))
        if matrix.ndim != 2 or matrix.dtype != np.float32 or len(keys) != matrix.shape[0]:
            raise ValueError(f"vector store in {directory} is inconsistent ({matrix.shape} vs {len(keys)} keys)")
        head = None
        if head_dims and matrix.shape[0] > EXACT_LIMIT and (directory / HEAD).exists():
            head = _mapped(directory / HEAD)
            if head.shape != (matrix.shape[0], head_dims):
                head = None
        store = cls(directory, matrix, keys, head_dims, head)
        store._base_token = token
        store._mapped = {name: seen[name] for name, used in ((MATRIX, True), (HEAD, head is not None),
                                                             (ORDER, keys._order is not None),
                                                             (KEYS, keys._order is not None)) if used}
        try:
            delta = _read_delta(directory)
        except FileNotFoundError:
            delta = None
        except (KeyError, TypeError, ValueError, OSError, EOFError) as exc:
            raise ValueError(f"vector delta in {directory} is unreadable ({exc})") from None
        if delta is not None and _same_base(delta[0], store._base_token):  # else: left by a fold, already in the base
            _, store.delta, store.delta_keys, store.dead = delta
        if store.delta.shape != (len(store.delta_keys), matrix.shape[1]) or any(not 0 <= r < len(keys) for r in store.dead):
            raise ValueError(f"vector delta in {directory} does not fit its base")
        return store

    def intact(self) -> bool:
        """Whether every file this store reads memory-mapped is still as it was mapped.
        cortex replaces its files whole (a mapping keeps the file it was made of), but one
        cut short in place (a disk tool, a person clearing the cache, a full disk) kills
        the process that reads past its new end, by SIGBUS: a process that keeps the
        store loaded asks this before each use, and reads the store again (four stats)."""
        return all(version(self.directory / name) == seen for name, seen in self._mapped.items())

    def save(self) -> None:
        """Write the delta alone, or fold it into a new base when it has grown."""
        self.directory.mkdir(parents=True, exist_ok=True)
        changed = len(self.delta_keys) + len(self.dead)
        if self._base_token is not None and changed <= max(FOLD_MIN, FOLD_SHARE * len(self.keys)):
            from cortex.fsutil import atomic_write

            head = {"base": self._base_token, "keys": self.delta_keys, "dead": sorted(self.dead),
                    "shape": list(self.delta.shape)}
            atomic_write(self.directory / DELTA, json.dumps(head, ensure_ascii=False).encode("utf-8") + b"\n"
                         + np.ascontiguousarray(self.delta, dtype=np.float32).tobytes())
            (self.directory / OLD_DELTA).unlink(missing_ok=True)
            if self.keys._order is None and len(self.keys):  # a base saved before the lookup file existed
                self._write_order()
            return
        if changed:
            self._fold()
        self._write_base()
        (self.directory / DELTA).unlink(missing_ok=True)
        (self.directory / OLD_DELTA).unlink(missing_ok=True)
        self._base_token = _token(self.directory)

    def _fold(self) -> None:
        """Base and delta as one matrix, dead rows dropped."""
        keys = list(self.keys)
        keep = [i for i, k in enumerate(keys) if k and i not in self.dead]
        live = [j for j, k in enumerate(self.delta_keys) if k]
        self.matrix = np.concatenate([np.asarray(self.matrix)[keep], self.delta[live]]).astype(np.float32)
        self.keys = Keys.of([keys[i] for i in keep] + [self.delta_keys[j] for j in live])
        self.delta = np.zeros((0, self.matrix.shape[1]), dtype=np.float32)
        self.delta_keys, self.dead, self._rows, self._in_delta, self._head = [], set(), None, None, None
        self._mapped = {}  # all in memory now

    def _write_base(self) -> None:
        tmp_matrix = self.directory / (MATRIX + ".tmp")
        tmp_keys = self.directory / (KEYS + ".tmp")
        with open(tmp_matrix, "wb") as fh:
            np.save(fh, np.ascontiguousarray(self.matrix, dtype=np.float32))
        replaced = _token(self.directory)
        tmp_keys.write_bytes(self.keys.data)
        _unlike(tmp_keys, replaced)
        if self.head_dims and self.matrix.shape[0] > EXACT_LIMIT:
            tmp_head = self.directory / (HEAD + ".tmp")
            with open(tmp_head, "wb") as fh:
                np.save(fh, np.ascontiguousarray(self.matrix[:, : self.head_dims], dtype=np.float32))
            os.replace(tmp_head, self.directory / HEAD)
        else:
            (self.directory / HEAD).unlink(missing_ok=True)
        os.replace(tmp_matrix, self.directory / MATRIX)
        os.replace(tmp_keys, self.directory / KEYS)
        self._write_order()

    def _write_order(self) -> None:
        """The lookup file for the keys file just written: its token first, so that a
        file left from another base (a kill between the two writes) is never used."""
        keys, token = self.keys, _token(self.directory)
        if token is None:
            return
        order = sorted(range(len(keys)), key=keys.line)
        table = np.concatenate([np.array([*token, len(keys)], dtype=np.int64), np.array(order, dtype=np.int64),
                                keys.starts.astype(np.int64)])
        tmp = self.directory / (ORDER + ".tmp")
        with open(tmp, "wb") as fh:
            np.save(fh, table)
        os.replace(tmp, self.directory / ORDER)

    # --- changes ----------------------------------------------------------------------

    def among(self, query: np.ndarray, paths: Iterable[str]) -> list[tuple[str, float]]:
        """(path, cosine) of each of `paths` that has a vector, best first: `top` over a
        few named notes, without scoring the rest."""
        found = [(path, vec) for path in paths if (vec := self.vector(path)) is not None]
        if not found:
            return []
        scores = np.stack([vec for _, vec in found]).astype(np.float32) @ query.astype(np.float32)
        return sorted(((path, float(s)) for (path, _), s in zip(found, scores)), key=lambda item: -item[1])

    def vector(self, path: str) -> np.ndarray | None:
        row = self.row_of(path)
        if row is None:
            return None
        n = len(self.keys)
        return np.array(self.matrix[row] if row < n else self.delta[row - n])

    def apply(self, upserts: Sequence[tuple[str, np.ndarray]], deletes: Iterable[str] = ()) -> None:
        """Delete rows, then set (path, vector) rows: into the delta, superseding base rows.
        Touches only the rows named (a byte search of the base keys per path)."""
        delta, delta_keys, dead = np.array(self.delta), list(self.delta_keys), set(self.dead)
        in_delta = dict(self.in_delta)

        def base_row(path: str) -> int | None:
            row = self.keys.row(path)
            return None if row is None or row in dead else row

        for path in deletes:
            j = in_delta.pop(path, None)
            if j is not None:  # (its base row, if any, is dead already)
                delta_keys[j] = ""
                delta[j] = 0.0
            elif (row := base_row(path)) is not None:
                dead.add(row)
        free = [j for j, k in enumerate(delta_keys) if not k]
        new = [p for p, _ in upserts if p not in in_delta]
        grow = max(0, len(new) - len(free))
        if grow:
            delta = np.vstack([delta, np.zeros((grow, delta.shape[1]), dtype=np.float32)])
            free += list(range(len(delta_keys), len(delta_keys) + grow))
            delta_keys += [""] * grow
        free_iter = iter(free)
        for path, vec in upserts:
            j = in_delta.get(path)
            if j is None:
                if (row := base_row(path)) is not None:
                    dead.add(row)  # a changed base row: superseded
                j = in_delta[path] = next(free_iter)
                delta_keys[j] = path
            delta[j] = vec
        # the in-memory head goes (queries here are exact until the next load, which maps it again)
        self.delta, self.delta_keys, self.dead, self._in_delta = delta, delta_keys, dead, in_delta
        self._rows, self._head = None, None

    # --- queries ----------------------------------------------------------------------

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine of every row (base, then delta) with a unit query vector (free and
        superseded rows score 0)."""
        query = query.astype(np.float32)
        base = self.matrix @ query if self.matrix.shape[0] else np.zeros(0, dtype=np.float32)
        if self.dead:
            base = np.array(base)
            base[sorted(self.dead)] = 0.0
        return np.concatenate([base, self.delta @ query]) if len(self.delta_keys) else base

    def top(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The `k` best (path, cosine) pairs, best first."""
        n = self.matrix.shape[0]
        if n + len(self.delta_keys) == 0 or k <= 0:
            return []
        query = query.astype(np.float32)
        if self._head is not None and k + len(self.dead) < HEAD_CANDIDATES < n:
            rough = self._head @ query[: self.head_dims]
            rows = np.argpartition(-rough, HEAD_CANDIDATES - 1)[:HEAD_CANDIDATES]
            rows.sort()  # gather in storage order
            scores = self.matrix[rows] @ query
        else:
            rows, scores = np.arange(n), (self.matrix @ query if n else np.zeros(0, dtype=np.float32))
        keys, dead = self.keys, self.dead
        found = [(keys[r], float(s)) for r, s in _best(rows, scores, k + len(dead)) if keys[r] and r not in dead]
        if self.delta_keys:
            found += [(self.delta_keys[j], float(s)) for j, s in
                      _best(np.arange(len(self.delta_keys)), self.delta @ query, k) if self.delta_keys[j]]
        found.sort(key=lambda item: -item[1])
        return found[:k]


class Keys:
    """The base rows' paths: the keys file's bytes, one path per line, never split into a
    list. `row(path)` is a binary search over the rows in path order when the lookup file
    is there (~30 µs in 200,000 rows), else a byte search and a count of the lines before
    the hit (~2 ms); `keys[i]` reads line i by offsets."""

    def __init__(self, data: "bytes | mmap.mmap", order: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """``data``: the keys file's bytes, or a map of the file (`_mapped_bytes`), whose
        pages a lookup reads as it goes: a cold query reads ~20 of its lines, not the whole
        file (2 MB at 50,000 notes). Without ``order`` a map is read whole."""
        if data and data[-1:] != b"\n":
            raise ValueError("vector keys file is cut short")
        self.data = data
        self._order: np.ndarray | None = None
        self._starts: np.ndarray | None = None
        # the same arrays as memoryviews, which index to a Python int: a numpy array's
        # element is a numpy scalar to convert, and a row lookup reads ~50 of them
        self._order_at: memoryview | None = None
        self._starts_at: memoryview | None = None
        if order is not None and len(order[1]) and order[1][-1] == len(data):
            # plain views of the mapped arrays: indexing a memmap element goes through its
            # Python-level __getitem__, 1 µs a step of the binary search
            self._order, self._starts = (np.ascontiguousarray(a, dtype=np.int64) for a in order)
            self._order_at = memoryview(self._order)
            self._n = len(self._order)
        else:
            self.data = data[:]  # a byte search, over bytes
            self._n = self.data.count(b"\n")

    @classmethod
    def of(cls, keys: Iterable[str]) -> "Keys":
        return cls("".join(k + "\n" for k in keys).encode("utf-8"))

    @property
    def starts(self) -> np.ndarray:
        """Offset of each line's start, and the data's length after the last."""
        if self._starts is None:
            ends = np.flatnonzero(np.frombuffer(self.data, dtype=np.uint8) == 10)
            self._starts = np.concatenate([[0], ends + 1]).astype(np.int64)
        return self._starts

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> str:
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return self.line(i % self._n).decode("utf-8")

    def line(self, i: int) -> bytes:
        """Row ``i``'s path as stored (0 <= i < len)."""
        starts = self._starts_at
        if starts is None:
            starts = self._starts_at = memoryview(np.ascontiguousarray(self.starts, dtype=np.int64))
        return self.data[starts[i]: starts[i + 1] - 1]

    def __iter__(self):
        return iter(self.data[:].decode("utf-8").split("\n")[:-1])

    def row(self, path: str) -> int | None:
        needle = path.encode("utf-8") + b"\n"
        if not path or b"\n" in needle[:-1]:
            return None
        if self._order is not None:
            return self._search(needle[:-1])
        if self.data.startswith(needle):
            return 0
        hit = self.data.find(b"\n" + needle)
        return None if hit < 0 else self.data.count(b"\n", 0, hit + 1)

    def _search(self, needle: bytes) -> int | None:
        order, lo, hi, line = self._order_at, 0, self._n, self.line
        while lo < hi:
            mid = (lo + hi) // 2
            if line(order[mid]) < needle:
                lo = mid + 1
            else:
                hi = mid
        return order[lo] if lo < self._n and line(order[lo]) == needle else None


def _read_delta(directory: Path) -> tuple[list[int], np.ndarray, list[str], set[int]]:
    """(base token, rows, keys, dead base rows) of the delta file: a JSON line, then the
    rows as float32 (no zip archive: reading one would import zipfile, bz2 and lzma,
    ~4 ms of every query). One in the format before (``.npz``) is read as it is."""
    try:
        raw = (directory / DELTA).read_bytes()
    except FileNotFoundError:
        with np.load(directory / OLD_DELTA, allow_pickle=False) as data:
            return (data["base"].tolist(), np.array(data["matrix"], dtype=np.float32),
                    [str(k) for k in data["keys"]], set(data["dead"].tolist()))
    head, sep, body = raw.partition(b"\n")
    meta = json.loads(head)
    rows, dim = (int(x) for x in meta["shape"])
    if not sep or len(body) != rows * dim * 4:
        raise ValueError("the delta's rows are cut short")
    matrix = np.frombuffer(body, dtype=np.float32).reshape(rows, dim).copy()
    return list(meta["base"]), matrix, [str(k) for k in meta["keys"]], {int(r) for r in meta["dead"]}


def _order(directory: Path, token: list[int] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows in path order and the line starts, when the lookup file belongs to the
    keys file of ``token`` (the one there now), else None (the byte search)."""
    try:
        table = _mapped(directory / ORDER)
    except (OSError, ValueError):
        return None
    if token is None or table.ndim != 1 or table.shape[0] < 4 or not _same_base(table[:3].tolist(), token):
        return None
    n = int(table[3])
    if table.shape[0] != 4 + 2 * n + 1:
        return None
    return table[4: 4 + n], table[4 + n:]


def _mapped_bytes(path: Path) -> "bytes | mmap.mmap":
    """A file's bytes as a read-only map (an empty file, which cannot be mapped: b"")."""
    import mmap

    with open(path, "rb") as fh:
        if not os.fstat(fh.fileno()).st_size:
            return b""
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _mapped(path: Path) -> np.ndarray:
    """A saved array, memory-mapped. An empty file is damage as any other is (ValueError):
    numpy reads it as the end of its input, EOFError, which the CLI would report as a bug
    (and click, once, as an interrupted prompt)."""
    try:
        return np.load(path, mmap_mode="r")
    except EOFError as exc:
        raise ValueError(f"{path.name} is empty ({exc})") from None


def _best(rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best (row, score), best first (ties in storage order)."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return []
    idx = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
    idx = idx[np.argsort(-scores[idx], kind="stable")]
    return [(int(rows[i]), float(scores[i])) for i in idx]


def _token(directory: Path) -> list[int] | None:
    """Which saved base a delta or a lookup file belongs to: the keys file's inode, size and
    mtime, of which only the size and the mtime tell (``_same_base``)."""
    try:
        st = os.stat(directory / KEYS)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _same_base(saved, token: list[int] | None) -> bool:
    """Whether ``saved`` (a delta's or a lookup file's token) names the base of ``token``:
    the same size and mtime of its keys file. Not the inode: a vault copied or restored with
    its times (`cp -a`, `rsync -a`, a backup) has new inodes and the same files, and a
    delta passed over there lost its notes' vectors (new notes unfound by meaning, deleted
    ones back) for good, while every cold query byte-searched the keys. A new base never
    has the token of the one it replaces (``_unlike``)."""
    return (token is not None and isinstance(saved, list) and len(saved) == 3 and len(token) == 3
            and saved[1:] == token[1:])


def _unlike(keys: Path, replaced: list[int] | None) -> None:
    """Date the keys file just written at ``keys`` 2 s later when its size and mtime are
    those of the keys file it replaces (written in the same clock tick, or on a file
    system counting whole seconds): a delta or lookup file left by a kill between the
    writes must not pass for the new base's."""
    st = os.stat(keys)
    if _same_base([st.st_ino, st.st_size, st.st_mtime_ns], replaced):
        os.utime(keys, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
