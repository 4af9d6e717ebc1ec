"""`cortex show` and `cortex forget`: one note, named by its path or its id."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from cortex.cli.app import JSON_HELP, app, emit_json, info, open_vault

REF_HELP = "A note's id (from query results) or its path (mind/facts/2026-02-16-e7f4a2b9.md)."


@app.command()
def show(
    ref: str = typer.Argument(..., metavar="ID|PATH", help=REF_HELP),
    json_: bool = typer.Option(False, "--json", help="Print {path, id, type, title, frontmatter, body} as JSON."),
) -> None:
    """Print one note: its file as written, or its fields with --json."""
    from cortex.noteref import read_note

    note, text = read_note(open_vault(), ref)
    if json_:
        emit_json(note)
    else:
        info(note["path"])
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


@app.command()
def forget(
    ref: str = typer.Argument(..., metavar="ID|PATH", help=REF_HELP),
    reason: str = typer.Option(..., "--reason", "-r", help="Why: wrong, replaced by another note, no longer true."),
    json_: bool = typer.Option(False, "--json", help=JSON_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would move; change nothing."),
    now: Optional[str] = typer.Option(None, "--now", hidden=True, help="Pretend the time is this ISO-8601 instant."),
) -> None:
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
