"""The fleet simulation: N machines sharing one vault through a bare remote, each a
separate process doing writes, `cortex run`, `cortex maintain --force`, a person's
commits through the hook and `cortex sync` in a random order — the same observations on
several machines, one note edited on all of them. Then a final round, and the checks:
one HEAD tree everywhere, every observation in the fleet exactly once with its
reinforcements added up, `cortex validate --all` passing, every person's edit kept, no
conflict markers, `git fsck` clean. Used by tests/test_sync_fleet.py and bench/bench_sync.py.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

from sync_helpers import active, cx, field, fsck, git, head_tree, make_fleet, notes, person_commit

HERE = Path(__file__).parent
RUNBOOK = "vault/decisions/ledger-runbook.md"
FAR = "2026-11-{day:02d}T{hour:02d}:00:00Z"


def runbook_line(i: int, new: bool = False) -> str:
    return f"- Machine {i}: " + (f"checked the ledger backups on machine {i}" if new else "nothing yet")


def seed_runbook(seed: Path, n: int) -> None:
    """A note a person wrote, one line per machine (each machine edits its own line)."""
    body = "\n\n".join(runbook_line(i) for i in range(n))
    text = f"---\ntype: decision\n---\n\n# Ledger runbook\n\n{body}\n"
    (seed / RUNBOOK).parent.mkdir(parents=True, exist_ok=True)
    person_commit(seed, RUNBOOK, text, "The ledger runbook")


def observations(rng: random.Random, i: int, shared: int, own: int) -> list[list[str]]:
    """[body, type, timestamp]: some of the fleet's shared observations (a shared one is
    stamped the same day everywhere, or a day of this machine's own) and some of its own."""
    out = []
    for k in rng.sample(range(shared), k=max(1, shared * 2 // 3)):
        if k % 3 == 2:
            out.append([f"We decided to shard ledger table {k} by tenant group {k * 7 + 1}", "decision",
                        FAR.format(day=20, hour=10)])
        else:
            day = 20 if k % 3 == 0 else 10 + i
            out.append([f"Service {k} listens on port {8000 + k} behind the gateway", "fact", FAR.format(day=day, hour=9)])
    for j in range(own):
        out.append([f"Machine {i} measured batch {j} at {i * 1000 + j * 17 + 3} requests per second", "fact",
                    FAR.format(day=21, hour=i)])
    rng.shuffle(out)
    return out


def plan_machine(rng: random.Random, i: int, *, shared: int, own: int, batches: int, maintain: bool = True) -> list:
    writes = observations(rng, i, shared, own)
    chunks = [writes[k::batches] for k in range(batches)]
    steps: list = []
    for chunk in chunks:
        steps += [["write", chunk], ["run"]]
    steps += [["sync"] for _ in range(batches)]
    steps.append(["edit", RUNBOOK, runbook_line(i), runbook_line(i, new=True)])
    if maintain:
        steps.append(["maintain"])
    rng.shuffle(steps)
    # The edit needs the runbook (seeded before cloning: always there); a write's run may
    # come before or after it, as it would on a real machine.
    return steps


def start(machines: list[Path], plans: list[list]) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, str(HERE / "fleet_worker.py"), str(m), json.dumps(p)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for m, p in zip(machines, plans)]


def wait(procs: list[subprocess.Popen], timeout: float = 600) -> list[dict]:
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"worker failed ({proc.returncode}):\n{stdout}\n{stderr}"
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def final_round(machines: list[Path]) -> None:
    """Every buffer processed, every reinforcement applied, everyone synced (twice: the
    last machine's merge reaches the first ones in the second pass)."""
    for m in machines:
        cx(m, "run")
    for _ in range(2):
        for m in machines:
            cx(m, "sync")
    for m in machines:
        cx(m, "reinforce")
        cx(m, "sync")
    for m in machines:
        cx(m, "sync")


def check(machines: list[Path], plans: list[list]) -> dict:
    trees = {head_tree(m) for m in machines}
    assert len(trees) == 1, f"machines disagree: {trees}"
    written: Counter[str] = Counter()
    for plan in plans:
        for step in plan:
            if step[0] == "write":
                written.update(body for body, _, _ in step[1])
    live = active(machines[0])
    for body, times in written.items():
        holders = [t for t in live.values() if t.rstrip().endswith(body)]
        assert len(holders) == 1, f"{body!r}: {len(holders)} active notes (expected exactly one)"
        count = int(field(holders[0], "reinforced") or 0)
        assert count == times - 1, f"{body!r}: written {times} times, reinforced {count} (expected {times - 1})"
    runbook = (machines[0] / RUNBOOK).read_text()
    for i in range(len(machines)):
        assert runbook_line(i, new=True) in runbook, f"machine {i}'s edit of the runbook is lost:\n{runbook}"
    for m in machines:
        for path, text in notes(m).items():
            assert "<<<<<<<" not in text and ">>>>>>>" not in text, f"{m.name}:{path} has conflict markers"
        cx(m, "validate", "--all")
        fsck(m)
        assert git(m, "status", "--porcelain", "--untracked-files=no") == ""
    ids = [field(t, "id") for t in notes(machines[0]).values()]
    assert len(ids) == len(set(ids)), "an id is used twice"
    return {"observations": sum(written.values()), "distinct": len(written)}


def simulate(tmp: Path, n: int, *, seed: int, shared: int, own: int, batches: int, maintain: bool = True):
    rng = random.Random(seed)
    remote, machines = make_fleet(tmp, n, prepare=lambda seed_dir: seed_runbook(seed_dir, n))
    plans = [plan_machine(rng, i, shared=shared, own=own, batches=batches, maintain=maintain) for i in range(n)]
    return remote, machines, plans

