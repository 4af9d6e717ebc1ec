"""Start-up is a feature: the paths agents call mid-conversation (`cortex --help`,
`cortex status`, `cortex write`) never import git, numerical or search libraries, and
only `write` (which validates a line) imports jsonschema.

Each case runs the real entry point in a fresh interpreter and reports `sys.modules`.
No wall-clock assertions: `bench/bench_startup.py` prints the times.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import VENV_BIN

HEAVY = ("pygit2", "numpy", "whoosh", "model2vec", "tokenizers", "safetensors")

PROBE = r"""
import json, sys
from cortex.cli import main
argv = json.loads(sys.argv[1])
try:
    code = main(argv)
except SystemExit as exc:  # an exit the CLI did not turn into a code
    code = exc.code
sys.stdout.flush()
sys.stderr.write("\n@@MODULES@@" + json.dumps({"code": code, "modules": sorted(sys.modules)}) + "\n")
"""


def probe(argv: list[str], cwd) -> tuple[int, set[str], str]:
    code, modules, out = probe_modules(argv, cwd)
    return code, {m.split(".")[0] for m in modules}, out


def probe_modules(argv: list[str], cwd) -> tuple[int, set[str], str]:
    """(exit code, every module imported, stdout) of the CLI run with ``argv``."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert "@@MODULES@@" in proc.stderr, proc.stderr
    result = json.loads(proc.stderr.rsplit("@@MODULES@@", 1)[1])
    return result["code"] or 0, set(result["modules"]), proc.stdout


def heavy_in(modules: set[str]) -> list[str]:
    return [m for m in HEAVY if m in modules]


def test_help_imports_nothing_heavy(tmp_path):
    code, modules, out = probe_modules(["--help"], tmp_path)
    assert code == 0
    assert "write" in out and "run" in out  # it really printed the help
    assert heavy_in({m.split(".")[0] for m in modules}) == []
    assert not {"jsonschema", "typer", "click"} & modules
    # every command listed from the table, none of the modules declaring them imported
    assert sorted(m for m in modules if m.startswith("cortex.cli.")) == ["cortex.cli.app", "cortex.cli.terminal"]


def test_status_imports_nothing_heavy(vault):
    code, modules, out = probe(["--vault", str(vault.root), "status", "--json"], vault.root)
    assert code == 0
    assert json.loads(out)["backlog"]["lines"] == 0
    assert heavy_in(modules) == []
    assert "jsonschema" not in modules


@pytest.mark.parametrize(
    "argv",
    [
        ["write", "--type", "fact", "--body", "The staging database restarts on Sundays.", "--entity", "Ledgerline:project"],
        ["write", "--type", "decision", "--body", "Use local git only.", "--bucket", "ambient", "--importance", "0.8",
         "--session", "022a598a-7ca8-4ccf-80bb-f1919386421e", "--author", "maya", "--tag", "git"],
        # the reference checked against the HEAD cache, without pygit2
        ["write", "--type", "fact", "--body", "The standup moved to 03:30.", "--supersedes", "01a2-typo"],
    ],
)
def test_write_imports_no_git_or_numerics(vault, argv):
    code, modules, _ = probe(["--vault", str(vault.root), *argv], vault.root)
    assert code == 0
    lines = vault.buffer_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["body"] == argv[argv.index("--body") + 1]
    assert heavy_in(modules) == []


def test_write_batch_from_stdin_imports_no_git_or_numerics(vault):
    batch = "\n".join(
        json.dumps({"type": "lesson", "body": f"Check the lock matrix before migration {n}.", "attribution": "maya"})
        for n in range(3)
    )
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(["--vault", str(vault.root), "write", "-"])],
        cwd=vault.root, input=batch + "\n", capture_output=True, text=True, timeout=60,
    )
    result = json.loads(proc.stderr.rsplit("@@MODULES@@", 1)[1])
    assert (result["code"] or 0) == 0, proc.stderr
    assert len(vault.buffer_path.read_text(encoding="utf-8").splitlines()) == 3
    assert heavy_in({m.split(".")[0] for m in result["modules"]}) == []


def test_a_refused_write_imports_no_git_or_numerics(vault):
    code, modules, _ = probe(["--vault", str(vault.root), "write", "--type", "observation", "--body", "x"], vault.root)
    assert code == 1
    assert not vault.buffer_path.exists() or vault.buffer_path.read_text() == ""
    assert heavy_in(modules) == []


