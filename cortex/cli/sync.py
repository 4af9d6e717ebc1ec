"""One vault on several machines: sync, clone."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

from cortex.cli.app import JSON, arg, command, emit_json, flag, info, open_vault, opt, toggle


def render_sync(report) -> str:
    r = report
    lines = [f"cortex sync with {r.remote}/{r.remote_branch or r.branch}: {r.integrated}" + (", pushed" if r.pushed else "")
             + f" in {r.seconds:.2f}s"]
    if r.recovered:
        lines.append(f"  finished first: interrupted {', '.join(r.recovered)}")
    if r.held_back:
        lines.append(f"  finished first: the last {', '.join(r.held_back)}'s commit, held back while git was busy (exit 75)")
    for item in r.settled:
        if "archived_as" in item:
            lines.append(f"  settled  {item['from']} → {item['archived_as']} (renamed {item['renamed_to']} on one side, "
                         f"archived as {item['archived_at']} on the other, {item.get('archive_reason') or 'archived'}: it "
                         "stays archived, under the new name)")
        elif "kept" in item:
            kept = (f"{item['stays_archived']} here: it stays archived" if item.get("stays_archived")
                    else f"reinforced {item['reinforced']}")
            if item["folded"]:
                lines.append(f"  settled  {', '.join(item['folded'])} → {item['kept']} (the same memory, {kept})")
            if item.get("counted"):  # merged into it on another machine, through a note merged here
                lines.append(f"  settled  {item['kept']} counts the repeats of {', '.join(item['counted'])} "
                             f"(merged into it, directly or through one another; {kept})")
        elif "kept_edited" in item and "deleted" not in item:
            reason = "forgotten" if "forgotten" in item else "superseded"
            lines.append(f"  kept  {item['kept_edited']} (the same memory as {item[reason]}, {reason} on one "
                         "machine; this note was edited by a person since it was memorized: their words stay "
                         "current, theirs to forget)")
        elif "kept_edited" in item:
            lines.append(f"  kept  {item['kept_edited']} (the memory deleted as {item['deleted']} on the other side, "
                         "memorized anew here and edited by a person since: theirs to delete)")
        elif "archived" in item:  # the deleted memory's copy the other side had archived
            lines.append(f"  settled  {item['kept_deleted']} removed, the archived copy of {item['deleted']}: a person "
                         f"deleted that memory (archived on the other side: {item['archived']})")
        elif "deleted" in item:
            lines.append(f"  settled  {item['kept_deleted']} stays deleted (the memory deleted as {item['deleted']}, "
                         "memorized anew before the deletion was heard of)")
        elif "apart" in item:
            lines.append(f"  kept apart  {', '.join(item['apart'])} beside {item['beside']} (one source_hash, but "
                         "words or fields that are not both the observation's: a person's edit, or a note written "
                         "to claim that memory; nothing folded, nothing archived: merge them by hand if they are one)")
        elif "brought_back_by" in item:
            lines.append(f"  settled  {item['kept_deleted']} kept deleted: it was deleted by a person; the other side only "
                         f"reinforced it (the merge or rebase {item['brought_back_by'][:12]} had brought it back; "
                         f"to keep it after all: `git checkout {item['brought_back_by'][:12]} -- {item['kept_deleted']}` "
                         "and commit)")
        elif "kept_deleted" in item:
            lines.append(f"  settled  {item['kept_deleted']} stays deleted (deleted on one side, only counted on the other)")
        else:
            lines.append(f"  settled  {item['revived']} → {item['to']} "
                         + (f"({item['was']} on one machine, its words edited by a person on another: their words "
                            "stay current; `cortex forget` it again if it is still wrong)"
                            if item.get("was") in ("forgotten", "superseded") else "(reinforced elsewhere: not archived)"))
    lines += _brought_lines(r.brought)
    if r.push_attempts > 1:
        lines.append(f"  pushed after {r.push_attempts} attempts (other machines pushed first)")
    lines.append(f"  now {r.ahead} ahead, {r.behind} behind {r.remote}")
    lines += [f"  warning: {w}" for w in r.warnings]
    if r.invalid:
        lines.append(f"  warning: {len(r.invalid)} note(s) from {r.remote} fail cortex's checks (committed without the "
                     "hooks?); `cortex validate PATH` says what to fix, a commit through the hooks completes most:")
        lines += [f"    {path}:{problems[0]}" + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
                  for path, problems in sorted(r.invalid.items())]
    return "\n".join(lines)


SHOW_DELETED = 10  # deleted notes the text names (--json names more)


def _brought_lines(brought: dict) -> list[str]:
    """What the remote's commits brought: counts of notes, the deleted ones named with who
    deleted them, each shared settings file changed, with who changed it."""
    if not brought:
        return []
    counts = [f"{brought[k]} {k}" for k in ("added", "changed", "archived", "deleted") if brought.get(k)]
    lines = [f"  brought  notes: {', '.join(counts)}"] if counts else []
    named = brought["deleted_notes"]
    lines += [f"  deleted  {n['path']}" + (f" (by {n['by']})" if n["by"] else "") for n in named[:SHOW_DELETED]]
    if (more := brought["deleted"] - SHOW_DELETED) > 0:
        lines.append(f"  deleted  … and {more} more" + (" (`--json` names more)" if len(named) > SHOW_DELETED else ""))
    for item in brought["settings"]:
        by = f" by {', '.join(a for a in item['by'] if a)}" if any(item["by"]) else ""
        lines.append(f"  settings  {item['path']} {item['change']}{by} (shared settings: they apply on this machine now)")
    return lines


def run_sync(*, remote: Optional[str], push: Optional[bool], accept_rewrite: bool = False, json_: bool = False) -> int:
    from cortex.sync import sync

    # a failure is printed, with --json in its shape (docs/sync.md), by `cortex.cli.main`
    report = sync(open_vault(), remote=remote, push_changes=push, accept_rewrite=accept_rewrite)
    if json_:
        emit_json({"ok": True, **report.to_json()})
    info(render_sync(report))
    return 0


@command(
    opt("--remote", metavar="NAME",
        help="The remote (default: the branch's upstream, else origin, or sync.remote in observer/config.yml)."),
    toggle("--push", help="Push after integrating (default: yes, or sync.push in observer/config.yml)."),
    flag("--accept-rewrite", help="The remote was force-pushed on purpose, or shares no history with this vault: merge "
                                  "its history with yours (nothing of yours is dropped)."),
    JSON,
    name="sync",
)
def sync_command(remote: Optional[str], push: Optional[bool], accept_rewrite: bool, json_: bool) -> int:
    """Fetch, merge (notes settled by cortex's merge driver), push, retrying when another machine pushed first.

    Exit 0 synced; 1 a person must act (a conflict, a rewritten remote, credentials, no
    repository at the remote's address, uncommitted changes in the way: the message says
    what to run); 75 try again later (the remote is unreachable, or kept moving, or a
    merge, rebase, cherry-pick ... of yours is in progress). Nothing is ever lost or reset."""
    return run_sync(remote=remote, push=push, accept_rewrite=accept_rewrite, json_=json_)


@command(
    arg("url", help="The shared vault's remote (a path, ssh://, https://, git@host:...)."),
    arg("path", optional=True, type=Path, help="Where to put it (default: the repository's name)."),
    opt("--branch", "-b", help="The branch to check out (default: the remote's own, else its only branch)."),
)
def clone(url: str, path: Optional[Path], branch: Optional[str]) -> None:
    """Join a shared vault on this machine: `git clone URL PATH`, then `cortex init PATH` (hooks, merge driver)."""
    from cortex.sync import clone_vault

    target = path or Path(url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git") or "vault")
    vault, created, checked_out = clone_vault(url, target, branch)
    info(f"Cloned {url} into {vault.root} (branch {checked_out}): hooks and merge driver set up"
         + (f", {len(created)} missing file(s) added and committed" if created else ", nothing rewritten"))
    where = shlex.quote(str(target))
    info(f"Next: `cortex --vault {where} sync` after each `cortex run`, or on this machine every run syncs "
         f"after `git -C {where} config cortex.syncOnRun true`.")
