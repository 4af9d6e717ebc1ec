"""The CLI's conventions, on the standard library's argparse: the global options (the
vault, wherever it stands), ``--json`` and the failure's document, usage errors, help.

Each command module declares its commands next to their code::

    @command(arg("ref", metavar="ID|PATH", help=...), opt("--reason", "-r", required=True, help=...), JSON)
    def forget(ref, reason, json_): ...

A command is a plain function: its arguments by keyword (each option's ``dest``), its
exit code returned (None: 0). Its docstring is its help, whose first sentence
``cortex --help`` lists. A usage error (a wrong option, a missing argument, or a
``UsageError`` the command raises) exits 2 with what is wrong and ``hint: cortex X
--help``, in the JSON document of a failure when the command was asked for ``--json``.
Command modules import the standard library and this module only at module level, so
``cortex --help`` and the git hook start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from cortex.errors import UsageError


class ReaderLeft(Exception):
    """stdout's reader closed it (`cortex query x | head -1`)."""


# The global options, and of this command's output: "json", the JSON flag it was given
# (None: none), and "emitted", whether a JSON document is on stdout already.
_options: dict[str, Any] = {"vault": None, "json": None, "emitted": False}

JSON_FLAGS = ("--json", "--jsonl")
JSON_HELP = "Print machine-readable JSON on stdout."
VAULT_FLAGS = ("--vault", "-C")
VAULT_HELP = ("The vault (default: $CORTEX_VAULT, else the git repository around the current directory). "
              "Accepted before or after the command.")


# --- what a command takes ---------------------------------------------------------------

class Spec:
    """One argument or option of a command: argparse's ``add_argument`` in cortex's words."""

    def __init__(self, names: tuple[str, ...], dest: str, **kwargs: Any) -> None:
        self.names, self.dest, self.kwargs = names, dest, kwargs

    @property
    def takes_value(self) -> bool:
        return bool(self.names) and self.kwargs.get("action") in (None, "append")

    def add_to(self, group) -> None:
        kwargs = dict(self.kwargs)
        if self.names:
            group.add_argument(*self.names, dest=self.dest, **kwargs)
        else:
            group.add_argument(self.dest, **kwargs)


def _dest(names: tuple[str, ...]) -> str:
    long = next((n for n in names if n.startswith("--")), names[0])
    return long.lstrip("-").replace("-", "_")


def arg(dest: str, *, help: str, metavar: str | None = None, optional: bool = False, many: bool = False,
        type: Callable = str) -> Spec:
    """A positional argument: required; ``optional``, or ``many`` (any number, a list)."""
    nargs = "*" if many else "?" if optional else None
    return Spec((), dest, help=help, metavar=metavar or dest.upper(), nargs=nargs, type=type,
                **({"default": [] if many else None} if nargs else {}))


def opt(*names: str, help: str, dest: str | None = None, type: Callable = str, default: Any = None,
        metavar: str | None = None, repeat: bool = False, required: bool = False, min: float | None = None,
        max: float | None = None, hidden: bool = False) -> Spec:
    """An option that takes a value: ``repeat`` collects every one given (a list);
    ``min``/``max`` bound a number."""
    metavar = metavar or _METAVARS.get(type, "TEXT")
    shown = [] if default in (None, False) else [f"default: {default}"]
    if required:  # the usage line says only [OPTIONS]
        shown.append("required")
    if min is not None or max is not None:
        shown.append(_range(min, max))
        type = _bounded(type, min, max)
    if shown:
        help += f"  [{'; '.join(shown)}]"
    return Spec(names, dest or _dest(names), help=argparse.SUPPRESS if hidden else help, type=type,
                default=default, metavar=metavar, required=required,
                **({"action": "append"} if repeat else {}))


def flag(*names: str, help: str, dest: str | None = None, hidden: bool = False) -> Spec:
    """An option that is on or off (off unless given)."""
    return Spec(names, dest or _dest(names), action="store_true", help=argparse.SUPPRESS if hidden else help)


def toggle(name: str, *, help: str, dest: str | None = None) -> Spec:
    """``--x`` / ``--no-x``: True, False, or None when neither is given (a setting decides)."""
    return Spec((name,), dest or _dest((name,)), action=argparse.BooleanOptionalAction, default=None, help=help)


JSON = flag("--json", dest="json_", help=JSON_HELP)

_METAVARS = {int: "INTEGER", float: "FLOAT", Path: "PATH"}


def _range(low, high) -> str:
    return f"{low}<=x<={high}" if low is not None and high is not None else f"x>={low}" if low is not None else f"x<={high}"


def _bounded(kind: Callable, low, high) -> Callable:
    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {_METAVARS.get(kind, 'value').lower()}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is not in the range {_range(low, high)}")
        return value

    convert.__name__ = kind.__name__
    return convert


# --- commands ----------------------------------------------------------------------------

