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
from typer.core import TyperCommand, TyperGroup


class EndOfInput(Exception):
    """An EOFError raised inside a command (numpy's word for an empty file, for one)."""


class ReaderLeft(Exception):
    """stdout's reader closed it (`cortex query x | head -1`)."""


class _Commands(TyperGroup):
    def invoke(self, ctx):
        # click reports an EOFError as an interrupted prompt: "Aborted!" and exit 1, a
        # query's "nothing found". cortex prompts for nothing, so one is a bug, for the
        # error handler of `cortex.cli.main` to report as every other (exit 3). A broken
        # pipe click turns into exit 1 as well: it is the reader's leaving, said by main.
        try:
            return super().invoke(ctx)
        except EOFError as exc:
            raise EndOfInput(f"EOFError: {exc}") from exc
        except BrokenPipeError as exc:
            raise ReaderLeft() from exc


JSON_FLAGS = ("--json", "--jsonl")


class _AsksJson:
    """Records whether the command was asked for ``--json`` (or ``--jsonl``): a failure is
    then printed on stdout too (``emit_failure``), so a script has a document to parse
    whatever happened. Every command and group is one (``cortex.cli``); a group's
    subcommand records its own flags after the group."""

    def invoke(self, ctx):
        _options["json"] = next((flag for param in self.params for flag in JSON_FLAGS
                                 if flag in param.opts and ctx.params.get(param.name)), None)
        return super().invoke(ctx)


class JsonAware(_AsksJson, TyperCommand):
    pass


class JsonAwareGroup(_AsksJson, TyperGroup):
    pass  # `cortex graph --json`: a group's own callback takes flags too


app = typer.Typer(
    name="cortex",
    cls=_Commands,
    help="Git-native memory for AI agents: observations in, validated notes and commits out.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# The global options, and of this command's output: "json", the JSON flag it was given
# (None: none), and "emitted", whether a JSON document is on stdout already.
_options: dict[str, Any] = {"vault": None, "json": None, "emitted": False}

JSON_HELP = "Print machine-readable JSON on stdout."


def _print_version(value: bool) -> None:
    if value:
        import platform

        from cortex.distribution import DIST, version

        sys.stdout.write(f"cortex {version()} ({DIST}, Python {platform.python_version()})\n")
        raise typer.Exit()


@app.callback()
def _global(
    vault: Optional[Path] = typer.Option(
        None, "--vault", "-C", metavar="PATH", help="The vault (default: $CORTEX_VAULT, else the git repository around the current directory). Accepted before or after the command."
    ),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit."),
) -> None:
    _options["vault"] = vault


VAULT_FLAGS = ("--vault", "-C")


def hoist_vault(argv: list[str]) -> list[str]:
    """``--vault PATH`` / ``-C PATH`` wherever it stands (``cortex status --vault X``, as
    git and most tools allow) moved before the command, where typer reads it."""
    out: list[str] = []
    hoisted: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out += argv[i:]
            break
        if arg in VAULT_FLAGS and i + 1 < len(argv):
            hoisted += [arg, argv[i + 1]]
            i += 2
            continue
        if arg.startswith("--vault="):
            hoisted.append(arg)
        else:
            out.append(arg)
        i += 1
    return hoisted + out


def open_vault():
    from cortex.vault import Vault

    return Vault.discover(_options["vault"])


def _json_value(value: Any) -> Any:
    """What JSON has no type for: a date or time as the notes write it (ISO 8601, as
    `query --json` and MCP print it: `timefmt.jsonable`), anything else as its text."""
    from cortex.timefmt import jsonable

    out = jsonable(value)
    return str(out) if out is value else out


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2, default=_json_value) + "\n")
    _options["emitted"] = True


def emit_failure(exc) -> None:
    """A failure (a ``CortexError``) as the document of a command asked for JSON, in the
    one shape of every command (README, "Exit codes"): ``--jsonl`` one line of it. A
    command that printed its document already (the refused lines of ``write``,
    ``graph neighbors``' empty list) keeps it: stdout holds one."""
    flag = _options.get("json")
    if flag is None or _options.get("emitted"):
        return
    failure = {"ok": False, "error": exc.kind, "message": exc.message, "hint": exc.hint,
               "paths": list(exc.paths), "exit_code": exc.exit_code}
    try:
        if flag == "--jsonl":
            emit_jsonl([failure])
        else:
            emit_json(failure)
        sys.stdout.flush()
    except OSError:  # stdout is what failed (a full disk, a reader gone): stderr has said it
        stdout_gone()


def stdout_gone() -> None:
    """stdout pointed at /dev/null: what is left in its buffer, flushed at exit, would fail
    again there (Python then prints its own traceback and exits 120)."""
    import os

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)


def emit_jsonl(objs) -> None:
    for obj in objs:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=_json_value) + "\n")


def info(message: str) -> None:
    """Status for people: stderr, so stdout stays data."""
    sys.stderr.write(message + "\n")


def autowatch(root) -> None:
    """Once a command has answered: the watcher started detached in a large vault where
    none runs (`watch: auto`, cortex/watcher.py `autostart`), so that the next commands are
    flat."""
    sys.stdout.flush()  # the answer is out before the daemon starts
    from cortex.watcher import autostart

    autostart(root)
