"""Stage 7: a scored observation → the note text (cortex/notes.py)."""

from __future__ import annotations

from cortex.model import Scored
from cortex.notes import Note, NoteDraft, make_title, render_note, rendered_note
from cortex.pipeline.context import Context
from cortex.security.secrets import scrub_generated
from cortex.timefmt import format_time


def draft(scored: Scored, note_id: str, hash_hex: str, ctx: Context) -> NoteDraft:
    obs = scored.obs
    spec = ctx.taxonomy.get(obs.type)
    created = format_time(obs.timestamp)
    title = scrub_generated(make_title(obs.body))  # the body is redacted; its cut is checked too
    return NoteDraft(
        id=note_id,
        type=obs.type,
        category=spec.category,
        created=created,
        source_hash=hash_hex,
        title=title,
        aliases=(title,),
        body=obs.body,
        bucket=obs.bucket,
        attribution=obs.attribution,
        confidence=scored.confidence,
        importance=scored.importance,
        entities=tuple(dict.fromkeys(obs.entities)),
        tags=tuple(tag.lower() for tag in obs.tags),
        context=obs.context,
        source_quote=obs.source_quote,
        session_id=obs.session_id,
        last_reinforced=created,
        supersedes=obs.supersedes,
    )


def render(scored: Scored, note_id: str, hash_hex: str, ctx: Context) -> str:
    return render_note(draft(scored, note_id, hash_hex, ctx))


def render_parsed(scored: Scored, note_id: str, hash_hex: str, ctx: Context) -> tuple[str, Note]:
    return rendered_note(draft(scored, note_id, hash_hex, ctx))
