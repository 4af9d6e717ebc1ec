"""The typer app and what every command shares: the vault option, JSON output, errors.

Command modules register on ``app``; they import only the standard library and typer
at module level, so ``cortex --help`` and the git hook start fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

app = typer.Typer(
    name="cortex",
    help="Git-native memory for AI agents: observations in, validated notes and commits out.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_options: dict[str, Any] = {"vault": None}

JSON_HELP = "Print machine-readable JSON on stdout."


@app.callback()
def _global(
    vault: Optional[Path] = typer.Option(
        None, "--vault", "-C", metavar="PATH", help="The vault (default: $CORTEX_VAULT, else the git repository around the current directory)."
    ),
) -> None:
    _options["vault"] = vault


def open_vault():
    from cortex.vault import Vault

    return Vault.discover(_options["vault"])


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2, default=str) + "\n")


def emit_jsonl(objs) -> None:
    for obj in objs:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")


def info(message: str) -> None:
    """Status for people: stderr, so stdout stays data."""
    sys.stderr.write(message + "\n")

