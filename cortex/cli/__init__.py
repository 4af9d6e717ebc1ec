"""Entry point: ``cortex`` → ``main()``. One error handler for every command: a known
problem prints what to do and exits 1 (or its own code); a bug exits 3 and leaves a
report with versions and the traceback."""

from __future__ import annotations

import sys

from cortex.cli.app import app

# Command modules register themselves on `app` (each keeps heavy imports inside functions),
# in this order, which is --help's. A call naming a command imports its module alone
# (`registered`): all eight cost every start ~15M instructions, a cold query's 2%.
MODULES = ("core", "hook", "search", "agents", "maintain", "sync", "memory", "watch")
# The module of each command and group (tests/test_startup.py holds it to what they register).
COMMANDS = {
    "init": "core", "write": "core", "run": "core", "status": "core", "quarantine": "core",
    "validate": "hook", "hook": "hook",
    "index": "search", "query": "search",
    "mcp": "agents",
    "reinforce": "maintain", "decay": "maintain", "dedup": "maintain", "maintain": "maintain",
    "schedule": "maintain", "cron": "maintain", "brief": "maintain", "graph": "maintain",
    "sync": "sync", "clone": "sync",
    "show": "memory", "forget": "memory",
    "watch": "watch",
}


def _json_aware(typer_app) -> None:
    """Every command and group a JSON-aware one: a failure of a command asked for
    ``--json`` is printed as JSON by the one error handler below, not by each command."""
    from typer.core import TyperCommand

    from cortex.cli.app import JsonAware, JsonAwareGroup

    for command in typer_app.registered_commands:
        if command.cls in (None, TyperCommand):  # typer's default: no command asks for another
            command.cls = JsonAware
    for group in typer_app.registered_groups:
        if not any(isinstance(cls, type) for cls in (group.cls, group.typer_instance.info.cls)):  # typer's default
            group.cls = JsonAwareGroup
        _json_aware(group.typer_instance)


def registered(name: str | None = None):
    """``app`` with the commands of the module registering ``name`` (None, or a name not
    in ``COMMANDS``: of every module), in ``MODULES``' order whatever was imported first."""
    import importlib

    for module in (COMMANDS[name],) if name in COMMANDS else MODULES:
        importlib.import_module(f"cortex.cli.{module}")

    def place(entry) -> int:
        found = COMMANDS.get(entry.name or entry.callback.__name__.lower().replace("_", "-"))
        return MODULES.index(found) if found else len(MODULES)  # another's (a test's): last

    app.registered_commands.sort(key=place)  # stable: each module's in its own order
    app.registered_groups.sort(key=place)
    _json_aware(app)
    return app


def main(argv: list[str] | None = None) -> int:
    from cortex.cli.app import ReaderLeft, _options, hoist_vault
    from cortex.cli.terminal import guard_terminals
    from cortex.errors import CortexError

    _standard_streams()
    guard_terminals()
    _options.update(json=None, emitted=False)  # of this call: tests call main() again in one process
    args = hoist_vault(sys.argv[1:] if argv is None else list(argv))
    try:
        # standalone mode: click reports usage errors itself (exit 2) and exits.
        _narrowed(args)(args=args, prog_name="cortex")
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except CortexError as exc:
        return _failed(exc, args)
    except ReaderLeft:
        # what was printed is what the reader wanted; the rest, flushed at exit, goes nowhere
        from cortex.cli.app import stdout_gone

        stdout_gone()
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("cortex: interrupted\n")
        return 130
    except OSError as exc:  # the file system said no: a path to fix, not a bug
        from cortex.errors import os_said
        from cortex.fsutil import folder_in_the_way

        return _failed(folder_in_the_way(exc) or CortexError(os_said(exc)), args)
    except UnicodeError as exc:
        return _failed(CortexError(f"not UTF-8 text ({exc}); cortex reads and writes UTF-8 only"), args)
    except Exception as exc:  # a bug: keep the evidence
        damaged = _repository_damage(exc)
        if damaged is not None:
            return _failed(damaged, args)
        from cortex.cli.app import emit_failure
        from cortex.errors import Bug

        path = _bug_report()
        sys.stderr.write(f"cortex: unexpected error (a bug). Details written to {path}\n")
        emit_failure(Bug("unexpected error (a bug)", f"details written to {path}"))
        return 3


