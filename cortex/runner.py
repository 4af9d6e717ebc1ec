"""Applying a plan, exactly once.

The protocol (every step safe to be killed after):

1. held and skipped lines are appended to their logs, keyed by line, so repeats are no-ops;
2. note blobs are written to the object store (content-addressed: harmless if orphaned;
   a big run's as one pack, ``packing.write_pack``);
3. the whole outcome — commits to make, reinforcements, target offset — is recorded as
   ``pending`` in ``state.json`` (an atomic replace): this is the decision point;
4. each commit carries a ``Cortex-Batch: <batch>/<part>`` trailer; ``finish`` makes
   the commits that HEAD's history does not have yet, writes the files and index
   entries, merges the reinforcements, moves the offset and clears ``pending``.

A run that finds ``pending`` at start completes it first. Before step 3 nothing is
decided, so the lines are simply planned again.
"""

from __future__ import annotations

import contextlib

import secrets
import time
from collections import Counter
from datetime import datetime
from typing import Any

from cortex.errors import CortexError, LockBusy
from cortex.gitrepo import GitRepo, trailer_lines
from cortex.model import Plan, PlannedNote, RunReport
from cortex.quarantine import Quarantine
from cortex.state import State
from cortex.timefmt import format_time

SUMMARY_MAX = 60


