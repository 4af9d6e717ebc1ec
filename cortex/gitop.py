"""The git operation a person has in progress in the vault, and when cortex may commit
beside it.

Told from the files git itself leaves in the git directory, as ``git status`` tells it:
``rebase-merge/`` or ``rebase-apply/`` (``applying`` in it: ``git am``),
``CHERRY_PICK_HEAD``, ``REVERT_HEAD``, ``sequencer/`` (a cherry-pick or revert of several
commits, between two of them), ``MERGE_HEAD``, ``BISECT_LOG``. Each is per worktree: in
a linked worktree they are in its own git directory (``.git/worktrees/<name>``, pygit2's
``repo.path``), not the common one.

While an operation that replays commits is in progress (rebase, am, cherry-pick,
revert), git expects HEAD to move only by it. A commit of cortex's on top of a stopped
``git cherry-pick A..B`` made the person's ``git cherry-pick --abort`` refuse ("You seem
to have moved HEAD. Not rewinding"), leaving the conflict, the commits already picked
and ``CHERRY_PICK_HEAD`` for a manual reset. So cortex commits nothing then: every
committing command refuses with exit 75 (try again later) and what it had to commit
waits. A merge stopped on a conflict does not mind: ``git merge --abort`` resets to
HEAD, whatever HEAD is, and the person's ``git commit`` makes the merge on top of
cortex's commit; only ``cortex sync``, which moves the index and the working tree,
waits for it.

Standard library only: ``cortex status`` and the commit guard read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cortex.errors import CortexError, LockBusy


@dataclass(frozen=True)
class Operation:
    name: str  # git's word for it: rebase, am, cherry-pick, revert, merge, bisect
    replays: bool  # git expects HEAD to move only by it: cortex commits nothing meanwhile

    @property
    def what(self) -> str:
        return "a `git am`" if self.name == "am" else f"a {self.name}"

    @property
    def finish(self) -> str:
        """How a person ends it, as git's own hints say."""
        if self.name == "merge":
            return ("finish it (resolve the conflicts, `git add` the files, `git commit`) "
                    "or abort it (`git merge --abort`)")
        if self.name == "bisect":
            return "end it (`git bisect reset`: back to the branch it started from)"
        return (f"finish it (resolve any conflicts, `git add` them, `git {self.name} --continue`) "
                f"or abort it (`git {self.name} --abort`)")

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "finish": self.finish}


def in_progress(git_dir: Path) -> Operation | None:
    """The operation in progress in the worktree whose git directory is ``git_dir``; the
    one that matters most to a commit when there are several (a cherry-pick during a
    bisect)."""
    if (git_dir / "rebase-merge").is_dir():
        return Operation("rebase", True)
    if (git_dir / "rebase-apply").is_dir():
        return Operation("am" if (git_dir / "rebase-apply" / "applying").exists() else "rebase", True)
    if (git_dir / "CHERRY_PICK_HEAD").exists():
        return Operation("cherry-pick", True)
    if (git_dir / "REVERT_HEAD").exists():
        return Operation("revert", True)
    if (git_dir / "sequencer").is_dir():  # between two picks: the person committed a resolution
        return Operation(_sequencer_command(git_dir / "sequencer" / "todo"), True)
    if (git_dir / "MERGE_HEAD").exists():
        return Operation("merge", False)
    if (git_dir / "BISECT_LOG").exists():
        return Operation("bisect", False)
    return None


def _sequencer_command(todo: Path) -> str:
    """cherry-pick or revert: the first command of the sequencer's list, as git reads it."""
    try:
        with open(todo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                word = line.split(maxsplit=1)[0] if line.strip() else ""
                if word and not word.startswith("#"):
                    return "revert" if word in ("revert", "r") else "cherry-pick"
    except OSError:
        pass
    return "cherry-pick"


class OperationInProgress(LockBusy):
    """A person's git operation cortex must not commit beside: nothing was committed,
    and the next run, once it is over, does it (exit 75)."""

    kind = "in_progress"  # `cortex sync --json`'s error

    def __init__(self, operation: Operation, message: str, hint: str) -> None:
        super().__init__(message, hint)
        self.operation = operation


class DetachedHead(CortexError):
    """No branch is checked out: a commit would belong to none, and there is none to sync."""

    kind = "detached_head"  # `cortex sync --json`'s error


def _detached(git_dir: Path) -> bool:
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False  # no HEAD file (another ref store): git, or pygit2, says what is wrong
    return not head.startswith("ref:")


def require_committable(git_dir: Path, *, merge: bool = True, then: str = "run again",
                        detached: bool | None = None) -> None:
    """Refuse to commit on HEAD now: while a person's operation that replays commits is
    in progress (with ``merge=False``, a merge too), and on a detached HEAD, whose
    commit would belong to no branch (lost at the next checkout). ``then``: what the
    person does once it is over; ``detached``: whether HEAD is (pygit2 knows every ref
    store), else read from ``HEAD``."""
    op = in_progress(git_dir)
    if op is not None and (op.replays or not merge and op.name == "merge"):
        why = ("git expects HEAD to move only by it, so cortex commits nothing until it is over" if op.replays
               else "cortex changes nothing beside it until it is over")
        raise OperationInProgress(op, f"{op.what} is in progress in the vault{_conflicts(git_dir, op)}: {why}",
                                  f"{op.finish}, then {then}; nothing was changed, and nothing is lost meanwhile "
                                  "(exit 75: try again later)")
    if not (_detached(git_dir) if detached is None else detached):
        return
    if op is not None:  # a bisect, or a merge on a detached HEAD
        raise OperationInProgress(op, f"{op.what} is in progress in the vault, and HEAD is detached (no branch is "
                                      "checked out): a commit would belong to no branch",
                                  f"{op.finish}, then {then}; nothing was committed (exit 75: try again later)")
    raise DetachedHead("the vault's HEAD is detached (no branch is checked out), so a commit would belong to no branch",
                       f"check out a branch (`git switch main`), then {then}; nothing was committed")


def _conflicts(git_dir: Path, op: Operation) -> str:
    """For a merge, whether conflicts are left to resolve (git's index says)."""
    if op.name != "merge":
        return ""
    from cortex import gitcli

    done = gitcli.run_bytes(None, f"--git-dir={git_dir}", "ls-files", "--unmerged")
    if done is None or not done.ok:
        return ""
    return " with unresolved conflicts" if done.out.strip() else " (its conflicts resolved, not yet committed)"
