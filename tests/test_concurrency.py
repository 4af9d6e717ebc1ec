"""Parallel writers never interleave or lose lines (one `write()` per line
under a file lock), even while `cortex run` consumes and rotates the buffer under them.

Eight worker processes append 250 observations each, all at once. A cold `cortex write`
costs a few hundred milliseconds of interpreter start-up, so 2,000 of them on a 2-core
machine would take minutes: the 2,000 go through the Python API (`Vault.write`, the very
function the CLI calls, in eight separate processes), and real CLI writers — single
`cortex write` calls and `cortex write -` batches — run at the same moment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import VENV_BIN

WORKERS = 8
PER_WORKER = 250
CLI_SINGLE = 8  # processes, one `cortex write` each
CLI_BATCHES = 4  # processes, one `cortex write -` of BATCH lines each
BATCH = 25

# Long bodies make a torn or interleaved write visible: a line is ~700 bytes.
FILLER = ("The invoicing worker retries failed webhook deliveries with a growing delay and logs each attempt. " * 4).strip()

WORKER = r"""
import os, sys, time
from cortex.vault import Vault
root, worker, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
filler = sys.argv[5]
vault = Vault(root)
while not os.path.exists(go):
    time.sleep(0.001)
for n in range(count):
    vault.write({
        "type": "fact",
        "body": f"w{worker:02d}-n{n:04d} {filler}",
        "bucket": "explicit",
        "importance": 0.8,
        "attribution": f"worker-{worker}",
        "session_id": "cli",
        "entities": [{"name": "Ledgerline", "type": "project"}],
    })
"""


def start_api_workers(root: Path, go: Path) -> list[subprocess.Popen]:
    return [
        subprocess.Popen([sys.executable, "-c", WORKER, str(root), str(w), str(PER_WORKER), str(go), FILLER])
        for w in range(WORKERS)
    ]


def start_cli_writers(root: Path) -> list[subprocess.Popen]:
    cortex = str(VENV_BIN / "cortex")
    procs = []
    for k in range(CLI_SINGLE):
        body = f"cli-single-{k:02d} {FILLER}"
        procs.append(subprocess.Popen(
            [cortex, "--vault", str(root), "write", "--type", "lesson", "--body", body, "--importance", "0.8",
             "--author", "maya", "--entity", "Tidewatch:project"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        ))
    for b in range(CLI_BATCHES):
        lines = "".join(
            json.dumps({"type": "task", "body": f"cli-batch-{b}-{n:02d} {FILLER}", "importance": 0.8,
                        "attribution": "claude-code"}) + "\n"
            for n in range(BATCH)
        )
        p = subprocess.Popen([cortex, "--vault", str(root), "write", "-"], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        p.stdin.write(lines.encode())
        p.stdin.close()
        procs.append(p)
    return procs


def expected_keys() -> Counter:
    keys = Counter(f"w{w:02d}-n{n:04d}" for w in range(WORKERS) for n in range(PER_WORKER))
    keys.update(f"cli-single-{k:02d}" for k in range(CLI_SINGLE))
    keys.update(f"cli-batch-{b}-{n:02d}" for b in range(CLI_BATCHES) for n in range(BATCH))
    return keys


def wait_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.wait(timeout=300)
        err = p.stderr.read().decode() if p.stderr else ""
        assert p.returncode == 0, err


def buffer_files(root: Path) -> list[Path]:
    live = root / "observer" / "observations.jsonl"
    archived = sorted((root / "observer" / "archive").glob("*")) if (root / "observer" / "archive").is_dir() else []
    return [*archived, *([live] if live.exists() else [])]


def read_keys(files: list[Path]) -> Counter:
    keys = Counter()
    for path in files:
        data = path.read_bytes()
        assert data == b"" or data.endswith(b"\n"), f"{path} ends mid-line"
        for line in data.decode("utf-8").splitlines():
            obs = json.loads(line)  # an interleaved or torn line fails here
            key, rest = obs["body"].split(" ", 1)
            assert rest == FILLER, line[:120]
            keys[key] += 1
    return keys


@pytest.mark.slow
def test_parallel_writers_leave_every_line_intact(vault, tmp_path):
    go = tmp_path / "go"
    procs = start_api_workers(vault.root, go)
    time.sleep(0.5)  # let the workers import cortex and wait at the start line
    procs += start_cli_writers(vault.root)
    go.touch()
    wait_all(procs)

    files = buffer_files(vault.root)
    assert files == [vault.buffer_path]  # nobody rotated: everything is in the live buffer
    keys = read_keys(files)
    assert sum(keys.values()) == WORKERS * PER_WORKER + CLI_SINGLE + CLI_BATCHES * BATCH
    assert keys == expected_keys()  # none lost, none doubled
    # each worker's own lines stay in its order
    order = [json.loads(l)["body"].split(" ", 1)[0] for l in vault.buffer_path.read_text().splitlines()]
    for w in range(WORKERS):
        mine = [k for k in order if k.startswith(f"w{w:02d}-")]
        assert mine == sorted(mine)
    assert vault.buffer_path.stat().st_mode & 0o777 == 0o600


@pytest.mark.slow
def test_parallel_writers_while_runs_rotate_the_buffer(vault, tmp_path):
    """Runs consume and rotate the buffer while the writers append: every observation
    still becomes exactly one note."""
    go = tmp_path / "go"
    procs = start_api_workers(vault.root, go)
    time.sleep(0.5)
    procs += start_cli_writers(vault.root)
    go.touch()
    cortex = str(VENV_BIN / "cortex")
    runs = 0
    while any(p.poll() is None for p in procs):
        r = subprocess.run([cortex, "--vault", str(vault.root), "run", "--json"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        runs += 1
    wait_all(procs)
    final = subprocess.run([cortex, "--vault", str(vault.root), "run", "--json"], capture_output=True, text=True)
    assert final.returncode == 0, final.stderr
    assert runs >= 1

    # every line that was ever written is intact, in the archive or the live buffer
    keys = read_keys(buffer_files(vault.root))
    assert keys == expected_keys()

    # and each one became exactly one note (or, if a security layer held it, one entry)
    notes = Counter()
    for path in vault.iter_note_paths():
        body = path.read_text(encoding="utf-8").split("\n---\n", 1)[1].strip()
        notes[body.split(" ", 1)[0]] += 1
    held = Counter(
        json.loads(json.loads(l)["line"])["body"].split(" ", 1)[0]
        for l in vault.quarantine.path.read_text().splitlines()
    ) if vault.quarantine.path.exists() else Counter()
    assert notes + held == expected_keys()
    assert max((notes + held).values()) == 1
    status = subprocess.run(["git", "status", "--porcelain"], cwd=vault.root, capture_output=True, text=True).stdout
    assert status == ""
