"""What the git hook costs a person at `git commit`. Figures, not pass/fail (issue 3's
targets are printed beside them):

- one staged note validated by the command the installed hook runs (`python -m
  cortex.hooks validate FILE`), next to a bare `python -c pass` measured in the same run
  (interleaved, median of N): the difference is what cortex adds; target ≤ 80 ms. CPU
  time (the process and its children, from wait4) is printed beside wall time: on a
  shared machine it is the steadier figure;
- the template's full entry (`sh -c` + `git config cortex.python`, then `check --stage`:
  the fixer and the validator, what a commit runs) and the CLI (`cortex hook
  validate`), for comparison;
- 1,000 staged notes validated in one process (the vault holds them all, so the
  vault-wide id check reads every note): target ≤ 1.5 s;
- `cortex hook fix` over the same 1,000 valid notes (it must change nothing);
- `pre-commit run cortex` (fix, then validate) over them: what a person waits for (pre-commit
  splits the files over the CPUs).

Run: `.venv/bin/python bench/bench_hooks.py [--runs N] [--instructions]` (or `make bench`).
`--instructions` adds instruction counts under valgrind, which no load on the machine moves.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cortex.notes import NoteDraft, make_title, note_path, render_note, source_hash, uuid7
from cortex.taxonomy import DEFAULT_TYPES

PY = sys.executable
TEMPLATE = Path(__file__).resolve().parents[1] / "cortex" / "data" / "templates" / "pre-commit-config.yaml"
WORDS = ("ledger invoice tide station export webhook migration cache token backup release sprint "
         "postgres alembic vite stripe retry batch nightly staging review owner decision budget").split()


def build_vault(root: Path, n: int) -> list[str]:
    rng = random.Random(1729)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    paths = []
    for i in range(n):
        spec = DEFAULT_TYPES[i % len(DEFAULT_TYPES)]
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40))).capitalize() + f" ({i})."
        when = start + timedelta(minutes=17 * i)
        ms = int(when.timestamp() * 1000)
        digest = source_hash(body)
        draft = NoteDraft(
            id=uuid7(ms, rng.randbytes(10)), type=spec.name, category=spec.category,
            created=when.strftime("%Y-%m-%dT%H:%M:%S.000Z"), source_hash=digest, title=make_title(body),
            body=body, bucket="explicit", attribution="owner", confidence=0.9, importance=0.6,
            entities=(("Ledgerline", "project"),), tags=(rng.choice(WORDS), "bench"),
        )
        rel = note_path(spec.directory, when.date().isoformat(), digest)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_note(draft), encoding="utf-8")
        paths.append(rel)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    return paths


def measured(cmd: list[str], cwd: Path, env: dict, expect: int = 0) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and what it waited for). CPU time is
    the steadier figure on a loaded machine; both are printed."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != expect:
        raise SystemExit(f"{shlex.join(cmd)} exited {proc.returncode}: {err.decode()}")
    return elapsed, usage.ru_utime + usage.ru_stime


def instructions(cmd: list[str], cwd: Path, env: dict) -> int:
    """Instructions executed (valgrind's callgrind): the same on a busy machine or an idle one."""
    out = Path(tempfile.mkdtemp()) / "callgrind.out"
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
                          cwd=cwd, env=env, capture_output=True, text=True)
    return int(re.search(r"Collected : (\d+)", done.stderr).group(1))


def timed(cmd: list[str], cwd: Path, env: dict) -> float:
    return measured(cmd, cwd, env)[0]