class Command:
    """A command: its function and what it takes; a group (``cortex hook``) has commands
    of its own, and runs its function, if any, when none is named (``cortex graph``)."""

    def __init__(self, name: str, func: Callable | None, specs: tuple[Spec, ...], doc: str) -> None:
        self.name, self.func, self.specs = name, func, specs
        self.doc = _cleandoc(doc)
        self.commands: dict[str, Command] = {}
        self.table: dict[str, str] | None = None  # name -> summary, listed without the commands imported

    @property
    def summary(self) -> str:
        """The first sentence of the help: what ``--help`` of the group above lists."""
        first = " ".join(self.doc.split("\n\n", 1)[0].split())
        end = first.find(". ")
        return first if end < 0 else first[:end + 1]

    def command(self, *specs: Spec, name: str | None = None):
        """Declare a command of this group (a decorator)."""
        def declare(func: Callable) -> Callable:
            found = Command(name or func.__name__, func, specs, func.__doc__ or "")
            self.commands[found.name] = found
            return func

        return declare

    def group(self, name: str, *specs: Spec, help: str) -> Command:
        """Declare a group of commands under this one; ``@group.runs`` gives it a function
        of its own, run when no command of it is named."""
        self.commands[name] = found = Command(name, None, specs, help)
        return found

    def runs(self, func: Callable) -> Callable:
        self.func = func
        return func

    def parser(self, prog: str) -> argparse.ArgumentParser:
        parser = _Parser(prog=prog, usage=self.usage(prog), description=self.doc, add_help=False,
                         allow_abbrev=False, formatter_class=_Help,
                         epilog=_listing(self.table or {c.name: c.summary for c in self.commands.values()}))
        positional = [s for s in self.specs if not s.names]
        if positional:
            shown = parser.add_argument_group("Arguments")
            for spec in positional:
                spec.add_to(shown)
        options = parser.add_argument_group("Options")
        for spec in self.specs:
            if spec.names:
                spec.add_to(options)
        options.add_argument("-h", "--help", action="help", help="Show this message and exit.")
        return parser

    def usage(self, prog: str) -> str:
        words = [prog, "[OPTIONS]"]
        for spec in self.specs:
            if not spec.names:
                metavar = spec.kwargs["metavar"]
                nargs = spec.kwargs["nargs"]
                words.append(f"[{metavar}]..." if nargs == "*" else f"[{metavar}]" if nargs == "?" else metavar)
        if self.commands or self.table:
            words.append("COMMAND [ARGS]...")
        return " ".join(words)


def _cleandoc(doc: str) -> str:
    """A docstring without its indentation (``inspect.cleandoc``, whose import costs more
    than every command's declaration)."""
    import textwrap

    first, _, rest = doc.strip("\n").partition("\n")
    return (first.strip() + "\n" + textwrap.dedent(rest)).strip()


# The commands of `cortex` (each module's, as it is imported: `cortex.cli.registered`), and
# its own options: read before the command's (`hoist_vault` moves the vault there).
app = Command("cortex", None, (
    opt(*VAULT_FLAGS, type=Path, metavar="PATH", help=VAULT_HELP),
    flag("--version", help="Print the version and exit."),
), "Git-native memory for AI agents: observations in, validated notes and commits out.")
command = app.command
group = app.group


# --- parsing -----------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message, f"{self.prog} --help")

    def parse_args(self, args=None, namespace=None):
        values, left = self.parse_known_args(args, namespace)
        return self._nothing_left(values, left)

    def parse_intermixed_args(self, args=None, namespace=None):
        values, left = self.parse_known_intermixed_args(args, namespace)
        return self._nothing_left(values, left)

    def _nothing_left(self, values, left: list[str]):
        """What argparse did not take: an option it does not know named with the ones it
        is close to (`--limt`: did you mean --limit?), as click named them."""
        if not left:
            return values
        unknown = next((w.split("=", 1)[0] for w in left if w[:1] == "-" and w[1:2] not in ("", ".")
                        and not w[1:2].isdigit()), None)
        if unknown is None:
            text = next((a for a in self._actions if not a.option_strings and a.metavar == "TEXT"), None)
            given = getattr(values, text.dest, None) if text else None
            if isinstance(given, str):  # `cortex query how do we deploy`
                whole = " ".join([given, *left])
                self.error(f"TEXT is one argument: quote words that go together ({self.prog} \"{whole}\")")
            self.error(f"unrecognized arguments: {' '.join(left)}")
        shown = [name for name, action in self._option_string_actions.items() if action.help != argparse.SUPPRESS]
        self.error(f"no such option: {unknown}" + did_you_mean(unknown, shown, quote=False))


