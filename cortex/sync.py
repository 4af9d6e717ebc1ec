"""``cortex sync``: one vault on several machines, through a git remote.

One pass, under the vault lock (so no ``cortex run`` or job interleaves):

1. finish what a killed run, job or sync left (their own exactly-once records);
2. ``git fetch`` the remote (the person's credentials, ssh config, proxies);
3. stop if the remote branch was rewritten (force-pushed): never reset, say what to do;
4. integrate: a fast-forward, or a **merge** commit. Merge, not rebase: a rebase would
   rewrite the person's commits (and their signatures) and cortex's own, whose ids and
   first-parent order the exactly-once records rely on; it also drops a commit whose
   patch the other side already has, which is how two machines' identical
   reinforcements became one. The merge is computed by ``git merge-tree`` (the notes'
   merge driver settles what it can) without touching the working tree; a memory one
   side deleted stays deleted when the other only counted it; only a clean result is
   applied, by ``git read-tree -m -u`` (which refuses to overwrite a person's
   uncommitted change) and a compare-and-swap of the branch;
5. settle what a merge cannot see: the same memory at two paths (two days) folds into one
   note, a memory brought back to life leaves ``mind/archive/``, one memorized anew
   where the other side deleted it goes (``cortex.settle``: a crash-safe commit);
6. push; a push rejected because another machine pushed first goes back to 2, a bounded
   number of times.

Every step is safe to kill: objects are content-addressed, the branch moves by
compare-and-swap after the working tree, and a rerun recomputes the same merge.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, TYPE_CHECKING

from cortex import gitcli
from cortex.errors import CortexError
from cortex.gitop import DetachedHead, require_committable
from cortex.settle import settle

if TYPE_CHECKING:
    from cortex.vault import Vault

PUSH_ATTEMPTS = 5
JOB = "sync"


class SyncError(CortexError):
    kind = "git"  # a git command failed in another way: the message has git's words


class NoRemote(SyncError):
    kind = "no_remote"  # the vault has no remote by that name (exit 1)


class Unreachable(SyncError):
    kind, exit_code = "unreachable", 75  # try again later: nothing is lost meanwhile


class AuthFailed(SyncError):
    kind = "auth"  # exit 1: a person must act; trying again changes nothing


class RemoteMissing(SyncError):
    """No repository at the remote's address (deleted, moved, never made): a scheduler
    trying again later would try forever, so a person is told (exit 1)."""
    kind = "not_found"


class RemoteRewritten(SyncError):
    kind = "rewritten"


class BranchGone(SyncError):
    """The remote no longer has the branch this vault synced with (deleted, or renamed:
    ``main`` → ``trunk``): a push would make it again, beside the team's."""
    kind = "branch_gone"


class Unrelated(SyncError):
    """The remote branch shares no commit with this vault: one was begun on its own
    (`cortex init`, then `git remote add`) instead of cloned, or the remote's history was
    made anew from a new first commit. Merged only on a person's word (--accept-rewrite)."""
    kind = "unrelated"


class Conflict(SyncError):
    kind = "conflict"

    def __init__(self, message: str, hint: str, paths: list[str]) -> None:
        super().__init__(message, hint)
        self.paths = paths


class LocalChanges(SyncError):
    kind = "local_changes"


class PushRefused(SyncError):
    kind = "push_refused"


class PushRaced(SyncError):
    kind, exit_code = "push_raced", 75


class HeadMoved(SyncError):
    """A commit landed (a person's, another cortex's) between reading HEAD and moving it:
    nothing was changed; the next attempt merges that commit too."""
    kind, exit_code = "head_moved", 75


@dataclass
class SyncReport:
    remote: str = ""
    branch: str = ""  # the branch checked out here
    remote_branch: str = ""  # the remote's branch it syncs with (its upstream's, else the same name)
    before: str | None = None
    after: str | None = None
    integrated: str = "up to date"  # up to date | fast-forward | merge
    settled: list[dict[str, Any]] = field(default_factory=list)
    pushed: bool = False
    push_attempts: int = 0
    recovered: list[str] = field(default_factory=list)
    held_back: list[str] = field(default_factory=list)  # finished first too: stopped on a busy git (exit 75)
    warnings: list[str] = field(default_factory=list)
    # notes the sync brought that fail the hook's checks (committed elsewhere with
    # --no-verify, or by a machine without the hooks): {path: problems}
    invalid: dict[str, list[str]] = field(default_factory=dict)
    # notes the remote's rewritten history no longer has, when this vault took it
    rewritten: list[str] = field(default_factory=list)
    # what the remote's commits brought: notes added, changed, deleted (and by whom), the
    # shared settings files they changed (``brought``)
    brought: dict[str, Any] = field(default_factory=dict)
    ahead: int = 0
    behind: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "remote": self.remote, "branch": self.branch, "remote_branch": self.remote_branch,
            "before": self.before, "after": self.after,
            "integrated": self.integrated, "settled": self.settled, "pushed": self.pushed,
            "push_attempts": self.push_attempts, "recovered": self.recovered, "held_back": self.held_back,
            "warnings": self.warnings,
            "invalid": self.invalid, "rewritten": self.rewritten, "brought": self.brought or brought_nothing(),
            "ahead": self.ahead, "behind": self.behind, "seconds": round(self.seconds, 3),
        }


# --- where to sync with ----------------------------------------------------------------------


def branch_name(root) -> str:
    res = gitcli.run(root, "symbolic-ref", "--quiet", "--short", "HEAD")
    if not res.ok:
        raise DetachedHead(
            "the vault's HEAD is detached (no branch is checked out): there is nothing to sync",
            "check out a branch (`git switch main`), then `cortex sync`",
        )
    return res.out.strip()


def choose_remote(root, requested: str | None, configured: str | None) -> str:
    branch = branch_name(root)
    name = requested or configured or gitcli.config(root, f"branch.{branch}.remote") or "origin"
    if not gitcli.run(root, "remote", "get-url", name).ok:
        known = gitcli.run(root, "remote").out.split()
        raise NoRemote(
            f"the vault has no remote named {name!r}" + (f" (it has: {', '.join(known)})" if known else ""),
            f"add it: `git remote add {name} URL` (a bare repository, GitHub, GitLab, ssh://...), or pass --remote NAME",
        )
    return name


