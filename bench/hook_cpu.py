"""Runs a command and appends its CPU time (user + system, its children's too) and wall
time to a file, one JSON line: the wrapper `bench_scale.py` puts before cortex's hook
entry, so that the hook's own cost inside a real `git commit` is measured directly
instead of as a difference of two commits (each carrying git's and pre-commit's work on
the whole working tree, which moves more than the hook costs).

Run: `python bench/hook_cpu.py OUT COMMAND [ARG...]`; exits with COMMAND's status.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    t0 = time.perf_counter()
    code = subprocess.call(argv)
    wall = time.perf_counter() - t0
    used = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command and all it waited for
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"cpu": used.ru_utime + used.ru_stime, "user": used.ru_utime, "system": used.ru_stime,
                             "wall": wall, "majflt": used.ru_majflt, "inblock": used.ru_inblock}) + "\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
