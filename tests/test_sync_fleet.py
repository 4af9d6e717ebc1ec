"""The fleet: four machines working at once on one shared vault, as separate processes,
then a final sync round (see tests/fleet.py for what is checked); and `cortex sync`
killed with kill -9 at random instants, then run again."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time

import pytest
from fleet import check, final_round, simulate, start, wait
from sync_helpers import CORTEX, active, cx, fsck, git, head_tree, make_fleet, write

pytestmark = pytest.mark.slow


def test_four_machines_at_once_converge_with_nothing_lost_or_doubled(tmp_path):
    _, machines, plans = simulate(tmp_path, 4, seed=12, shared=6, own=2, batches=2)
    summaries = wait(start(machines, plans))
    final_round(machines)
    seen = check(machines, plans)
    assert seen["observations"] > seen["distinct"]  # some observations were made on several machines
    merges = sum(1 for s in summaries for r in s["syncs"] if r["integrated"] == "merge")
    assert merges >= 1  # the machines really diverged and were merged


def test_sync_killed_at_random_instants_then_run_again_loses_and_doubles_nothing(tmp_path):
    rng = random.Random(9)
    _, (a, b) = make_fleet(tmp_path, 2)
    bodies = [f"Queue {k} drains in {k * 3 + 2} seconds under load" for k in range(6)]
    for k, body in enumerate(bodies):
        write(a if k % 2 else b, body)
        if k % 3 == 0:
            write(a, body)  # on both machines: folded by the merge
    for m in (a, b):
        cx(m, "run")
    cx(b, "sync")
    for _ in range(4):
        proc = subprocess.Popen([CORTEX, "--vault", str(a), "sync"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for m in (a, b, a, b):
        cx(m, "sync")
    assert head_tree(a) == head_tree(b)
    live = active(a).values()
    for body in bodies:
        assert sum(t.rstrip().endswith(body) for t in live) == 1, body
    for m in (a, b):
        fsck(m)
        cx(m, "validate", "--all")
        assert git(m, "status", "--porcelain", "--untracked-files=no") == ""
    status = json.loads(cx(a, "status", "--json").stdout)
    assert status["sync"]["ahead"] == 0 and status["sync"]["behind"] == 0