def remote_branch(root, remote: str, branch: str) -> str:
    """The branch on the remote this one syncs with: its upstream's, else the same name."""
    merge = gitcli.config(root, f"branch.{branch}.merge")
    if merge and gitcli.config(root, f"branch.{branch}.remote") == remote:
        return merge.removeprefix("refs/heads/")
    return branch


# --- the steps --------------------------------------------------------------------------------


def clone_vault(url: str, target: Path, branch: str | None = None):
    """`git clone` then `cortex init`: (vault, files init added, the branch checked out).

    A bare repository made by `git init --bare` keeps HEAD on its default branch name
    even when the machines push another one: git then clones nothing into the working
    tree, and an init there would start a second, unrelated history. So with no branch
    checked out, the remote's only branch is; with several, the person names one."""
    from cortex.vault import Vault

    args = ["clone", "--quiet", *(["--branch", branch] if branch else []), url, str(target)]
    res = gitcli.run(Path.cwd(), *args, timeout=gitcli.NETWORK_TIMEOUT)
    if not res.ok:
        raise CortexError(f"git clone {url} failed: {res.err.strip()}", "check the address, the branch and your access")
    current = check_out_remote_branch(
        target, lambda first: f"clone again naming one: `cortex clone --branch {first} {url} {target}` "
                              f"(remove {target} first)")
    vault, created = Vault.init(target)
    return vault, created, current or gitcli.run(target, "symbolic-ref", "--short", "HEAD").out.strip()


