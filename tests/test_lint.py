"""The linter configured in pyproject.toml ([tool.ruff]) passes on the whole tree: what
it selects are bugs or hide one (undefined names, unused imports, late-bound loop
variables, exceptions re-raised without their cause)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import VENV_BIN

REPO = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = VENV_BIN / "ruff"
    assert ruff.exists(), "ruff is a dev dependency: `make install` (or pip install -e '.[dev]') puts it in the venv"
    done = subprocess.run([str(ruff), "check", "--no-cache", "--output-format", "concise", "cortex", "tests", "bench"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
