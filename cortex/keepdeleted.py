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
A conclusion no hook saw (``git rebase --continue`` runs no pre-commit hook;
``--no-verify``; a git without hooks) is found by ``concluded`` at the next ``cortex
sync``, whose settle deletes the memory again in a commit of its own.
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
    by: str = ""  # the merge or rebase that had brought it back (``concluded``)

    def line(self) -> str:
        return (f"kept deleted: {self.path} was deleted by a person; the other side only reinforced it "
                f"(to keep it after all: `git checkout {self.side[:12]} -- {self.path}` and commit)")


def git_dir(root: Path, git: Callable[..., bytes | None]) -> Path | None:
    """The git directory of the worktree at ``root``, where git leaves the files of an
    operation in progress (``cortex.gitop``): read off ``$GIT_DIR`` or ``.git`` with no
    process; a linked worktree or a submodule (``.git`` a file) asks git."""
    from cortex.gitlock import caller_env

    env = caller_env(root).get("GIT_DIR")  # not another repository's, whose hook ran cortex
    if env:
        return Path(env) if os.path.isabs(env) else root / env
    dot = root / ".git"
    if dot.is_dir():
        return dot
    out = git(root, "rev-parse", "--absolute-git-dir")
    return Path(out.decode().strip()) if out else None


def merging(root: Path, git: Callable[..., bytes | None]) -> bool:
    """Whether this commit concludes a person's merge (``MERGE_HEAD``, as ``cortex.gitop``
    tells it)."""
    from cortex.gitop import in_progress

    where = git_dir(root, git)
    op = in_progress(where) if where is not None else None
    return op is not None and op.name == "merge"


def sides(root: Path, git: Callable[..., bytes | None]) -> list[tuple[str, str]]:
    """(the other side's commit, the base) of the merge, cherry-pick or rebase pick this
    commit concludes; [] when none is in progress (the usual commit: no git call)."""
    where = git_dir(root, git)
    if where is None:
        return []
    found: list[tuple[str, str]] = []
    merge = where / "MERGE_HEAD"
    if merge.is_file():
        for other in merge.read_text(encoding="ascii", errors="replace").split():
            base = git(root, "merge-base", "HEAD", other)
            if base:
                found.append((other, base.decode().strip()))
        return found
    rebasing = (where / "rebase-merge").is_dir() or (where / "rebase-apply").is_dir()
    for name, needed in (("REBASE_HEAD", rebasing), ("CHERRY_PICK_HEAD", True)):
        pick = where / name
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


def _deleted(root: Path, git, base: str, side: str) -> list[str]:
    from cortex.layout import PARTITIONS

    out = git(root, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=D", base, side, "--", *PARTITIONS)
    return [p for p in (out or b"").decode("utf-8", "surrogateescape").split("\0") if p]


def concluded(root: Path, since: str | None, head: str, git: Callable[..., bytes | None],
              limit: int = 20) -> list[Kept]:
    """The memories HEAD holds that a merge or rebase concluded since ``since`` (None:
    the last ``limit`` of each) brought back where one side deleted them and the other
    only counted them, with no person's change since: a conclusion the hook did not see
    (``git rebase --continue`` runs no pre-commit hook; ``--no-verify``; a git without
    the hooks, such as Obsidian Git on a phone). ``cortex sync`` deletes them."""
    # (the conclusion, one side, the other): merge commits, and rebases the branch's reflog names
    found: list[tuple[str, str, str]] = []
    since_args = [f"{since}..{head}"] if since else [f"--max-count={limit}", head]
    for line in (git(root, "rev-list", "--merges", "--parents", *since_args) or b"").decode().splitlines():
        commit, *parents = line.split()
        if len(parents) == 2:
            found.append((commit, *parents))
    branch = (git(root, "symbolic-ref", "-q", "HEAD") or b"").decode().strip()
    if branch:
        log = (git(root, "reflog", "show", "-z", f"--max-count={limit * 5}", "--format=%H %gs", branch, "--") or b"")
        entries = [e.split(" ", 1) for e in log.decode("utf-8", "replace").split("\0") if " " in e]
        for i, (new, subject) in enumerate(entries):
            if new == since:
                break
            if i + 1 < len(entries) and "rebase" in subject and "(finish)" in subject and " onto " in subject:
                onto = subject.rsplit(" onto ", 1)[1].strip()
                found.append((new, entries[i + 1][0], onto))
    if not found:
        return []
    text = _reader(root, git)
    kept: dict[str, Kept] = {}
    for result, one, other in found:
        base = (git(root, "merge-base", one, other) or b"").decode().strip()
        if not base:
            continue
        paths = sorted(set(_deleted(root, git, base, one)) ^ set(_deleted(root, git, base, other)))
        paths = [p for p in paths if p not in kept]
        if not paths:
            continue
        was, ours, theirs, then, now = (_tree(root, git, c, paths) for c in (base, one, other, result, head))
        for path in paths:
            if path not in then:
                continue  # the conclusion kept it deleted; a person may have brought it back since
            side = _one_sided(was.get(path), ours.get(path), theirs.get(path), now.get(path), text)
            if side:
                kept[path] = Kept(path, one if side == "ours" else other, result)
    return list(kept.values())


def remove(root: Path, kept: list[Kept], git: Callable[..., bytes | None]) -> list[Kept]:
    """Take ``kept`` out of the index (the one git commits: ``GIT_INDEX_FILE``) and the
    working tree; the ones removed."""
    if not kept:
        return []
    if git(root, "rm", "-q", "-f", "--", *(k.path for k in kept)) is None:
        return []
    return kept
