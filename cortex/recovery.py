"""What a killed ``cortex run`` left, finished before the buffer is read again: its
decided commit (``runner.finish``), a rotation it did not record, a rotated buffer not
yet scrubbed into the archive.

Apart from ``cortex.cycle`` because ``cortex sync`` recovers too, and with nothing left
to finish (nearly always) needs neither the pipeline nor pygit2: the repository is
opened, and the runner imported, only for a commit a killed run decided.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from cortex import buffer
from cortex.state import State

if TYPE_CHECKING:
    from cortex.gitrepo import GitRepo
    from cortex.model import RunReport
    from cortex.vault import Vault

RETIRED_QUIET = 86_400.0  # where the OS cannot tell whether a rotated buffer is open


def author(vault: Vault) -> tuple[str, str]:
    return (vault.settings.author_name, vault.settings.author_email)


def recover(vault: Vault, state: State, report: RunReport, now: datetime, repo: GitRepo | None = None) -> None:
    """Finish what a killed run decided, and notice a rotation it did not record.
    ``repo``: the caller's, else one is opened when there is a commit to finish."""
    for tmp in vault.state_path.parent.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)  # a half-written replacement a kill left (we hold the lock)
    if not vault.state_path.exists():
        vault.save_state(state)  # fix the buffer id before any line is keyed by it
    if state.pending is not None:
        from cortex.gitrepo import GitRepo
        from cortex.runner import finish

        if state.pending.get("held_back"):
            report.held_back = True  # it stopped on a busy git (exit 75): nothing was interrupted
        else:
            report.recovered = True
        repo = repo or GitRepo(vault.root, lock_wait=vault.settings.lock_timeout)
        finish(repo, state, vault.save_state, vault.quarantine, author(vault), now, report, recovering=True)
    raw = raw_archive(vault, state.buffer_id)
    rotated = raw.exists() or (vault.archive_dir / f"observations-{state.buffer_id}.jsonl").exists()
    if rotated:  # rotated, then killed before the state said so
        if raw.exists():
            state.retired[state.buffer_id] = state.offset
        state.new_buffer()
        vault.save_state(state)
    finish_archives(vault, state)  # a kill between the rotation and the scrub
    if not rotated and buffer.unread_from(vault.buffer_path, state.offset, state.last_line) != state.offset:
        report.warnings.append(
            f"the buffer no longer holds the lines processed up to byte {state.offset}: it was replaced or "
            "truncated (by hand, or logrotate's copytruncate) since the last run; reading it from the start"
        )
        state.new_buffer()
        vault.save_state(state)


def raw_archive(vault: Vault, buffer_id: str) -> Path:
    """Where a consumed buffer is moved, under the writers' lock, before its scrub."""
    return vault.archive_dir / f".observations-{buffer_id}.jsonl.raw"


def finish_archives(vault: Vault, state: State) -> None:
    """Turn every rotated buffer still raw into its kept, scrubbed archive — once every
    line in it was read and no writer can append to it any more."""
    if not vault.archive_dir.is_dir():
        return
    for tmp in vault.archive_dir.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)  # a scrub a kill interrupted: done again from the raw file
    for raw in sorted(vault.archive_dir.glob(".observations-*.jsonl.raw")):
        old_id = raw.name.removeprefix(".observations-").removesuffix(".jsonl.raw")
        if old_id in state.retired:
            if buffer.size(raw) > state.retired[old_id] or buffer.held_open(raw, RETIRED_QUIET):
                continue  # lines still coming through an old handle: read at the next run
        from cortex.security.secrets import scrub_json_line

        kept = raw.with_name(raw.name[1:].removesuffix(".raw"))
        buffer.archive_scrubbed(raw, kept, scrub_json_line, vault.settings.limits.max_line_bytes)
        if state.retired.pop(old_id, None) is not None:
            vault.save_state(state)
