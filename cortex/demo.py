"""``make run``: the example end to end, in a scratch copy, with the real CLI.

Copies the repository's example vault (``vault/``, ``mind/``, ``observer/*.yml``) into
a fresh vault in a temporary directory, commits it through the real pre-commit hook,
ingests ``examples/observations.jsonl`` with ``cortex run``, and shows what happened.
Nothing outside the scratch directory is touched.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _bold(text: str) -> str:
    """Bold on a terminal only, and never with NO_COLOR set (no-color.org)."""
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        return f"\033[1m{text}\033[0m"
    return text


def step(title: str) -> None:
    print(f"\n{_bold('== ' + title)}", flush=True)


def sh(*args: str, cwd: Path, check: bool = True, env=None) -> subprocess.CompletedProcess:
    print(f"$ {shlex.join(args)}", flush=True)
    result = subprocess.run(args, cwd=cwd, env=env, text=True)
    if check and result.returncode != 0:
        raise SystemExit(f"demo: `{shlex.join(args)}` failed with exit {result.returncode}")
    return result


def main() -> int:
    examples = REPO / "examples" / "observations.jsonl"
    if not examples.exists():
        print("demo: examples/observations.jsonl is missing (run from a cortex checkout)", file=sys.stderr)
        return 1
    scratch = Path(os.environ.get("CORTEX_DEMO_DIR") or tempfile.mkdtemp(prefix="cortex-demo-"))
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "GIT_AUTHOR_NAME": "Maya Okafor",
        "GIT_AUTHOR_EMAIL": "maya@example.com",
        "GIT_COMMITTER_NAME": "Maya Okafor",
        "GIT_COMMITTER_EMAIL": "maya@example.com",
        "PRE_COMMIT_HOME": str(scratch.parent / f"{scratch.name}-pre-commit"),
    }
    env.pop("CORTEX_VAULT", None)
    cortex = str(BIN / "cortex")
    vault = scratch / "vault"

    step(f"A fresh vault in {vault}")
    sh(cortex, "init", str(vault), cwd=scratch, env=env)

    step("The example vault's hand-written notes, committed through the real pre-commit hook")
    for part in ("vault", "mind"):
        shutil.copytree(REPO / part, vault / part, dirs_exist_ok=True)
    for name in ("config.yml", "taxonomy.yml", "calibration.yml"):
        shutil.copyfile(REPO / "observer" / name, vault / "observer" / name)
    sh("git", "add", "-A", cwd=vault, env=env)
    sh("git", "commit", "-q", "-m", "Example vault: hand-written notes and settings", cwd=vault, env=env)

    step(f"An agent's buffer: {sum(1 for _ in open(examples))} lines from examples/observations.jsonl")
    shutil.copyfile(examples, vault / "observer" / "observations.jsonl")
    sh(cortex, "run", cwd=vault, env=env)

    step("What was committed")
    sh("git", "--no-pager", "log", "--stat", "--format=%n%h %an: %B", "-1", cwd=vault, env=env)

    step("Two of the notes")
    committed = subprocess.run(
        ["git", "show", "--name-only", "--format=", "HEAD"], cwd=vault, capture_output=True, text=True, env=env
    ).stdout.split()
    picks = [p for p in committed if "/decisions/" in p][:1] + [p for p in committed if p.startswith("mind/")][:1]
    for path in picks:
        print(f"--- {path}")
        print((vault / path).read_text())

    step("The quarantine: held lines, with their reasons")
    sh(cortex, "quarantine", "list", cwd=vault, env=env)

    step("Status")
    sh(cortex, "status", cwd=vault, env=env)

    step("A query, as an agent would ask at the start of a session")
    sh(cortex, "query", "how do we run database migrations safely", "--limit", "3", cwd=vault, env=env, check=False)

    print(f"\nThe scratch vault stays in {vault}: open it in Obsidian, or try (cortex is in this repo's .venv):")
    print(f"  {shlex.join([cortex, '--vault', str(vault), 'status'])}")
    return 0



if __name__ == "__main__":
    raise SystemExit(main())
