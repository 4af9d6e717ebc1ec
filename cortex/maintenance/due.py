"""``cortex maintain``: every job that is due, in order, catching up on missed runs.

The clock is an argument (tests pass one; nothing sleeps). Each job records its last
and next run in ``state.jobs``; a job is due when it never ran or its next run has
passed, so a laptop asleep through the night runs the overdue jobs once at the next
call (one decay pass covers any gap: it reads the clock, not a count of nights).
Each job takes the vault lock for its own duration only, so ``cortex run`` is never
kept waiting for a whole maintenance session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, TYPE_CHECKING

from cortex.errors import CortexError, LockBusy
from cortex.maintenance import JOBS
from cortex.maintenance.base import EditedMeanwhile, JobContext, JobResult
from cortex.maintenance.settings import MaintenanceSettings, load_maintenance
from cortex.timefmt import format_time, parse_time, utcnow

if TYPE_CHECKING:
    from cortex.vault import Vault


def _runner(name: str):
    from importlib import import_module

    module = {"index": "reindex"}.get(name, name)  # the job's name, its module's
    return import_module(f"cortex.maintenance.{module}").run


@dataclass
class MaintainReport:
    now: str
    results: list[JobResult] = field(default_factory=list)
    not_due: dict[str, str] = field(default_factory=dict)  # job -> next run
    errors: dict[str, str] = field(default_factory=dict)
    busy: list[str] = field(default_factory=list)  # the jobs of `errors` that found git busy: run again later
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        """0; 75 when every job that failed only found git busy (nothing changed, try
        again: what `cortex run` says too); 1 for any other failure."""
        if not self.errors:
            return 0
        return 75 if set(self.errors) <= set(self.busy) else 1

    @property
    def commits(self) -> int:
        return sum(1 for r in self.results if r.commit)

    def to_json(self) -> dict[str, Any]:
        return {"now": self.now, "ran": [r.to_json() for r in self.results], "not_due": self.not_due,
                "errors": self.errors, "busy": self.busy, "commits": self.commits, "seconds": round(self.seconds, 3)}


def next_run(job_state: dict[str, Any] | None, when, now: datetime) -> datetime | None:
    """When the job is next due (None: it never ran, or ran "later" than now, so it is due now).

    A last run after ``now`` means the clock went back (a machine that ran once with its
    clock years ahead, then was set right): counted from that run, the job would wait
    for a date that has not come, and the vault would go unmaintained until then."""
    last = (job_state or {}).get("last_run")
    if not last:
        return None
    try:
        ran = parse_time(last)
    except ValueError:
        return None
    return None if ran > now else when.next_after(ran)


def is_due(job_state: dict[str, Any] | None, when, now: datetime) -> bool:
    due = next_run(job_state, when, now)
    return due is None or due <= now


def run_job(vault: Vault, name: str, *, now: datetime | None = None, dry_run: bool = False,
            settings: MaintenanceSettings | None = None, refresh_index: bool = True,
            if_due: bool = False) -> JobResult | None:
    """Run one job under the vault lock and record it; refresh the search index after a commit.

    ``if_due``: only while the job is still due once the lock is held (None otherwise): a
    `cortex maintain` that waited for another one's run of the same job must not do it
    over (a second dedup of a large vault is as long as the first)."""
    if name not in JOBS:
        raise CortexError(f"unknown maintenance job {name!r}", f"use one of {', '.join(JOBS)}")
    now = now or utcnow()
    settings = settings or load_maintenance(vault)
    started = time.monotonic()
    with vault.lock():
        if if_due and not is_due(vault.load_state().jobs.get(name), settings.when[name], now):
            return None
        ctx = JobContext(vault, now, settings)
        try:
            result = ctx.replanned(lambda: _runner(name)(ctx, dry_run=dry_run))
        except CortexError as exc:
            if not dry_run:
                _record(vault, name, now, settings, error=exc.message, again=isinstance(exc, (LockBusy, EditedMeanwhile)))
            raise
        result.seconds = time.monotonic() - started
        result.warnings += ctx.repo.kept_warnings()
        if ctx._snapshot is not None:  # the job read the notes at HEAD
            result.warnings += [f"skipped {path}: a symbolic link, not a note (cortex follows no link)"
                                for path in ctx._snapshot.links]
            result.warnings += list(ctx._snapshot.misnamed)
        if not dry_run:
            _record(vault, name, now, settings, result=result)
        if result.commit and refresh_index and name != "index":
            _runner("index")(ctx)
    return result


def _record(vault: Vault, name: str, now: datetime, settings: MaintenanceSettings, *, result: JobResult | None = None,
            error: str | None = None, again: bool = False) -> None:
    """Record a job's run; ``again``: it found git busy and changed nothing, so it stays due
    (the next call runs it, not the next day's)."""
    state = vault.load_state()
    entry = state.jobs.setdefault(name, {})
    if not again:
        entry["last_run"] = format_time(now)
        entry["next_run"] = format_time(settings.when[name].next_after(now))
    entry["schedule"] = str(settings.when[name])
    if error is not None:
        entry["last_error"] = error
        entry["last_result"] = None
    else:
        entry.pop("last_error", None)
        entry["last_result"] = {"changed": result.changed, "commit": result.commit}
    vault.save_state(state)


def run_due(vault: Vault, *, now: datetime | None = None, force: bool = False, only: Iterable[str] | None = None) -> MaintainReport:
    now = now or utcnow()
    started = time.monotonic()
    settings = load_maintenance(vault)
    chosen = list(JOBS) if only is None else [j for j in JOBS if j in set(only)]
    unknown = set(only or ()) - set(JOBS)
    if unknown:
        raise CortexError(f"unknown maintenance job(s): {', '.join(sorted(unknown))}", f"use {', '.join(JOBS)}")
    report = MaintainReport(format_time(now))
    changed_notes = False
    for name in chosen:
        state = vault.load_state()
        job_state = state.jobs.get(name)
        # run whatever its schedule says: forced, or the index after a job before it changed notes
        required = force or (name == "index" and changed_notes)
        if not required and not is_due(job_state, settings.when[name], now):
            report.not_due[name] = format_time(next_run(job_state, settings.when[name], now))
            continue
        try:
            result = run_job(vault, name, now=now, settings=settings, refresh_index=False, if_due=not required)
        except CortexError as exc:
            report.errors[name] = exc.message + (f" ({exc.hint})" if exc.hint else "")
            if isinstance(exc, LockBusy):
                report.busy.append(name)
            continue
        if result is None:  # another maintain ran it while this one waited for the lock
            report.not_due[name] = format_time(next_run(vault.load_state().jobs.get(name), settings.when[name], now))
            continue
        changed_notes = changed_notes or bool(result.commit)
        report.results.append(result)
    if report.commits:
        from cortex.packing import pack_if_due

        pack_if_due(vault.root)  # git's own gc --auto, when loose objects call for it
    report.seconds = time.monotonic() - started
    return report


def schedule_table(vault: Vault, now: datetime | None = None) -> list[dict[str, Any]]:
    """Each job's schedule, last and next run (for `cortex status` and `cortex maintain --list`)."""
    now = now or utcnow()
    settings = load_maintenance(vault)
    state = vault.load_state()
    rows = []
    for name in JOBS:
        job_state = state.jobs.get(name) or {}
        nxt = next_run(job_state, settings.when[name], now)
        rows.append({"job": name, "schedule": str(settings.when[name]), "last_run": job_state.get("last_run"),
                     "next_run": format_time(nxt) if nxt else "now", "due": is_due(job_state, settings.when[name], now),
                     "last_error": job_state.get("last_error")})
    return rows
