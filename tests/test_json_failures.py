"""`--json` on a failure: stdout is still one JSON document a script can parse, in the
shape `cortex sync --json` documents (README, "Exit codes"), stderr and the exit code
as without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import VENV_BIN, append_lines, cortex, git, observation

FAILURE_KEYS = {"ok", "error", "message", "hint", "paths", "exit_code"}


@pytest.fixture
def busy_vault(vault):
    """A vault with one memory and one pending repeat of it, whose lock another cortex
    holds (a waiting command gives up after 0.3 s)."""
    config = vault.root / "observer" / "config.yml"
    config.write_text(config.read_text() + "\nlock_timeout: 0.3\n")
    git(vault.root, "commit", "-qam", "shorter lock wait")
    append_lines(vault, json.dumps(observation()))
    assert cortex("--vault", str(vault.root), "run").returncode == 0
    append_lines(vault, json.dumps(observation()))
    with vault.lock():
        yield vault


def note_path(root: Path) -> str:
    return next(str(p.relative_to(root)) for p in (root / "mind").rglob("*.md"))


def assert_busy_failure(done) -> dict:
    assert done.returncode == 75, done.stdout + done.stderr
    assert done.stderr.startswith("cortex: the vault is busy")  # stderr as without --json
    out = json.loads(done.stdout)  # one document, nothing before or after it
    assert set(out) == FAILURE_KEYS
    assert out["ok"] is False and out["error"] == "busy" and out["exit_code"] == 75
    assert out["message"].startswith("the vault is busy") and "lock_timeout" in out["hint"]
    return out


@pytest.mark.parametrize("command", [
    ["run", "--json"],
    ["reinforce", "--json"],
    ["graph", "--json"],
    ["forget", "NOTE", "--reason", "wrong", "--json"],
])
def test_a_busy_vault_prints_the_failure_as_json(busy_vault, command):
    root = busy_vault.root
    args = [note_path(root) if a == "NOTE" else a for a in command]
    assert_busy_failure(cortex("--vault", str(root), *args))


def test_a_brief_written_to_a_busy_vault_prints_the_failure_not_the_brief(busy_vault):
    """The brief's document and exit 75 read as a brief written: a script sees the failure."""
    done = cortex("--vault", str(busy_vault.root), "brief", "--write", "--json")
    assert_busy_failure(done)


def test_the_same_failure_without_json_prints_nothing_on_stdout(busy_vault):
    done = cortex("--vault", str(busy_vault.root), "run")
    assert done.returncode == 75 and done.stdout == ""


@pytest.mark.parametrize("command", [["status", "--json"], ["query", "staging", "--json"], ["graph", "--json"]])
def test_no_vault_prints_the_failure_as_json(tmp_path, command):
    """`query` says its errors itself (exit 2, never 1: nothing found) in the same shape."""
    done = cortex("--vault", str(tmp_path / "nowhere"), *command)
    assert done.returncode == 2
    out = json.loads(done.stdout)
    assert out["ok"] is False and out["error"] == "no_vault" and out["exit_code"] == 2


def test_jsonl_prints_the_failure_as_one_line(tmp_path):
    done = cortex("--vault", str(tmp_path / "nowhere"), "quarantine", "list", "--jsonl")
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["error"] == "no_vault"


@pytest.mark.parametrize("command, flag, said", [
    (["query", "staging", "--limit", "0"], "--json", "0 is not in the range x>=1"),
    (["status", "--nosuch"], "--json", "no such option: --nosuch"),
    (["status", "--jsn"], "--json", "no such option: --jsn (did you mean --json?)"),
    (["quarantine", "list", "--reason", "nope"], "--jsonl", "--reason 'nope'"),
])
def test_a_usage_error_prints_the_failure_as_json(vault, command, flag, said):
    """A wrong option was said on stderr only (click's message): a script asking for
    JSON had nothing to parse."""
    done = cortex("--vault", str(vault.root), *command, flag)
    assert done.returncode == 2
    out = json.loads(done.stdout)
    assert set(out) == FAILURE_KEYS and out["error"] == "usage" and out["exit_code"] == 2
    assert said in out["message"] and out["hint"] == f"cortex {' '.join(command[:2 if command[0] == 'quarantine' else 1])} --help"
    assert said in done.stderr


def test_a_bug_prints_the_failure_as_json_with_the_report(tmp_path):
    script = ("import sys\nfrom cortex.cli.app import JSON, command\nfrom cortex.cli import main\n"
              "@command(JSON, name='trip')\ndef trip(json_):\n"
              "    raise RuntimeError('a bug')\n"
              "sys.exit(main(['trip', '--json']))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 3, done.stderr
    out = json.loads(done.stdout)
    assert out["error"] == "bug" and out["exit_code"] == 3
    assert Path(out["hint"].removeprefix("details written to ")).read_text().count("RuntimeError: a bug") == 1


@pytest.fixture
def memorized(vault):
    append_lines(vault, json.dumps(observation()))
    assert cortex("--vault", str(vault.root), "run").returncode == 0
    return vault


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command, code", [
    (["query", "staging", "--json"], 2),
    (["query", "staging", "--paths"], 2),
    (["index", "--json"], 2),
    (["status", "--json"], 1),
])
def test_a_stdout_that_cannot_be_written_is_an_error_said_once(memorized, command, code):
    """`cortex query --json > answer.json` on a full disk: the query found its note, so
    exit 1 ("nothing found") misleads; it is an error (2), said on stderr without a
    traceback — the failure's own JSON cannot be written there either."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(memorized.root), *command],
                              stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == code
    assert done.stderr.endswith("cortex: No space left on device\n")
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_a_failure_whose_reader_left_keeps_its_exit_code(tmp_path):
    """A failed query whose reader closed the pipe first exits as the failure (2), not 0."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone: cortex's first write meets a broken pipe
    try:
        done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(tmp_path / "nowhere"), "query", "x", "--json"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr
