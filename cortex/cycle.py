"""One ``cortex run`` pass: recover, read the buffer, plan, apply, rotate.

This is the imperative shell around the pure pipeline (``cortex.pipeline``) and the
exactly-once protocol (``cortex.runner``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import json
import time
from datetime import datetime

from cortex import buffer
from cortex.hashindex import HashIndex
from cortex.packing import configured_gc_auto, pack_if_due
from cortex.model import Plan, RunReport
from cortex.pipeline.plan import make_plan, plan_later
from cortex.notes import REDACTED
from cortex.quarantine import Entry
from cortex.recovery import author, finish_archives, raw_archive, recover
from cortex.state import State
from cortex.timefmt import utcnow

if TYPE_CHECKING:
    from cortex.gitrepo import GitRepo
    from cortex.vault import Vault

CHUNK_LINES = 5_000  # lines planned and committed at a time (memory stays flat)
CHUNK_BYTES = 16 << 20  # ... and bytes, so that long lines cannot make a chunk large
UNFINISHED_QUIET = 60.0  # ... whether the writer of an unfinished line still has it open


def run_pass(vault: Vault, *, dry_run: bool, commit_per: str, now: datetime | None = None, limit: int | None = None) -> RunReport:
    started = time.monotonic()
    now = now or utcnow()
    report = RunReport(dry_run=dry_run)
    report.warnings += list(vault.calibration.warnings)
    with vault.lock():
        state = vault.load_state()
        # pygit2 (~40 ms of the run's start) is needed before the lines' assessment only
        # to finish a killed run's commit: else the repository is opened while the children
        # assess the first chunk (``_consume``), on the core this process would leave idle.
        repo = _open(vault) if dry_run or state.pending is not None else None
        if not dry_run:
            if repo is None:
                from cortex.gitlock import git_dir_of
                from cortex.gitop import require_committable

                require_committable(git_dir_of(vault.root))  # HEAD read from its file; pygit2's word below
            else:
                repo.require_branch()
            recover(vault, state, report, now, repo)
        index = HashIndex(vault.root).load()
        if dry_run:
            start = buffer.unread_from(vault.buffer_path, state.offset, state.last_line)
            end, said = buffer.settle(vault.buffer_path, repair=False)
            report.warnings += said
            plan = _plan(vault, index, state, start, end, now, limit)
            report.plan = plan
            _count_plan(plan, report)
        else:
            # Lines a writer appended to a rotated buffer through a handle it opened
            # before the rotation come first, in the order they were written.
            left = limit
            for old_id in list(state.retired):
                repo, left = _consume(vault, repo, state, index, raw_archive(vault, old_id), old_id,
                                      commit_per, now, report, left)
            _end_abandoned_line(vault, state, report)
            repo, _ = _consume(vault, repo, state, index, vault.buffer_path, state.buffer_id, commit_per, now, report, left)
            raw = raw_archive(vault, state.buffer_id)
            if buffer.rotate_if_consumed(vault.buffer_path, state.offset, raw):
                state.retired[state.buffer_id] = state.offset
                state.new_buffer()
                vault.save_state(state)
                report.rotated = True
            finish_archives(vault, state)
            _note_unfinished_line(vault, state)
            if report.commits:
                pack_if_due(vault.root, configured_gc_auto(repo.repo))
    report.seconds = time.monotonic() - started
    return report


def _open(vault: Vault) -> GitRepo:
    from cortex.gitrepo import GitRepo

    return GitRepo(vault.root, lock_wait=vault.settings.lock_timeout)


def _end_abandoned_line(vault: Vault, state: State, report: RunReport) -> None:
    """A last line that is as the previous run left it, without its newline, and whose
    writer no longer has the buffer open, was cut short by that writer's death: ended
    (``buffer.end_unfinished_line``), it is read now — a note if it was whole, else held
    as a parse error — and the next line appended with ``>>`` is not glued onto it."""
    seen = state.unfinished
    if seen is None or _unfinished(vault, state) != seen or buffer.held_open(vault.buffer_path, UNFINISHED_QUIET):
        return  # none, still growing, or its writer still has the buffer open: left for later
    ended, said = buffer.end_unfinished_line(vault.buffer_path, seen["size"])
    report.warnings += said  # a batch a killed writer left is cut away first: its end is no line to read
    if ended:
        report.warnings.append("the buffer's last line was left unfinished (no newline) since the last run by a "
                               "writer that is gone: it was ended and read")


def _note_unfinished_line(vault: Vault, state: State) -> None:
    """Record the buffer's unfinished last line, if any, for the next run to compare."""
    record = _unfinished(vault, state)
    if record != state.unfinished:
        state.unfinished = record
        vault.save_state(state)


