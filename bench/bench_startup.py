"""Start-up time of the commands agents and people call mid-conversation.

Median wall time of cold processes (a new interpreter each time, ~10 runs each) for
`cortex --help`, `cortex status` and `cortex write ...`, next to a bare `python -c pass`
on the same interpreter. Figures, not pass/fail: issue 2's targets are ≤ 150 ms for
`--help` and `status`, ≤ 250 ms for `write`.

Run: `.venv/bin/python bench/bench_startup.py [--runs N]`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SCRIPT = Path(sys.executable).parent / "cortex"  # the installed console script: the real CLI
CORTEX = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cortex"]


def wall(argv: list[str], runs: int, cwd: Path) -> tuple[float, float, float]:
    """(median, min, max) milliseconds over ``runs`` cold processes, after one warm-up
    (so the OS file cache, not the first read from disk, is what gets measured)."""
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-startup-") as tmp:
        vault = Path(tmp) / "vault"
        subprocess.run([*CORTEX, "init", str(vault)], check=True, capture_output=True)
        cases = [
            ("python -c pass", [sys.executable, "-c", "pass"], None),
            ("cortex --help", [*CORTEX, "--help"], 150),
            ("cortex status", [*CORTEX, "status"], 150),
            ("cortex write --type fact --body ...",
             [*CORTEX, "write", "--type", "fact", "--body", "The staging database restarts every Sunday at 04:00.",
              "--entity", "Ledgerline:project", "--importance", "0.7"], 250),
        ]
        print(f"{'command':<40} {'median':>9} {'min':>9} {'max':>9} {'- python':>10}   target")
        base = None
        for label, argv, target in cases:
            med, lo, hi = wall(argv, args.runs, vault)
            base = med if base is None else base
            extra = "" if target is None else f"{med - base:>8.0f} ms   ≤ {target} ms"
            print(f"{label:<40} {med:>6.0f} ms {lo:>6.0f} ms {hi:>6.0f} ms {extra}")
        print(f"({args.runs} cold runs each after one warm-up, in a fresh vault at {vault})")


if __name__ == "__main__":
    main()
