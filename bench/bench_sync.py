"""What sharing one vault between machines costs (docs/sync.md). Figures, not pass/fail:

- one sync of 1,000 new notes between two clones of a bare remote: the push from the
  machine that memorized them, the fast-forward on the other (1,000 files written), and
  a merge when both machines memorized 1,000 notes of their own (`git merge-tree`, the
  working tree moved, then the push);
- the fleet simulation of tests/fleet.py at 4 and 8 machines working at once (writes,
  `cortex run`, `cortex maintain --force`, a person's commit, `cortex sync`, each machine
  a process), then the final round: observations per second across the fleet, wall
  clock from the first process started to every machine holding the same tree.

Run: `.venv/bin/python bench/bench_sync.py [--notes 1000] [--fleet 4,8]` (or `make bench`).
Every command runs with HOME, git config and pre-commit's cache in a temp directory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fleet import check, final_round, simulate, start, wait  # noqa: E402
from sync_helpers import cx, head_tree, make_fleet  # noqa: E402


def isolate(tmp: Path) -> None:
    home = tmp / "home"
    home.mkdir()
    os.environ.update({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "PRE_COMMIT_HOME": str(home / ".cache"),
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Bench Person", "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "Bench Person", "GIT_COMMITTER_EMAIL": "bench@example.com",
    })
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.pop("CORTEX_VAULT", None)


def memorize(machine: Path, n: int, tag: str) -> None:
    lines = [json.dumps({"type": "fact", "body": f"Machine {tag} recorded that job {i} took {i * 7 + 3} ms",
                         "timestamp": "2026-11-20T10:00:00Z", "attribution": "owner"}) for i in range(n)]
    cx(machine, "write", "-", input="\n".join(lines) + "\n")
    cx(machine, "run", timeout=600)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def bench_notes(tmp: Path, n: int) -> list[tuple[str, float]]:
    _, (a, b) = make_fleet(tmp, 2)
    memorize(a, n, "a")
    rows = [(f"push {n:,} new notes (a)", timed(lambda: cx(a, "sync"))),
            (f"fast-forward {n:,} new notes (b)", timed(lambda: cx(b, "sync")))]
    memorize(a, n, "a2")
    memorize(b, n, "b2")
    cx(a, "sync")
    rows.append((f"merge {n:,} + {n:,} new notes, settle, push (b)", timed(lambda: cx(b, "sync"))))
    rows.append(("fast-forward to that merge (a)", timed(lambda: cx(a, "sync"))))
    assert head_tree(a) == head_tree(b)
    return rows


def bench_fleet(tmp: Path, n: int, *, shared: int, own: int, batches: int) -> dict:
    _, machines, plans = simulate(tmp, n, seed=20 + n, shared=shared, own=own, batches=batches)
    started = time.perf_counter()
    summaries = wait(start(machines, plans), timeout=1800)
    working = time.perf_counter() - started
    final_round(machines)
    total = time.perf_counter() - started
    try:
        seen, problem = check(machines, plans), None
    except AssertionError as exc:  # a figure still, and the finding printed beside it
        bodies = [body for p in plans for st in p if st[0] == "write" for body, _, _ in st[1]]
        seen, problem = {"observations": len(bodies), "distinct": len(set(bodies))}, str(exc)
    syncs = [r for s in summaries for r in s["syncs"]]
    return {
        "machines": n, "observations": seen["observations"], "distinct": seen["distinct"],
        "working_s": working, "total_s": total, "obs_per_s": seen["observations"] / total,
        "syncs": len(syncs), "merges": sum(r["integrated"] == "merge" for r in syncs),
        "push_retries": sum(max(0, r["push_attempts"] - 1) for r in syncs),
        "exit_75": sum(s["retried"] for s in summaries),
        "problem": problem,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--fleet", default="4,8", help="machine counts, comma-separated")
    parser.add_argument("--shared", type=int, default=12, help="observations shared by the fleet")
    parser.add_argument("--own", type=int, default=12, help="observations of each machine's own")
    parser.add_argument("--batches", type=int, default=3, help="write/run/sync rounds per machine")
    args = parser.parse_args()
    random.seed(0)
    with tempfile.TemporaryDirectory(prefix="cortex-bench-sync-") as tmp_dir:
        tmp = Path(tmp_dir)
        isolate(tmp)
        (tmp / "notes").mkdir()
        print(f"sync of {args.notes:,} new notes between two clones (wall clock, one run each)")
        for label, seconds in bench_notes(tmp / "notes", args.notes):
            print(f"  {label:<48} {seconds:6.2f} s")
        print("\nfleet simulation (tests/fleet.py), every machine a process, then the final round")
        print(f"  {'machines':>8} {'observations':>12} {'working s':>10} {'total s':>8} {'obs/s':>7} "
              f"{'syncs':>6} {'merges':>7} {'push retries':>13} {'exit 75':>8}")
        problems = []
        for n in [int(x) for x in args.fleet.split(",") if x]:
            (tmp / f"fleet{n}").mkdir()
            r = bench_fleet(tmp / f"fleet{n}", n, shared=args.shared, own=args.own, batches=args.batches)
            print(f"  {r['machines']:>8} {r['observations']:>12} {r['working_s']:>10.1f} {r['total_s']:>8.1f} "
                  f"{r['obs_per_s']:>7.2f} {r['syncs']:>6} {r['merges']:>7} {r['push_retries']:>13} {r['exit_75']:>8}")
            if r["problem"]:
                problems.append(f"{n} machines: {r['problem']}")
        if problems:
            print("  CHECKS FAILED (tests/fleet.py):")
            for p in problems:
                print(f"    {p}")
            return 1
        print("  (all checks of tests/fleet.py passed: one tree, each observation once, counts added up)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