def did_you_mean(word: str, choices, *, quote: bool = True) -> str:
    """`` (did you mean 'status'?)`` when ``word`` is a near miss of one of ``choices``
    (a typo, a letter dropped or swapped, an abbreviation), else nothing."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=2, cutoff=0.7)
    return f" (did you mean {' or '.join(repr(c) if quote else c for c in close)}?)" if close else ""


class _Help(argparse.HelpFormatter):
    """Help in the docstrings' paragraphs, each wrapped to the terminal (one with an
    indented line as written: the list of commands), each option once with its value's
    name (``-n, --limit INTEGER``)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return "\n\n".join(para if any(line[:1].isspace() for line in para.splitlines())
                            else textwrap.fill(" ".join(para.split()), width, initial_indent=indent,
                                               subsequent_indent=indent)
                            for para in text.split("\n\n"))

    def add_usage(self, usage, actions, groups, prefix=None) -> None:
        super().add_usage(usage, actions, groups, "Usage: ")

    def _format_action_invocation(self, action) -> str:
        if not action.option_strings:
            return super()._format_action_invocation(action)
        names = ", ".join(sorted(action.option_strings, key=lambda name: name.startswith("--")))  # -n, --limit
        return names if action.nargs == 0 else f"{names} {self._format_args(action, action.dest.upper())}"


def _listing(summaries: dict[str, str]) -> str | None:
    """``Commands:`` and one line each (its summary wrapped beside it)."""
    import shutil
    import textwrap

    if not summaries:
        return None
    width = max(len(name) for name in summaries) + 4
    columns = max(shutil.get_terminal_size().columns - 2, width + 30)
    lines = ["Commands:"]
    for name, summary in summaries.items():
        wrapped = textwrap.wrap(summary, columns - width) or [""]
        lines.append(f"  {name:<{width - 2}}{wrapped[0]}")
        lines += [" " * width + more for more in wrapped[1:]]
    return "\n".join(lines)


def _first_word(args: list[str], value_options=VAULT_FLAGS) -> int:
    """Where the first word that is no option (a command's name) stands in ``args``."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            return i + 1
        i += 2 if args[i] in value_options else 1
    return i


def _joined(args: list[str], specs: tuple[Spec, ...]) -> list[str]:
    """Each option that takes a value joined to it (``--body=-x``): the next word is its
    value whatever it looks like, as it was before argparse (which takes a ``-x`` for an
    option)."""
    longs = {name: next(n for n in spec.names if n.startswith("--"))
             for spec in specs if spec.takes_value for name in spec.names}
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] == "--":
            return out + args[i:]
        if args[i] in longs and i + 1 < len(args):
            out.append(f"{longs[args[i]]}={args[i + 1]}")
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


def parse(cmd: Command, prog: str, args: list[str]) -> tuple[Command, str, dict]:
    """The command ``args`` name under ``cmd`` (``prog``), its whole name and its arguments
    by keyword. A usage error raises ``UsageError``; ``--help`` prints and exits 0."""
    if cmd.commands:
        i = _first_word(args)
        if i < len(args):
            found = cmd.commands.get(args[i])
            cmd.parser(prog).parse_args(args[:i])  # its own --help, an unknown option
            if found is None:
                raise UsageError(f"no such command {args[i]!r}" + did_you_mean(args[i], cmd.commands), f"{prog} --help")
            return parse(found, f"{prog} {args[i]}", args[i + 1:])
        if cmd.func is None:
            cmd.parser(prog).parse_args(args)  # --help
            sys.stderr.write(cmd.parser(prog).format_help())  # nothing named: its help, a usage error
            raise SystemExit(2)
    _options["json"] = next((f for f in JSON_FLAGS if f in args and any(f in s.names for s in cmd.specs)), None)
    parser = cmd.parser(prog)
    joined = _joined(args, cmd.specs)
    many = any(s.kwargs.get("nargs") == "*" for s in cmd.specs)  # files among options: pre-commit's order
    values = vars(parser.parse_intermixed_args(joined) if many else parser.parse_args(joined))
    for spec in cmd.specs:
        if spec.kwargs.get("action") == "append" and values[spec.dest] is None:
            values[spec.dest] = []
    _options["json"] = next((f for s in cmd.specs for f in JSON_FLAGS if f in s.names and values.get(s.dest)), None)
    return cmd, prog, values


def call(cmd: Command, prog: str, values: dict) -> int:
    """Run a parsed command: its exit code. A ``UsageError`` it raises names its help."""
    try:
        code = cmd.func(**values)
    except UsageError as exc:
        exc.hint = exc.hint or f"{prog} --help"
        raise
    except BrokenPipeError as exc:  # the reader's leaving, said by `cortex.cli.main`
        raise ReaderLeft() from exc
    return code or 0


def hoist_vault(argv: list[str]) -> list[str]:
    """``--vault PATH`` / ``-C PATH`` wherever it stands (``cortex status --vault X``, as
    git and most tools allow) moved before the command, where it is read."""
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


# --- what commands share -----------------------------------------------------------------

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
