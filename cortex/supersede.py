"""A memory that replaces another: the observation names the note it ``supersedes``.

An agent that learns a memory is wrong or out of date writes the correction with
``supersedes`` (``cortex write --supersedes ID|PATH``, MCP ``observe(supersedes=…)``).
The run that memorizes it archives the replaced note in the same commit — moved to
``mind/archive/<folder>/`` with ``archive_reason: superseded`` and ``superseded_by``
naming the new note, which carries ``supersedes`` — so from that commit on a query
returns the current memory; the replaced one stays reachable with ``--archived`` and in
git history. The changes join the run's pending record, so a run killed at any instant
does it once.

What is not archived, with a warning in the run's report (the new note is written all
the same): a reference that names no note at HEAD; permanent data (``vault/``, which a
person edits or deletes); a note with a person's uncommitted changes; a note archived
already (it is out of queries).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cortex.gitrepo import GitRepo
from cortex.model import PlannedNote
from cortex.notes import NoteSyntaxError, quote, set_fields
from cortex.taxonomy import ARCHIVE


@dataclass
class Superseding:
    changes: dict[str, dict[str, bytes | None]] = field(default_factory=dict)  # new note's path -> its extra changes
    archived: list[tuple[str, str, str]] = field(default_factory=list)  # (old path, archive path, new note's path)
    warnings: list[str] = field(default_factory=list)


def plan(repo: GitRepo, notes: list[PlannedNote], at: str) -> Superseding:
    """The archive moves that ``notes`` ask for, against HEAD."""
    out = Superseding()
    wanted = [n for n in notes if n.supersedes]
    if not wanted:
        return out
    from cortex.headcache import HeadCache
    from cortex.maintenance.base import archive_path

    cache = HeadCache(repo.root).sync()
    try:
        written = {n.path for n in notes}
        taken: set[str] = set()
        for note in wanted:
            old = _named(repo, cache, note.supersedes or "")
            if isinstance(old, str) and old.startswith("!"):
                out.warnings.append(f"{note.path}: supersedes {note.supersedes!r}: {old[1:]}; nothing archived")
                continue
            if old is None or old in taken or old in written:
                continue  # archived already, or by an earlier note of this run
            text = repo.file_at_head(old)
            if repo.is_dirty(old):
                out.warnings.append(f"{note.path}: supersedes {old}, which has uncommitted changes; "
                                    "not archived (commit them, then `cortex forget` it)")
                continue
            try:
                moved = set_fields(text.decode("utf-8"), {"archived": at, "archive_reason": "superseded",
                                                          "superseded_by": quote(note.note_id)})
            except (UnicodeDecodeError, NoteSyntaxError) as exc:
                out.warnings.append(f"{note.path}: supersedes {old}, which cannot be read ({exc}); nothing archived")
                continue
            target = _free(repo, archive_path(old), taken | written)
            taken |= {old, target}
            out.changes.setdefault(note.path, {}).update({target: moved.encode("utf-8"), old: None})
            out.archived.append((old, target, note.path))
    finally:
        cache.close()
    return out


def _named(repo: GitRepo, cache, ref: str) -> str | None:
    """The active memory at HEAD that ``ref`` names; None when it is archived already;
    ``"!why"`` when there is none to archive."""
    from cortex.noteref import ID_RE, BadReference, note_path

    try:
        path = note_path(repo.root, ref)
    except BadReference as exc:
        return "!" + exc.message
    if path is None:
        if not ID_RE.match(ref):
            return "!not a note id or path"
        paths = cache.paths_with_id(ref)
        active = [p for p in paths if not _archived(p)]
        if not active:
            return None if paths else "!no note at HEAD has that id"
        path = sorted(active)[0]
    elif not cache.has_path(path):
        return "!no such note at HEAD"
    if _archived(path):
        return None
    if not path.startswith("mind/"):
        return "!it is permanent data (vault/): edit or delete it yourself"
    return path


def _archived(path: str) -> bool:
    return path.startswith(f"mind/{ARCHIVE}/")


def _free(repo: GitRepo, path: str, taken: set[str]) -> str:
    stem, candidate, n = path[:-3], path, 1
    while candidate in taken or repo.file_at_head(candidate) is not None or (repo.root / candidate).exists():
        n += 1
        candidate = f"{stem}-{n}.md"
    return candidate
