"""`bench_scale.py`'s `cortex run` row alone, on a copy of a cached vault.

The row's two steps as `bench_scale.measure` does them: 1,000 new observations appended
to the buffer and `cortex run --json` timed, then git's own `git add` + `git commit` of
1,000 new files. Between runs the vault goes back to the cached commit, but the files a
run added are moved aside, not deleted: on ext4 without a journal the kernel skips inodes
freed in the last minutes when it allocates new ones, so files deleted just before a run
make each of its file creations slower (docs/scale.md). `cortex status` runs first, so
the caches follow HEAD as in the bench. Prints each run and the medians, with the CPU
time (user + system) of `cortex run` and its children.

Run: `.venv/bin/python bench/run_row.py COPY [--repeat 3]`, where COPY is a copy of
a vault `bench_scale.py` cached (`cp -a /tmp/cortex-bench-scale/v10000 /tmp/v10k`); the
moved files go to COPY's parent folder, `<COPY>.moved/`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import CORTEX, append_observations, git_own_1000, sh  # noqa: E402


def restore(vault: Path, head: str, moved: Path) -> None:
    """Back to ``head``, the files added since moved to ``moved`` (not deleted)."""
    added = sh(vault, "git", "diff", "--name-only", "--diff-filter=A", head, "HEAD", "--", "vault", "mind").stdout.split()
    added += sh(vault, "git", "ls-files", "--others", "--", "vault", "mind").stdout.split()
    into = moved / str(time.time_ns())
    into.mkdir(parents=True)
    for k, rel in enumerate(added):
        if (vault / rel).is_file():
            os.rename(vault / rel, into / str(k))
    sh(vault, "git", "reset", "-q", "--hard", head)
    sh(vault, "git", "clean", "-q", "-fd", "--", "vault", "mind")
    (vault / "observer" / "observations.jsonl").unlink(missing_ok=True)
    (vault / "observer" / "quarantine.jsonl").unlink(missing_ok=True)


def one_run(vault: Path) -> tuple[float, float, float]:
    """(seconds of `cortex run`, its CPU seconds, seconds of git's own add + commit)."""
    stamp = time.time_ns()
    append_observations(vault, stamp)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    report = json.loads(sh(vault, *CORTEX, "run", "--json").stdout)
    run = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if report.get("memorized", 0) < 1000:
        raise SystemExit(f"cortex run memorized {report.get('memorized')} of 1,000 lines")
    git = git_own_1000(vault, stamp)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return run, cpu, git


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vault", type=Path, help="A copy of a vault bench_scale.py cached.")
    parser.add_argument("--repeat", type=int, default=3, help="Runs (the medians are printed).")
    args = parser.parse_args()
    vault = args.vault.resolve()
    head = json.loads((vault / ".bench-version").read_text(encoding="utf-8"))["head"]
    moved = vault.parent / f"{vault.name}.moved"
    runs = []
    try:
        for _ in range(args.repeat):
            restore(vault, head, moved)
            sh(vault, *CORTEX, "status", "--json")
            runs.append(one_run(vault))
            print("cortex run %.3f s (cpu %.3f s), git's own %.3f s" % runs[-1], flush=True)
    finally:
        restore(vault, head, moved)
    run, cpu, git = (statistics.median(column) for column in zip(*runs))
    print(f"median: cortex run {run:.3f} s (cpu {cpu:.3f} s), git's own {git:.3f} s, ratio {run / git:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