def test_help_lists_every_command_and_an_unknown_one_is_a_usage_error():
    listed = subprocess.run([str(VENV_BIN / "cortex"), "--help"], capture_output=True, text=True).stdout
    commands = listed.split("Commands:\n", 1)[1]
    names = [line.split()[0] for line in commands.splitlines() if line[2:3].strip()]
    assert names == ["init", "write", "run", "status", "validate", "index", "query", "mcp", "reinforce", "decay",
                     "dedup", "maintain", "schedule", "cron", "brief", "sync", "clone", "show", "forget", "watch",
                     "quarantine", "hook", "graph"]
    unknown = subprocess.run([str(VENV_BIN / "cortex"), "nosuch"], capture_output=True, text=True)
    assert unknown.returncode == 2 and unknown.stderr == "cortex: no such command 'nosuch'\n  hint: cortex --help\n"
    alone = subprocess.run([str(VENV_BIN / "cortex")], capture_output=True, text=True)
    assert alone.returncode == 2 and alone.stderr == listed and alone.stdout == ""  # its help, as a usage error


def test_a_command_imports_its_own_module_of_commands_alone(vault):
    """Registering all 33 commands imported eight modules on every start, ~15M of a cold
    query's ~870M instructions; --help still lists every one, in the same order."""
    code, modules, _ = probe_modules(["--vault", str(vault.root), "query", "zzz", "--lexical-only"], vault.root)
    assert code == 1
    assert sorted(m for m in modules if m.startswith("cortex.cli.")) == ["cortex.cli.app", "cortex.cli.search",
                                                                          "cortex.cli.terminal"]
    code, modules, _ = probe_modules(["--vault", str(vault.root), "hook", "validate", "--help"], vault.root)
    assert code == 0 and "cortex.cli.hook" in modules and "cortex.cli.core" not in modules
    fresh = subprocess.run([sys.executable, "-m", "cortex", "--help"], capture_output=True, text=True, cwd=vault.root)
    after = ("import sys; from cortex.cli import main; "
             "[main([name, '--help']) for name in ('watch', 'query', 'hook', 'status')]; main(['--help'])")
    later = subprocess.run([sys.executable, "-c", after], capture_output=True, text=True, cwd=vault.root)
    assert fresh.returncode == later.returncode == 0 and "quarantine" in fresh.stdout
    assert later.stdout.endswith(fresh.stdout)  # after four modules imported in another order


def test_the_table_of_command_modules_is_what_the_modules_register():
    """`cortex --help` lists the table's summaries without importing the modules: each is
    the first sentence of the command's own help, in the module the table names."""
    code = ("import json; from cortex.cli import COMMANDS, registered\n"
            "def module(cmd):\n"
            "    funcs = [cmd.func] if cmd.func else [c.func for c in cmd.commands.values()]\n"
            "    return {f.__module__.rsplit('.', 1)[1] for f in funcs}.pop()\n"
            "seen = {name: [module(cmd), cmd.summary] for name, cmd in registered().items()}\n"
            "print(json.dumps([seen, COMMANDS]))")
    seen, table = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                            check=True).stdout)
    assert list(seen.items()) == list(table.items())


def test_a_listing_of_recent_notes_imports_no_numerics(vault):
    """`cortex query --recent` (what the session-start hook runs) reads the time order
    value by value in a small vault: numpy's import would cost more than it saves."""
    vault.write({"type": "fact", "body": "The staging database restarts on Sundays.", "session_id": "cli",
                 "timestamp": "2026-11-27T06:00:00.000Z", "bucket": "explicit", "attribution": "maya"})
    vault.run()
    argv = ["--vault", str(vault.root), "query", "--recent", "3650d", "--paths"]
    probe(argv, vault.root)  # the first query builds the index (and its vectors)
    code, modules, out = probe(argv, vault.root)
    assert code == 0 and out.strip().endswith(".md")
    assert "numpy" not in modules


def test_a_query_imports_only_what_it_searches_with(vault):
    """A cold hybrid `cortex query`: not the records of `cortex run` (`cortex.model`, whose
    dataclasses every command's CLI paid ~10 ms to create)."""
    vault.write({"type": "fact", "body": "The staging database restarts on Sundays.", "session_id": "cli",
                 "timestamp": "2026-11-27T06:00:00.000Z", "bucket": "explicit", "attribution": "maya"})
    vault.run()
    argv = ["--vault", str(vault.root), "query", "staging database", "--paths"]
    probe_modules(argv, vault.root)  # the first query builds the index
    code, modules, out = probe_modules(argv, vault.root)
    assert code == 0 and out.strip().endswith(".md")
    assert "numpy" in modules and "whoosh.index" in modules  # it really searched, both ways
    assert "cortex.model" not in modules


