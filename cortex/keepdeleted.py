"""A memory a person deleted stays deleted when a person's own merge or rebase concludes.

``cortex sync`` keeps a memory deleted on one side and only counted on the other
(``sync._deleted_on_one_side``). A person's plain ``git pull`` (the Obsidian Git plugin's,
merge or rebase) stops on the same modify/delete conflict, which git settles without any
merge driver; the natural way out, ``git add -A`` and a commit, keeps the file, and the
next sync spreads it to every machine. The commit that concludes it runs the pre-commit
hook: there, a memory that

- one side of the merge (or of the commit being picked) deleted,
- the other side changed only in what cortex maintains (``mergedriver.maintained_only``:
  a repeat counted, a twin folded in),
- and that is staged as it was or only counted (nobody edited its words while resolving),

is removed from the commit and the working tree, and the hook says so. A person's edit on
either side keeps the file, as before. The hook commits nothing of its own: it only
changes what the person's commit holds (the fix half: ``SKIP=cortex-fix`` leaves it out).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable


@dataclass(frozen=True)
class Kept:
    path: str
    side: str  # the commit that kept (and counted) it, to bring it back by hand

    def line(self) -> str:
        return (f"kept deleted: {self.path} was deleted by a person; the other side only reinforced it "
                f"(to keep it after all: `git checkout {self.side[:12]} -- {self.path}` and commit)")


def _git_dir(root: Path) -> Path | None:
    env = os.environ.get("GIT_DIR")
    if env:
        return Path(env) if os.path.isabs(env) else root / env
    dot = root / ".git"
    if dot.is_dir():
        return dot
    return None  # a linked worktree or a submodule: asked of git only when needed


def sides(root: Path, git: Callable[..., bytes | None]) -> list[tuple[str, str]]:
    """(the other side's commit, the base) of the merge, cherry-pick or rebase pick this
    commit concludes; [] when none is in progress (the usual commit: no git call)."""
    git_dir = _git_dir(root)
    if git_dir is None:
        out = git(root, "rev-parse", "--absolute-git-dir")
        if out is None:
            return []
        git_dir = Path(out.decode().strip())
    found: list[tuple[str, str]] = []
    merge = git_dir / "MERGE_HEAD"
    if merge.is_file():
        for other in merge.read_text(encoding="ascii", errors="replace").split():
            base = git(root, "merge-base", "HEAD", other)
            if base:
                found.append((other, base.decode().strip()))
        return found
    rebasing = (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply").is_dir()
    for name, needed in (("REBASE_HEAD", rebasing), ("CHERRY_PICK_HEAD", True)):
        pick = git_dir / name
        if needed and pick.is_file():
            other = pick.read_text(encoding="ascii", errors="replace").strip()
            base = git(root, "rev-parse", "--verify", "-q", f"{other}^")
            if other and base:
                found.append((other, base.decode().strip()))
            break
    return found


def _tree(root: Path, git, commit: str, paths: list[str]) -> dict[str, str]:
    out = git(root, "ls-tree", "-z", commit, "--", *paths) or b""
    entries = {}
    for entry in out.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        if path and meta.split(" ")[1:2] == ["blob"]:
            entries[path] = meta.split(" ")[2]
    return entries


def _staged(root: Path, git, paths: list[str]) -> dict[str, str]:
    """Paths staged as one resolved file (stage 0) → blob."""
    out = git(root, "ls-files", "-s", "-z", "--", *paths) or b""
    staged: dict[str, str] = {}
    for entry in out.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split(" ")
        if path and len(fields) == 3 and fields[2] == "0":
            staged[path] = fields[1]
    return staged


def _one_sided(was: str | None, ours: str | None, theirs: str | None, now: str | None, text) -> str | None:
    """Which side kept a memory the other deleted and only counted it (``"ours"`` or
    ``"theirs"``), when ``now`` (what the conclusion holds) adds no person's change
    either; else None. Blob ids in, ``text(blob)`` reads one."""
    from cortex.mergedriver import maintained_only

    if was is None or now is None or (ours is None) == (theirs is None):
        return None  # not deleted on exactly one side
    counted, side = (theirs, "theirs") if ours is None else (ours, "ours")
    if counted == was:
        return None  # unchanged there: git deleted it, no conflict
    original, counted_text, now_text = text(was), text(counted), text(now)
    if original is None or counted_text is None or now_text is None:
        return None
    return side if maintained_only(original, counted_text) and maintained_only(original, now_text) else None


def _reader(root: Path, git):
    texts: dict[str, str | None] = {}

    def text(blob: str) -> str | None:
        if blob not in texts:
            data = git(root, "cat-file", "blob", blob)
            texts[blob] = None if data is None else data.decode("utf-8", "surrogateescape")
        return texts[blob]
    return text


def to_keep_deleted(root: Path, paths: Iterable[str], git: Callable[..., bytes | None]) -> list[Kept]:
    """The memories among ``paths`` (staged for this commit) that one side deleted and
    the other only counted, staged with no person's change: the commit concludes a merge
    or pick that must keep them deleted."""
    from cortex.layout import in_partition

    paths = [p for p in paths if in_partition(p)]
    if not paths:
        return []
    found = sides(root, git)
    if not found:
        return []
    head = (git(root, "rev-parse", "--verify", "-q", "HEAD") or b"").decode().strip()
    if not head:
        return []
    text = _reader(root, git)
    staged = _staged(root, git, paths)
    kept: dict[str, Kept] = {}
    for other, base in found:
        was, ours, theirs = (_tree(root, git, commit, paths) for commit in (base, head, other))
        for path in paths:
            side = None if path in kept else _one_sided(was.get(path), ours.get(path), theirs.get(path),
                                                        staged.get(path), text)
            if side:
                kept[path] = Kept(path, head if side == "ours" else other)
    return list(kept.values())


def remove(root: Path, kept: list[Kept], git: Callable[..., bytes | None]) -> list[Kept]:
    """Take ``kept`` out of the index (the one git commits: ``GIT_INDEX_FILE``) and the
    working tree; the ones removed."""
    if not kept:
        return []
    if git(root, "rm", "-q", "-f", "--", *(k.path for k in kept)) is None:
        return []
    return kept
