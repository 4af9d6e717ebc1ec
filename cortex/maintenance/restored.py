"""A memory a person brought back from the archive with git: decay keeps it, dedup keeps
it apart from the memory it had been merged into or superseded by.

``git revert`` of a ``decay:`` or ``forget:`` commit, a ``git cherry-pick`` of such a
revert, or ``git checkout <older> -- mind/…`` brings a memory back into its folder with
the fields it had before it was archived: the old ``last_reinforced``, so the next decay
would archive it again and silently undo the person's decision. ``git mv`` out of the
archive goes through the commit hook, which counts the move as a reinforcement
(``fixer._restored``); revert and cherry-pick run no hook, so decay asks git instead,
and only about the few memories it is about to archive.

A restoration is the newest commit that added the memory's path, when that commit was
not cortex's own and its parent held the same memory (same id) in ``mind/archive/``. It
counts as a reinforcement at that commit's time, as the hook counts a move. Only commits
since the memory began to fade by its own fields are read: decay archives a memory only
after that moment, so a revert of its archiving always comes later, and the walk stays
short whatever the size of the vault or its history.

Dedup asks the same question for the pairs it is about to merge or supersede
(``kept_apart``): a person who reverts a ``dedup:`` commit, or moves the note back out of
the archive (the hook clears ``merged_into`` and ``superseded_by`` then), said the two are
different memories, and the pair is not merged or superseded again. The archived copy in
the restoring commit's parent tells which memory cortex had joined it to, so the note
stays open to merging with any other. Only commits since the newer of the two was
created are read: cortex pairs two notes only once both exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Mapping, Sequence

from cortex.fixer import RESTORED_IMPORTANCE
from cortex.gitrepo import cortex_made
from cortex.importance import SECONDS_PER_MONTH
from cortex.maintenance.base import archive_path, later
from cortex.maintenance.snapshot import NoteInfo
from cortex.taxonomy import Taxonomy
from cortex.timefmt import format_time, parse_time

SLACK = timedelta(days=1)  # clocks of the machines that archived and restored may differ
_FORMAT = "%x1e%H%x1f%P%x1f%ct%x1f%an%x1f%ae%x1f%at%x1f%cn%x1f%ce%x1f%B"


@dataclass(frozen=True)
class Restoration:
    commit: str
    at: str  # the commit's time: the reinforcement
    by: str  # who committed it
    replaced_by: str | None = None  # the memory cortex had merged it into, or superseded it by


def fading_since(meta: Mapping, taxonomy: Taxonomy, threshold: float) -> datetime | None:
    """When a memory's own fields took it below ``threshold`` (None: they never do)."""
    spec = taxonomy.get(str(meta.get("type")))
    if spec is None or not spec.decay:
        return None
    importance = meta.get("importance")
    try:
        anchor = parse_time(meta.get("last_reinforced") or meta.get("created"))
        months = max(0.0, (0.5 if importance is None else float(importance)) - threshold) / spec.decay
        return anchor + timedelta(seconds=months * SECONDS_PER_MONTH)
    except (TypeError, ValueError, OverflowError):  # no time to read, or a hostile importance (.inf)
        return None


def as_restored(meta: Mapping, restoration: Restoration, threshold: float) -> dict:
    """``meta`` with the restoration counted as the hook counts a move back."""
    out = {**meta, "last_reinforced": later(meta.get("last_reinforced"), restoration.at)}
    importance = out.get("importance")
    if isinstance(importance, (int, float)) and not isinstance(importance, bool) and importance < threshold:
        out["importance"] = RESTORED_IMPORTANCE
    return out


def restorations(repo, notes: Iterable[tuple[NoteInfo, datetime]]) -> dict[str, Restoration]:
    """The notes (each with the time it began to fade) a person brought back, by path."""
    from cortex import gitcli

    notes = [(n, t) for n, t in notes if n.id and t is not None]
    if not notes or repo.head_oid() is None:
        return {}
    since = min(t for _, t in notes) - SLACK
    wanted = {n.path: n for n, _ in notes}
    # --stdin: the paths on standard input, however many fade tonight
    res = gitcli.run(repo.root, "--literal-pathspecs", "log", "--stdin", f"--since={int(since.timestamp())}",
                     "--diff-filter=A", "--name-only", "-z", f"--format={_FORMAT}",
                     input="HEAD\n--\n" + "".join(p + "\n" for p in wanted))
    if not res.ok:
        return {}  # git could not read the history: decay goes on as it always did
    found: dict[str, Restoration] = {}
    seen: set[str] = set()
    for chunk in res.out.split("\x1e")[1:]:
        fields = chunk.split("\x1f", 8)
        if len(fields) < 9:
            continue  # a message carrying the record separator: not a restoration to trust
        oid, parents, ctime, an, ae, atime, cn, ce, rest = fields
        message, _, names = rest.partition("\0")
        added = [p for p in names.lstrip("\n").split("\0") if p in wanted and p not in seen]
        seen.update(added)  # newest first: an older add of the path no longer matters
        if not added or cortex_made(message, (an, ae, atime), (cn, ce, ctime)):
            continue
        parent = parents.split()[0] if parents else None
        for path in added:
            archived = _archived(repo, parent, path, wanted[path].id) if parent else None
            if archived is not None:
                at = format_time(datetime.fromtimestamp(int(ctime), timezone.utc))
                found[path] = Restoration(oid, at, cn, _replaced_by(archived))
    return found


def kept_apart(repo, pairs: Sequence[tuple[NoteInfo, NoteInfo]]
               ) -> dict[tuple[str, str], tuple[NoteInfo, Restoration]]:
    """The pairs (by their paths) a person split: one side brought back from the archive
    after cortex merged it into, or superseded it by, the other; with that side and the
    commit that brought it back. Both sides are asked about: a memory moved back through
    the hook is the one said last, and would supersede the other."""
    back = restorations(repo, [(n, _both_exist(a, b)) for a, b in pairs for n in (a, b)])
    split = {}
    for a, b in pairs:
        for side, other in ((a, b), (b, a)):
            r = back.get(side.path)
            if r and other.id and r.replaced_by == other.id:
                split[(a.path, b.path)] = (side, r)
                break
    return split


def _both_exist(a: NoteInfo, b: NoteInfo) -> datetime | None:
    """When the newer of two notes was created (None: neither says)."""
    times = []
    for note in (a, b):
        try:
            times.append(parse_time(note.created))
        except (TypeError, ValueError):
            continue
    return max(times, default=None)


def _archived(repo, commit: str, path: str, note_id: str) -> bytes | None:
    """The memory ``note_id`` as ``commit`` held it in the archive, where cortex puts
    ``path`` (``mind/archive/<folder>/x.md``, or ``x-2.md`` … when that was taken); None
    when it was not there."""
    from cortex.headcache import fields

    target, n = archive_path(path), 1
    while (data := repo.file_at(commit, target)) is not None:
        if fields(data)[0] == note_id:
            return data
        n += 1
        target = f"{archive_path(path)[:-3]}-{n}.md"
    return None


def _replaced_by(data: bytes) -> str | None:
    """The id an archived note names in ``merged_into`` or ``superseded_by``."""
    from cortex.notes import NoteSyntaxError, parse_note

    try:
        meta = parse_note(data.decode("utf-8", "replace")).meta
    except NoteSyntaxError:
        return None
    value = meta.get("merged_into") or meta.get("superseded_by")
    return str(value) if value else None
