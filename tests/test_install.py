"""Installable and scriptable anywhere: the distribution name, what a vault records for
installing cortex elsewhere, `--version`, `--vault` after the command, one exit code per
situation, commands that paste, colour only on a terminal."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

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
    if requirement:  # a source or a version, never a bare name
        assert len(requirement) == 1 and requirement[0].startswith(DIST)
        assert "@" in requirement[0] or "==" in requirement[0]
    else:  # this checkout's commit is on no remote: none at all, and the file says why
        assert "No cortex is named here yet" in (root / REQUIREMENTS).read_text()
    cron = cortex("--vault", str(root), "cron")
    assert cron.returncode == 0
    texts = [p.read_text() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts] + [cron.stdout]
    installs = [m.group(1) for text in texts for m in PIP_INSTALL.finditer(text)]
    assert installs, "the workflow installs cortex somehow"
    for args in installs:
        assert args.split("#")[0].strip() == f"-r {REQUIREMENTS}", args


def test_the_recorded_source_is_the_checkout_this_cortex_came_from(tmp_path, monkeypatch):
    """A clone whose commit a remote has records `git+URL@commit`, credentials left out;
    a commit no remote branch holds, or a remote that is a folder of this machine, records
    nothing installable: the line is left commented out, saying why."""
    from cortex import distribution

    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    (clone / "f").write_text("x")
    git(clone, "add", "f")
    git(clone, "commit", "-qm", "x")
    git(clone, "push", "-q", "origin", "HEAD")
    commit = git(clone, "rev-parse", "HEAD").strip()
    local = distribution._from_checkout(clone)  # pushed, but to a folder of this machine
    assert local.spec is None and "folder on this machine" in local.problem
    # pip before 24.2 refuses `git+file:///…`: the line, once uncommented, reads in both
    assert local.candidate == f"{DIST} @ git+file://localhost{origin.resolve()}@{commit}"
    git(clone, "remote", "set-url", "origin", "https://someone:tok3n@example.com/team/cortex.git")
    assert distribution._from_checkout(clone).spec == f"{DIST} @ git+https://example.com/team/cortex.git@{commit}"
    git(clone, "remote", "set-url", "origin", "git@github.com:team/cortex.git")
    assert distribution._from_checkout(clone).spec == f"{DIST} @ git+ssh://git@github.com/team/cortex.git@{commit}"

    git(clone, "commit", "-q", "--allow-empty", "-m", "a local tweak, never pushed")
    tweak = git(clone, "rev-parse", "HEAD").strip()
    unpushed = distribution._from_checkout(clone)
    assert unpushed.spec is None and tweak[:12] in unpushed.problem and "not pushed" in unpushed.problem
    assert unpushed.candidate == f"{DIST} @ git+ssh://git@github.com/team/cortex.git@{tweak}"
    text = distribution.requirements_text(unpushed)
    assert [line for line in text.splitlines() if not line.startswith("#")] == []  # nothing pip would install
    flat = " ".join(line.removeprefix("# ") for line in text.splitlines())  # the comment wraps where the path ends
    assert text.endswith(f"# {unpushed.candidate}\n") and "push that commit to origin" in flat
    git(clone, "remote", "add", "fork", "https://example.com/me/cortex.git")
    git(clone, "update-ref", "refs/remotes/fork/tweak", tweak)  # pushed to another remote: that one is named
    assert distribution._from_checkout(clone).spec == f"{DIST} @ git+https://example.com/me/cortex.git@{tweak}"

    plain = tmp_path / "plain"
    plain.mkdir()
    assert distribution._from_checkout(plain).spec is None  # not a clone
    monkeypatch.setenv(distribution.SPEC_ENV, f"{DIST}==9.9.9")
    assert distribution.recorded_source().spec == f"{DIST}==9.9.9"


BACKEND = """\
import base64, hashlib, os, zipfile

NAME, VERSION = "cortex_git_memory", "0.1.0"
FILES = sorted("cortex/" + name for name in os.listdir("cortex") if name.endswith(".py"))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VERSION}.dist-info"
    entries = {f: open(f, "rb").read() for f in FILES}
    entries[f"{info}/METADATA"] = b"Metadata-Version: 2.1\\nName: cortex-git-memory\\nVersion: 0.1.0\\n"
    entries[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    record = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
              for p, d in entries.items()] + [f"{info}/RECORD,,"]
    entries[f"{info}/RECORD"] = ("\\n".join(record) + "\\n").encode()
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as whl:
        for path, data in entries.items():
            whl.writestr(path, data)
    return name
