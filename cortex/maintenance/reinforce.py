"""``cortex reinforce``: apply the reinforcement map that ``cortex run`` collects.

Each reinforced note gets ``last_reinforced`` (the later of its own and the map's) and a
``reinforced: N`` count. A reinforced memory in the archive comes back to its folder; one
that was merged into another note reinforces that note instead; one forgotten or replaced
(``taxonomy.DELIBERATE_ARCHIVE``), moved into the archive by a person, or merged into a
note a person has deleted since, counts the repeat and stays where it is; one that comes back goes to its month folder. Locked notes are never
rewritten: their reinforcements are kept in ``state.jobs.reinforce.held`` (counted, not
written). Applied entries leave the map only once the commit exists, and by the counts
that were applied, so a crash at any point neither loses nor doubles a reinforcement.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Mapping

from cortex.maintenance.base import JobContext, JobResult, later, unarchive_path
from cortex.maintenance.snapshot import NoteInfo, Snapshot
from cortex.notes import quote, set_fields
from cortex.taxonomy import ARCHIVE_FIELDS, DELIBERATE_ARCHIVE

JOB = "reinforce"


@dataclass(frozen=True)
class Reinforcement:
    note: NoteInfo
    keys: tuple[str, ...]  # the map entries this applies (a merged note's redirect adds one)
    count: int
    last: str | None
    restore: bool  # brought back from the archive

    @property
    def new_count(self) -> int:
        return self.note.reinforced + self.count

    @property
    def new_last(self) -> str | None:
        return later(self.note.last_reinforced, self.last)


@dataclass(frozen=True)
class ReinforcePlan:
    items: tuple[Reinforcement, ...]
    locked: tuple[tuple[str, NoteInfo], ...]  # (map key, note): not written
    missing: tuple[str, ...]  # map keys whose note is gone


def plan_reinforce(snapshot: Snapshot, reinforcements: Mapping[str, Mapping[str, Any]]) -> ReinforcePlan:
    by_id, by_path = snapshot.by_id(), snapshot.by_path()
    grouped: dict[str, dict[str, Any]] = {}
    locked, missing = [], []
    gone: set[str] = set()  # merged into a note no longer there
    for key in sorted(reinforcements):
        entry = reinforcements[key]
        note = by_id.get(key) or by_path.get(str(entry.get("path") or "")) or by_path.get(key.removeprefix("path:"))
        if note is None:
            note = snapshot.by_merged_from.get(key)  # folded by a sync into another note
        if note is None:
            missing.append(key)
            continue
        note, joined = _joined(note, by_id, snapshot.by_merged_from)
        if not joined:  # merged into a note a person deleted since: their decision, the repeat counted here
            gone.add(note.path)
        if note.locked or note.broken:
            locked.append((key, note))
            continue
        slot = grouped.setdefault(note.path, {"note": note, "keys": [], "count": 0, "last": None})
        slot["keys"].append(key)
        slot["count"] += max(1, int(entry.get("count", 1) or 1))
        slot["last"] = later(slot["last"], entry.get("last"))
    items = tuple(Reinforcement(s["note"], tuple(s["keys"]), s["count"], s["last"],
                                _revives(s["note"]) and s["note"].path not in gone)
                  for s in grouped.values())
    return ReinforcePlan(items, tuple(locked), tuple(missing))


def _joined(note: NoteInfo, by_id: Mapping[str, NoteInfo], by_merged_from: Mapping[str, NoteInfo]) -> tuple[NoteInfo, bool]:
    """(the note a merged duplicate's repeat counts on, whether that note is there): the
    note it merged into, and on to the end of a chain — two machines that each merged a
    pair before they heard of each other leave Z merged into Y and Y into X; stopping at
    Y would bring Y back beside X, one memory twice. False when a note of the chain is gone
    (a person deleted it): the repeat then stays on the last note found."""
    seen = {note.id}
    while note.archived and note.merged_into:
        into = by_id.get(note.merged_into) or by_merged_from.get(note.merged_into)
        if into is None:
            return note, False
        if into.id in seen:  # a cycle (pushed by hand): stop where it closes
            return note, True
        seen.add(into.id)
        note = into
    return note, True


def _revives(note: NoteInfo) -> bool:
    """Whether a repeat brings ``note`` back from the archive: only a memory cortex let
    fade or merged. One forgotten or replaced, or one a person moved into the archive
    themselves, counts the repeat where it lies: their decision, which no job undoes."""
    return note.archived and not note.archived_by_person and note.archive_reason not in DELIBERATE_ARCHIVE


def _kept_as(note: NoteInfo) -> str:
    """Why a reinforced note in the archive stays there, for ``cortex reinforce --json``."""
    if note.archived_by_person:
        return "by a person"
    if note.merged_into and note.archive_reason not in DELIBERATE_ARCHIVE:
        return f"{note.archive_reason}: the note it merged into was deleted"
    return note.archive_reason


def render(text: str, item: Reinforcement) -> str:
    # A fresh tally per application: two machines applying "+1" to one note would
    # otherwise write the same bytes, and git keeps one of two identical changes (the
    # count would stay 1 where it is 2); distinct, the merge driver adds them up. Quoted:
    # a token of digits alone would read as a number.
    updates: dict[str, str | None] = {"last_reinforced": item.new_last, "reinforced": str(item.new_count),
                                      "reinforced_tally": quote(secrets.token_hex(4))}
    if item.restore:
        updates.update(dict.fromkeys(ARCHIVE_FIELDS))
    return set_fields(text, updates, after="last_reinforced")


def _consume(reinforcements: dict, applied: Mapping[str, int]) -> None:
    """Take ``applied`` counts off the map (a run may have added more since)."""
    for key, n in applied.items():
        entry = reinforcements.get(key)
        if entry is None:
            continue
        left = int(entry.get("count", 0)) - int(n)
        if left > 0:
            entry["count"] = left
        else:
            reinforcements.pop(key)


def _applied_counts(reinforcements: Mapping[str, Mapping], keys) -> dict[str, int]:
    return {k: int(reinforcements[k].get("count", 1) or 1) for k in keys if k in reinforcements}


def _finish(state, pending: dict) -> None:
    _consume(state.reinforcements, pending.get("applied") or {})


def _release_held(ctx: JobContext, state, result: JobResult) -> bool:
    """Reinforcements held for a note a person has since unlocked go back into the map,
    so the note gets them now (and does not fade for want of them); those of a note that
    is gone are dropped, as the map's own are."""
    held = state.jobs.get(JOB, {}).get("held") or {}
    if not held:
        return False
    by_id = ctx.snapshot().by_id()
    released = False
    for key in list(held):
        note = by_id.get(key)
        if note is None:
            held.pop(key)
            result.warnings.append(f"held reinforcement for {key}: no such note any more (dropped)")
            released = True
            continue
        if note.locked or note.broken:
            continue
        slot = held.pop(key)
        entry = state.reinforcements.setdefault(key, {"count": 0, "last": None, "path": note.path})
        entry["count"] = int(entry.get("count", 0) or 0) + int(slot.get("count", 1) or 1)
        entry["last"] = later(entry.get("last"), slot.get("last"))
        released = True
    return released


def run(ctx: JobContext, *, dry_run: bool = False) -> JobResult:
    result = JobResult(JOB, dry_run=dry_run)
    if not dry_run:
        ctx.recover(JOB, _finish)
    state = ctx.vault.load_state()
    if not dry_run and _release_held(ctx, state, result):
        ctx.vault.save_state(state)
    if not state.reinforcements:
        return result
    plan = plan_reinforce(ctx.snapshot(), state.reinforcements)
    changes: dict[str, str | None] = {}
    lines, applied_keys, taken = [], [], set()
    for item in plan.items:
        note = item.note
        if ctx.editing(note.path):
            result.skipped.append({"path": note.path, "why": "being edited (uncommitted changes): next run"})
            continue
        target = ctx.free_path(unarchive_path(note.path), taken) if item.restore else note.path
        taken.add(target)
        result.items.append({"id": note.id, "path": target, "count": item.count, "reinforced": item.new_count,
                             "last_reinforced": item.new_last, **({"restored_from": note.path} if item.restore else {}),
                             **({"kept_archived": _kept_as(note)}
                                if note.archived and not item.restore else {})})
        applied_keys += item.keys
        if dry_run:
            continue
        changes[target] = ctx.blob(render(ctx.file_text(note), item))
        if target != note.path:
            changes[note.path] = None
        back = " (back from the archive)" if item.restore else ""
        lines.append(f"{target} — {note.title} (+{item.count}){back}")
    for _key, note in plan.locked:
        result.skipped.append({"path": note.path, "why": "maintained by a person: reinforcement kept, note not rewritten"})
    for key in plan.missing:
        result.warnings.append(f"reinforcement for {key}: no such note any more (dropped)")
    result.changed = len(result.items)
    if dry_run:
        return result
    applied = _applied_counts(state.reinforcements, applied_keys)
    if changes:
        n = len(lines)
        message = f"reinforce: {n} memor{'y' if n == 1 else 'ies'}\n\n" + "\n".join(lines) + "\n"
        result.commit = ctx.commit(JOB, changes, message, {"applied": applied}, _finish)
        state = ctx.vault.load_state()
    # locked and vanished notes leave the map too: the first kept as a count, the second dropped
    if plan.locked or plan.missing:
        held = state.jobs.setdefault(JOB, {}).setdefault("held", {})
        for key, note in plan.locked:
            entry = state.reinforcements.get(key)
            if entry is None:
                continue
            slot = held.setdefault(note.id or key, {"count": 0, "last": None, "path": note.path})
            slot["count"] += int(entry.get("count", 1) or 1)
            slot["last"] = later(slot["last"], entry.get("last"))
            slot["path"] = note.path
        for key in [k for k, _ in plan.locked] + list(plan.missing):
            state.reinforcements.pop(key, None)
        ctx.vault.save_state(state)
    return result
