"""``cortex decay``: memories that faded move to ``mind/archive/<folder>/``.

Effective importance = importance − rate × months since ``last_reinforced`` (else
``created``), floored at 0 (``cortex.importance``). Only the mind partition decays, only types
with a rate above 0, never a locked note; nothing is deleted. A reinforcement still
waiting in the map counts as the latest reinforcement, so a memory is never archived
while its reinforcement is on the way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from cortex.importance import effective_importance
from cortex.maintenance.base import JobContext, JobResult, archive_path, archived, later
from cortex.maintenance.snapshot import NoteInfo, Snapshot
from cortex.taxonomy import Taxonomy
from cortex.timefmt import format_time

JOB = "decay"


@dataclass(frozen=True)
class Fading:
    note: NoteInfo
    effective: float


def plan_decay(snapshot: Snapshot, taxonomy: Taxonomy, now: datetime, threshold: float,
               reinforcements: Mapping[str, Mapping[str, Any]] = {}) -> tuple[tuple[Fading, ...], tuple[NoteInfo, ...]]:
    """(memories to archive, locked memories that would have been)."""
    fading, locked = [], []
    for note in snapshot:
        if note.partition != "mind" or note.archived or note.broken or note.type is None:
            continue
        spec = taxonomy.get(note.type)
        if spec is None or spec.partition != "mind" or not spec.decay:
            continue
        meta = note.meta()
        pending = reinforcements.get(note.key)
        if pending:
            meta["last_reinforced"] = later(note.last_reinforced, pending.get("last"))
        value = effective_importance(meta, taxonomy, now)
        if value >= threshold:
            continue
        if note.locked:
            locked.append(note)
        else:
            fading.append(Fading(note, value))
    return tuple(fading), tuple(locked)


def render(text: str, now: datetime) -> str:
    return archived(text, format_time(now), "faded")


def run(ctx: JobContext, *, dry_run: bool = False) -> JobResult:
    result = JobResult(JOB, dry_run=dry_run)
    if not dry_run:
        ctx.recover(JOB)
    state = ctx.vault.load_state()
    threshold = ctx.settings.forget_threshold
    fading, locked = plan_decay(ctx.snapshot(), ctx.taxonomy, ctx.now, threshold, state.reinforcements)
    for note in locked:
        result.skipped.append({"path": note.path, "why": "maintained by a person: never archived"})
    changes: dict[str, str | None] = {}
    lines, taken = [], set()
    for f in fading:
        note = f.note
        if ctx.editing(note.path):
            result.skipped.append({"path": note.path, "why": "being edited (uncommitted changes): next run"})
            continue
        target = ctx.free_path(archive_path(note.path), taken)
        taken.add(target)
        result.items.append({"id": note.id, "path": note.path, "archived_to": target, "type": note.type,
                             "effective_importance": round(f.effective, 4)})
        lines.append(f"{note.path} → {target} — {note.title} ({f.effective:.2f})")
        if not dry_run:
            changes[target] = ctx.blob(render(ctx.file_text(note), ctx.now))
            changes[note.path] = None
    result.changed = len(result.items)
    if changes:
        n = len(lines)
        head = f"decay: {n} memor{'y' if n == 1 else 'ies'} faded below {threshold:g}"
        result.commit = ctx.commit(JOB, changes, head + "\n\n" + "\n".join(lines) + "\n")
    return result
