"""A simulation of a 1,000,000-note vault and of a team fleet, from per-note figures
measured on a real vault (the 10,000-note vault `bench_scale.py` caches; built if absent).

Measured here, on the real vault: bytes per note in git's pack, in git's index file, in
cortex's HEAD cache and search index; the time of `git status`, of a HEAD-cache rebuild
and of `git commit --no-verify` of one note. Computed: the same at 1,000,000 notes
(linear in notes where the cost is linear, which each line says), the size of the tree
object a one-note commit rewrites when a type's folder is flat (today) or sharded by
year and month, and, for a fleet of machines pushing to one branch, how often a push
loses the race (Poisson arrivals) with one shared branch or one branch per machine.

Run: `.venv/bin/python bench/sim_scale.py [--notes 1000000] [--vault PATH]`. Figures
only; `docs/scale.md` discusses them.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

TYPES = 17


def git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(vault), *args], capture_output=True, text=True, check=True).stdout


def timed(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def tree_bytes(entries: int) -> tuple[int, int]:
    """(raw, zlib-compressed) size of a git tree object holding ``entries`` notes named
    as cortex names them (``2026-03-01-<8 hex>.md``): what a commit touching one note of
    that folder writes anew."""
    raw = b"".join(b"100644 2026-03-%02d-%08x.md\0" % (1 + i % 28, i * 2654435761 % 2**32) + os.urandom(20)
                   for i in range(entries))
    return len(raw), len(zlib.compress(raw))


def race(machines: int, every_s: float, push_s: float, branches: int) -> float:
    """Chance that a push finds its branch moved since it fetched (Poisson arrivals):
    the others pushing to the same branch within the push's own window."""
    rate = (machines / branches - 1) / every_s if machines > branches else 0.0
    return 1 - math.exp(-rate * push_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=1_000_000)
    parser.add_argument("--vault", type=Path, default=None, help="A built vault (default: bench_scale's 10,000).")
    args = parser.parse_args()
    if args.vault is None:
        import bench_scale

        vault, info = bench_scale.cached_vault(10_000, False)
        bench_scale.restore(vault, info["head"])
    else:
        vault = args.vault
    notes = sum(1 for line in git(vault, "ls-files").splitlines() if line.endswith(".md"))
    scale = args.notes / notes
    counts = dict(line.split(": ", 1) for line in git(vault, "count-objects", "-v").splitlines())
    pack = int(counts["size-pack"]) * 1024 + int(counts["size"]) * 1024
    index_file = (vault / ".git" / "index").stat().st_size
    from cortex.layout import cache_dir, search_dir

    caches = cache_dir(vault)
    head_cache = (caches / "head.sqlite").stat().st_size
    search = sum(f.stat().st_size for f in search_dir(vault).rglob("*") if f.is_file())
    status = timed(lambda: git(vault, "--no-optional-locks", "status", "--porcelain", "-uall"))
    from cortex.headcache import HeadCache

    def rebuild():
        for suffix in ("", "-wal", "-shm"):
            (caches / f"head.sqlite{suffix}").unlink(missing_ok=True)
        HeadCache(vault).sync().close()

    rebuild_s = timed(rebuild, 1)
    python = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
    mb = 1024 * 1024
    print(f"measured on {vault} ({notes:,} notes); computed for {args.notes:,} notes (×{scale:,.0f}); "
          f"python -c pass {python * 1000:.0f} ms in the same run (a busy machine inflates the times alike)")
    rows = [
        ("git pack (after gc)", f"{pack / notes:,.0f} B/note", f"{pack * scale / mb / 1024:,.1f} GB", "linear"),
        ("git index file (.git/index)", f"{index_file / notes:,.0f} B/note", f"{index_file * scale / mb:,.0f} MB",
         "rewritten whole by every git add/commit"),
        ("git status (stat of every file)", f"{status * 1000:,.0f} ms", f"{status * scale:,.1f} s", "linear"),
        ("HEAD cache (.git/cortex/head.sqlite)", f"{head_cache / notes:,.0f} B/note", f"{head_cache * scale / mb:,.0f} MB",
         "read per call: O(log n)"),
        ("HEAD cache rebuild (once, from git)", f"{rebuild_s:,.2f} s", f"{rebuild_s * scale / 60:,.1f} min", "linear"),
        ("search index", f"{search / notes:,.0f} B/note", f"{search * scale / mb / 1024:,.1f} GB", "linear"),
    ]
    print(f"  {'what':<38}{'measured':>16}{'at scale':>14}  growth")
    for what, measured, at_scale, growth in rows:
        print(f"  {what:<38}{measured:>16}{at_scale:>14}  {growth}")
    print("  tree object a one-note commit rewrites (one type's folder):")
    for label, entries in (("flat folder (today)", args.notes // TYPES),
                           ("by year", args.notes // TYPES // 5), ("by year and month", args.notes // TYPES // 60)):
        raw, packed = tree_bytes(entries)
        print(f"    {label:<22}{entries:>9,} entries  {raw / mb:7.2f} MB raw, {packed / mb:7.2f} MB loose per commit")
    print("  a fleet pushing to one remote (each machine pushes every 5 min; a push takes 2 s at this size):")
    print(f"    {'machines':>9}{'one branch':>12}{'a branch each':>15}")
    for machines in (5, 20, 50, 200, 1000):
        print(f"    {machines:>9}{race(machines, 300, 2.0, 1):>11.0%}{race(machines, 300, 2.0, machines):>14.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
