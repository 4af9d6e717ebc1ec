"""Installable and scriptable anywhere: the distribution name, what a vault records for
installing cortex elsewhere, `--version`, `--vault` after the command, one exit code per
situation, commands that paste, colour only on a terminal."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from conftest import REPO, VENV_BIN, cortex, git
from cortex.distribution import DIST, REQUIREMENTS
from cortex.timefmt import parse_time

PIP_INSTALL = re.compile(r"pip install\s+(.+)")


def test_the_distribution_name_is_this_projects_own():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(rf'^name = "{DIST}"', text, re.M)
    assert DIST != "cortex-memory"  # an unrelated project's name on PyPI


def test_no_generated_file_installs_another_package(tmp_path):
    """The nightly workflow and `cortex cron` used to `pip install cortex-memory`, a
    stranger's package, with contents: write. Every install line a vault carries or
    cortex prints must install this distribution, from the recorded source."""
    root = tmp_path / "vault"
    assert cortex("init", str(root)).returncode == 0
    requirement = [line for line in (root / REQUIREMENTS).read_text().splitlines()
                   if line.strip() and not line.startswith("#")]
    assert len(requirement) == 1 and requirement[0].startswith(DIST)
    assert "@" in requirement[0] or "==" in requirement[0]  # a source or a version, never a bare name
    cron = cortex("--vault", str(root), "cron")
    assert cron.returncode == 0
    texts = [p.read_text() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts] + [cron.stdout]
    installs = [m.group(1) for text in texts for m in PIP_INSTALL.finditer(text)]
    assert installs, "the workflow installs cortex somehow"
    for args in installs:
        assert args.split("#")[0].strip() == f"-r {REQUIREMENTS}", args


def test_the_recorded_source_is_the_checkout_this_cortex_came_from(tmp_path, monkeypatch):
    """A source checkout with an origin records `git+URL@commit`, credentials left out."""
    from cortex import distribution

    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    (clone / "f").write_text("x")
    git(clone, "add", "f")
    git(clone, "commit", "-qm", "x")
    commit = git(clone, "rev-parse", "HEAD").strip()
    spec = distribution._from_checkout(clone)
    assert spec == f"{DIST} @ git+{origin.resolve().as_uri()}@{commit}"
    git(clone, "remote", "set-url", "origin", "https://someone:tok3n@example.com/team/cortex.git")
    assert distribution._from_checkout(clone) == f"{DIST} @ git+https://example.com/team/cortex.git@{commit}"
    monkeypatch.setenv(distribution.SPEC_ENV, f"{DIST}==9.9.9")
    assert distribution.install_spec() == f"{DIST}==9.9.9"


def test_version():
    result = cortex("--version")
    assert result.returncode == 0
    assert re.fullmatch(rf"cortex \d+\.\d+\.\d+ \({DIST}, Python [\d.]+\)\n", result.stdout)


def test_default_timestamps_parse_on_every_python():
    """Python 3.10's fromisoformat reads no `Z` and only 3 or 6 fraction digits: cortex's
    own default timestamp was refused there, and the example quarantined 119 of 120."""
    assert parse_time("2026-02-16T15:23:14.527Z").microsecond == 527000
    assert parse_time("2026-02-16T15:23:14.5Z").microsecond == 500000
    assert parse_time("2026-02-16T15:23:14.1234567+02:00").hour == 13


def test_vault_is_accepted_after_the_command(vault):
    for argv in (("status", "--vault", str(vault.root)), ("status", "-C", str(vault.root)),
                 ("status", f"--vault={vault.root}"), ("--vault", str(vault.root), "status")):
        result = cortex(*argv, "--json")
        assert result.returncode == 0, (argv, result.stderr)


def test_one_exit_code_outside_a_vault(tmp_path):
    """`status` exited 1 and `index` 2; a script cannot tell "not a vault" from "nothing
    found" (query's 1), so every command says it with 2."""
    for argv in (("status",), ("run",), ("index",), ("query", "anything"), ("maintain",), ("write", "-t", "fact", "-b", "x")):
        result = cortex(*argv, cwd=tmp_path)
        assert result.returncode == 2, (argv, result.returncode, result.stderr)
        assert "cortex init" in result.stderr


def test_attribution_is_the_flag(vault):
    result = cortex("--vault", str(vault.root), "write", "-t", "fact", "-b", "The deploy key rotates monthly.",
                    "--attribution", "maya")
    assert result.returncode == 0, result.stderr
    assert '"attribution":"maya"' in vault.buffer_path.read_text()
    result = cortex("--vault", str(vault.root), "write", "-t", "fact", "-b", "Old flag still works.", "--author", "sam")
    assert result.returncode == 0 and '"attribution":"sam"' in vault.buffer_path.read_text()


