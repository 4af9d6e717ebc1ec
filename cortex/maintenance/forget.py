"""``cortex forget``: a memory someone says is wrong or replaced moves to the archive.

The git-native way to correct a memory: the note moves to ``mind/archive/<folder>/``
as a faded one does, with ``archive_reason: forgotten``, the person's or agent's reason
in ``forgotten_reason`` and the time in ``archived``, in one crash-safe commit
(``forget:``). Queries leave it out from then on; ``--archived`` still finds it, and git
keeps every earlier version. Only memories (``mind/``) are forgotten: ``vault/`` holds
permanent data, which a person edits or deletes themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from cortex.errors import CortexError, UsageError
from cortex.maintenance.base import JobContext, archive_path, archived
from cortex.notes import quote
from cortex.security.secrets import scrub_generated
from cortex.timefmt import format_time

if TYPE_CHECKING:
    from cortex.vault import Vault

JOB = "forget"
MAX_REASON = 500


@dataclass(frozen=True)
class Forgotten:
    id: str
    path: str
    archived_to: str
    title: str
    reason: str
    commit: str | None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"id": self.id, "path": self.path, "archived_to": self.archived_to, "title": self.title,
                "reason": self.reason, "commit": self.commit, "warnings": self.warnings}


def clean_reason(reason: str) -> str:
    text = " ".join((reason or "").split())
    if not text:
        raise UsageError("say why the memory is forgotten", "add --reason 'replaced: standup moved to 03:30'")
    if len(text) > MAX_REASON:
        raise UsageError(f"the reason is {len(text)} characters", f"keep it under {MAX_REASON}")
    return scrub_generated(text)


def forget(vault: Vault, ref: str, reason: str, *, now: datetime, dry_run: bool = False) -> Forgotten:
    """Archive the memory ``ref`` names (a path or an id) with ``reason``."""
    from cortex.noteref import gone, kind_of, resolve

    reason = clean_reason(reason)
    with vault.lock():
        ctx = JobContext(vault, now)
        if not dry_run:
            ctx.recover(JOB)
        path = resolve(vault.root, ref)
        note = ctx.snapshot().by_path().get(path)
        if note is None:
            if not (vault.root / path).exists():
                raise gone(vault.root, path)
            raise CortexError(f"{path} is not a committed note", "commit it first, or name a note from `cortex query`")
        if note.archived:
            raise CortexError(f"{path} is archived already", "nothing to forget")
        if note.partition != "mind":
            raise CortexError(f"{path} is {kind_of(path)}: cortex archives only the memories in mind/",
                              "edit or delete the note yourself; git keeps its history")
        if ctx.editing(path):
            raise CortexError(f"{path} has uncommitted changes", "commit or discard them, then forget it; nothing was changed")
        target = ctx.free_path(archive_path(path), set())
        commit = None
        if not dry_run:
            text = archived(ctx.file_text(note), format_time(now), "forgotten", forgotten_reason=quote(reason))
            message = f"forget: {scrub_generated(note.title)}\n\n{path} → {target}\nreason: {reason}\n"
            commit = ctx.commit(JOB, {target: ctx.blob(text), path: None}, message)
        return Forgotten(id=note.id or "", path=path, archived_to=target, title=note.title or "", reason=reason,
                         commit=commit, warnings=ctx.repo.kept_warnings())