def check_out_remote_branch(root: Path, several: Callable[[str], str]) -> str | None:
    """In a clone that checked out nothing — the remote's HEAD names a branch it lacks, as
    a bare repository made by `git init --bare` does when the machines push another name —
    check out the remote's one branch, tracking it; its name (None: something was checked
    out, or the repository is no clone). A vault made there instead would start a second,
    unrelated history, which its first sync pushes to a branch of its own beside the
    team's: two vaults that never meet. Several branches: the person names one
    (``several(first branch)``: how, in the hint)."""
    if gitcli.rev(root, "HEAD") is not None:
        return None
    listed = gitcli.run(root, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/remotes/").out.split()
    branches = [ref for ref in listed if not ref.endswith("/HEAD")]
    if not branches:
        return None  # a new repository: the vault starts its history
    if len(branches) > 1:
        raise CortexError(f"{root} has nothing checked out (its remote's default branch does not exist), and the "
                          f"remote has several branches: {', '.join(branches)}", several(branches[0].split("/", 1)[1]))
    remote, _, current = branches[0].partition("/")
    done = gitcli.run(root, "checkout", "--quiet", "-B", current, "--track", f"{remote}/{current}")
    if not done.ok:
        raise CortexError(f"could not check out {current} in {root}: {done.err.strip()}")
    return current


def recover_all(vault: Vault, now: datetime, git_dir: Path) -> tuple[list[str], list[str]]:
    """Finish a killed sync's move of the working tree, then a killed ``cortex run``,
    maintenance job or settle step: their records name commits by the first-parent
    history a merge extends. The repository is opened (pygit2 imported) only for what
    a killed one left, nearly never: pygit2's import was two fifths of a sync with
    nothing to do. (What was interrupted, what had stopped on a busy git: exit 75.)"""
    from cortex.model import RunReport
    from cortex.recovery import recover

    done = []
    if (git_dir / gitcli.MOVE_JOURNAL).exists():
        from cortex.gitrepo import GitRepo

        if GitRepo(vault.root, lock_wait=vault.settings.lock_timeout).finish_move():  # a sync killed while git wrote the working files
            done.append("sync")
    state = vault.load_state()
    report = RunReport()
    recover(vault, state, report, now)
    if report.recovered:
        done.append("run")
    held_back = ["run"] if report.held_back else []
    for job, record in list(state.jobs.items()):  # every job's journal: maintenance, settle, forget
        if isinstance(record, dict) and record.get("pending"):
            from cortex.maintenance.base import JobContext
            from cortex.maintenance.reinforce import _finish

            JobContext(vault, now).recover(job, _finish if job == "reinforce" else None)
            done.append(job)
    return done, held_back


def fetch(root, remote: str, branch: str) -> str | None:
    """Fetch the remote branch; its tip, or None when the remote has no such branch yet."""
    res = gitcli.run(root, "fetch", "--quiet", "--no-tags", remote,
                     f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}", timeout=gitcli.NETWORK_TIMEOUT)
    if not res.ok:
        if "couldn't find remote ref" in res.err.lower():
            return None
        _network_failure(res, remote, "fetch from")
    return gitcli.rev(root, f"refs/remotes/{remote}/{branch}")


def _network_failure(res: gitcli.Result, remote: str, doing: str) -> None:
    detail = gitcli.failure_reason(res.err) or f"exit {res.code}"
    kind = gitcli.failure_kind(res.err)
    if kind == "auth":
        raise AuthFailed(
            f"could not {doing} {remote}: authentication failed ({detail})",
            "check your credentials for this remote (ssh key, token, credential helper: `git fetch "
            f"{remote}` shows the same error); your commits are safe here and go out at the next `cortex sync`",
        )
    if kind == "missing":
        raise RemoteMissing(
            f"could not {doing} {remote}: there is no repository at its address ({detail})",
            f"trying again will not help: check the address (`git remote -v`) and set the right one with "
            f"`git remote set-url {remote} URL`; if the shared repository was deleted, make a new empty one there "
            f"(`git init --bare`, or on the host) and `cortex sync` pushes this vault to it. Your notes are "
            f"committed here and go out at the next `cortex sync`",
        )
    if kind in ("network", "busy"):
        raise Unreachable(
            f"could not {doing} {remote}: " + ("the remote is unreachable" if kind == "network" else "git is busy")
            + f" ({detail})",
            "nothing is lost: your notes are committed here and go out at the next `cortex sync` once the "
            + ("network is back" if kind == "network" else "other git is done") + " (exit 75: try again later)",
        )
    raise SyncError(f"could not {doing} {remote}: {detail}", f"`git fetch {remote}` shows the whole error")


def check_not_rewritten(root, last: str | None, tip: str | None, head: str | None, remote_ref: str) -> list[str]:
    """The tip we last integrated must still be in the remote's history, unless this
    vault took the rewritten history; and HEAD must hold no commit the remote once had
    (this machine's git saw it there: a plain `git pull` or `git fetch` too) and has no
    more. The notes a rewrite removed, when this vault took it (to report)."""
    held = _removed_held(root, tip, head, remote_ref)
    if not held:
        if last is None or last == tip:
            return []
        if tip is not None and gitcli.is_ancestor(root, last, tip):
            return []  # moved forward
        if tip is not None and head is not None and _took_rewrite(root, last, tip, head):
            return _notes_added(root, gitcli.run(root, "rev-list", last, f"^{tip}").out.split())  # the sync records the new tip
    # A remote moved back (commits removed, perhaps a secret purged) is a rewrite too:
    # pushing would quietly put the removed commits back.
    now = tip[:10] if tip else "gone"
    if held:
        what = (f"{len(held)} commit(s) this vault holds (seen there before) are no longer in its history (now {now})"
                + _named(_notes_added(root, held)))
    else:
        what = f"commit {last[:10]}, which this vault last synced with, is no longer in its history (now {now})"
    raise RemoteRewritten(
        f"{remote_ref} was rewritten (force-pushed or deleted): {what}. cortex never resets your vault, and pushes "
        "nothing back",
        f"look at both (`git log --oneline --graph HEAD {remote_ref}`). To keep everything, merging the rewritten "
        f"history with yours (commits the rewrite removed come back): `cortex sync --accept-rewrite`. To take the "
        f"remote's history instead: `git reset --keep {remote_ref}` (commits only you had are then only in the reflog), "
        f"then `cortex sync`",
    )


def check_branch_not_gone(root, remote: str, branch: str, last: str | None) -> bool:
    """A branch this vault synced with (or its git fetched) that the remote no longer has
    was deleted or renamed. Pushing would make it again, beside the team's branch: this
    machine's notes would go where no other machine looks, and theirs never come here.
    A branch never seen there (a first sync) is pushed, which makes it; so is every branch
    of a remote with none at all (a shared repository made again, empty, at its address:
    True, and the history this vault holds goes back to it)."""
    if last is None and gitcli.rev(root, f"refs/remotes/{remote}/{branch}") is None:
        return False
    heads, default = _remote_heads(root, remote)
    if not heads:
        return True
    if default and default != branch:
        hint = (f"if the team renamed it to {default}, follow it: `git fetch {remote} {default} && git branch "
                f"--set-upstream-to {remote}/{default}`, then `cortex sync` (merges {default}, and pushes there)")
    else:
        hint = f"see what the remote has: `git ls-remote --heads {remote}`"
    raise BranchGone(
        f"{remote} has no branch {branch} any more (deleted or renamed)"
        + (f"; its default branch is now {default}" if default and default != branch else "")
        + f". cortex pushes nothing: it would make {branch} again, where no other machine looks",
        f"{hint}; to make {branch} again on purpose: `git push {remote} HEAD:refs/heads/{branch}`, then `cortex sync`. "
        "Your notes are committed here meanwhile",
    )


def _remote_heads(root, remote: str) -> tuple[list[str], str | None]:
    """(the remote's branches, the one its HEAD names or None), by ``git ls-remote``;
    ``(["?"], None)`` when git cannot say, so that nothing is pushed on a guess."""
    res = gitcli.run(root, "ls-remote", "--symref", remote, timeout=gitcli.NETWORK_TIMEOUT)
    if res is None or not res.ok:
        return ["?"], None
    heads, default = [], None
    for line in res.out.splitlines():
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            default = line.removeprefix("ref: refs/heads/").removesuffix("\tHEAD")
        elif "\trefs/heads/" in line:
            heads.append(line.split("\trefs/heads/", 1)[1])
    return heads, default if default in heads else None


def _removed_held(root, tip: str | None, head: str | None, remote_ref: str) -> list[str]:
    """The commits HEAD holds that the remote branch once held (every value this
    machine's git recorded for ``remote_ref``: its reflog) and holds no more."""
    if tip is None or head is None:
        return []
    here = gitcli.run(root, "rev-list", head, f"^{tip}").out.split()
    if not here:
        return []
    seen = gitcli.run(root, "log", "-g", "--format=%H", f"refs/remotes/{remote_ref}", "--").out.split()
    past = [c for c in dict.fromkeys(seen) if c != tip]
    if not past:
        return []
    gone = set(gitcli.run(root, "rev-list", *past, f"^{tip}").out.split())
    return [c for c in here if c in gone]


def _notes_added(root, commits: list[str]) -> list[str]:
    """The notes ``commits`` added (at most 200 commits read)."""
    from cortex.layout import is_note_path

    if not commits:
        return []
    # names as git wrote them (one that is not UTF-8 is no note: `is_note_path`)
    out = gitcli.stdout_bytes(root, "log", "-z", "--no-walk", "--no-renames", "--diff-filter=A", "--name-only",
                              "--format=", *commits[:200], "--") or b""
    return sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p and is_note_path(p)})


def _named(paths: list[str]) -> str:
    return (f"; they added {len(paths)} note(s): {', '.join(paths[:5])}{', …' if len(paths) > 5 else ''}"
            if paths else "")


def _took_rewrite(root, last: str, tip: str, head: str) -> bool:
    """Whether HEAD is the rewritten tip or built on it, holding none of the commits the
    rewrite removed: the machine that force-pushed, or one that followed the hint's
    `git reset --keep`. Every common ancestor of HEAD and the old tip must then be in the
    new history; a HEAD that still holds a removed commit would push it back."""
    if not gitcli.is_ancestor(root, tip, head):
        return False
    bases = gitcli.run(root, "merge-base", "--all", last, head)
    if bases.code not in (0, 1):  # 1: no common ancestor at all
        return False
    return all(gitcli.is_ancestor(root, base, tip) for base in bases.out.split())