def _repository_damage(exc: Exception):
    """pygit2's failure to read an object git cannot read either: the repository is
    damaged (an object removed or corrupted on disk), which is no bug of cortex's."""
    import re

    pygit2 = sys.modules.get("pygit2")
    found = re.search(r"\b[0-9a-f]{40}(?:[0-9a-f]{24})?\b", str(exc))
    if pygit2 is None or not isinstance(exc, pygit2.GitError) or found is None:
        return None
    from cortex import gitcli
    from cortex.cli.app import _options
    from cortex.errors import CortexError, RepositoryDamaged
    from cortex.layout import find_vault

    try:
        # the whole object read: a corrupt one is there by name (`cat-file -e` finds it)
        done = gitcli.run_bytes(find_vault(_options.get("vault")), "cat-file", "-p", found.group())
        readable = done is not None and done.ok
    except CortexError:
        return None
    return None if readable else RepositoryDamaged(found.group())


# Commands whose exit 1 means "nothing found": any error of theirs exits 2 (README, "Exit codes").
ERRORS_EXIT_2 = ("query", "index")


def _failed(exc, args: list[str]) -> int:
    """Say a known problem: what and how to fix it on stderr, its document on stdout
    when the command was asked for JSON; its exit code."""
    from cortex.cli.app import emit_failure

    if exc.exit_code == 1 and _command_name(args) in ERRORS_EXIT_2:
        exc.exit_code = 2  # met after the command's own handler (writing its output): never "nothing found"
    sys.stderr.write(f"cortex: {exc.message}\n")
    if exc.hint:
        sys.stderr.write(f"  hint: {exc.hint}\n")
    emit_failure(exc)
    return exc.exit_code


def _standard_streams() -> None:
    """A standard stream closed by the caller (`2>&-`, a daemon, a service manager) is
    /dev/null for this process. Python leaves ``sys.stderr`` None there: the first status
    line raised, after the work was done — `cortex write` appended its observation and
    exited 1, and the agent's retry doubled it — and a file cortex opened next could take
    the free descriptor, where a child's output would land. Each stream is UTF-8, whatever
    the locale or ``PYTHONIOENCODING`` says."""
    import os

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", closefd=False))
        elif not _utf8(stream):
            # cortex reads and writes UTF-8 only: a --json document in the locale's Latin-1
            # (or PYTHONIOENCODING=ascii) was no JSON a reader could take, or failed mid-way
            stream.reconfigure(encoding="utf-8")


def _utf8(stream) -> bool:
    """Whether ``stream`` is UTF-8 already, or cannot be made so (a test's ``StringIO``)."""
    import codecs

    if not hasattr(stream, "reconfigure"):
        return True
    try:
        return codecs.lookup(stream.encoding).name == "utf-8"
    except LookupError:
        return False


def _narrowed(args: list[str]):
    """``app`` with only the command this call runs: typer builds a click command for
    every registered one at each start (33 here: ~10 ms of every cortex process). Help,
    ``--version`` and an unknown name get the whole app, so lists and messages stay whole."""
    import copy

    name = _command_name(args)
    registered(name)
    if name is None:
        return app
    commands = [c for c in app.registered_commands
                if (c.name or c.callback.__name__.lower().replace("_", "-")) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    narrow = copy.copy(app)
    narrow.registered_commands, narrow.registered_groups = commands, groups
    return narrow


def _command_name(args: list[str]) -> str | None:
    """The command ``args`` run (their first word after the global options), if any."""
    from cortex.cli.app import VAULT_FLAGS

    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in VAULT_FLAGS else 1
    return args[i] if i < len(args) else None


def _bug_report() -> str:
    import platform
    import tempfile
    import traceback

    from cortex import __version__

    fd, path = tempfile.mkstemp(prefix="cortex-bug-", suffix=".log")
    with open(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(f"cortex {__version__}\npython {platform.python_version()} on {platform.platform()}\n")
        fh.write("argv: " + " ".join(sys.argv) + "\n\n")
        fh.write(traceback.format_exc())
    # The last line says what broke; the whole traceback is in the report.
    sys.stderr.write("".join(traceback.format_exception_only(*sys.exc_info()[:2])).strip() + "\n")
    return path
