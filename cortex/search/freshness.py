"""Which notes may have changed since the index last looked: a cheap check, no full scan.

Three signals, each cheap, together complete:

* directory mtimes: creating, deleting or renaming a note (and an editor's atomic save)
  changes its folder's mtime, so only changed folders are listed;
* `git status` (one subprocess, started before the query's heavy imports so that it runs
  on the other core meanwhile): lists notes edited in place, tracked or untracked;
* HEAD: when it moved since the last check, `git diff --name-only old new` lists what
  the commits touched (an edit made and committed between two queries).

Where the vault is not a git repository, every note is stat'ed instead.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PARTITIONS = ("vault", "mind")


def note_dirs(root: Path) -> dict[str, int]:
    """Every folder under vault/ and mind/ (the two included) with its mtime_ns."""
    out: dict[str, int] = {}
    for top in PARTITIONS:
        base = root / top
        stack = [base]
        while stack:
            d = stack.pop()
            try:
                st = d.stat()
                entries = list(os.scandir(d))
            except OSError:
                continue
            out[d.relative_to(root).as_posix()] = st.st_mtime_ns
            stack.extend(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    return out


def scan_dir(root: Path, rel_dir: str) -> dict[str, tuple[int, int]]:
    """{path: (mtime_ns, size)} of the notes directly in one folder."""
    out = {}
    try:
        entries = list(os.scandir(root / rel_dir))
    except OSError:
        return out
    for e in entries:
        if e.name.endswith(".md") and not e.name.startswith(".") and e.is_file(follow_symlinks=False):
            st = e.stat(follow_symlinks=False)
            out[f"{rel_dir}/{e.name}"] = (st.st_mtime_ns, st.st_size)
    return out


def stat_note(root: Path, path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(root / path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def is_note_path(path: str) -> bool:
    parts = path.split("/")
    return len(parts) >= 2 and parts[0] in PARTITIONS and path.endswith(".md") and not any(p.startswith(".") for p in parts)


@dataclass
class GitProbe:
    """`git status` of the note folders, running in the background once started."""

    root: Path
    proc: subprocess.Popen | None = None
    head: str | None = None
    dirty: set[str] = field(default_factory=set)
    ok: bool = False

    @classmethod
    def start(cls, root: Path) -> "GitProbe":
        # --no-optional-locks: `git status` would otherwise refresh and rewrite the index
        # under index.lock, and a person's `git commit` at that moment would fail.
        probe = cls(root)
        if not (root / ".git").exists():
            return probe
        try:
            probe.proc = subprocess.Popen(
                ["git", "--no-optional-locks", "-C", str(root), "-c", "core.quotepath=off", "status", "--porcelain=v2", "--branch",
                 "-z", "-uall", "--no-renames", "--ignored=no", "--", *PARTITIONS],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            )
        except OSError:  # no git on PATH: fall back to a full stat sweep
            probe.proc = None
        return probe

    def result(self) -> "GitProbe":
        if self.proc is None or self.ok:
            return self
        out, _ = self.proc.communicate()
        if self.proc.returncode != 0:
            return self
        for entry in out.decode("utf-8", errors="surrogateescape").split("\0"):
            if entry.startswith("# branch.oid "):
                oid = entry[len("# branch.oid "):].strip()
                self.head = None if oid == "(initial)" else oid
            elif entry.startswith("1 "):
                self.dirty.add(entry.split(" ", 8)[8])
            elif entry.startswith("u "):
                self.dirty.add(entry.split(" ", 10)[10])
            elif entry.startswith("? "):
                self.dirty.add(entry[2:])
        self.ok = True
        return self

    def committed_since(self, old_head: str) -> set[str] | None:
        """Note paths that commits between `old_head` and HEAD touched (None: unknown)."""
        if not self.ok or self.head is None:
            return None
        if old_head == self.head:
            return set()
        try:
            proc = subprocess.run(
                ["git", "-C", str(self.root), "-c", "core.quotepath=off", "diff", "--name-only", "-z",
                 "--no-renames", old_head, self.head, "--", *PARTITIONS],
                capture_output=True, stdin=subprocess.DEVNULL,
            )
        except OSError:
            return None
        if proc.returncode != 0:  # old head gone (history rewritten): look everywhere
            return None
        return {p for p in proc.stdout.decode("utf-8", errors="surrogateescape").split("\0") if p}
