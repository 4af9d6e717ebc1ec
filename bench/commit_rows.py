"""`bench_scale.py`'s commit rows alone, on a copy of a cached vault: `git commit` of one
new note through cortex's hook, of one file no cortex hook reads, and of one note through
a hook that does nothing (`bench_scale.NOOP_HOOK`: pre-commit's own cost of running any
hook, its `git diff` of the whole working tree after it). For each: the wall time and the
CPU time (user + system) of the commit and everything it ran; for cortex's hook also its
own duration, as pre-commit prints it (the hook alone, without pre-commit's diffs). Then
cortex's two processes measured inside one more commit, each under `hook_cpu.py` (its wall
and CPU time, the git it runs included): the commit guard and the hook.

`--code DIR,DIR`: source trees the hook's cortex is imported from (PYTHONPATH), taken in
turn on the same vault, so two versions are compared in the same minutes (the vault's
`git config cortex.python` must be a python that honours PYTHONPATH, as the repository's
`.venv` does). The vault goes back to its cached commit before and after.

Run: `.venv/bin/python bench/commit_rows.py COPY [--repeat 5] [--code /a,/b]`, where COPY
is a copy of a vault `bench_scale.py` cached (`cp -a /tmp/cortex-bench-scale/v10000 /tmp/v10k`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import (  # noqa: E402
    ENV, NOOP_HOOK, ROOT, current_hooks, hooks_config, last_timing, new_note, restore, sh, timed_processes)


def commit(vault: Path, code: str, what: str) -> tuple[float, float, float | None]:
    """One commit of a new note (or, ``what == "other"``, a file no cortex hook reads):
    wall, CPU, and the hook's duration as pre-commit printed it (None: no hook ran)."""
    if what == "other":
        other = vault / "observer" / f"bench-{time.time_ns()}.txt"
        other.write_text("not a note\n", encoding="utf-8")
        sh(vault, "git", "add", "-f", str(other.relative_to(vault)))
    else:
        sh(vault, "git", "add", new_note(vault))
    env = {**ENV, "PYTHONPATH": code}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(["git", "commit", "-q", "-m", f"bench: {what}"], cwd=vault, env=env, capture_output=True,
                          text=True, check=True)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # git runs hooks with their output on stderr; cortex's hook is `verbose: true`
    said = [line for line in done.stderr.splitlines() if line.startswith("- duration:")]
    return wall, cpu, float(said[0].split(":")[1].strip().rstrip("s")) if said else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--code", default=str(ROOT), help="Source trees to take in turn, comma-separated.")
    args = parser.parse_args()
    vault, codes = args.vault.resolve(), args.code.split(",")
    head = json.loads((vault / ".bench-version").read_text())["head"]
    restore(vault, head)
    current_hooks(vault)
    cortex_hooks = (vault / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    rows: dict[str, list[tuple[float, float]]] = {}
    timings = vault / ".git" / "bench-processes"  # hook_cpu.py's lines, outside the working tree
    commit(vault, codes[0], "warm")  # the HEAD cache and the hook's caches, as bench_scale warms them
    try:
        for i in range(args.repeat):
            for code in codes[i % len(codes):] + codes[:i % len(codes)]:
                wall, cpu, hook = commit(vault, code, "note")
                rows.setdefault(f"through cortex's hook ({os.path.basename(code)})", []).append((wall, cpu))
                rows.setdefault(f"  the hook itself ({os.path.basename(code)})", []).append((hook or 0.0, 0.0))
            rows.setdefault("a file no cortex hook reads", []).append(commit(vault, codes[0], "other")[:2])
            hooks_config(vault, NOOP_HOOK)
            rows.setdefault("through a hook doing nothing", []).append(commit(vault, codes[0], "note")[:2])
            with timed_processes(vault, cortex_hooks, timings) as (guard_out, hook_out):  # cortex's hooks after
                for code in codes[i % len(codes):] + codes[:i % len(codes)]:
                    commit(vault, code, "note")
                    guard, hook = last_timing(guard_out), last_timing(hook_out)
                    name = os.path.basename(code)
                    rows.setdefault(f"cortex's processes in one, measured ({name})", []).append(
                        (guard["wall"] + hook["wall"], guard["cpu"] + hook["cpu"]))
                    rows.setdefault(f"  the commit guard ({name})", []).append((guard["wall"], guard["cpu"]))
                    rows.setdefault(f"  the hook ({name})", []).append((hook["wall"], hook["cpu"]))
    finally:
        restore(vault, head)
    print(f"{vault.name}: git commit of one note, median of {args.repeat} (wall s, CPU s)")
    for label, values in rows.items():
        print(f"  {label:<54}{statistics.median(v[0] for v in values):8.3f}{statistics.median(v[1] for v in values):8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
