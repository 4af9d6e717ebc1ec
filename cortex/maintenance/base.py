"""What every job shares: the context it runs in, its result, and a crash-safe commit.

A commit is recorded as ``pending`` in ``state.jobs[<job>]`` before it is made and
carries a ``Cortex-Job: <token>`` trailer. Killed at any instant, the next run of the
job finds the record: when HEAD's history has the token, the commit happened, so it only
finishes the working tree and the state (``on_done``); otherwise nothing happened and the
job simply plans again.

A job looks for the notes a person is editing first and leaves them out; an edit that
lands after that look (an editor saving, ``git stash pop``) is found again under
``index.lock``, just before the commit: the job plans again without the note
(``replanned``). One that lands later still, while the files are written, stays in the
working tree (``GitRepo.materialize``): nothing a person wrote is overwritten.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Sequence, TYPE_CHECKING

from cortex.errors import CortexError, LockBusy
from cortex.gitrepo import GitRepo, trailer_lines
from cortex.maintenance.settings import MaintenanceSettings, load_maintenance
from cortex.maintenance.snapshot import Snapshot, SnapshotCache, take_snapshot
from cortex.taxonomy import ARCHIVE

if TYPE_CHECKING:
    from cortex.vault import Vault


@dataclass
class JobResult:
    job: str
    changed: int = 0  # notes rewritten, moved or merged
    commit: str | None = None
    items: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # locked, being edited, ...
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job, "changed": self.changed, "commit": self.commit, "items": self.items,
            "skipped": self.skipped, "warnings": self.warnings, "seconds": round(self.seconds, 3),
            "dry_run": self.dry_run,
        }


class EditedMeanwhile(CortexError):
    """Notes a job was about to commit that a person changed after the job looked:
    nothing was committed."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        shown = ", ".join(self.paths[:3]) + (f" and {len(self.paths) - 3} more" if len(self.paths) > 3 else "")
        super().__init__(f"{shown} changed while cortex was about to commit: nothing was committed",
                         "commit or discard the change, then run the command again")


REPLANS = 3  # a job planned again this often while people keep editing its notes


_CACHES: dict[str, SnapshotCache] = {}


def shared_cache(cache_dir) -> SnapshotCache:
    """One snapshot cache per vault per process: the jobs of one `cortex maintain` read
    the cache file once, not once each."""
    key = str(cache_dir)
    if key not in _CACHES:
        _CACHES[key] = SnapshotCache(cache_dir)
    return _CACHES[key]


class JobContext:
    """One maintenance session: the vault, its git repository, the clock, the caches.

    The caller holds ``vault.lock()`` for the context's lifetime."""

    def __init__(self, vault: Vault, now: datetime, settings: MaintenanceSettings | None = None) -> None:
        self.vault = vault
        self.now = now
        self.repo = GitRepo(vault.root, lock_wait=vault.settings.lock_timeout)
        self.settings = settings or load_maintenance(vault)
        self.author = (vault.settings.author_name, vault.settings.author_email)
        self._cache = shared_cache(vault.cache_dir)
        self._snapshot: Snapshot | None = None
        self._dirty: set[str] | None = None

    @property
    def taxonomy(self):
        return self.vault.taxonomy

    def snapshot(self) -> Snapshot:
        head = self.repo.head_oid()
        if self._snapshot is None or self._snapshot.head != head:
            self._snapshot = take_snapshot(self.repo, self._cache, self.vault.settings.limits.max_note_bytes)
        return self._snapshot

    def editing(self, path: str) -> bool:
        """A person has staged or unstaged changes here: leave the note alone.

        One status of the whole tree instead of ``GitRepo.is_dirty`` per note, which
        reads the whole index each time."""
        if self._dirty is None:
            self._dirty = self.repo.changed()
        return path in self._dirty

    def blob(self, text: str) -> str:
        return self.repo.write_blob(text.encode("utf-8"))

    def file_text(self, note) -> str:
        """The committed text of a snapshot note (read by blob oid: no tree walk)."""
        return self.repo.blob_text(note.blob)

    def free_path(self, path: str, taken: set[str]) -> str:
        """``path``, or the first free ``-2``, ``-3`` … (free at HEAD, on disk and of ``taken``)."""
        at_head = (self._snapshot or self.snapshot()).by_path()
        root = self.vault.root
        return next_free(path, lambda p: p in taken or p in at_head or (root / p).exists())

    def replanned(self, plan_and_commit: Callable[[], Any]) -> Any:
        """``plan_and_commit()``, again (at most ``REPLANS`` times in all) while it meets
        a person's edit it had not seen (``EditedMeanwhile``): each time it looks afresh
        and leaves the edited notes out."""
        for _ in range(REPLANS - 1):
            try:
                return plan_and_commit()
            except EditedMeanwhile:
                continue
        return plan_and_commit()

    # --- the crash-safe commit ---------------------------------------------------------

    def recover(self, job: str, on_done: Callable[[Any, dict], None] | None = None) -> None:
        state = self.vault.load_state()
        pending = (state.jobs.get(job) or {}).get("pending")
        if not pending:
            return
        committed = any(
            info.trailers.get("Job") == pending["token"] for info in self.repo.commits_since(pending.get("head_before"))
        )
        if committed:  # what was changed since stays as it is (``GitRepo.still_staged``)
            with self.repo.locked():
                self.repo.materialize(self.repo.still_staged(pending["changes"]), pending.get("head_before"))
            if on_done is not None:
                on_done(state, pending)
        else:  # killed before its commit: what was staged for it goes (the job plans again)
            self.repo.unstage(pending["changes"])
        _close_journal(state, job)
        self.vault.save_state(state)

    def commit(self, job: str, changes: dict[str, str | None], message: str, extra: dict | None = None,
               on_done: Callable[[Any, dict], None] | None = None) -> str:
        """Commit ``changes`` crash-safely; raises ``EditedMeanwhile`` (nothing done, the
        next look sees the edit) when a person changed one of their paths since the job
        looked."""
        # HEAD and the index move together (cortex/gitlock.py); the index made first (GitRepo.materializing)
        with self.repo.locked():
            self.repo.require_branch()  # before the journal: a refusal leaves nothing to recover
            edited = self.repo.changed(changes)
            if edited:
                self._dirty = None
                raise EditedMeanwhile(sorted(edited))
            token = secrets.token_hex(8)
            state = self.vault.load_state()
            pending = {"token": token, "head_before": self.repo.head_oid(), "changes": changes, **(extra or {})}
            state.jobs.setdefault(job, {})["pending"] = pending
            self.vault.save_state(state)
            try:
                with self.repo.materializing(changes):
                    oid = self.repo.commit(changes, message.rstrip("\n") + "\n\n" + trailer_lines({"Job": token}) + "\n",
                                           self.author)
            except LockBusy:
                # git was busy (exit 75): nothing was committed and nothing crashed. The
                # journal, kept for a kill, is closed now as the next look would close it
                # (what was staged taken back; the job plans again): no later command
                # (sync's "finished first") names the job interrupted.
                with contextlib.suppress(CortexError):
                    self.recover(job)
                raise
        if on_done is not None:
            on_done(state, pending)
        _close_journal(state, job)
        self.vault.save_state(state)
        return oid


