"""`cortex maintain` on a 50,000-note vault: every job forced, then a run with nothing to do.

The vault (built once, cached under /tmp/cortex-bench-maintain/): 50,000 notes in the
cortex's note format across all 17 types (about two thirds in the mind partition), created
over two years and, for 80% of them, reinforced within the last two months (a vault in
daily use; the other 20% were never reinforced, so decay has a backlog), with 1% written
as paraphrases of an earlier note of the same type (for
dedup to find), 1% marked `maintainer: human`, and a reinforcement map of 2,000 entries
(some on archived-to-be notes). Each measurement runs the real CLI on a fresh copy:

- `cortex maintain --force` — reinforce, decay, dedup, graph, index (target ≤ 60 s);
- `cortex maintain` right after — nothing is due, nothing to do (target ≤ 3 s);
- `cortex maintain --force` again — every job runs and finds nothing to change
  (idempotence: no commit), printed for reference.

Figures, not pass/fail. Run: `.venv/bin/python bench/bench_maintain.py [--rebuild]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cortex.notes import NoteDraft, make_title, note_path, render_note, source_hash, uuid7  # noqa: E402
from cortex.taxonomy import DEFAULT_TAXONOMY  # noqa: E402
from cortex.timefmt import format_time  # noqa: E402

CACHE = Path(os.environ.get("CORTEX_BENCH_MAINTAIN_CACHE", "/tmp/cortex-bench-maintain"))
NOTES = 50_000
SEED = 4242
VERSION = "maintain-v3"  # v3: notes filed by month
NOW = "2026-03-01T12:00:00.000Z"
_SCRIPT = Path(sys.executable).parent / "cortex"
CORTEX = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cortex"]

PROJECTS = ["Ledgerline", "Tidewatch", "Harbor portal", "Nightjar", "Quillmate", "Ferrybox", "Saltmarsh", "Kestrel"]
PEOPLE = ["Maya Okafor", "Jonas Berg", "Priya Natarajan", "Tomás Ruiz", "Lena Vogt", "Ade Bello"]
THINGS = ["the invoicing module", "the sync worker", "the service worker", "the CI pipeline", "the member portal",
          "the export job", "the webhook handler", "the search page", "the nightly backup", "the release script",
          "the login flow", "the tide table builder", "the PDF renderer", "the staging database", "the test suite"]
ACTIONS = ["retry failed payments", "cache station files", "validate credit notes", "stream audit events",
           "round VAT lines", "sign webhook deliveries", "compress monthly exports", "throttle error reports",
           "index tide predictions", "batch background jobs", "log session tokens", "render invoice numbers"]
WHEN = ["after {n} seconds", "in batches of {n}", "for {n} days", "at most {n} times", "every {n} minutes",
        "within {n} milliseconds", "before {n}:00 UTC"]
FRAMES = [
    "{h} wants {t} of {p} to {a} {w}.",
    "In {p}, {t} should {a} {w}.",
    "{h} noted that {t} in {p} has to {a} {w}.",
    "For {p}: make {t} {a} {w}.",
]
PARAPHRASE = [  # (original frame index, how an agent might restate it)
    "{h} would like {t} of {p} to {a} {w}.",
    "{t} in {p} should {a} {w}.",
    "According to {h}, {t} in {p} must {a} {w}.",
    "Make {t} {a} {w} for {p}.",
]


def slots(rnd: random.Random) -> dict[str, str]:
    return {"h": rnd.choice(PEOPLE), "p": rnd.choice(PROJECTS), "t": rnd.choice(THINGS), "a": rnd.choice(ACTIONS),
            "w": rnd.choice(WHEN).format(n=rnd.randint(2, 500))}


def build(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    t0 = time.perf_counter()
    subprocess.run([*CORTEX, "init", str(path)], check=True, capture_output=True)
    rnd = random.Random(SEED)
    mind = [s for s in DEFAULT_TAXONOMY.types.values() if s.partition == "mind"]
    vault = [s for s in DEFAULT_TAXONOMY.types.values() if s.partition == "vault"]
    start = datetime(2024, 3, 1, tzinfo=timezone.utc)
    made: list[tuple[str, dict, str]] = []  # (type, slots, id) for paraphrases and reinforcements
    reinforcements = {}
    taken = set()
    for _ in range(NOTES):
        spec = rnd.choice(mind) if rnd.random() < 0.67 else rnd.choice(vault)
        if made and rnd.random() < 0.01:  # a paraphrase of an earlier note of the same type
            same = [m for m in made[-500:] if m[0] == spec.name]
            if same:
                _, s, _ = rnd.choice(same)
                body = rnd.choice(PARAPHRASE).format(**s)
                body = body[0].upper() + body[1:]
            else:
                s = slots(rnd)
                body = rnd.choice(FRAMES).format(**s)
        else:
            s = slots(rnd)
            body = rnd.choice(FRAMES).format(**s)
        created = start + timedelta(seconds=rnd.randint(0, 720 * 86400))
        stamp = format_time(created)
        h = source_hash(body)
        note_id = uuid7(int(created.timestamp() * 1000), rnd.randbytes(10))
        extra = (("maintainer", "human"),) if rnd.random() < 0.01 else ()
        draft = NoteDraft(
            id=note_id, type=spec.name, category=spec.category, created=stamp, source_hash=h, title=make_title(body),
            body=body, bucket="explicit", attribution=rnd.choice(("maya", "claude-code", "jonas")),
            confidence=0.9, importance=round(rnd.uniform(0.5, 1.0), 2),
            entities=((s["p"], "project"), (s["h"], "person")), tags=(rnd.choice(("ops", "billing", "pwa", "ci")),),
            last_reinforced=stamp if rnd.random() < 0.2 else format_time(
                max(created, datetime(2026, 3, 1, tzinfo=timezone.utc) - timedelta(seconds=rnd.randint(0, 60 * 86400)))),
            extra=extra,
        )
        rel = note_path(spec.directory, stamp[:10], h)
        n = 2
        while rel in taken:
            rel = note_path(spec.directory, stamp[:10], h, n)
            n += 1
        taken.add(rel)
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_note(draft), encoding="utf-8")
        made.append((spec.name, s, note_id))
        if rnd.random() < 0.04 and len(reinforcements) < 2000:
            reinforcements[note_id] = {"count": rnd.randint(1, 3), "last": "2026-02-27T10:00:00.000Z", "path": rel}
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, capture_output=True)
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "--no-verify",
                    "-m", f"{NOTES} notes"], cwd=path, check=True, capture_output=True)
    state_path = path / "observer" / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    state["reinforcements"] = reinforcements
    state_path.write_text(json.dumps(state))
    (path / ".bench-version").write_text(VERSION)
    print(f"built a {NOTES:,}-note vault in {time.perf_counter() - t0:.0f} s at {path}", file=sys.stderr)


def copy(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=dst, capture_output=True)


def maintain(vault: Path, *args: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run([*CORTEX, "--vault", str(vault), "maintain", "--json", *args], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"cortex maintain failed ({proc.returncode}):\n{proc.stderr}")
    return seconds, json.loads(proc.stdout)


def commits(vault: Path) -> int:
    return int(subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=vault, capture_output=True, text=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="Build the cached vault again.")
    args = parser.parse_args()
    base = CACHE / "vault"
    if args.rebuild or not (base / ".bench-version").exists() or (base / ".bench-version").read_text() != VERSION:
        build(base)
    work = CACHE / "work"
    copy(base, work)
    before = commits(work)
    forced, report = maintain(work, "--force", "--now", NOW)
    after_first = commits(work)
    idle, idle_report = maintain(work, "--now", "2026-03-01T12:05:00.000Z")
    again, again_report = maintain(work, "--force", "--now", "2026-03-01T12:10:00.000Z")
    print(f"cortex maintain on a {NOTES:,}-note vault (2 cores, real CLI, fresh copy)")
    print(f"  --force, everything to do: {forced:6.2f} s  (target ≤ 60 s)   {after_first - before} commits")
    for job in report["ran"]:
        print(f"      {job['job']:<10} {job['seconds']:6.2f} s  changed {job['changed']}")
    print(f"  right after, nothing due:  {idle:6.2f} s  (target ≤ 3 s)   ran {len(idle_report['ran'])} jobs")
    print(f"  --force again, no changes: {again:6.2f} s  {again_report['commits']} commits (idempotent: 0 expected)")
    for job in again_report["ran"]:
        print(f"      {job['job']:<10} {job['seconds']:6.2f} s  changed {job['changed']}")


if __name__ == "__main__":
    main()
