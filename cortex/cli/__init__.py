"""Entry point: ``cortex`` → ``main()``. One error handler for every command: a known
problem prints what to do and exits 1 (or its own code); a bug exits 3 and leaves a
report with versions and the traceback."""

from __future__ import annotations

import sys

from cortex.cli.app import app

# Command modules declare their commands on `app` (each keeps heavy imports inside
# functions). A call naming a command imports its module alone (`registered`): all eight
# cost every start ~15M instructions, a cold query's 2%.
MODULES = ("core", "hook", "search", "agents", "maintain", "sync", "memory", "watch")
# Each command and group, in `cortex --help`'s order: its module, and the first sentence
# of its help, which `cortex --help` lists without importing the modules
# (tests/test_startup.py holds both to what the modules declare).
COMMANDS = {
    "init": ("core", "Make PATH a ready vault: git repo, folders, schemas, config, hooks."),
    "write": ("core", "Append one validated observation to the buffer (or a batch from stdin with `-`)."),
    "run": ("core", "Process the buffer: validate, scan, score, dedup, route, write notes, commit."),
    "status": ("core", "Backlog, notes per partition and type, quarantine, pending reinforcements, last runs."),
    "validate": ("hook", "Check notes with the git hook's rules (ids unique across the vault); exit 1 on any error."),
    "index": ("search", "Update the search index (in .git/cortex/search/; only added, changed, moved or deleted notes)."),
    "query": ("search", "Search the memory: BM25 + embeddings fused, ranked by importance, confidence and recency."),
    "mcp": ("agents", "Serve the vault to agents over MCP on stdin/stdout: observe, query, recent, get_note, forget, "
                      "brief, status."),
    "reinforce": ("maintain", "Apply pending reinforcements to the notes (last_reinforced, count); bring faded ones "
                              "back from the archive (a forgotten or replaced memory stays there)."),
    "decay": ("maintain", "Archive memories whose effective importance fell below the forget threshold (mind only)."),
    "dedup": ("maintain", "Merge near-duplicate memories of the same type into the older note, and archive a memory "
                          "the newest one of its subject contradicts (another number, date, polarity or state)."),
    "maintain": ("maintain", "Run every maintenance job that is due, in order, catching up on missed runs."),
    "schedule": ("maintain", "Stay in the foreground: `cortex run` every few minutes, `cortex maintain` when jobs "
                             "are due."),
    "cron": ("maintain", "Print crontab lines, a systemd user timer (Persistent=true) and a CI schedule for this "
                         "vault."),
    "brief": ("maintain", "The digest: memorized, reinforced, merged, faded, quarantined, most active entities."),
    "sync": ("sync", "Fetch, merge (notes settled by cortex's merge driver), push, retrying when another machine "
                     "pushed first."),
    "clone": ("sync", "Join a shared vault on this machine: `git clone URL PATH`, then `cortex init PATH` (hooks, "
                      "merge driver)."),
    "show": ("memory", "Print one note: its file as written, or its fields with --json."),
    "forget": ("memory", "Archive a memory that is wrong or replaced, with the reason (one commit)."),
    "watch": ("watch", "Watch the vault's files, so that cortex's checks stat only the changed notes (Linux; "
                       "large vaults)."),
    "quarantine": ("core", "Review held and rejected buffer lines."),
    "hook": ("hook", "The git hooks pre-commit runs on staged notes (usable by hand too)."),
    "graph": ("maintain", "The graph of notes, entities and tags (.git/cortex/graph.json)."),
}
app.table = {name: summary for name, (_, summary) in COMMANDS.items()}


def registered(name: str | None = None) -> dict:
    """The commands of ``app`` once the module declaring ``name`` is imported (None, or a
    name not in ``COMMANDS``: every module), in ``COMMANDS``' order whatever was imported
    first (another's, a test's, last)."""
    import importlib

    for module in (COMMANDS[name][0],) if name in COMMANDS else MODULES:
        importlib.import_module(f"cortex.cli.{module}")
    order = list(COMMANDS)
    app.commands = dict(sorted(app.commands.items(),
                               key=lambda item: order.index(item[0]) if item[0] in COMMANDS else len(order)))
    return app.commands


def main(argv: list[str] | None = None) -> int:
    from cortex.cli.app import ReaderLeft, _options, hoist_vault
    from cortex.cli.terminal import guard_terminals
    from cortex.errors import CortexError

    _standard_streams()
    guard_terminals()
    _options.update(vault=None, json=None, emitted=False)  # of this call: tests call main() again in one process
    args = hoist_vault(sys.argv[1:] if argv is None else list(argv))
    try:
        return _run(args)
    except SystemExit as exc:  # --help (0), a group named alone (2), a command's own exit
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


def _run(args: list[str]) -> int:
    """Parse ``args`` (the global options first, then the command's: only its module is
    imported) and run the command: its exit code."""
    from cortex.cli.app import _first_word, _options, call, did_you_mean, parse
    from cortex.errors import UsageError

    i = _first_word(args)
    top = vars(app.parser("cortex").parse_args(args[:i]))  # --help lists every command from COMMANDS
    _options["vault"] = top["vault"]
    if top["version"]:
        import platform

        from cortex.distribution import DIST, version

        sys.stdout.write(f"cortex {version()} ({DIST}, Python {platform.python_version()})\n")
        return 0
    if i == len(args):
        if args:
            raise UsageError("missing command", "cortex --help")
        sys.stderr.write(app.parser("cortex").format_help())  # `cortex` alone: its help, a usage error
        return 2
    name = args[i]
    found = registered(name).get(name)
    if found is None:
        raise UsageError(f"no such command {name!r}" + did_you_mean(name, COMMANDS), "cortex --help")
    return call(*parse(found, f"cortex {name}", args[i + 1:]))


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


def _command_name(args: list[str]) -> str | None:
    """The command ``args`` run (their first word after the global options), if any."""
    from cortex.cli.app import _first_word

    i = _first_word(args)
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