def test_printed_commands_paste(tmp_path):
    """`cortex init "My Notes"` printed `cortex --vault ~/My Notes write …` (unquoted); the
    printed command now runs as pasted."""
    where = tmp_path / "My Notes"
    result = cortex("init", str(where))
    assert result.returncode == 0
    line = next(l for l in result.stderr.splitlines() if l.startswith("Next:"))
    first = line.split("`")[1]
    pasted = subprocess.run(["sh", "-c", first], capture_output=True, text=True,
                            env={**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"})
    assert pasted.returncode == 0, pasted.stderr
    assert "What to remember" in (where / "observer" / "observations.jsonl").read_text()


def test_the_example_prints_commands_that_paste_and_no_colour_into_a_pipe(tmp_path):
    (tmp_path / "demo").mkdir()
    env = {**os.environ, "CORTEX_DEMO_DIR": str(tmp_path / "demo")}
    demo = subprocess.run([str(VENV_BIN / "python"), "-m", "cortex.demo"], capture_output=True, text=True, env=env,
                          cwd=REPO)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "\033[" not in demo.stdout  # stdout is a pipe here
    queries = [l[2:] for l in demo.stdout.splitlines() if l.startswith("$ ") and " query " in l]
    assert queries
    for command in queries:
        words = shlex.split(command)
        assert words[words.index("query") + 1] == "how do we run database migrations safely"
    hint = demo.stdout.rstrip().splitlines()[-1].strip()
    pasted = subprocess.run(["sh", "-c", hint], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                            "HOME": os.environ["HOME"]})
    assert pasted.returncode == 0, (hint, pasted.stderr)


def test_the_session_start_hook_ships_with_the_package(vault):
    """`hooks/session-start.sh` was not installed with the package; `cortex hook
    session-start` reaches it from any installed cortex."""
    where = cortex("hook", "session-start", "--path")
    assert where.returncode == 0
    script = Path(where.stdout.strip())
    assert script.is_file() and "cortex/data/hooks" in str(script)
    assert (REPO / "hooks" / "session-start.sh").resolve() == script.resolve()
    assert cortex("--vault", str(vault.root), "write", "-t", "decision", "-b",
                  "Use Postgres 16 for the ledger service.").returncode == 0
    assert cortex("--vault", str(vault.root), "run").returncode == 0
    result = cortex("--vault", str(vault.root), "hook", "session-start")
    assert result.returncode == 0, result.stderr
    assert "Use Postgres 16 for the ledger service." in result.stdout


def test_a_batch_with_bad_lines_says_exactly_what_was_appended(vault):
    """`printf 'good\\nbad' | cortex write -` appended nothing but named only the bad
    line, so an agent took the good one as kept. All or nothing, and every line named."""
    import json

    batch = "\n".join([
        json.dumps({"type": "fact", "body": "The ledger runs on Postgres 16."}),
        "{not json",
        json.dumps({"type": "nope", "body": "An unknown type."}),
        json.dumps({"type": "fact", "body": "Backups run nightly."}),
    ]) + "\n"
    result = cortex("--vault", str(vault.root), "write", "-", "--json", input=batch)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["appended"] == 0 and report["total"] == 4
    assert [r["line"] for r in report["refused"]] == [2, 3]
    assert "nothing appended: 2 of 4" in result.stderr and "2 valid ones were not appended either" in result.stderr
    assert not vault.buffer_path.exists() or vault.buffer_path.read_text() == ""
    good = "\n".join(line for i, line in enumerate(batch.splitlines()) if i in (0, 3)) + "\n"
    result = cortex("--vault", str(vault.root), "write", "-", "--json", input=good)
    assert result.returncode == 0 and json.loads(result.stdout)["appended"] == 2
    assert len(vault.buffer_path.read_text().splitlines()) == 2


def test_a_held_line_can_be_corrected_and_sent_through_again(vault):
    """`quarantine promote` said "fix the line or discard it" and no command could fix
    it: `cortex quarantine edit` corrects it, in an editor or with --set."""
    import json

    bad = {"timestamp": "2026-02-16T15:23:14.527Z", "bucket": "explicit", "type": "decisions",
           "body": "Use Postgres 16 for the ledger service.", "attribution": "maya", "session_id": "cli"}
    vault.buffer_path.parent.mkdir(parents=True, exist_ok=True)
    vault.buffer_path.write_text(json.dumps(bad) + "\n" + json.dumps({**bad, "body": "Second held line."}) + "\n")
    assert cortex("--vault", str(vault.root), "run").returncode == 0
    held = json.loads(cortex("--vault", str(vault.root), "quarantine", "list", "--json").stdout)
    assert len(held) == 2
    first, second = (h["key"].replace(":", "-") for h in held)
    promote = cortex("--vault", str(vault.root), "quarantine", "promote", first)
    assert promote.returncode == 1 and "cortex quarantine edit" in promote.stderr

    fixed = cortex("--vault", str(vault.root), "quarantine", "edit", first, "--set", "type=decision")
    assert fixed.returncode == 0, fixed.stderr
    assert "1 memorized" in fixed.stderr
    # An editor, as a person would use it: a script that fixes the type in place.
    env = {**os.environ, "EDITOR": "sed -i s/decisions/decision/"}
    edited = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "quarantine", "edit", second],
                            capture_output=True, text=True, env=env)
    assert edited.returncode == 0, edited.stderr
    assert json.loads(cortex("--vault", str(vault.root), "quarantine", "list", "--json").stdout) == []
    notes = git(vault.root, "ls-tree", "-r", "--name-only", "HEAD", "vault/decisions").split()
    assert len([n for n in notes if n.endswith(".md")]) == 2


def test_a_hook_without_cortex_says_what_to_do(vault):
    """A commit from a client whose PATH has no cortex, in a vault whose recorded python
    is gone, printed `--: 1: exec: cortex: not found`."""
    root = vault.root
    git(root, "config", "--unset", "cortex.python")
    (root / "mind" / "facts" / "note.md").write_text("---\ntype: fact\n---\n\nThe cache warms in a minute.\n")
    git(root, "add", "mind/facts/note.md")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["git", "commit", "-m", "a note"], cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "cortex: not found" in out and "cortex hook install" in out
    assert "exec: cortex" not in out