def template_entry() -> list[str]:
    import yaml

    hooks = yaml.safe_load(TEMPLATE.read_text())["repos"][0]["hooks"]
    return shlex.split(next(h["entry"] for h in hooks if h["id"] == "cortex"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions under valgrind (load-independent; ~30 s)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="cortex-bench-hooks-") as tmp:
        root = Path(tmp) / "vault"
        paths = build_vault(root, args.notes)
        subprocess.run(["git", "config", "cortex.python", PY], cwd=root, check=True)
        env = {**os.environ, "PYTHONSAFEPATH": "1"}
        one = paths[0]
        cortex_cli = str(Path(PY).with_name("cortex"))
        cmds = {
            "python -c pass": [PY, "-c", "pass"],
            "python -m cortex.hooks validate (hook)": [PY, "-m", "cortex.hooks", "validate", one],
            "template entry (sh + git config, fix + validate)": [*template_entry(), one],
            "cortex hook validate (the CLI)": [cortex_cli, "hook", "validate", one],
        }
        for cmd in cmds.values():  # warm the page cache and .pyc files
            timed(cmd, root, env)
        wall: dict[str, list[float]] = {k: [] for k in cmds}
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(args.runs):  # interleaved, so load on the machine hits all alike
            for name, cmd in cmds.items():
                w, c = measured(cmd, root, env)
                wall[name].append(w)
                cpu[name].append(c)
        base_w, base_c = (statistics.median(d["python -c pass"]) for d in (wall, cpu))

        print(f"one staged note, median of {args.runs} runs (vault of {args.notes} notes; their ids from the hook cache)")
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        print(f"  {'command':<42} {'wall':>9} {'over':>10} {'CPU':>9} {'over':>10}")
        for name in cmds:
            w, c = statistics.median(wall[name]), statistics.median(cpu[name])
            ow = "" if name == "python -c pass" else f"{(w - base_w) * 1000:+7.1f} ms"
            oc = "" if name == "python -c pass" else f"{(c - base_c) * 1000:+7.1f} ms"
            print(f"  {name:<42} {w * 1000:6.1f} ms {ow:>10} {c * 1000:6.1f} ms {oc:>10}")
        print("  target: the hook's command ≤ 80 ms over `python -c pass`")
        if args.instructions and shutil.which("valgrind"):
            counts = {name: instructions(cmds[name], root, env) for name in ("python -c pass", "python -m cortex.hooks validate (hook)")}
            base_i = counts["python -c pass"]
            for name, n in counts.items():
                print(f"  instructions (valgrind): {name:<40} {n / 1e6:7.0f} M ({n / base_i:.2f}x)")

        many = [PY, "-m", "cortex.hooks", "validate", *paths]
        fix_many = [PY, "-m", "cortex.hooks", "fix", *paths]
        timed(many, root, env)
        runs = max(3, args.runs // 7)
        v = [measured(many, root, env) for _ in range(runs)]
        f = [measured(fix_many, root, env) for _ in range(runs)]
        vw, vc = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
        fw, fc = statistics.median(x[0] for x in f), statistics.median(x[1] for x in f)
        changed = subprocess.run(["git", "diff", "--name-only"], cwd=root, capture_output=True, text=True).stdout.split()
        print(f"\n{len(paths)} staged notes in one process, median of {runs} runs")
        print(f"  validate  wall {vw:6.3f} s  CPU {vc:6.3f} s  ({vw / len(paths) * 1000:.2f} ms/note wall; target ≤ 1.5 s)")
        print(f"  fix       wall {fw:6.3f} s  CPU {fc:6.3f} s  (files changed: {len(changed)}; must be 0)")
        print(f"  baseline `python -c pass`: wall {base_w * 1000:.1f} ms, CPU {base_c * 1000:.1f} ms")

        # What a person waits for: pre-commit itself, which splits the files over the CPUs.
        pre_commit = Path(PY).with_name("pre-commit")
        if pre_commit.exists():
            (root / ".pre-commit-config.yaml").write_text(TEMPLATE.read_text())
            pc_env = {**env, "PRE_COMMIT_HOME": str(Path(tmp) / "pre-commit-home")}
            cmd = [str(pre_commit), "run", "cortex", "--files", *paths]
            measured(cmd, root, pc_env)
            p = [measured(cmd, root, pc_env) for _ in range(runs)]
            pw, pcpu = statistics.median(x[0] for x in p), statistics.median(x[1] for x in p)
            print(f"  `pre-commit run cortex` on the {len(paths)} notes: wall {pw:6.3f} s  CPU {pcpu:6.3f} s")


if __name__ == "__main__":
    main()
