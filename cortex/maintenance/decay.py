"""``cortex decay``: memories that faded move to ``mind/archive/<folder>/``.

Effective importance = importance − rate × months since ``last_reinforced`` (else
``created``), floored at 0 (``cortex.importance``). Only the mind partition decays, only types
with a rate above 0, never a locked note nor one without an id (a person's note from before
cortex, never completed by a commit: no memory yet); nothing is deleted. A reinforcement still
waiting in the map counts as the latest reinforcement, so a memory is never archived
while its reinforcement is on the way. A memory a person brought back from the archive
with git (``git revert`` of the commit that archived it: ``cortex.maintenance.restored``)
is not archived again: the restoration counts as a reinforcement at its commit's time,
written into the note by this job's commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from cortex.importance import effective_importance
from cortex.maintenance.base import JobContext, JobResult, archive_path, archived, later
from cortex.maintenance.restored import Restoration, as_restored, fading_since, restorations
from cortex.maintenance.snapshot import NoteInfo, Snapshot
from cortex.notes import set_fields
from cortex.taxonomy import Taxonomy
from cortex.timefmt import format_time

JOB = "decay"


@dataclass(frozen=True)
class Fading:
    note: NoteInfo
    effective: float
    meta: dict  # what the effective importance was read from


def plan_decay(snapshot: Snapshot, taxonomy: Taxonomy, now: datetime, threshold: float,
               reinforcements: Mapping[str, Mapping[str, Any]] = {}) -> tuple[tuple[Fading, ...], tuple[NoteInfo, ...]]:
    """(memories to archive, locked memories that would have been)."""
    fading, locked = [], []
    for note in snapshot:
        if note.partition != "mind" or note.archived or note.broken or note.type is None:
            continue
        if not note.id:  # never completed by a commit or a run (a person's note from before cortex): no memory yet
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
            fading.append(Fading(note, value, meta))
    return tuple(fading), tuple(locked)


def plan_restored(fading: tuple[Fading, ...], back: Mapping[str, Restoration], taxonomy: Taxonomy, now: datetime,
                  threshold: float) -> tuple[tuple[Fading, ...], tuple[tuple[Fading, dict], ...]]:
    """(memories still to archive, those a person brought back that stay, with their
    fields once the restoration counts as a reinforcement)."""
    still, kept = [], []
    for f in fading:
        restoration = back.get(f.note.path)
        meta = as_restored(f.meta, restoration, threshold) if restoration else f.meta
        if restoration and effective_importance(meta, taxonomy, now) >= threshold:
            kept.append((f, meta))
        else:
            still.append(f)
    return tuple(still), tuple(kept)


def render(text: str, now: datetime) -> str:
    return archived(text, format_time(now), "faded")


def render_restored(text: str, before: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    return set_fields(text, {k: _rendered(meta[k]) for k in ("last_reinforced", "importance") if meta[k] != before[k]})


def _rendered(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def run(ctx: JobContext, *, dry_run: bool = False) -> JobResult:
    result = JobResult(JOB, dry_run=dry_run)
    if not dry_run:
        ctx.recover(JOB)
    state = ctx.vault.load_state()
    threshold = ctx.settings.forget_threshold
    fading, locked = plan_decay(ctx.snapshot(), ctx.taxonomy, ctx.now, threshold, state.reinforcements)
    for note in locked:
        result.skipped.append({"path": note.path, "why": "maintained by a person: never archived"})
    for f in fading:
        if ctx.editing(f.note.path):
            result.skipped.append({"path": f.note.path, "why": "being edited (uncommitted changes): next run"})
    fading = tuple(f for f in fading if not ctx.editing(f.note.path))
    # only the memories about to be archived are looked up in git's history
    back = restorations(ctx.repo, [(f.note, fading_since(f.meta, ctx.taxonomy, threshold)) for f in fading])
    fading, kept = plan_restored(fading, back, ctx.taxonomy, ctx.now, threshold)
    changes: dict[str, str | None] = {}
    lines, taken = [], set()
    for f in fading:
        note = f.note
        target = ctx.free_path(archive_path(note.path), taken)
        taken.add(target)
        result.items.append({"id": note.id, "path": note.path, "archived_to": target, "type": note.type,
                             "effective_importance": round(f.effective, 4)})
        lines.append(f"{note.path} → {target} — {note.title} ({f.effective:.2f})")
        if not dry_run:
            changes[target] = ctx.blob(render(ctx.file_text(note), ctx.now))
            changes[note.path] = None
    for f, meta in kept:
        note, r = f.note, back[f.note.path]
        result.items.append({"id": note.id, "path": note.path, "restored_in": r.commit, "restored_by": r.by,
                             "last_reinforced": meta["last_reinforced"]})
        lines.append(f"{note.path} — {note.title}: brought back by {r.by} in {r.commit[:10]}, kept as reinforced then")
        if not dry_run:
            changes[note.path] = ctx.blob(render_restored(ctx.file_text(note), f.meta, meta))
    result.changed = len(result.items)
    if changes:
        n = len(fading)
        heads = [f"{n} memor{'y' if n == 1 else 'ies'} faded below {threshold:g}"] if n else []
        heads += [f"{len(kept)} brought back by a person kept"] if kept else []
        result.commit = ctx.commit(JOB, changes, "decay: " + "; ".join(heads) + "\n\n" + "\n".join(lines) + "\n")
    return result
