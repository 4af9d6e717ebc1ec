"""Shared fixtures. Every test runs with HOME, git config and pre-commit's cache in a
temp dir, so no test can read or touch the real home directory."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def pytest_collection_modifyitems(items):
    """The long-running cases (marked `slow`) first: under xdist the workers take tests
    from the front of the list, so a case of minutes started last would leave one worker
    running it alone at the end. Otherwise the order is the files' own."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    _isolate(monkeypatch, home)
    return home


def _isolate(monkeypatch, home: Path) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("PRE_COMMIT_HOME", str(home / ".cache" / "pre-commit"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Person")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "person@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Person")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "person@example.com")
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CORTEX_VAULT", raising=False)


@pytest.fixture(scope="session")
def vault_template(tmp_path_factory) -> Path:
    """A vault as `cortex init` makes it, made once per test process (init runs git,
    pre-commit's installer and a first commit through the hook: most of a short test's
    time) and copied for each test that wants a ready vault (`ready_vault`). Tests of
    init itself run it."""
    from cortex.vault import Vault

    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, tmp_path_factory.mktemp("template-home"))
        root = tmp_path_factory.mktemp("template") / "vault"
        Vault.init(root)
    return root


@pytest.fixture
def ready_vault(vault_template):
    """A function making PATH a fresh vault, as `cortex init PATH` would (a copy of
    `vault_template`: nothing in a vault names its own folder)."""

    def make(path) -> Path:
        shutil.copytree(vault_template, path, symlinks=True)
        # the copies have new inodes and times: git's index is told, or it takes every
        # file for one it must look at again (a sparse checkout then keeps them all)
        subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=path, capture_output=True, check=False)
        return Path(path)

    return make


@pytest.fixture
def vault(tmp_path, ready_vault):
    from cortex.vault import Vault

    return Vault(ready_vault(tmp_path / "vault"))


def observation(**fields) -> dict:
    """A valid observation; keyword arguments override or (with None) remove fields."""
    obs = {
        "timestamp": "2026-02-16T15:23:14.527Z",
        "bucket": "explicit",
        "type": "fact",
        "body": "The staging database is rebuilt every night at 02:00.",
        "attribution": "owner",
        "session_id": "022a598a-7ca8-4ccf-80bb-f1919386421e",
    }
    for key, value in fields.items():
        if value is None:
            obs.pop(key, None)
        else:
            obs[key] = value
    return obs


def append_lines(vault, *lines) -> None:
    """Append raw buffer lines (dicts are JSON-encoded) the way an agent's `>>` would."""
    vault.buffer_path.parent.mkdir(parents=True, exist_ok=True)
    with open(vault.buffer_path, "a", encoding="utf-8") as fh:
        for line in lines:
            fh.write((json.dumps(line, ensure_ascii=False) if isinstance(line, dict) else line) + "\n")


def git(root, *args, check=True) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=check).stdout


@contextlib.contextmanager
def watching(root: Path):
    """`cortex watch --background` started on ``root``, killed at the end (a test that
    failed may have left it running)."""
    done = cortex("--vault", str(root), "watch", "--background")
    assert done.returncode == 0, done.stderr
    try:
        yield root
    finally:
        pid = root / ".git" / "cortex-watch" / "pid"
        if pid.exists():
            try:
                os.kill(int(pid.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def cortex(*args, cwd=None, input=None, env=None, check=False):
    """The real CLI in a subprocess."""
    return subprocess.run(
        [str(VENV_BIN / "cortex"), *args], cwd=cwd, input=input, capture_output=True, text=True, env=env, check=check
    )
