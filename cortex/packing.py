"""Keeping the object store compact.

pygit2 writes every blob, tree and commit of cortex's commits as a loose object (about
4.7 KB a note on disk) and never packs them; plain git packs when a command of its own
finds too many loose objects (`git gc --auto`). After committing, cortex asks git the
same question, cheaply: like git, it counts one of the 256 fan-out folders
(``objects/17``) and multiplies, and only when that estimate reaches the repository's
``gc.auto`` (git's default: 6,700) does it run ``git gc --auto --quiet`` — git's own
decision, locks (``gc.pid``) and settings (``gc.auto=0`` turns it off; ``gc.autoDetach``
runs it in the background). Standard library only.
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
    if not too_many_loose(git_dir / "objects", GC_AUTO_DEFAULT if gc_auto is None else gc_auto):
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