def log_records(plan: Plan, at: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    held, skipped = [], []
    for key, raw, why in plan.rejections:
        record = {"key": key, "reason": why.reason, "detail": why.detail, "line": raw, "at": at, **why.extra}
        (held if why.held else skipped).append(record)
    return held, skipped


def group_notes(notes: list[PlannedNote], per: str) -> list[list[PlannedNote]]:
    if not notes:
        return []
    if per == "note":
        return [[n] for n in notes]
    if per == "session":
        groups: dict[str, list[PlannedNote]] = {}
        for note in notes:
            groups.setdefault(note.session_id, []).append(note)
        return list(groups.values())
    return [notes]


def commit_message(notes: list[PlannedNote], reinforced: int | None) -> str:
    """``reinforced`` is the run's count, said only by a commit that stands for the whole
    run (reinforcements are not grouped by session or note)."""
    from cortex.security.secrets import scrub_generated

    # Each part scrubbed on its own (a title's cut, a name): a run's titles and names were
    # scanned already, so each is a remembered verdict, where one scan of the joined
    # message of a 10,000-note run cost seconds. A path is made of a date and a hash.
    if len(notes) == 1:
        note = notes[0]
        summary = note.title if len(note.title) <= SUMMARY_MAX else note.title[: SUMMARY_MAX - 1].rsplit(" ", 1)[0] + "…"
        head = f"observe: {scrub_generated(summary)} ({scrub_generated(note.attribution)})"
    else:
        head = f"observe: {len(notes)} memories" + (f" ({reinforced} reinforced)" if reinforced is not None else "")
    body = "\n".join(f"{n.path} — {scrub_generated(n.title)} ({scrub_generated(n.attribution)})" for n in notes)
    return f"{head}\n\n{body}\n"


def prepare(repo: GitRepo, state: State, plan: Plan, per: str, quarantine_remove: list[str], *,
            now: datetime, report: RunReport) -> dict[str, Any]:
    """Steps 2–3's content: the pending record for ``plan``, with the archive moves of
    the memories its notes supersede (``cortex/supersede.py``) in their notes' commits."""
    from cortex import supersede

    batch = secrets.token_hex(8)
    groups = []
    grouped = group_notes(plan.notes, per)
    reinforced = len(plan.reinforcements) if len(grouped) == 1 else None
    oids = iter(repo.write_blobs([n.text.encode("utf-8") for notes in grouped for n in notes]))
    superseding = supersede.plan(repo, plan.notes, format_time(now), plan.reinforcements)
    report.warnings += superseding.warnings

    def archive(changes: dict[str, str | None], moves: list) -> None:
        for m in moves:
            changes.update({m.target: repo.write_blob(m.text.encode("utf-8")), m.old: None})

    for notes in grouped:
        changes = {n.path: next(oids) for n in notes}
        moves = [m for m in superseding.moves if m.by in changes]
        message = commit_message(notes, reinforced) + "".join(f"{m.old} → {m.target} (superseded)\n" for m in moves)
        archive(changes, moves)
        groups.append({"message": message, "changes": changes, "superseded": [m.old for m in moves]})
    planned = {n.path for n in plan.notes}
    if by_repeats := [m for m in superseding.moves if m.by not in planned]:  # a repeat's correction: a commit of its own
        changes: dict[str, str | None] = {}
        archive(changes, by_repeats)
        n = len(by_repeats)
        message = (f"observe: {n} memor{'y' if n == 1 else 'ies'} superseded\n\n"
                   + "".join(f"{m.old} → {m.target}: superseded by {m.by} (said again)\n" for m in by_repeats))
        groups.append({"message": message, "changes": changes, "superseded": [m.old for m in by_repeats]})
    return {
        "batch": batch,
        "at": time.time(),
        "head_before": repo.head_oid(),
        "buffer_id": plan.buffer_id or state.buffer_id,
        "target_offset": plan.target_offset,
        "target_mark": plan.target_mark,
        "groups": groups,
        "reinforcements": [[r.note_id, r.at, r.path] for r in plan.reinforcements],
        "quarantine_remove": list(quarantine_remove),
    }


def apply(
    plan: Plan,
    *,
    repo: GitRepo,
    state: State,
    save,
    quarantine: Quarantine,
    skipped: Quarantine,
    author: tuple[str, str],
    per: str,
    now: datetime,
    report: RunReport,
    quarantine_remove: list[str] = (),
) -> None:
    at = format_time(now)
    held, dropped = log_records(plan, at)
    added = quarantine.add(held, live={state.buffer_id, *state.retired})
    report.quarantine_repeats += added.repeats
    skipped.add(dropped)
    state.pending = prepare(repo, state, plan, per, list(quarantine_remove), now=now, report=report)
    save(state)
    finish(repo, state, save, quarantine, author, now, report)
    reasons = Counter(why.reason for _, _, why in plan.rejections)
    report.read += plan.lines_read - plan.empty_lines
    report.empty += plan.empty_lines
    report.memorized += len(plan.notes)
    report.reinforced += len(plan.reinforcements)
    report.below_threshold += reasons.pop("below_threshold", 0)
    report.dropped += reasons.pop("dropped", 0)
    for reason, n in reasons.items():
        report.quarantined[reason] = report.quarantined.get(reason, 0) + n
    report.redacted += plan.redacted
    report.truncated += plan.truncated
    report.warnings += plan.warnings
    report.paths += [n.path for n in plan.notes]


def _archived(path: str) -> bool:
    """An archive move's target (a superseded memory), not a note the run wrote: notes are
    written to a type's folder, and no type's folder is the archive."""
    from cortex.taxonomy import ARCHIVE

    return path.startswith(f"mind/{ARCHIVE}/")


def _replan(repo: GitRepo, state: State, save, changes: dict[str, str], report: RunReport) -> None:
    """A killed run's decision that cannot be finished: blobs it had written and not
    yet committed are gone (a `git gc --prune=now` or `git repack -a -d` since). What it
    staged goes, and its lines are read again from the buffer's offset, which it never
    moved: each becomes a note, a reinforcement or a quarantine entry (kept once, by
    key) again. Notes of it that were committed already are repeats to the new plan."""
    repo.unstage(changes)
    state.pending = None
    save(state)
    report.warnings.append("an interrupted run's notes were removed from git's object store before their commit "
                           "(git gc --prune=now, or git repack -a -d, since): their lines were read again")


BLOBS_GONE = ("git removed this run's notes from its object store before cortex committed them "
              "(git gc --prune=now, or git repack -a -d, while cortex ran)",
              "run `cortex run` again: nothing was committed, and its lines are read again")


def _blobs_gone(repo: GitRepo, pending: dict, done: set[str]) -> bool:
    """Whether a blob of a group still to commit is gone from the object store."""
    return bool(repo.missing(oid for part, group in enumerate(pending["groups"]) if f"{pending['batch']}/{part}" not in done
                             for oid in group["changes"].values() if oid))


def _to_write(repo: GitRepo, pending: dict, done: set[str]) -> dict[str, str | None]:
    """What the index and the working tree take of a decision being finished (under
    ``index.lock``): every change of a group still to commit; of a group a killed run had
    committed already, only what the index still holds as it left it
    (``GitRepo.still_staged``): a path changed since, by a person's commit or a
    ``cortex forget``, stays as that left it."""
    writing: dict[str, str | None] = {}
    for part, group in enumerate(pending["groups"]):
        changes = group["changes"]
        writing.update(repo.still_staged(changes) if f"{pending['batch']}/{part}" in done else changes)
    return writing


def finish(
    repo: GitRepo, state: State, save, quarantine: Quarantine, author, now: datetime, report: RunReport, *, recovering: bool = False
) -> None:
    """Step 4: complete ``state.pending`` whatever was done of it before."""
    pending = state.pending
    if pending is None:
        return
    batch = pending["batch"]
    done = {
        info.trailers.get("Batch")
        for info in repo.commits_since(pending.get("head_before"))
        if info.trailers.get("Batch", "").startswith(batch + "/")
    }
    all_changes: dict[str, str] = {}
    for group in pending["groups"]:
        all_changes.update(group["changes"])
    if _blobs_gone(repo, pending, done):
        _replan(repo, state, save, all_changes, report)
        if recovering:
            return
        raise CortexError(*BLOBS_GONE)
    for group in pending["groups"]:
        report.superseded += group.get("superseded", [])
    # HEAD and the index move together (cortex/gitlock.py); the index made first (GitRepo.materializing)
    try:
        with repo.locked(), contextlib.ExitStack() as stack:
            writing = _to_write(repo, pending, done)
            if writing:
                stack.enter_context(repo.materializing(writing, pending.get("head_before")))
            for part, group in enumerate(pending["groups"]):
                tag = f"{batch}/{part}"
                if tag not in done:
                    trailers = {"Batch": tag}
                    if pending.get("target_offset") is not None:
                        trailers["Offset"] = f"{pending['buffer_id']}:{pending['target_offset']}"
                    repo.commit(group["changes"], group["message"] + "\n" + trailer_lines(trailers) + "\n", author)
                    report.commits += 1
    except LockBusy:
        # Stopped on purpose, git being busy (exit 75): the run that finishes it says so,
        # not that it recovered an interrupted one.
        if not pending.get("held_back"):
            pending["held_back"] = True
            save(state)
        raise
    except Exception:
        # A `git gc --prune=now` beside the run pruned the blobs after the look above:
        # the commit failed on them (libgit2: "invalid object specified") before moving
        # HEAD. The decision is dropped and its lines read again, as above: not a bug.
        if not _blobs_gone(repo, pending, done):
            raise
        _replan(repo, state, save, all_changes, report)
        if recovering:
            return
        raise CortexError(*BLOBS_GONE) from None
    for note_id, at, path in pending["reinforcements"]:
        state.add_reinforcement(note_id, at, path)
    if recovering:
        # The earlier run (git busy: exit 75; or killed) decided these and reported
        # none of them; this run committed or finished them, so it counts them.
        made = [p for group in pending["groups"] for p, oid in group["changes"].items()
                if oid and not _archived(p)]
        report.recovered_notes += len(made)
        report.memorized += len(made)
        report.reinforced += len(pending["reinforcements"])
        report.paths += made
    repo.release_packs()
    report.warnings += [f"removed {lock}, left by an interrupted run" for lock in repo.cleared_locks]
    report.warnings += repo.kept_warnings()
    if pending.get("quarantine_remove"):
        quarantine.remove(set(pending["quarantine_remove"]))
    if pending.get("target_offset") is not None:
        if pending.get("buffer_id") == state.buffer_id:
            state.offset, state.last_line = pending["target_offset"], pending.get("target_mark")
        elif pending.get("buffer_id") in state.retired:
            state.retired[pending["buffer_id"]] = pending["target_offset"]
    state.pending = None
    state.last_run = {"at": format_time(now), "commits": report.commits, "batch": batch}
    save(state)
