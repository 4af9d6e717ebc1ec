"""`cortex show` and `cortex forget`: one note, named by its path or its id."""

from __future__ import annotations

import sys
from typing import Optional

from cortex.cli.app import JSON, arg, command, emit_json, flag, info, open_vault, opt

REF = arg("ref", metavar="ID|PATH", help="A note's id (from query results) or its path (mind/facts/2026-02-16-e7f4a2b9.md).")


@command(REF, flag("--json", dest="json_", help="Print {path, id, type, title, frontmatter, body} as JSON."))
def show(ref: str, json_: bool) -> None:
    """Print one note: its file as written, or its fields with --json."""
    from cortex.noteref import read_note

    note, text = read_note(open_vault(), ref)
    if json_:
        emit_json(note)
    else:
        info(note["path"])
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


@command(
    REF,
    opt("--reason", "-r", required=True, help="Why: wrong, replaced by another note, no longer true."),
    JSON,
    flag("--dry-run", help="Say what would move; change nothing."),
    opt("--now", hidden=True, help="Pretend the time is this ISO-8601 instant."),
)
def forget(ref: str, reason: str, json_: bool, dry_run: bool, now: Optional[str]) -> None:
    """Archive a memory that is wrong or replaced, with the reason (one commit).

    Queries leave it out from then on; `cortex query --archived` and git history keep it.
    """
    from cortex.cli.maintain import _now
    from cortex.maintenance.forget import forget as forget_note

    done = forget_note(open_vault(), ref, reason, now=_now(now), dry_run=dry_run)
    if json_:
        emit_json({**done.to_json(), "dry_run": dry_run})
    else:
        verb = "would move" if dry_run else "forgotten"
        commit = f", commit {done.commit[:10]}" if done.commit else ""
        info(f"{verb}: {done.path} → {done.archived_to}{commit}")
        for line in done.warnings:
            info(f"  warning: {line}")
