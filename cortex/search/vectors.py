"""The semantic side: one L2-normalised embedding row per note, keyed by vault path.

Stored as `vectors.npy` (float32, memory-mapped for queries) and `vector_keys.txt` (the
path of each row; an empty line is a free row left by a deleted note and reused by the
next new one). Saving writes both files under new names and renames them into place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

MATRIX = "vectors.npy"
KEYS = "vector_keys.txt"


class VectorStore:
    def __init__(self, directory: Path, matrix: np.ndarray, keys: list[str]):
        self.directory = directory
        self.matrix = matrix
        self.keys = keys
        self._rows: dict[str, int] | None = None

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def rows(self) -> dict[str, int]:
        if self._rows is None:
            self._rows = {k: i for i, k in enumerate(self.keys) if k}
        return self._rows

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def empty(cls, directory: Path, dim: int) -> "VectorStore":
        return cls(directory, np.zeros((0, dim), dtype=np.float32), [])

    @classmethod
    def load(cls, directory: Path, *, writable: bool = False) -> "VectorStore":
        matrix = np.load(directory / MATRIX, mmap_mode=None if writable else "r")
        keys = (directory / KEYS).read_text(encoding="utf-8").split("\n")[:-1]
        if matrix.ndim != 2 or matrix.dtype != np.float32 or len(keys) != matrix.shape[0]:
            raise ValueError(f"vector store in {directory} is inconsistent ({matrix.shape} vs {len(keys)} keys)")
        return cls(directory, matrix, keys)

    def save(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp_matrix = self.directory / (MATRIX + ".tmp")
        tmp_keys = self.directory / (KEYS + ".tmp")
        with open(tmp_matrix, "wb") as fh:
            np.save(fh, np.ascontiguousarray(self.matrix, dtype=np.float32))
        tmp_keys.write_text("".join(k + "\n" for k in self.keys), encoding="utf-8")
        os.replace(tmp_matrix, self.directory / MATRIX)
        os.replace(tmp_keys, self.directory / KEYS)

    # --- changes ----------------------------------------------------------------------

    def vector(self, path: str) -> np.ndarray | None:
        row = self.rows.get(path)
        return None if row is None else np.array(self.matrix[row])

    def apply(self, upserts: Sequence[tuple[str, np.ndarray]], deletes: Iterable[str] = ()) -> None:
        """Delete rows, then set (path, vector) rows, reusing free rows before growing."""
        matrix = np.array(self.matrix)  # a private, writable copy of a memory map
        rows = dict(self.rows)
        keys = list(self.keys)
        for path in deletes:
            row = rows.pop(path, None)
            if row is not None:
                keys[row] = ""
                matrix[row] = 0.0
        free = [i for i, k in enumerate(keys) if not k]
        new = [(p, v) for p, v in upserts if p not in rows]
        grow = max(0, len(new) - len(free))
        if grow:
            matrix = np.vstack([matrix, np.zeros((grow, matrix.shape[1]), dtype=np.float32)])
            free += list(range(len(keys), len(keys) + grow))
            keys += [""] * grow
        free_iter = iter(free)
        for path, vec in upserts:
            row = rows.get(path)
            if row is None:
                row = rows[path] = next(free_iter)
                keys[row] = path
            matrix[row] = vec
        self.matrix, self.keys, self._rows = matrix, keys, rows

    # --- queries ----------------------------------------------------------------------

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine of every row with a unit query vector (free rows score 0)."""
        if self.matrix.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        return self.matrix @ query.astype(np.float32)

    def top(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The `k` best (path, cosine) pairs, best first."""
        scores = self.scores(query)
        n = scores.shape[0]
        if n == 0 or k <= 0:
            return []
        k = min(k, n)
        idx = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        keys = self.keys
        return [(keys[i], float(scores[i])) for i in idx if keys[i]]