"""


def _pip_with(version_below: tuple[int, int]) -> Path | None:
    """A python whose bundled pip is older than ``version_below`` (here: 3.10's pip 23)."""
    import glob
    import shutil

    roots = [os.environ.get("PYENV_ROOT", ""), "/root/.pyenv", str(Path(os.path.expanduser("~")).parent / ".pyenv")]
    found = [shutil.which("python3.10")] + [p for r in roots if r for p in sorted(glob.glob(f"{r}/versions/3.10*/bin/python"))]
    for exe in filter(None, found):
        done = subprocess.run([exe, "-m", "pip", "--version"], capture_output=True, text=True)
        words = done.stdout.split()
        if done.returncode == 0 and len(words) > 1 and tuple(map(int, words[1].split(".")[:2])) < version_below:
            return Path(exe)
    return None


@pytest.mark.slow
def test_a_cortex_installed_from_this_machine_only_records_no_line_other_machines_cannot_install(tmp_path):
    """Installed with real pip from a wheel, from a clone at a commit never pushed, or from
    a git repository on this machine, `observer/requirements.txt` named this machine's
    paths (`@ file:///…whl`, `git+file:///…`, which pip 23 refuses outright) or a commit
    the origin never saw, and nothing was said. Now only a source another machine can
    reach is recorded; else no line, and the comment says why and what to write."""
    proj = tmp_path / "proj"
    (proj / "cortex").mkdir(parents=True)
    for module in (REPO / "cortex").glob("*.py"):  # the package's top-level modules (what distribution imports)
        (proj / "cortex" / module.name).write_bytes(module.read_bytes())
    (proj / "_backend.py").write_text(BACKEND)
    (proj / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "_backend"\nbackend-path = ["."]\n')
    git(tmp_path, "init", "-q", str(proj))
    git(proj, "add", "-A")
    git(proj, "commit", "-qm", "cortex")
    git(proj, "remote", "add", "origin", "https://example.com/team/cortex.git")
    git(proj, "update-ref", "refs/remotes/origin/main", "HEAD")  # as after a push
    pushed = git(proj, "rev-parse", "HEAD").strip()
    venv = tmp_path / "venv"
    # no pip of its own (bootstrapping one is most of this test's time): this pip installs
    # into it, run by the venv's python (`--python`), as pip installed there would
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    into = [sys.executable, "-m", "pip", "--python", str(py)]
    pip = [*into, "install", "-q", "--no-deps", "--no-index", "--force-reinstall", "--disable-pip-version-check"]

    def recorded(source: str, cwd=tmp_path):
        subprocess.run([*pip, source], check=True, cwd=cwd, capture_output=True)
        code = ("import json; from cortex import distribution as d; s = d.recorded_source(); "
                "print(json.dumps([s.spec, s.problem, s.candidate, d.requirements_text(s), d.warning(s)]))")
        out = subprocess.run([str(py), "-I", "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path)
        return json.loads(out.stdout)

    # from a clone whose commit the remote has: that commit, at the remote's URL
    spec, *_ = recorded(str(proj))
    assert spec == f"{DIST} @ git+https://example.com/team/cortex.git@{pushed}"

    # a wheel built here, installed from its file
    dist = tmp_path / "dist"
    subprocess.run([*into, "wheel", "-q", "--no-deps", "--no-index", "-w", str(dist), str(proj)],
                   check=True, capture_output=True)
    wheel = next(dist.glob("*.whl"))
    spec, problem, candidate, text, warning = recorded(str(wheel))
    assert spec is None and candidate is None and str(wheel) in problem
    assert [line for line in text.splitlines() if line.strip() and not line.startswith("#")] == []
    assert "CORTEX_INSTALL_SPEC" in warning and REQUIREMENTS in warning

    # a commit never pushed
    git(proj, "commit", "-q", "--allow-empty", "-m", "a local tweak")
    tweak = git(proj, "rev-parse", "HEAD").strip()
    spec, problem, candidate, text, warning = recorded(str(proj))
    assert spec is None and tweak[:12] in problem and "push" in warning
    assert candidate == f"{DIST} @ git+https://example.com/team/cortex.git@{tweak}" and f"# {candidate}" in text

    # from a git repository on this machine: the commented line is one pip 23 and pip 26 both read
    spec, problem, candidate, text, warning = recorded(f"git+file://localhost{proj}@{tweak}")
    assert spec is None and candidate == f"{DIST} @ git+file://localhost{proj}@{tweak}"
    old = _pip_with((24, 2))
    if old is not None:  # pip 23 installs the line as written (it refused `git+file:///…`)
        (tmp_path / "req.txt").write_text(candidate + "\n")
        # that python's own pip, installing into a folder (no venv to bootstrap a pip into)
        done = subprocess.run([str(old), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check",
                               "--target", str(tmp_path / "site23"), "-r", str(tmp_path / "req.txt")],
                              capture_output=True, text=True, env={**os.environ, "PIP_USER": "0"})
        assert done.returncode == 0, done.stderr


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
    assert (REPO / "hooks" / "session-start.sh").read_bytes() == script.read_bytes()  # a link here, a copy in the sdist
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


def test_init_says_when_it_can_record_no_cortex_and_the_workflow_stops_saying_why(tmp_path, monkeypatch, capsys):
    """`cortex init` wrote a requirements line for this machine only and said nothing; the
    nightly workflow then failed with pip's (or a missing `cortex`'s) words."""
    import yaml

    from cortex import distribution
    from cortex.vault import Vault

    here = distribution.Source(None, "it was installed from the file /tmp/x/cortex.whl, which only this machine has",
                               f"name a source other machines can install in {REQUIREMENTS}")
    monkeypatch.setattr(distribution, "recorded_source", lambda: here)
    vault, _ = Vault.init(tmp_path / "vault")
    err = capsys.readouterr().err
    assert f"cortex: warning: {REQUIREMENTS} names no cortex" in err and "/tmp/x/cortex.whl" in err
    assert distribution.SPEC_ENV in err
    text = (vault.root / REQUIREMENTS).read_text()
    assert [line for line in text.splitlines() if line.strip() and not line.startswith("#")] == []

    workflow = yaml.safe_load((vault.root / ".github" / "workflows" / "cortex-nightly.yml").read_text())
    install = next(s["run"] for s in workflow["jobs"]["maintain"]["steps"] if "requirements.txt" in s.get("run", ""))
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "pip").write_text("#!/bin/sh\necho pip ran\n")
    (shim / "pip").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}
    step = subprocess.run(["sh", "-ec", install], cwd=vault.root, capture_output=True, text=True, env=env)
    assert step.returncode == 1 and "pip ran" not in step.stdout
    assert "names no cortex" in step.stdout and "/tmp/x/cortex.whl" in step.stdout
    (vault.root / REQUIREMENTS).write_text(f"# pinned\n{DIST}==0.1.0\n")
    step = subprocess.run(["sh", "-ec", install], cwd=vault.root, capture_output=True, text=True, env=env)
    assert step.returncode == 0 and "pip ran" in step.stdout


def test_the_sdist_carries_the_license_and_everything_its_tests_read():
    """No LICENSE file though pyproject says MIT, and the sdist held tests/ (setuptools'
    default) without conftest.py, examples/, scripts/, bench/ or the example vault they
    read: a packager could run none of them. MANIFEST.in (read here by setuptools' own
    parser, offline) now takes every file the repository tracks."""
    import pytest

    filelist = pytest.importorskip("setuptools.command.egg_info")
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License") and re.search(r'^license = "MIT"', (REPO / "pyproject.toml").read_text(), re.M)
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout (an unpacked sdist): nothing to compare with")
    files = filelist.FileList()
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        files.findall()
        for line in (REPO / "MANIFEST.in").read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                files.process_template_line(line)
    finally:
        os.chdir(cwd)
    shipped = set(files.files) | {"README.md", "pyproject.toml", "MANIFEST.in"}  # setuptools adds these, and the packages
    missing = [p for p in tracked.stdout.split("\0") if p and not p.startswith("cortex/") and p not in shipped]
    assert missing == [], f"tracked files the sdist would leave out: {missing}"


def _older_python() -> str | None:
    """A Python older than every supported one installed here (pyenv's, say), or None."""
    for v in ("3.9", "3.8", "3.7"):
        found = subprocess.run([str(REPO / "scripts" / "find-python"), v], capture_output=True, text=True)
        if found.returncode == 0:
            return found.stdout.strip()
    return None


def _make_tree(tmp_path: Path) -> Path:
    """The Makefile and what its set-up reads, nothing to install: a make that got as far
    as pip fails there, fast and offline."""
    tree = tmp_path / "checkout"
    (tree / "scripts").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml", "scripts/find-python"):
        (tree / name).write_bytes((REPO / name).read_bytes())
    (tree / "scripts" / "find-python").chmod(0o755)
    return tree


def _make_env(tmp_path: Path, path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "MAKE", "PYTHON"))}
    env.update(PATH=path, HOME=str(tmp_path), PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def test_make_picks_a_supported_python_when_python3_is_older(tmp_path):
    """`make run` on a machine whose python3 is 3.9 (macOS's, Debian 11's) made .venv with
    it and stopped at pip's "requires a different Python"; the Makefile now takes python3
    only when it is supported, else the newest supported Python installed."""
    old = _older_python()
    if old is None:
        pytest.skip("no Python older than 3.10 installed here")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(old)
    current = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (bin_dir / current).symlink_to(sys.executable)
    env = _make_env(tmp_path, f"{bin_dir}:/usr/bin:/bin")
    picked = subprocess.run(["make", "-n", "install"], cwd=_make_tree(tmp_path), capture_output=True, text=True,
                            env=env)
    assert picked.returncode == 0, picked.stderr
    assert f"{bin_dir / current} -m venv" in picked.stdout, picked.stdout


def test_make_with_an_older_python_says_what_is_needed_and_makes_no_venv(tmp_path):
    old = _older_python()
    if old is None:
        pytest.skip("no Python older than 3.10 installed here")
    tree = _make_tree(tmp_path)
    made = subprocess.run(["make", "install", f"PYTHON={old}"], cwd=tree, capture_output=True, text=True,
                          env=_make_env(tmp_path, "/usr/bin:/bin"))
    assert made.returncode != 0
    assert "cortex needs Python 3.10 or newer" in made.stderr and "make run PYTHON=" in made.stderr, made.stderr
    assert not (tree / ".venv").exists()


def test_make_replaces_a_venv_an_unsupported_python_made(tmp_path):
    """After that failure, `make run PYTHON=python3.12` kept the 3.9 .venv (venv does not
    replace an existing one's interpreter) and failed the same way until the person found
    `make clean`; a .venv whose Python is unsupported is now made again."""
    old = _older_python()
    if old is None:
        pytest.skip("no Python older than 3.10 installed here")
    tree = _make_tree(tmp_path)
    subprocess.run([old, "-m", "venv", "--without-pip", str(tree / ".venv")], check=True)
    subprocess.run(["make", "install", f"PYTHON={sys.executable}"], cwd=tree, capture_output=True, text=True,
                   env=_make_env(tmp_path, "/usr/bin:/bin"))  # pip then finds nothing to install: no index
    venv_python = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True)
    assert venv_python.stdout.strip() == str(sys.version_info[:2])