def integrate(vault: Vault, head: str, tip: str, remote_ref: str,
              unrelated: bool = False) -> tuple[str, str, list[dict[str, Any]]]:
    """(how, new head, what the merge settled: notes kept deleted, a memory renamed two
    ways): move HEAD, the index and the working tree to include ``tip``. ``unrelated``:
    merge a remote history that shares no commit with HEAD (a person said so)."""
    root = vault.root
    if gitcli.is_ancestor(root, tip, head):
        return "up to date", head, []
    settled: list[dict[str, Any]] = []
    if gitcli.is_ancestor(root, head, tip):
        how, new = "fast-forward", tip
    else:
        how, (new, settled) = "merge", _merge_commit(vault, head, tip, remote_ref, unrelated)
    _move(vault, head, new, f"cortex sync: {how} {remote_ref}")
    return how, new, settled


def _merge_commit(vault: Vault, head: str, tip: str, remote_ref: str,
                  unrelated: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """The merge commit of ``head`` and ``tip``, and what it settled: the notes it keeps
    deleted that one side deleted and the other only counted, a memory a person renamed
    on one side and someone forgot on the other."""
    from cortex.mergedriver import ensure_driver, ensure_no_directory_renames

    root = vault.root
    ensure_driver(root)  # a clone that skipped `cortex init` still merges notes cortex's way
    ensure_no_directory_renames(root)  # and so does a person's `git pull` there after
    res = _merge_tree(root, head, tip, unrelated)
    if res.code not in (0, 1) and "unrelated histories" in res.err:
        raise Unrelated(
            f"{remote_ref} shares no history with this vault: one of the two was begun on its own (`cortex init`, then "
            "`git remote add`) instead of cloned from the other, or the remote's history was made anew from a new "
            "first commit. cortex merges two unrelated vaults only when told to",
            f"nothing was changed here. Look at both (`git log --oneline HEAD {remote_ref}`). To join the shared vault "
            "instead, clone it into another folder (`cortex clone URL DIR`) and leave this one; to merge the two "
            "histories into one on purpose (every note of both kept): `cortex sync --accept-rewrite`")
    if res.code not in (0, 1):
        raise SyncError(f"git merge-tree failed: {res.err.strip()}")
    fields = res.out.split("\0")
    tree = fields[0].strip()
    kept_deleted: list[str] = []
    archived: dict[str, tuple[str, str, str, bytes]] = {}  # renamed two ways, settled: new path → (old, ours, theirs, text)
    if res.code == 1:
        stages: dict[str, dict[int, str]] = {}
        end = fields.index("", 1) if "" in fields[1:] else len(fields)  # the conflicted files, then git's messages
        for entry in fields[1:end]:
            meta, _, name = entry.partition("\t")
            _, blob, stage = meta.split()
            stages.setdefault(name, {})[int(stage)] = blob
        renamed = _renamed_two_ways(root, head, tip, tree, stages, fields[end + 1:])
        archived = {path: entry for path, entry in renamed.items() if entry[3] is not None}
        settled = {p for old, ours, theirs, _ in archived.values() for p in (old, ours, theirs)}
        stages = {p: s for p, s in stages.items() if p not in settled}
        kept_deleted = _deleted_on_one_side(root, stages)
        if len(kept_deleted) < len(stages):
            raise _conflict([p for p in stages if p not in kept_deleted], stages, remote_ref, kept_deleted,
                            [(old, ours, theirs) for old, ours, theirs, text in renamed.values() if text is None])
    tree = _without(root, tree, kept_deleted + [p for _, ours, theirs, _ in archived.values() for p in (ours, theirs)],
                    {path: entry[3] for path, entry in archived.items()})
    import pygit2

    from cortex.gitrepo import repository

    repo = repository(root)
    sig = pygit2.Signature(vault.settings.author_name, vault.settings.author_email)
    from cortex.maintenance.base import archive_path

    message = f"sync: merge {remote_ref}\n"
    if kept_deleted:
        message += "\nDeleted on one side, only counted on the other: kept deleted\n" + "".join(f"  {p}\n" for p in kept_deleted)
    if archived:
        message += ("\nRenamed by a person on one side, archived on the other: archived under the new name\n"
                    + "".join(f"  {ours} / {theirs} → {path}\n" for path, (_, ours, theirs, _) in archived.items()))
    oid = repo.create_commit(None, sig, sig, message, pygit2.Oid(hex=tree), [pygit2.Oid(hex=head), pygit2.Oid(hex=tip)])
    settled = [{"kept_deleted": path} for path in kept_deleted]
    for path, (old, ours, theirs, _) in archived.items():
        to, at = (theirs, ours) if ours == archive_path(old) else (ours, theirs)
        settled.append({"archived_as": path, "from": old, "renamed_to": to, "archived_at": at,
                        "archive_reason": _archive_reason(archived[path][3])})
    return str(oid), settled


def _archive_reason(text: bytes) -> str:
    found = re.search(rb"^archive_reason:\s*[\"']?(\w+)", text, re.M)
    return found.group(1).decode() if found else ""


def _merge_tree(root: Path, head: str, tip: str, unrelated: bool = False) -> gitcli.Result:
    """``git merge-tree`` of ``head`` and ``tip``, with no directory renames, run where the
    temporary files git makes for a merge driver stay out of the working tree.

    git writes the three versions a driver reads (%O %A %B) as ``.merge_file_XXXXXX`` in
    its current directory, the working tree's top when git runs there: a person's ``git
    add -A`` meanwhile (Obsidian Git's, every minute) would commit them, and the sync push
    them. merge-tree needs no working tree, so it runs in a folder of cortex's under
    ``.git`` that reads as the working tree where git looks for attributes."""
    from cortex.mergedriver import NO_DIRECTORY_RENAMES

    git_dir = gitcli.git_dir(root)
    view = _attributes_view(root, git_dir / "cortex-merge")  # one sync at a time: the vault lock
    try:
        # -z: names as they are ("Café.md", not git's quoted "Caf\303\251.md"), NUL-separated:
        # the tree, each conflicted file's stages ("mode blob stage\tpath"), an empty field,
        # then git's messages
        return gitcli.run(view, *NO_DIRECTORY_RENAMES, "merge-tree", "--write-tree", "-z",
                          *(["--allow-unrelated-histories"] if unrelated else []), head, tip,
                          env={"GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(view)})
    finally:
        shutil.rmtree(view, ignore_errors=True)


def _attributes_view(root: Path, view: Path) -> Path:
    """``view`` made afresh to show git the working tree's ``.gitattributes`` files, which
    say which driver merges a file: a copy of the top one (git does not follow a link
    there) and links to the top folders (git reads their own files through them)."""
    shutil.rmtree(view, ignore_errors=True)  # what a killed sync left
    view.mkdir()
    for entry in os.scandir(root):
        if entry.name == ".gitattributes" and entry.is_file(follow_symlinks=False):
            shutil.copyfile(entry.path, view / entry.name)
        elif entry.name != ".git" and entry.is_dir(follow_symlinks=False):
            os.symlink(entry.path, view / entry.name)
    return view


def _renamed_two_ways(root: Path, head: str, tip: str, tree: str, stages: dict[str, dict[int, str]],
                      messages: list[str]) -> dict[str, tuple[str, str, str, bytes | None]]:
    """The notes renamed on both sides (git: rename/rename), by where they end up:
    {new path: (old path, ours, theirs, text)}; text None where a person must choose
    (``mergedriver.archived_under_new_name`` says which cortex settles)."""
    from cortex.mergedriver import archived_under_new_name, renamed_two_ways

    out: dict[str, tuple[str, str, str, bytes | None]] = {}
    for old, ours, theirs in renamed_two_ways(messages):
        base = stages.get(old, {}).get(1)
        sides = [gitcli.run_bytes(root, "cat-file", "blob", spec) for spec in (base, f"{head}:{ours}", f"{tip}:{theirs}")
                 if spec]
        done = None
        if len(sides) == 3 and all(s is not None and s.ok for s in sides):
            texts = tuple(s.out.decode("utf-8", "surrogateescape") for s in sides)
            done = archived_under_new_name(old, ours, theirs, texts)
        if done is not None and not gitcli.run(root, "cat-file", "-e", f"{tree}:{done[0]}").ok:
            out[done[0]] = (old, ours, theirs, done[1].encode("utf-8", "surrogateescape"))
        else:
            out[f"{ours}\0{theirs}"] = (old, ours, theirs, None)
    return out


def _deleted_on_one_side(root: Path, stages: dict[str, dict[int, str]]) -> list[str]:
    """The conflicted notes one side deleted (or archived away) while the other only
    counted them — reinforced, folded a twin in, archived them (``mergedriver.MAINTAINED``):
    a person's "not this" is not undone by an agent repeating it elsewhere, as a forgotten
    memory stays archived. A note whose words were changed on the other side is a
    person's to settle."""
    from cortex.layout import is_note_path
    from cortex.mergedriver import maintained_only

    one_sided = {path: (s[1], s.get(2) or s.get(3)) for path, s in stages.items()
                 if is_note_path(path) and len(s) == 2 and 1 in s}
    if not one_sided:
        return []
    from cortex.headcache import read_blobs

    texts = read_blobs(root, sorted({b for pair in one_sided.values() for b in pair}))
    text = {b: data.decode("utf-8", "replace") for b, data in texts.items()}
    return [path for path, (base, kept) in one_sided.items() if maintained_only(text[base], text[kept])]


def _without(root: Path, tree: str, paths: list[str], added: dict[str, bytes] | None = None) -> str:
    """``tree`` without ``paths`` and with the files ``added``, written as a new tree (a
    throwaway index: the person's is never touched)."""
    if not paths and not added:
        return tree
    import pygit2

    from cortex.gitrepo import repository

    repo = repository(root)
    index = pygit2.Index()
    index.read_tree(repo.get(tree))
    for path in paths:
        if path in index:
            index.remove(path)
    for path, data in (added or {}).items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB))
    return str(index.write_tree(repo))


def _conflict(paths: list[str], stages: dict[str, dict[int, str]], remote_ref: str, settled: list[str],
              renamed: list[tuple[str, str, str]] = ()) -> Conflict:
    """``settled``: the files cortex would keep deleted, where `git merge` stops too.
    ``renamed``: (old path, ours, theirs) of each note renamed two ways."""
    moved = {p for triple in renamed for p in triple}
    one_sided = [p for p in paths if len(stages[p]) == 2 and 1 in stages[p]]  # deleted on one side
    deleted = "`git rm` a file deleted on one side and changed on the other to keep it deleted, or `git add` it to keep it"
    edited = [p for p in paths if p not in one_sided and p not in moved]
    if len(one_sided) == len(paths):
        hint = f"nothing was changed here. Run `git merge {remote_ref}`, {deleted}"
    elif not renamed:
        hint = (f"nothing was changed here. Run `git merge {remote_ref}`, edit the files above (keep what is right, "
                f"drop the <<<<<<< ======= >>>>>>> lines) and `git add` them"
                + (f"; deleted on one side ({', '.join(one_sided)}): {deleted}" if one_sided else ""))
    else:
        parts = [_renamed_hint(old, ours, theirs, remote_ref) for old, ours, theirs in renamed]
        if edited:
            parts.append(f"edit {', '.join(edited)} (keep what is right, drop the <<<<<<< ======= >>>>>>> lines) "
                         "and `git add` them")
        if one_sided:
            parts.append(f"deleted on one side ({', '.join(one_sided)}): {deleted}")
        hint = f"nothing was changed here. Run `git merge {remote_ref}`, then: " + "; ".join(parts)
    if settled:
        hint += (f"; git stops at {len(settled)} more, memories deleted on one side and only counted on the other: "
                 f"`git rm` them, as cortex would ({', '.join(settled[:3])}{', …' if len(settled) > 3 else ''})")
    hint += "; then `git commit` and `cortex sync`"
    return Conflict(f"both sides changed {len(paths)} file(s) in ways only a person can settle: {', '.join(paths)}",
                    hint, paths)


def _renamed_hint(old: str, ours: str, theirs: str, remote_ref: str) -> str:
    """What to do with one note renamed two ways: git leaves it at both new paths (no
    conflict markers), two files with one id, which the hook refuses to commit."""
    from cortex.taxonomy import ARCHIVE

    archive = f"mind/{ARCHIVE}/"
    what = {ours: "here", theirs: f"on {remote_ref}"}
    for path in (ours, theirs):
        if path.startswith(archive) and not old.startswith(archive):
            what[path] += " (archived there: forgotten, replaced, faded or merged)"
    return (f"{old} was renamed two ways, to {ours} {what[ours]} and to {theirs} {what[theirs]}: git leaves the note "
            f"at both paths, with no conflict markers, and two files with one id cannot be committed. Keep one: "
            f"`git rm {_quoted(theirs)}` keeps {ours}, `git rm {_quoted(ours)}` keeps {theirs}; then "
            f"`git rm {_quoted(old)}` (gone on both sides) and `git add` the one you kept")


def _quoted(path: str) -> str:
    import shlex

    return shlex.quote(path)


def _move(vault: Vault, old: str, new: str, reason: str) -> None:
    """Working tree, index and HEAD from ``old`` to ``new``, as one step under git's
    index lock (``GitRepo.move_tree``): only the paths that differ, and git refuses when
    one of them holds a person's uncommitted change."""
    from cortex.gitrepo import GitRepo

    gitcli.run(vault.root, "update-index", "-q", "--refresh")  # fresh stat data (git's own lock)
    refused = GitRepo(vault.root, lock_wait=vault.settings.lock_timeout).move_tree(old, new, reason)
    if refused is None:
        return
    what, err = refused
    if what == "moved":
        raise HeadMoved(
            "HEAD kept moving while cortex synced (commits were made meanwhile); nothing was changed",
            "run `cortex sync` again: it merges those commits too",
        )
    if what == "failed":  # a git error of another kind ("git"), its words in the message
        raise SyncError(
            f"git could not write the remote's notes into the working tree ({err.splitlines()[-1]}); "
            "nothing was changed: the files it had written were taken back",
            "free some space (or fix the folder's permissions), then `cortex sync` again",
        )
    files = [line.split("'")[1] for line in err.splitlines() if line.count("'") >= 2]
    raise LocalChanges(
        "your uncommitted changes are in files the remote changed too"
        + (f": {', '.join(files)}" if files else f" ({err.splitlines()[0] if err else 'git refused'})"),
        "commit them (`git commit`) or put them aside (`git stash`), then `cortex sync`; nothing was changed",
    )


def push(root, remote: str, branch: str, set_upstream: bool = False) -> str:
    """``ok``, or ``raced`` when the remote moved since the fetch (another machine pushed).
    ``set_upstream``: the local branch has none yet (a first push); one it has stays, so a
    one-off ``--remote backup`` leaves the usual remote the default."""
    res = gitcli.run(root, "push", "--porcelain", *(["--set-upstream"] if set_upstream else []), remote,
                     f"HEAD:refs/heads/{branch}", timeout=gitcli.NETWORK_TIMEOUT)
    text = res.out + res.err
    if res.ok:
        return "ok"
    if "[rejected]" in text and ("fetch first" in text or "non-fast-forward" in text or "stale info" in text):
        return "raced"
    if "[remote rejected]" in text and ("failed to update ref" in text or "failed to lock" in text
                                        or "cannot lock ref" in text):
        return "raced"  # another machine's push held or moved the branch at that instant
    if "[remote rejected]" in text:
        raise PushRefused(
            f"{remote} refused the push{_refusal(res.out, res.err)}",
            "the remote's rules (branch protection, a size limit, a hook) said no; your commits are safe here. "
            "Fix the rule or push to a branch you may write, then `cortex sync`",
        )
    _network_failure(res, remote, "push to")
    return "failed"  # not reached


def _refusal(out: str, err: str) -> str:
    """" to main (pre-receive hook declined): <what the remote said>" from git's porcelain
    status line (``!<TAB>HEAD:refs/heads/main<TAB>[remote rejected] (why)``) and the
    remote's own ``remote:`` lines, which hold the reason a person can act on."""
    status = next((line for line in out.splitlines() if "[remote rejected]" in line), "")
    parts = status.split("\t")
    where = parts[1].rpartition(":")[2].removeprefix("refs/heads/") if len(parts) > 2 else ""
    why = parts[2].replace("[remote rejected]", "").strip().removeprefix("(").removesuffix(")") if len(parts) > 2 else ""
    said = " ".join(gitcli.remote_said(err))
    return (f" to {where}" if where else "") + (f" ({why})" if why else "") + (f": {said}" if said else "")


# --- the pass ---------------------------------------------------------------------------------


def sync(vault: Vault, *, remote: str | None = None, push_changes: bool | None = None, accept_rewrite: bool = False,
         attempts: int | None = None, now: datetime | None = None) -> SyncReport:
    from cortex.timefmt import format_time, utcnow

    started = time.monotonic()
    settings = vault.settings
    root = vault.root
    push_changes = settings.sync_push if push_changes is None else push_changes
    attempts = max(1, attempts or settings.sync_attempts)
    report = SyncReport()
    with vault.lock():
        now = now or utcnow()
        # Before the recovery, which commits too: a person's merge, rebase, cherry-pick ...
        # ends first (a merge stopped on a conflict made git refuse the working tree's move:
        # "you need to resolve your current index first", told as uncommitted changes)
        git_dir = gitcli.git_dir(root)
        require_committable(git_dir, merge=False, then="`cortex sync`")
        report.recovered, report.held_back = recover_all(vault, now, git_dir)
        report.branch = branch_name(root)
        report.remote = choose_remote(root, remote, settings.sync_remote)
        target = report.remote_branch = remote_branch(root, report.remote, report.branch)
        remote_ref = f"{report.remote}/{target}"
        no_upstream = gitcli.config(root, f"branch.{report.branch}.remote") is None
        report.before = gitcli.rev(root, "HEAD")
        integrated = None  # the last remote tip merged in
        for attempt in range(1, attempts + 1):
            head = gitcli.rev(root, "HEAD")
            tip = fetch(root, report.remote, target)
            record = _record(vault)
            emptied = tip is None and check_branch_not_gone(root, report.remote, target, record.get(remote_ref))
            if emptied and attempt == 1:
                report.warnings.append(f"{report.remote} has no branch at all (a new, empty repository at its address): "
                                       "this vault's history is pushed to it")
            if not accept_rewrite and not emptied:
                removed = check_not_rewritten(root, record.get(remote_ref), tip, head, remote_ref)
                if removed and attempt == 1:
                    report.rewritten = removed
                    report.warnings.append(
                        f"{remote_ref} was rewritten and this vault has taken it: {len(removed)} note(s) are no longer "
                        f"in its history ({', '.join(removed[:5])}{', …' if len(removed) > 5 else ''}). A rewrite is "
                        "not a deletion: an agent that says one again memorizes it anew")
            if tip is not None:
                try:
                    how, head, merged = integrate(vault, head, tip, remote_ref, unrelated=accept_rewrite)
                except HeadMoved:
                    if attempt == attempts:
                        raise
                    continue  # a commit landed meanwhile (a person's): merge again, with it
                if how != "up to date":
                    report.integrated = how if report.integrated == "up to date" else report.integrated
                    integrated = tip
                report.settled += merged
            report.settled += settle(vault, now)
            head = gitcli.rev(root, "HEAD")
            _remember(vault, remote_ref, tip, now)
            if not push_changes or head == tip:
                break
            report.push_attempts = attempt
            if push(root, report.remote, target, set_upstream=no_upstream) == "ok":
                report.pushed = True
                _remember(vault, remote_ref, head, now)
                break
            if attempt == attempts:
                raise PushRaced(
                    f"{remote_ref} kept moving: {attempts} pushes were each overtaken by another machine's",
                    "nothing is lost: your commits are merged and committed here; run `cortex sync` again",
                )
            time.sleep(min(2.0, 0.1 * 2 ** attempt) * random.uniform(0.5, 1.5))
        report.after = gitcli.rev(root, "HEAD")
        if report.after != report.before:
            report.warnings += _follow_head(vault, now)
            report.invalid = _incoming_problems(root, report.before, report.after)
            report.warnings += _config_pulled(root, report.before, report.after)
            report.brought = brought(root, report.before, integrated)
        counts = gitcli.ahead_behind(root, "HEAD", f"refs/remotes/{remote_ref}")
        if counts:
            report.ahead, report.behind = counts
        state = vault.load_state()
        state.extra.setdefault(JOB, {})["last_sync"] = format_time(now)
        vault.save_state(state)
    report.seconds = time.monotonic() - started
    return report


def _record(vault: Vault) -> dict[str, str]:
    return dict((vault.load_state().extra.get(JOB) or {}).get("tips") or {})


def _remember(vault: Vault, remote_ref: str, tip: str | None, now: datetime) -> None:
    if tip is None:
        return
    state = vault.load_state()
    state.extra.setdefault(JOB, {}).setdefault("tips", {})[remote_ref] = tip
    vault.save_state(state)


def _config_pulled(root: Path, before: str | None, after: str | None) -> list[str]:
    """One line when the sync changed the pre-commit config, whose hooks run as commands at
    every commit (``cortex.hookinstall``: a commit refuses a config not accepted here)."""
    from cortex.hookinstall import CONFIG, config_accepted, config_checked

    if before is None or after is None or gitcli.run(root, "diff", "--quiet", before, after, "--", CONFIG).code != 1:
        return []
    if config_accepted(root):
        return []
    review = f"review it (`git log -p -- {CONFIG}`)"
    if config_checked(root):
        return [f"the pull changed {CONFIG}, whose hooks run as commands at every commit: commits here are refused "
                f"until you {review} and accept it (`cortex hook install`)"]
    return [f"the pull changed {CONFIG}, whose hooks run as commands at every commit, and this vault's hook does not "
            f"check it (set up by an older cortex, or by `pre-commit install`): {review} before your next commit, "
            "then `cortex hook install` (from then on a changed config is refused until accepted)"]


# Notes a sync checks at most (a machine long offline may pull thousands; `cortex validate
# --all` checks every one, as the nightly CI does).
CHECK_INCOMING = 1000


def _incoming_problems(root: Path, before: str | None, after: str | None) -> dict[str, list[str]]:
    """The notes added or changed between ``before`` and ``after`` that fail the hook's
    checks, with what each fails. Every commit made here passed the hooks; one made on
    another machine with ``--no-verify`` reaches this vault only through a sync."""
    from cortex.hooks import validate
    from cortex.layout import is_markdown

    if before is None or after is None:
        return {}
    out = gitcli.stdout_bytes(root, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=AM", before, after)
    if out is None:
        return {}
    names = out.decode("utf-8", "surrogateescape").split("\0")  # as git wrote them: a name not UTF-8 is named too
    paths = [p for p in names if p and is_markdown(p)][:CHECK_INCOMING]  # a misnamed one is named too
    if not paths:
        return {}
    out: dict[str, list[str]] = {}
    for problem in validate([str(root / p) for p in paths], root=root).errors:
        out.setdefault(problem.path, []).append(f"{problem.line}: {problem.what}")
    return out


# The tracked settings every machine reads: a pull that changes one changes what this
# machine does (its decay threshold, its types, its schemas, how notes merge).
SHARED_SETTINGS = ("observer/config.yml", "observer/taxonomy.yml", "observer/calibration.yml", ".gitattributes")
SHARED_FOLDERS = ("schemas/",)
NAME_DELETED = 100  # deleted notes named in the report; the others are counted


def brought_nothing() -> dict[str, Any]:
    return {"added": 0, "changed": 0, "archived": 0, "deleted": 0, "deleted_notes": [], "deleted_more": 0,
            "settings": []}


def brought(root: Path, before: str | None, tip: str | None) -> dict[str, Any]:
    """What the remote's commits up to ``tip`` brought that ``before`` (HEAD before the
    sync) lacked: the notes they added, changed and deleted — the deleted named, each with
    the author of the commit that deleted it — and the shared settings files they changed,
    with their authors. A teammate's mass deletion or a setting that changes this
    machine's maintenance otherwise arrives in a fast-forward with no word said."""
    from cortex.layout import is_note_path

    out = brought_nothing()
    if before is None or tip is None:
        return out
    base = gitcli.run(root, "merge-base", before, tip).out.strip()
    # No common commit (a history merged by --accept-rewrite that shares none with this
    # vault's): what it holds that this vault lacked or had otherwise, and no deletion,
    # which only a common base could tell (not every file it holds, as if all were new).
    diff = gitcli.raw_diff(gitcli.stdout_bytes(root, *gitcli.tree_diff_args(base or before, tip)) or b"")
    change = {path: "added" if set(old[1]) == {"0"} else "deleted" if set(new[1]) == {"0"} else "changed"
              for path, (old, new) in diff.items() if base or set(new[1]) != {"0"}}
    _moves_of_the_archive(change)
    _moves_by_id(root, diff, change)
    for path, what in change.items():
        if is_note_path(path):
            out[what] += 1
    deleted = sorted(p for p, what in change.items() if what == "deleted" and is_note_path(p))
    if deleted:
        by = _authors(root, f"{before}..{tip}", "D")
        out["deleted_notes"] = [{"path": p, "by": by.get(p, [""])[0]} for p in deleted[:NAME_DELETED]]
        out["deleted_more"] = max(0, len(deleted) - NAME_DELETED)
    settings = sorted(p for p in change if p in SHARED_SETTINGS or p.startswith(SHARED_FOLDERS))
    if settings:
        by = _authors(root, f"{before}..{tip}", "ACDMT", *SHARED_SETTINGS, *SHARED_FOLDERS)
        out["settings"] = [{"path": p, "change": change[p], "by": by.get(p, [])} for p in settings]
    return out


def _moves_of_the_archive(change: dict[str, str]) -> None:
    """A memory decay, dedup or ``cortex forget`` moved into ``mind/archive/`` is one note
    archived, not one deleted and one added: a nightly maintenance would otherwise read
    as a teammate's mass deletion on every machine. One moved back out of it is a note
    changed. The moved-to path of each pair becomes ``archived`` or ``changed``; the
    other is left out."""
    from cortex.taxonomy import ARCHIVE

    def archived_as(path: str) -> str:  # mind/<folder>/x.md → mind/archive/<folder>/x.md
        top, _, rest = path.partition("/")
        return f"{top}/{ARCHIVE}/{rest}"

    for path, what in list(change.items()):
        if what != "deleted" or not path.startswith("mind/"):
            continue
        if path.startswith(f"mind/{ARCHIVE}/"):
            back = "mind/" + path.removeprefix(f"mind/{ARCHIVE}/")
            if change.get(back) == "added":
                change[back] = "changed"
                del change[path]
        elif change.get(archived_as(path)) == "added":
            change[archived_as(path)] = "archived"
            del change[path]


def _moves_by_id(root: Path, diff: dict[str, tuple[gitcli.Entry, gitcli.Entry]], change: dict[str, str]) -> None:
    """A note a person renamed or moved (Obsidian's rename: a new file name, another
    folder, one of their own) is the same note at a new path — its ``id`` says so — not a
    deletion: told as one, on every other machine, with the person named as who deleted
    it. Each note deleted whose id a note added carries is left out, and the added one
    becomes ``changed`` (``archived`` where it went into ``mind/archive/``). The blobs are
    read only when the remote's commits both deleted and added notes."""
    from cortex.errors import RepositoryDamaged
    from cortex.headcache import fields, read_blobs
    from cortex.layout import is_note_path
    from cortex.taxonomy import ARCHIVE

    gone = {p: diff[p][0][1] for p, what in change.items() if what == "deleted" and is_note_path(p)}
    new = {p: diff[p][1][1] for p, what in change.items() if what == "added" and is_note_path(p)}
    if not gone or not new:
        return
    try:
        blobs = read_blobs(root, sorted({*gone.values(), *new.values()}), max_bytes=MOVED_NOTE_BYTES)
    except (OSError, RepositoryDamaged):
        return  # told as before: deleted and added
    ids = {oid: fields(data)[0] for oid, data in blobs.items() if data is not None}
    was = {ids[oid]: path for path, oid in gone.items() if ids.get(oid)}
    archive = f"mind/{ARCHIVE}/"
    for path, oid in new.items():
        old = was.pop(ids.get(oid) or "", None)
        if old is not None:
            change[path] = "archived" if path.startswith(archive) and not old.startswith(archive) else "changed"
            del change[old]


MOVED_NOTE_BYTES = 1 << 20  # a larger note deleted or added is not read for its id: told as deleted and added


def _authors(root: Path, commits: str, changes: str, *paths: str) -> dict[str, list[str]]:
    """{path: the authors of the commits in ``commits`` that made a change of the kinds
    ``changes`` (git's --diff-filter letters) to it, newest first}."""
    out = gitcli.stdout_bytes(root, "log", "-z", "--no-renames", f"--diff-filter={changes}", "--name-only",
                              "--format=%x01%an", commits, "--", *paths) or b""
    found: dict[str, list[str]] = {}
    author = ""
    for item in out.decode("utf-8", "surrogateescape").split("\0"):
        if item.startswith("\x01"):
            author = item[1:]
        elif item.strip("\n"):
            names = found.setdefault(item.lstrip("\n"), [])
            if author not in names:
                names.append(author)
    return found


def _follow_head(vault: Vault, now: datetime) -> list[str]:
    """The machine-local caches follow the new HEAD (each incrementally, by tree and
    blob ids): the hash index ``cortex run`` dedups with, and the search index if built."""
    from cortex.hashindex import HashIndex
    from cortex.maintenance.base import JobContext
    from cortex.maintenance.reindex import run as refresh_index

    HashIndex(vault.root).load()  # head.sqlite follows HEAD by a tree diff
    try:
        refresh_index(JobContext(vault, now))
    except CortexError as exc:
        return [f"the search index was not refreshed ({exc.message}); `cortex index` does it"]
    return []