def _unfinished(vault: Vault, state: State) -> dict | None:
    tail = buffer.unfinished_tail(vault.buffer_path)
    return {**tail, "buffer_id": state.buffer_id} if tail else None


def _consume(vault: Vault, repo: GitRepo | None, state: State, index: HashIndex, path, buffer_id: str, commit_per: str,
             now: datetime, report: RunReport, left: int | None) -> tuple[GitRepo | None, int | None]:
    """Plan and apply the lines of one buffer file from its offset, in chunks (memory
    stays flat; each chunk is its own exactly-once step). The next chunk's lines are
    assessed by other processes while this one is committed, and the first chunk's
    while the repository is opened (``repo``: None until then). Returns the repository
    and the line budget left."""
    start = state.offset if buffer_id == state.buffer_id else state.retired[buffer_id]
    end = None  # a rotated buffer: no batch is appended to it any more
    if buffer_id == state.buffer_id:  # read up to where the batches appended end, none half
        end, said = buffer.settle(path)
        report.warnings += said
    ahead = _plan_ahead(vault, index, start, now, left, path, buffer_id, end)
    while ahead is not None:
        if repo is None:
            repo = _open(vault)
            repo.require_branch()
        plan = ahead()
        if plan.lines_read == 0:
            break
        if left is not None:
            left -= plan.lines_read
        ahead = _plan_ahead(vault, index, plan.target_offset, now, left, path, buffer_id, end)
        _apply(vault, repo, state, plan, commit_per, now, report)
        for note in plan.notes:
            index.add(note.source_hash, note.note_id, note.path)
        moved = state.offset if buffer_id == state.buffer_id else state.retired.get(buffer_id, start)
        if moved != plan.target_offset:  # a bug, not an input: never read the same lines twice
            raise RuntimeError(f"the offset of buffer {buffer_id} is {moved}, not {plan.target_offset}")
    return repo, left


def _plan_ahead(vault: Vault, index: HashIndex, start: int, now: datetime, left: int | None, path,
                buffer_id: str, end: int | None):
    """The chunk from ``start`` (up to ``end``), its assessment under way; None when the
    budget is spent."""
    if left is not None and left <= 0:
        return None
    lines = list(buffer.read_lines(path, start, CHUNK_LINES if left is None else min(CHUNK_LINES, left),
                                   max_line_bytes=vault.settings.limits.max_line_bytes, max_bytes=CHUNK_BYTES, end=end))
    assessed = plan_later(lines, buffer_id, vault.context(now), index, vault.note_validator(bulk=True).check,
                          workers=_workers(vault))
    if not lines:
        return assessed
    last = buffer.mark(path, lines[-1].offset, lines[-1].end)  # now: the bytes just read

    def planned() -> Plan:
        plan = assessed()
        plan.target_mark = last
        return plan

    return planned


def _apply(vault: Vault, repo: GitRepo, state: State, plan: Plan, per: str, now: datetime, report: RunReport, quarantine_remove=()) -> None:
    from cortex.runner import apply

    apply(
        plan,
        repo=repo,
        state=state,
        save=vault.save_state,
        quarantine=vault.quarantine,
        skipped=vault.skipped,
        author=author(vault),
        per=per,
        now=now,
        report=report,
        quarantine_remove=list(quarantine_remove),
    )