def _close_journal(state, job: str) -> None:
    """The commit is done: its record goes, and so does a job entry left empty (a job
    with no schedule of its own, such as ``forget``, keeps nothing)."""
    state.jobs[job].pop("pending", None)
    if not state.jobs[job]:
        del state.jobs[job]


def archive_path(path: str) -> str:
    """``mind/<folder>/x.md`` → ``mind/archive/<folder>/x.md``."""
    parts = path.split("/")
    return "/".join([parts[0], ARCHIVE, *parts[1:]])


def fold_into(ctx: "JobContext", keep, others: Sequence, taken: set[str], absorbed: Sequence = ()):
    """The changes that make ``keep`` the one note of a memory found several times
    (dedup's near-duplicates, the same observation from several machines): each of
    ``others`` archived into it (``merged_into``; in ``vault/``, which has no archive,
    removed), and ``keep`` gains their ids in ``merged_from``, their repeats in its count
    (``cortex.counts``: each absorbed note once, whoever folds it) and the latest
    ``last_reinforced``. ``absorbed``: notes archived into it already, counted only.
    Returns (changes, the new count)."""
    from cortex import counts
    from cortex.notes import quote, set_fields
    from cortex.timefmt import format_time

    changes: dict[str, str | None] = {}
    ids = list(keep.merged_from)
    last = keep.last_reinforced or keep.created
    count = counts.fold(keep.count, [(n.id or n.path, n.count) for n in (*others, *absorbed)])
    for note in (*absorbed, *others):
        ids += [i for i in (*note.merged_from, note.id) if i and i not in ids]
        last = later(last, note.last_reinforced or note.created)
    for other in others:
        if other.partition == "mind":
            target = ctx.free_path(archive_path(other.path), taken)
            taken.add(target)
            changes[target] = ctx.blob(archived(ctx.file_text(other), format_time(ctx.now), "merged",
                                                merged_into=quote(keep.id)))
        changes[other.path] = None
    updates = {"merged_from": flow_ids(ids), **counts.fields(count)}
    if last:
        updates["last_reinforced"] = last
    changes[keep.path] = ctx.blob(set_fields(ctx.file_text(keep), updates, after="last_reinforced"))
    return changes, count


def next_free(path: str, taken: Callable[[str], bool]) -> str:
    """``path``, or ``-2``, ``-3`` … before ``.md``: the first name ``taken`` refuses not."""
    stem, candidate, n = path[:-3], path, 1
    while taken(candidate):
        n += 1
        candidate = f"{stem}-{n}.md"
    return candidate


def archived(text: str, at: str, reason: str, **fields: str) -> str:
    """``text`` as an archived note: ``archived`` (when), ``archive_reason`` (faded,
    merged, forgotten, superseded) and the reason's own pre-rendered fields
    (``merged_into``, ``superseded_by``, ``forgotten_reason``: ``taxonomy.ARCHIVE_FIELDS``)."""
    from cortex.notes import set_fields

    return set_fields(text, {"archived": at, "archive_reason": reason, **fields})


def flow_ids(ids: Sequence[str]) -> str:
    """Ids as a YAML flow list (``merged_from``)."""
    from cortex.notes import quote

    return "[" + ", ".join(quote(i) for i in ids) + "]"


def unarchive_path(path: str) -> str:
    """``mind/archive/<folder>/x.md`` → ``mind/<folder>/x.md``; a note cortex named
    (``2026-03-14-1a2b3c4d.md``) found directly in the archive's folder goes back to the
    month folder cortex files it in (``mind/<folder>/2026-03/``, ``notes.note_path``)."""
    parts = path.split("/")
    from cortex.notes import NOTE_NAME_RE

    back = [parts[0], *parts[2:]]
    dated = NOTE_NAME_RE.match(back[2]) if len(back) == 3 else None
    if dated:
        back.insert(2, dated.group(1))
    return "/".join(back)


def later(a: str | None, b: str | None) -> str | None:
    """The later of two ISO timestamps (either may be missing)."""
    from cortex.timefmt import parse_time

    if not a:
        return b
    if not b:
        return a
    try:
        return a if parse_time(a) >= parse_time(b) else b
    except (ValueError, TypeError):
        return a
