"""A memory a person brought back from the archive with git, for decay to keep.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Mapping

from cortex.fixer import RESTORED_IMPORTANCE
from cortex.gitrepo import TRAILER_RE
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
        if not added or _cortex_made(message, (an, ae, atime), (cn, ce, ctime)):
            continue
        parent = parents.split()[0] if parents else None
        for path in added:
            if parent and _was_archived(repo, parent, path, wanted[path].id):
                at = format_time(datetime.fromtimestamp(int(ctime), timezone.utc))
                found[path] = Restoration(oid, at, cn)
    return found


def _cortex_made(message: str, author: tuple, committer: tuple) -> bool:
    """Committed by cortex itself: its trailer, and no one else committed it since
    (a cherry-pick or rebase of cortex's commit keeps the trailer, not the committer)."""
    return bool(set(dict(TRAILER_RE.findall(message))) & {"Job", "Batch"}) and author == committer


def _was_archived(repo, commit: str, path: str, note_id: str) -> bool:
    """Whether ``commit`` held the memory ``note_id`` in the archive, where cortex puts
    ``path`` (``mind/archive/<folder>/x.md``, or ``x-2.md`` … when that was taken)."""
    from cortex.headcache import fields

    target, n = archive_path(path), 1
    while (data := repo.file_at(commit, target)) is not None:
        if fields(data)[0] == note_id:
            return True
        n += 1
        target = f"{archive_path(path)[:-3]}-{n}.md"
    return False