def _plan(vault: Vault, index: HashIndex, state: State, start: int, end: int, now: datetime, limit: int | None) -> Plan:
    """The whole buffer's plan from ``start`` to ``end`` (a dry run shows it all at once)."""
    lines = buffer.read_lines(vault.buffer_path, start, limit, max_line_bytes=vault.settings.limits.max_line_bytes, end=end)
    return make_plan(lines, state.buffer_id, vault.context(now), index, vault.note_validator(bulk=True).check,
                     workers=_workers(vault))


def _workers(vault: Vault) -> int:
    """Processes to plan with: ``workers:`` in config.yml, else one per core."""
    from cortex.parallel import available_cores

    return vault.settings.workers or available_cores()


def _count_plan(plan: Plan, report: RunReport) -> None:
    from collections import Counter

    reasons = Counter(why.reason for _, _, why in plan.rejections)
    report.read = plan.lines_read - plan.empty_lines
    report.empty = plan.empty_lines
    report.memorized = len(plan.notes)
    report.reinforced = len(plan.reinforcements)
    report.below_threshold = reasons.pop("below_threshold", 0)
    report.dropped = reasons.pop("dropped", 0)
    report.quarantined = dict(reasons)
    report.redacted = plan.redacted
    report.truncated = plan.truncated
    report.warnings += plan.warnings
    report.paths = [n.path for n in plan.notes]


def _without_redacted_tags(line: str) -> str:
    """A held line as stored has its credentials redacted; a tag that held one is now
    "[REDACTED]", which no tag may be: it goes, as a run would have left it out."""
    try:
        obj = json.loads(line)
    except ValueError:
        return line
    tags = obj.get("tags") if isinstance(obj, dict) else None
    if not isinstance(tags, list) or not any(isinstance(g, str) and REDACTED in g for g in tags):
        return line
    obj["tags"] = [g for g in tags if not (isinstance(g, str) and REDACTED in g)]
    return json.dumps(obj, ensure_ascii=False)


def promote(vault: Vault, entry: Entry, *, force: bool, now: datetime | None = None) -> RunReport:
    """Send a held line through the pipeline again, skipping the trust hold (and, with
    ``force``, the injection hold). The entry leaves the quarantine in the same
    exactly-once step that commits its note."""
    from cortex.model import Line, Reinforcement

    now = now or utcnow()
    report = RunReport()
    with vault.lock():
        repo = _open(vault)
        repo.require_branch()
        state = vault.load_state()
        recover(vault, state, report, now, repo)
        index = HashIndex(vault.root).load()
        raw = _without_redacted_tags(entry.line).encode("utf-8")
        buffer_id, _, offset = entry.key.rpartition(":")
        line = Line(int(offset) if offset.isdigit() else 0, 0, raw)
        ctx = vault.context(now, skip_trust=True, skip_injection=force)
        plan = make_plan([line], buffer_id or "promoted", ctx, index, vault.note_validator().check)
        plan.target_offset = None  # the buffer position is not ours to move
        still_held = [r for r in plan.rejections if r[2].held]
        if still_held:
            why = still_held[0][2]
            from cortex.errors import CortexError

            raise CortexError(f"{entry.short_id} is still rejected: {why.reason}: {why.detail}",
                              f"correct it with `cortex quarantine edit {entry.short_id}` (--set FIELD=VALUE), or discard it")
        if entry.count > 1 and len(plan.notes) == 1:  # the repeats counted on the entry reinforce the note
            note = plan.notes[0]
            plan.reinforcements += [Reinforcement(note.note_id, note.path, entry.last_seen, entry.key)] * (entry.count - 1)
        _apply(vault, repo, state, plan, "run", now, report, quarantine_remove=[entry.key])
    return report
