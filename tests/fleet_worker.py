"""One machine of the fleet simulation: a list of steps, run in order, each a real
process (the CLI, or a person's `git commit` through the hook).

    python fleet_worker.py MACHINE STEPS_JSON

Steps: ["write", [[body, type, timestamp], ...]], ["run"], ["maintain"], ["sync"],
["edit", path, old_line, new_line] (a person's edit of one body line). Exit 75 from a
sync (another machine kept pushing first, or the vault was busy) is retried; anything
else that fails stops the worker with the output, for the test to show. A JSON summary
goes to stdout: per step kind, how many ran, and the sync reports.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from sync_helpers import CORTEX, person_commit, sh  # noqa: E402


def cortex(machine: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CORTEX, "--vault", str(machine), *args], capture_output=True, text=True, input=input,
                          timeout=300)


def must(done: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    if done.returncode != 0:
        sys.stderr.write(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n")
        raise SystemExit(1)
    return done


def do_sync(machine: Path, summary: dict) -> None:
    for attempt in range(20):
        done = cortex(machine, "sync", "--json")
        if done.returncode == 0:
            summary["syncs"].append(json.loads(done.stdout))
            return
        if done.returncode != 75:
            must(done, "cortex sync")
        summary["retried"] += 1
        time.sleep(0.2 * (attempt + 1))
    must(done, "cortex sync (kept failing with 75)")


def main() -> int:
    machine, steps = Path(sys.argv[1]), json.loads(sys.argv[2])
    summary: dict = {"steps": {}, "syncs": [], "retried": 0}
    for step in steps:
        kind = step[0]
        summary["steps"][kind] = summary["steps"].get(kind, 0) + 1
        if kind == "write":
            lines = [json.dumps({"type": t, "body": b, "timestamp": ts, "attribution": "owner"}) for b, t, ts in step[1]]
            must(cortex(machine, "write", "-", input="\n".join(lines) + "\n"), "cortex write")
        elif kind == "run":
            must(cortex(machine, "run"), "cortex run")
        elif kind == "maintain":
            must(cortex(machine, "maintain", "--force"), "cortex maintain --force")
        elif kind == "sync":
            do_sync(machine, summary)
        elif kind == "edit":
            _, rel, old, new = step
            text = (machine / rel).read_text(encoding="utf-8")
            if old not in text:
                sys.stderr.write(f"{rel} on {machine.name} lacks the line {old!r}:\n{text}\n")
                return 1
            person_commit(machine, rel, text.replace(old, new), f"{machine.name}: a person's edit")
        else:
            sys.stderr.write(f"unknown step {kind}\n")
            return 2
    sh(machine, "git", "status", "--porcelain")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