def test_the_makefile_minimum_python_is_pyprojects():
    minimum = re.search(r'^requires-python = ">=(\d+)\.(\d+)"', (REPO / "pyproject.toml").read_text(), re.M).groups()
    makefile = (REPO / "Makefile").read_text()
    assert f"sys.version_info < ({minimum[0]}, {minimum[1]})" in makefile
    assert f"needs Python {minimum[0]}.{minimum[1]} or newer" in makefile
    assert re.search(r"^PYTHONS \?= (\S+)", makefile, re.M).group(1) == ".".join(minimum)


def test_every_package_cortex_imports_is_one_it_declares():
    """cortex/mcp_server.py imports pydantic and typing_extensions, which only mcp's own
    requirements brought: a checker of declared dependencies (deptry, a distribution's
    packager) flagged them, and an mcp that dropped either would break `cortex mcp`."""
    import ast
    from importlib.metadata import packages_distributions

    block = re.search(r"^dependencies = \[(.*?)^\]", (REPO / "pyproject.toml").read_text(), re.S | re.M).group(1)
    declared = {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower().replace("_", "-")
                for r in re.findall(r'^\s*"([^"]+)"', block, re.M)}
    dists = packages_distributions()
    undeclared = []
    for path in sorted((REPO / "cortex").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {name.split(".")[0] for name in names} - set(sys.stdlib_module_names) - {"cortex"}:
                if not {d.lower().replace("_", "-") for d in dists.get(top, [])} & declared:
                    undeclared.append(f"{path.relative_to(REPO)}:{node.lineno} imports {top}")
    assert undeclared == []
