"""A memory that replaces another: the observation names the note it ``supersedes``.

An agent that learns a memory is wrong or out of date writes the correction with
``supersedes`` (``cortex write --supersedes ID|PATH``, MCP ``observe(supersedes=…)``).
The run that memorizes it archives the replaced note in the same commit — moved to
``mind/archive/<folder>/`` with ``archive_reason: superseded`` and ``superseded_by``
naming the new note, which carries ``supersedes`` — so from that commit on a query
returns the current memory; the replaced one stays reachable with ``--archived`` and in
git history. The changes join the run's pending record, so a run killed at any instant
does it once.

An observation that says the words of an archived memory and supersedes another is
memorized as a new note (``plan._repeated``), not counted on the archived one: "it was
02:00 after all" corrects the memory that had replaced it. Later repeats of those words
reinforce the new note (the HEAD cache prefers an active memory to an archived one).
The words of a current memory said again with ``supersedes`` naming another memory are
a repeat of the first, and archive the other (``superseded_by`` the first), in a commit
of the run's own when the run memorizes nothing else.

A reference to a memory replaced already (archived with ``superseded_by``, or merged
into another with ``merged_into``) is followed to the memory that replaced it, which is
the one queries return now: an agent that read the old note before it was corrected, and
corrects it again, replaces the current memory rather than leave two that contradict
each other; the run's report says which note it archived instead.

What is not archived, with a warning in the run's report (the new note is written all
the same): a reference that names no note at HEAD; permanent data (``vault/``, which a
person edits or deletes) and a person's own notes elsewhere; a note with a person's
uncommitted changes; a note archived already with nothing that replaced it (faded,
forgotten: it is out of queries). An id resolves as
``cortex forget`` resolves it (``noteref.preferred``): the memory in ``mind/``, never a
copy a person keeps in a folder of their own with the same id.

``cortex write`` and MCP ``observe`` ask the same question when the line is written
(``at_write``, from the HEAD cache): a reference to a note cortex never archives (a
record, a person's own note) or no reference at all is refused there, as ``cortex
forget`` refuses it; one that names nothing at HEAD is a warning, the line appended
all the same (the note may be committed by the time of the run, which decides).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cortex.model import PlannedNote, Reinforcement
from cortex.notes import NoteSyntaxError, quote
from cortex.taxonomy import ARCHIVE

if TYPE_CHECKING:
    from cortex.gitrepo import GitRepo  # pygit2: never imported by `cortex write`, which checks a reference here


@dataclass(frozen=True)
class Move:
    old: str  # the replaced note
    target: str  # where it goes in the archive
    text: str  # its archived text
    by: str  # the path of the note that replaces it


@dataclass
class Superseding:
    moves: list[Move] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def plan(repo: GitRepo, notes: list[PlannedNote], at: str, repeats: list[Reinforcement] = ()) -> Superseding:
    """The archive moves that ``notes`` ask for, against HEAD, and those asked by
    ``repeats``: the words of a current memory said again as the correction of another
    ("it is 09:30", superseding the note that says 10:00) archive that other one too."""
    out = Superseding()
    wanted = [n for n in notes if n.supersedes]
    wanted += [_Repeat(r.path, r.note_id, r.supersedes) for r in repeats if r.supersedes]
    if not wanted:
        return out
    from cortex.headcache import HeadCache
    from cortex.maintenance.base import archive_path, archived, next_free

    cache = HeadCache(repo.root).sync()
    try:
        taken = {n.path for n in notes}

        def busy(path: str) -> bool:
            return path in taken or cache.has_path(path) or (repo.root / path).exists()

        for note in wanted:
            try:
                old, replaced = _named(repo.root, cache, note.supersedes or "", repo.file_at_head)
            except _NothingToArchive as why:
                out.warnings.append(f"{note.path}: supersedes {note.supersedes!r}: {why}; nothing archived")
                continue
            if old in taken or old == note.path:
                continue  # archived by an earlier note of this run; or the repeated memory itself
            if replaced:
                out.warnings.append(f"{note.path}: supersedes {replaced}, which {old} had replaced already: "
                                    f"{old} archived instead")
            if repo.is_dirty(old):
                out.warnings.append(f"{note.path}: supersedes {old}, which has uncommitted changes; "
                                    "not archived (commit them, then `cortex forget` it)")
                continue
            try:
                text = archived(repo.file_at_head(old).decode("utf-8"), at, "superseded", superseded_by=quote(note.note_id))
            except (UnicodeDecodeError, NoteSyntaxError) as exc:
                out.warnings.append(f"{note.path}: supersedes {old}, which cannot be read ({exc}); nothing archived")
                continue
            target = next_free(archive_path(old), busy)
            taken.update((old, target))
            out.moves.append(Move(old, target, text, note.path))
    finally:
        cache.close()
    return out


@dataclass(frozen=True)
class _Repeat:
    """A repeat that supersedes: the memory it reinforces replaces the one it names."""

    path: str
    note_id: str
    supersedes: str | None


class _NothingToArchive(Exception):
    """``ref`` names no memory that can be archived: the message says why."""


class _NeverArchived(_NothingToArchive):
    """``ref`` names a note cortex never archives (a record, a person's own note), or is
    no reference at all: whatever HEAD holds by the time of the run, nothing is archived."""


def at_write(root: Path, refs: dict[int, str], cache) -> tuple[list[tuple[int, str]], dict[int, str]]:
    """What the run will make of each observation's ``supersedes`` (its number → the
    reference), said when it is written, from the HEAD cache the run reads: (refusals,
    for a reference that can never archive anything; warnings, for one that names no
    memory at HEAD now — the line is appended, and the run decides against its HEAD).
    ``cache``: the HEAD cache, brought up to date."""
    from cortex import gitcli

    def at_head(path: str) -> bytes | None:
        return gitcli.stdout_bytes(root, "cat-file", "blob", f"HEAD:{path}")

    refused: list[tuple[int, str]] = []
    warnings: dict[int, str] = {}
    for n, ref in refs.items():
        try:
            current, replaced = _named(root, cache, ref, at_head)
        except _NeverArchived as why:
            refused.append((n, f"supersedes {ref!r}: {why} (or leave supersedes out)"))
        except _ArchivedAlready as why:
            warnings[n] = f"supersedes {ref!r}: {why} (the run will archive nothing)"
        except _NothingToArchive:
            warnings[n] = f"supersedes {ref!r}: no memory with that id or path here (the run will archive nothing)"
        else:
            if replaced:
                warnings[n] = (f"supersedes {ref!r}: {replaced} was replaced already by {current}, the memory "
                               f"queries return now: the run archives {current} instead")
    return refused, warnings


class _ArchivedAlready(_NothingToArchive):
    """``ref`` names an archived memory that no other memory replaced (faded, forgotten)."""


REPLACED_BY = re.compile(r"^(?:superseded_by|merged_into):[ \t]*[\"']?([0-9A-Za-z][0-9A-Za-z_-]{0,99})[\"']?[ \t\r]*$", re.M)


def _named(root: Path, cache, ref: str, read) -> tuple[str, str | None]:
    """(the active memory at HEAD that ``ref`` names, the archived note ``ref`` named when
    that memory replaced it already, else None). ``read``: a path's text at HEAD."""
    from cortex.noteref import ID_RE, BadReference, kind_of, note_path, preferred

    try:
        path = note_path(root, ref)
    except BadReference as exc:
        raise _NeverArchived(exc.message) from None
    if path is None:
        if not ID_RE.match(ref):
            raise _NeverArchived("not a note id or path")
        path = preferred(cache.paths_with_id(ref))  # as `cortex forget` resolves the id (cortex/noteref.py)
        if path is None:
            raise _NothingToArchive("no note at HEAD has that id")
    elif not cache.has_path(path):
        raise _NothingToArchive("no such note at HEAD")
    named, seen = path, {path}
    while _archived(path):  # replaced already: follow to the memory that replaced it
        by = _replaced_by(read(path))
        path = preferred(cache.paths_with_id(by)) if by else None
        if path is None or path in seen:  # nothing replaced it (faded, forgotten), or a loop of replacements
            raise _ArchivedAlready(f"{named} is archived already, and no memory replaces it")
        seen.add(path)
    if not path.startswith("mind/"):
        raise _NeverArchived(f"{path} is {kind_of(path)}, which cortex never archives: edit or delete it yourself")
    return path, (named if path != named else None)


def _replaced_by(text: bytes | None) -> str | None:
    """The id an archived note's frontmatter says replaced it (``superseded_by``, ``merged_into``)."""
    from cortex.notes import split_frontmatter

    try:
        parts = split_frontmatter(text.decode("utf-8", "replace")) if text else None
    except NoteSyntaxError:
        return None
    found = REPLACED_BY.search(parts[0]) if parts else None
    return found.group(1) if found else None


def _archived(path: str) -> bool:
    return path.startswith(f"mind/{ARCHIVE}/")