def test_a_query_told_to_start_no_watcher_reads_no_settings(vault, monkeypatch):
    """With CORTEX_WATCH=off (scripts, benches) a query decides against starting the
    watcher before the vault's settings are read: it imported cortex.config, whose
    dataclasses cost a cold query ~25M instructions, only to learn the variable's name.
    Without it the settings are read as before."""
    vault.write({"type": "fact", "body": "The staging database restarts on Sundays.", "session_id": "cli",
                 "timestamp": "2026-11-27T06:00:00.000Z", "bucket": "explicit", "attribution": "maya"})
    vault.run()
    argv = ["--vault", str(vault.root), "query", "staging database", "--paths"]
    for _ in range(2):  # the first query builds the index, the second records git's status in it
        probe_modules(argv, vault.root)
    monkeypatch.setenv("CORTEX_WATCH", "off")
    code, modules, out = probe_modules(argv, vault.root)
    assert code == 0 and out.strip().endswith(".md")
    assert "cortex.config" not in modules
    monkeypatch.delenv("CORTEX_WATCH")
    code, modules, out = probe_modules(argv, vault.root)
    assert code == 0 and out.strip().endswith(".md")
    assert "cortex.config" in modules  # `watch:` read from observer/config.yml


DATACLASSES = r"""
import dataclasses, json, sys
made, process = [], dataclasses._process_class
def spy(cls, *args):
    made.append(f"{cls.__module__}.{cls.__qualname__}")
    return process(cls, *args)
dataclasses._process_class = spy
from cortex.cli import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
sys.stderr.write("\n@@MADE@@" + json.dumps(made) + "\n")
"""


def test_a_query_makes_its_small_records_without_generating_code(vault):
    """Every dataclass a cold query's modules define costs it 2-5M instructions (~0.5 ms):
    its methods are written as source and compiled as the module loads. The small
    immutable records on the query's path (git's answer, a file as a writer saw it, a
    span of time, the fusion weights, a result, a note type) are NamedTuples, ~0.6M each (~1M for a
    result's sixteen fields, ~8M as a dataclass)."""
    vault.write({"type": "fact", "body": "The staging database restarts on Sundays.", "session_id": "cli",
                 "timestamp": "2026-11-27T06:00:00.000Z", "bucket": "explicit", "attribution": "maya"})
    vault.run()
    argv = ["--vault", str(vault.root), "query", "staging database last week", "--paths"]
    probe_modules(argv, vault.root)  # the first query builds the index
    proc = subprocess.run([sys.executable, "-c", DATACLASSES, json.dumps(argv)], cwd=vault.root, capture_output=True,
                          text=True, timeout=60)
    made = set(json.loads(proc.stderr.rsplit("@@MADE@@", 1)[1]))
    assert proc.stdout.strip().endswith(".md") and "cortex.search.index.State" in made  # it really searched
    assert not made & {"cortex.gitcli.Result", "cortex.gitcli.Raw", "cortex.fsutil.Before", "cortex.search.when.Span",
                       "cortex.search.fusion.FusionWeights", "cortex.search.query.Hit", "cortex.taxonomy.TypeSpec"}


def test_a_sync_with_nothing_to_do_imports_no_git_library(vault, tmp_path):
    """`cortex sync` with nothing to fetch, settle, recover or push (what a schedule runs
    most often) asks git itself: pygit2's import was two fifths of it. The first sync,
    which pushes and settles, still opens the repository."""
    vault.write({"type": "fact", "body": "The staging database restarts on Sundays.", "session_id": "cli",
                 "timestamp": "2026-11-27T06:00:00.000Z", "bucket": "explicit", "attribution": "maya"})
    vault.run()
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "remote", "add", "origin", str(remote)], cwd=vault.root, check=True)
    argv = ["--vault", str(vault.root), "sync", "--json"]
    code, modules, out = probe(argv, vault.root)
    assert code == 0 and json.loads(out)["pushed"] and "pygit2" in modules
    code, modules, out = probe(argv, vault.root)
    report = json.loads(out)
    assert code == 0 and report["integrated"] == "up to date" and not report["pushed"]
    assert (report["ahead"], report["behind"]) == (0, 0)
    assert heavy_in(modules) == []
