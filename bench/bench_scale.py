"""What one note costs as the vault grows: the same operations on vaults of 10,000, 50,000
and (with `--sizes 10000,50000,200000`) 200,000 notes.

Each vault (built once and cached under /tmp/cortex-bench-scale/, since a 200,000-note
vault takes minutes): `cortex init`, then notes of all 17 types in cortex's note format
(deterministic text, as `bench_run.py` writes them), one plain-git commit, `git gc`, a
full `cortex index`. Each measurement runs the real CLI (or git) in a subprocess; the
median of `--repeat` runs, next to `python -c pass` measured in the same run:

- the validate hook (`python -m cortex.hooks validate`) on one staged new note, and what
  a commit runs (`check --stage`: the fixer, then the validator);
- `git commit` of one new note through the installed pre-commit hooks, of one file no
  cortex hook looks at (pre-commit's own work: it diffs the whole working tree several
  times) and with `--no-verify` (git alone); the hooks' share is the first less the second.
  That share holds pre-commit's `git diff` of the whole working tree after any hook it
  runs, so the same commit also goes through a hook that does nothing (`true`, on the same
  files): the commit through cortex's hook less that one is cortex's own. A difference
  of two walls that each carry git's lstat of every file moves by more than cortex's
  part, so cortex's two processes are also measured inside a commit, each under
  `hook_cpu.py` (CPU time, user + system with the git they run, and the hook's wall):
  the commit guard, which runs before pre-commit in every commit, and the hook;
- `cortex index` after one new committed note, and with nothing to do;
- a cold `cortex query`, hybrid and lexical (`--lexical`);
- `cortex status`; `cortex maintain` with nothing due;
- `cortex run` of 1,000 new observations, next to `git add` + `git commit` of 1,000 new
  files in the same vault;
- `cortex maintain --force --only dedup` (a near-duplicate merge over the whole vault);
- with `cortex watch` running (`--no-watch` leaves these out): `cortex index` with nothing
  to do, after one note written, after one note committed; `cortex status`; queries. The
  watcher answers the queries and makes the index updates on the index it keeps loaded
  (each checked to have been);
- with the watcher `cortex query` starts by itself (`watch: auto`, the default, from
  20,000 tracked files; `--no-watch` leaves these out too): the first query, which starts
  it and does not wait, then `cortex index`, `cortex status` and queries once it answers
  (below 20,000 notes none starts: these are the figures without a watcher). Every other
  row runs with CORTEX_WATCH=off, so that no watcher starts under it;
- the full index build (timed when the vault is built) and `.git`'s size, loose objects.

Then each one-note cost's ratio between the largest and the smallest vault (target
≤ 1.3). Figures, not pass/fail; the machine is shared, so expect ±10%.

Run: `.venv/bin/python bench/bench_scale.py [--sizes 10000,50000] [--repeat 5] [--rebuild]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_run import vault_note  # noqa: E402
from cortex.notes import NoteDraft, make_title, note_path, render_note, source_hash, uuid7  # noqa: E402
from cortex.taxonomy import DEFAULT_TAXONOMY  # noqa: E402

CACHE = Path(os.environ.get("CORTEX_BENCH_SCALE_CACHE", "/tmp/cortex-bench-scale"))
VERSION = "scale-v2"  # v2: notes filed by month
PY = sys.executable
_SCRIPT = Path(PY).parent / "cortex"
CORTEX = [str(_SCRIPT)] if _SCRIPT.exists() else [PY, "-m", "cortex"]
ONE_NOTE = ("hook", "hook_check", "commit", "commit_cortex", "commit_own", "commit_cpu", "commit_guard_cpu",
            "commit_hook_cpu", "commit_hook_wall", "index_one", "index_idle", "status", "maintain_idle", "query_hybrid",
            "query_lexical", "index_idle_w", "index_edit_w", "index_one_w", "status_w", "query_hybrid_w",
            "query_lexical_w", "status_one_w", "query_one_w", "index_idle_a", "status_a", "query_hybrid_a",
            "query_lexical_a")
ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
       "CORTEX_WATCH": "off"}  # no watcher starts by itself under the rows measured without one
AUTO_ENV = {k: v for k, v in ENV.items() if k != "CORTEX_WATCH"}  # `watch: auto`, as a person has it


def sh(cwd: Path, *argv: str, check: bool = True, input: str | None = None, env: dict | None = None
       ) -> subprocess.CompletedProcess:
    done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, env=env or ENV, input=input)
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}) in {cwd}:\n{done.stdout}\n{done.stderr}")
    return done


def timed(cwd: Path, *argv: str, check: bool = True, env: dict | None = None) -> float:
    t0 = time.perf_counter()
    sh(cwd, *argv, check=check, env=env)
    return time.perf_counter() - t0


def build(path: Path, notes: int) -> dict:
    if path.exists():
        shutil.rmtree(path)
    t0 = time.perf_counter()
    sh(path.parent, *CORTEX, "init", str(path))
    types = sorted(DEFAULT_TAXONOMY.types)
    for i in range(notes):
        rel, text, _ = vault_note(i, types, DEFAULT_TAXONOMY)
        target = path / rel
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    sh(path, "git", "add", "-A")
    sh(path, "git", "-c", "gc.auto=0", "commit", "-q", "--no-verify", "-m", f"{notes} notes")
    sh(path, "git", "gc", "-q")
    written = time.perf_counter() - t0
    t1 = time.perf_counter()
    sh(path, *CORTEX, "index")
    indexed = time.perf_counter() - t1
    sh(path, *CORTEX, "maintain", "--force")  # every job run once: later, nothing is due
    info = {"notes": notes, "build_seconds": round(written, 1), "index_build_seconds": round(indexed, 1),
            "head": sh(path, "git", "rev-parse", "HEAD").stdout.strip()}
    (path / ".bench-version").write_text(json.dumps({"version": VERSION, **info}))
    return info


def current_hooks(path: Path) -> None:
    """A cached vault's pre-commit config as `cortex init` writes it today (a vault built
    by an older cortex keeps its hooks otherwise: the commit rows would measure those)."""
    template = (ROOT / "cortex" / "data" / "templates" / "pre-commit-config.yaml").read_text(encoding="utf-8")
    config = path / ".pre-commit-config.yaml"
    if config.read_text(encoding="utf-8") != template:
        config.write_text(template, encoding="utf-8")
        sh(path, "git", "add", ".pre-commit-config.yaml")
        sh(path, "git", "commit", "-q", "--no-verify", "-m", "bench: the current hooks")
    # a bench killed inside `timed_processes` left its wrapped hooks: the config accepted
    # (every commit refused) and the guard under a wrapper that may be gone (the guard
    # would silently not run: its line ends `|| true`)
    blob = sh(path, "git", "hash-object", ".pre-commit-config.yaml").stdout.strip()
    if sh(path, "git", "config", "--get", "cortex.preCommitConfig", check=False).stdout.strip() != blob:
        sh(path, "git", "config", "cortex.preCommitConfig", blob)
    legacy = path / ".git" / "hooks" / "pre-commit.legacy"
    if legacy.exists():
        text = legacy.read_text(encoding="utf-8")
        unwrapped = re.sub(r"^\S+ \S+/hook_cpu\.py \S+ ", "", text, flags=re.MULTILINE)
        if unwrapped != text:
            legacy.write_text(unwrapped, encoding="utf-8")


def cached_vault(notes: int, rebuild: bool) -> tuple[Path, dict]:
    path = CACHE / f"v{notes}"
    marker = path / ".bench-version"
    try:
        info = json.loads(marker.read_text())
        if info.get("version") == VERSION and not rebuild:
            return path, info
    except (OSError, ValueError):
        pass
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"building a {notes:,}-note vault at {path} …", file=sys.stderr)
    info = build(path, notes)
    print(f"  built in {info['build_seconds']} s, indexed in {info['index_build_seconds']} s", file=sys.stderr)
    return path, info


_SERIAL = [0]


def new_note(vault: Path, kind: str = "lesson") -> str:
    """A fresh, valid note file (not yet staged); its vault-relative path."""
    _SERIAL[0] += 1
    serial = f"{os.getpid()}-{time.time_ns()}-{_SERIAL[0]}"
    body = f"Bench note {serial}: the sync worker retries station files after a short pause."
    created = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    spec = DEFAULT_TAXONOMY.get(kind)
    h = source_hash(body)
    draft = NoteDraft(id=uuid7(time.time_ns() // 1_000_000, os.urandom(10)), type=kind, category=spec.category, created=created, source_hash=h,
                      title=make_title(body), body=body, bucket="explicit", attribution="bench", confidence=0.9,
                      importance=0.8, entities=(("Tidewatch", "project"),), tags=("ops",), last_reinforced=created)
    rel = note_path(spec.directory, created[:10], h)
    (vault / rel).parent.mkdir(parents=True, exist_ok=True)
    (vault / rel).write_text(render_note(draft), encoding="utf-8")
    return rel


# A hook that does nothing, on the files cortex's hook is given: what pre-commit costs for
# running any hook (its `git diff` of the whole working tree after it), without cortex's.
NOOP_HOOK = r"""repos:
  - repo: local
    hooks:
      - id: noop
        name: does nothing
        entry: 'true'
        language: system
        files: \.md$
        exclude: ^observer/|(^|/)\.
        require_serial: true
"""


def hooks_config(vault: Path, text: str) -> None:
    (vault / ".pre-commit-config.yaml").write_text(text, encoding="utf-8")
    sh(vault, "git", "add", ".pre-commit-config.yaml")
    sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: hooks")
    # accepted here, as its person would with `cortex hook install`: cortex's hook refuses a
    # commit while the config differs from the one accepted on this machine
    blob = sh(vault, "git", "hash-object", ".pre-commit-config.yaml").stdout.strip()
    sh(vault, "git", "config", "cortex.preCommitConfig", blob)


HOOK_CPU = ROOT / "bench" / "hook_cpu.py"


@contextlib.contextmanager
def timed_processes(vault: Path, cortex_hooks: str, out: Path) -> Iterator[tuple[Path, Path]]:
    """Cortex's two processes in a commit, each under `hook_cpu.py`, which appends its CPU
    time (user + system, the git it runs included) and wall to the files yielded: the
    commit guard (`.git/hooks/pre-commit.legacy`, before pre-commit, in every commit) and
    the hook (`check --stage`, with its `sh` and `git config`). Measured inside a real
    `git commit`, not as a difference of two commits, each of which carries git's and
    pre-commit's work on the whole working tree (more than cortex's part, and noisier)."""
    entry = "entry: >-\n          sh -c"
    if entry not in cortex_hooks:
        raise SystemExit(f"the hook's entry in {vault}/.pre-commit-config.yaml is not the template's: no `{entry}`")
    legacy = vault / ".git" / "hooks" / "pre-commit.legacy"
    text = legacy.read_text(encoding="utf-8")
    guard = next((line for line in text.splitlines() if "-m cortex.gitlock guard" in line), None)
    if guard is None:
        raise SystemExit(f"no commit guard in {legacy}")
    guard_out, hook_out = out.with_name(out.name + "-guard.jsonl"), out.with_name(out.name + "-hook.jsonl")
    hooks_config(vault, cortex_hooks.replace(entry, f"entry: >-\n          {PY} {HOOK_CPU} {hook_out} sh -c"))
    legacy.write_text(text.replace(guard, f"{PY} {HOOK_CPU} {guard_out} {guard}"), encoding="utf-8")
    try:
        yield guard_out, hook_out
    finally:
        legacy.write_text(text, encoding="utf-8")
        hooks_config(vault, cortex_hooks)


def last_timing(path: Path) -> dict:
    """The last line ``hook_cpu.py`` appended to ``path`` (the process ran: else no line)."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not lines:
        raise SystemExit(f"{path}: the measured process did not run in the commit")
    return json.loads(lines[-1])


def median(values: list[float]) -> float:
    return statistics.median(values)


def append_observations(vault: Path, stamp: int) -> None:
    """The `cortex run` row's 1,000 new observations, appended to the buffer."""
    lines = [json.dumps({"timestamp": "2026-03-01T12:00:00.000Z", "session_id": "cli", "type": "fact",
                         "bucket": "explicit", "attribution": "bench", "importance": 0.8,
                         "body": f"Run {stamp} item {k}: the export job compresses monthly exports in batches of {k}."})
             for k in range(1000)]
    with open(vault / "observer" / "observations.jsonl", "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def git_own_1000(vault: Path, stamp: int) -> float:
    """Seconds of git's own `git add` + `git commit` of 1,000 new files (written first)."""
    for k in range(1000):
        target = vault / "mind" / "facts" / f"git-{stamp}-{k}.md"
        target.write_text(f"---\ntype: fact\n---\n\nGit baseline {stamp} {k}.\n", encoding="utf-8")
    t0 = time.perf_counter()
    sh(vault, "git", "add", "mind/facts")
    sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: git's own 1,000")
    return time.perf_counter() - t0


def measure(vault: Path, repeat: int) -> dict:
    out: dict[str, float] = {}
    out["python"] = median([timed(vault, PY, "-c", "pass") for _ in range(repeat)])
    # warm what the first use builds (the HEAD cache, the hook's pattern cache)
    rel = new_note(vault)
    sh(vault, "git", "add", rel)
    sh(vault, PY, "-m", "cortex.hooks", "validate", rel)
    sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: warm")
    hook, check = [], []
    for _ in range(repeat):
        rel = new_note(vault)
        sh(vault, "git", "add", rel)
        hook.append(timed(vault, PY, "-m", "cortex.hooks", "validate", rel))
        check.append(timed(vault, PY, "-m", "cortex.hooks", "check", "--stage", rel))
        sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: hook")
    out["hook"], out["hook_check"] = median(hook), median(check)
    commit, framework, plain, noop = [], [], [], []
    processes: list[tuple[float, float, float, float]] = []
    cortex_hooks = (vault / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    timings = vault / ".git" / "bench-processes"  # hook_cpu.py's lines, outside the working tree
    for _ in range(repeat):
        rel = new_note(vault)
        sh(vault, "git", "add", rel)
        commit.append(timed(vault, "git", "commit", "-q", "-m", "bench: one note"))
        other = vault / "observer" / f"bench-{time.time_ns()}.txt"  # no cortex hook matches it
        other.write_text("not a note\n", encoding="utf-8")
        sh(vault, "git", "add", "-f", str(other.relative_to(vault)))
        framework.append(timed(vault, "git", "commit", "-q", "-m", "bench: one other file"))
        rel = new_note(vault)
        sh(vault, "git", "add", rel)
        plain.append(timed(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: one note, no hooks"))
        hooks_config(vault, NOOP_HOOK)
        rel = new_note(vault)
        sh(vault, "git", "add", rel)
        noop.append(timed(vault, "git", "commit", "-q", "-m", "bench: one note, a hook doing nothing"))
        with timed_processes(vault, cortex_hooks, timings) as (guard_out, hook_out):  # back to cortex's hooks after
            rel = new_note(vault)
            sh(vault, "git", "add", rel)
            sh(vault, "git", "commit", "-q", "-m", "bench: one note, cortex's processes timed")
            guard, hook = last_timing(guard_out), last_timing(hook_out)
        processes.append((guard["cpu"] + hook["cpu"], guard["cpu"], hook["cpu"], hook["wall"]))
    out["commit"], out["commit_framework"], out["commit_plain"] = median(commit), median(framework), median(plain)
    out["commit_cortex"] = out["commit"] - out["commit_framework"]
    out["commit_noop"] = median(noop)
    out["commit_own"] = out["commit"] - out["commit_noop"]
    for k, key in enumerate(("commit_cpu", "commit_guard_cpu", "commit_hook_cpu", "commit_hook_wall")):
        out[key] = median([p[k] for p in processes])
    sh(vault, *CORTEX, "index")
    index_one, index_idle = [], []
    for _ in range(repeat):
        rel = new_note(vault)
        sh(vault, "git", "add", rel)
        sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: index one")
        index_one.append(timed(vault, *CORTEX, "index"))
        index_idle.append(timed(vault, *CORTEX, "index"))
    out["index_one"], out["index_idle"] = median(index_one), median(index_idle)
    out["query_hybrid"] = median([timed(vault, *CORTEX, "query", "how are station files cached", "--json", check=False)
                                  for _ in range(repeat)])
    out["query_lexical"] = median([timed(vault, *CORTEX, "query", "how are station files cached", "--lexical-only", "--json",
                                         check=False) for _ in range(repeat)])
    out["status"] = median([timed(vault, *CORTEX, "status", "--json") for _ in range(repeat)])
    out["maintain_idle"] = median([timed(vault, *CORTEX, "maintain") for _ in range(repeat)])
    # cortex run of 1,000 new observations, then git's own for 1,000 new files
    stamp = time.time_ns()
    append_observations(vault, stamp)
    t0 = time.perf_counter()
    report = json.loads(sh(vault, *CORTEX, "run", "--json").stdout)
    out["run_1000"] = time.perf_counter() - t0
    if report.get("memorized", 0) < 1000:  # a figure for notes written, not for lines refused
        raise SystemExit(f"cortex run memorized {report.get('memorized')} of 1,000 lines: {json.dumps(report)[:400]}")
    out["git_1000"] = git_own_1000(vault, stamp)
    out["dedup"] = timed(vault, *CORTEX, "maintain", "--force", "--only", "dedup")
    objects = dict(line.split(": ", 1) for line in sh(vault, "git", "count-objects", "-v").stdout.splitlines())
    out["loose_objects"] = int(objects["count"])
    out["git_mb"] = (int(objects["size"]) + int(objects["size-pack"])) / 1024
    return out


def measure_freshness(vault: Path, repeat: int) -> dict:
    """``measure``'s rows a watcher changes, alone (`--only-watch`): `cortex index` with
    nothing to do, the cold queries, `cortex status`, no watcher running."""
    out = {"python": median([timed(vault, PY, "-c", "pass") for _ in range(repeat)])}
    sh(vault, *CORTEX, "index")
    out["index_idle"] = median([timed(vault, *CORTEX, "index") for _ in range(repeat)])
    out["query_hybrid"] = median([timed(vault, *CORTEX, "query", "how are station files cached", "--json", check=False)
                                  for _ in range(repeat)])
    out["query_lexical"] = median([timed(vault, *CORTEX, "query", "how are station files cached", "--lexical-only", "--json",
                                         check=False) for _ in range(repeat)])
    out["status"] = median([timed(vault, *CORTEX, "status", "--json") for _ in range(repeat)])
    return out


def measure_watched(vault: Path, repeat: int) -> dict:
    """The freshness-bound rows again while `cortex watch` runs (cortex's probe asks the
    watcher instead of git stat-ing every note), once the watcher has seeded its copy of
    the index. A commit gives git a new index, which the watcher seeds once the vault is
    quiet: `index_one_w`, `status_one_w` and `query_one_w` are measured right after a
    commit, as the rows without the watcher are (the search index and `cortex status` ask
    the watcher itself, which no commit affects: docs/scale.md); `index_edit_w` after a
    note written and not committed (a person's edit in Obsidian)."""
    out: dict[str, float] = {}
    sh(vault, *CORTEX, "watch", "--background")
    try:
        sh(vault, *CORTEX, "index")
        wait_seeded(vault)
        served = wait_serving(vault)
        out["index_idle_w"] = median([timed(vault, *CORTEX, "index") for _ in range(repeat)])
        out["status_w"] = median([timed(vault, *CORTEX, "status", "--json") for _ in range(repeat)])
        out["query_hybrid_w"] = median([timed(vault, *CORTEX, "query", "how are station files cached", "--json",
                                              check=False) for _ in range(repeat)])
        out["query_lexical_w"] = median([timed(vault, *CORTEX, "query", "how are station files cached",
                                               "--lexical-only", "--json", check=False) for _ in range(repeat)])
        edit, one = [], []
        for _ in range(repeat):
            new_note(vault)
            edit.append(timed(vault, *CORTEX, "index"))
        sh(vault, "git", "add", "-A", "--", "vault", "mind")
        sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: watched notes")
        for _ in range(repeat):
            rel = new_note(vault)
            sh(vault, "git", "add", rel)
            sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: watched index one")
            one.append(timed(vault, *CORTEX, "index"))
        out["index_edit_w"], out["index_one_w"] = median(edit), median(one)
        status, query = [], []
        for _ in range(repeat):
            rel = new_note(vault)
            sh(vault, "git", "add", rel)
            sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: watched status one")
            status.append(timed(vault, *CORTEX, "status", "--json"))
            rel = new_note(vault)
            sh(vault, "git", "add", rel)
            sh(vault, "git", "commit", "-q", "--no-verify", "-m", "bench: watched query one")
            query.append(timed(vault, *CORTEX, "query", "how are station files cached", "--json", check=False))
        out["status_one_w"], out["query_one_w"] = median(status), median(query)
        if (answered := watch_queries(vault)["served"] - served) != 6 * repeat:  # 3 rows of queries, 3 of `cortex index`
            raise SystemExit(f"the watcher answered {answered} of {6 * repeat} queries and index updates: "
                             "the rows would mix both paths")
    finally:
        sh(vault, *CORTEX, "watch", "--stop")
    return out


def measure_auto(vault: Path, repeat: int) -> dict:
    """The watcher `watch: auto` starts: the first `cortex query` of a vault with none
    running (it starts one and answers without waiting), then, once the watcher answers,
    `cortex index` with nothing to do, `cortex status` and queries, as a person's next
    commands are. Below the vault size it starts from, none starts and these are the
    figures without a watcher (said in the output)."""
    out: dict[str, float] = {}
    if watch_status(vault)["running"]:
        raise SystemExit(f"a watcher runs in {vault} already: the first query would not start one")
    question = ("query", "how are station files cached", "--json")
    out["query_first_a"] = timed(vault, *CORTEX, *question, check=False, env=AUTO_ENV)
    deadline = time.monotonic() + 30
    while not (started := watch_status(vault)["running"]) and time.monotonic() < deadline:
        time.sleep(0.1)  # the daemon is starting (it runs once the lock is its)
    out["auto_started"] = started
    try:
        served = 0
        if started:
            served = wait_serving(vault)
            wait_seeded(vault)
        out["index_idle_a"] = median([timed(vault, *CORTEX, "index", env=AUTO_ENV) for _ in range(repeat)])
        out["status_a"] = median([timed(vault, *CORTEX, "status", "--json", env=AUTO_ENV) for _ in range(repeat)])
        out["query_hybrid_a"] = median([timed(vault, *CORTEX, *question, check=False, env=AUTO_ENV)
                                        for _ in range(repeat)])
        out["query_lexical_a"] = median([timed(vault, *CORTEX, *question, "--lexical-only", check=False, env=AUTO_ENV)
                                         for _ in range(repeat)])
        if started and (answered := watch_queries(vault)["served"] - served) != 3 * repeat:
            raise SystemExit(f"the watcher started by itself answered {answered} of {3 * repeat} queries and "
                             "index updates: the rows would mix both paths")
        if not started and watch_status(vault)["running"]:
            raise SystemExit("a watcher started after the first query: the rows would mix both paths")
    finally:
        sh(vault, *CORTEX, "watch", "--stop")
    return out


def watch_status(vault: Path) -> dict:
    return json.loads(sh(vault, *CORTEX, "watch", "--status", "--json").stdout)


def watch_queries(vault: Path) -> dict:
    return json.loads(sh(vault, *CORTEX, "watch", "--status", "--json").stdout)["daemon"]["queries"]


def wait_serving(vault: Path) -> int:
    """Until the watcher has loaded the search index (it does when it starts) and answers
    queries itself; how many it has answered."""
    deadline = time.monotonic() + 300
    while (state := watch_queries(vault))["state"] != "ready":
        if time.monotonic() > deadline:
            raise SystemExit(f"the watcher did not load the search index of {vault} within 300 s")
        time.sleep(0.2)
    return state["served"]


def wait_seeded(vault: Path) -> None:
    """Until the watcher has seeded the probe's copy of the index (once the vault has
    been quiet for a second: docs/scale.md); until then probes ask git the usual way."""
    from cortex.search.freshness import watched_index

    deadline = time.monotonic() + 120
    while not watched_index(vault)[2]:
        if time.monotonic() > deadline:
            raise SystemExit(f"the watcher did not seed its index copy in {vault} within 120 s")
        time.sleep(0.1)


def restore(vault: Path, head: str) -> None:
    """Back to the vault as built: the measurements' commits dropped, caches kept."""
    sh(vault, "git", "reset", "-q", "--hard", head)
    sh(vault, "git", "clean", "-q", "-fd", "--", "vault", "mind")
    (vault / "observer" / "observations.jsonl").unlink(missing_ok=True)
    (vault / "observer" / "quarantine.jsonl").unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000", help="Vault sizes, comma-separated (200000 when asked).")
    parser.add_argument("--repeat", type=int, default=5, help="Runs per figure (the median is printed).")
    parser.add_argument("--rebuild", action="store_true", help="Build the cached vaults again.")
    parser.add_argument("--no-watch", action="store_true", help="Leave out the rows measured with `cortex watch` running.")
    parser.add_argument("--only-watch", action="store_true",
                        help="Only `python -c pass`, the freshness rows without a watcher, and the rows with one.")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = {}
    for size in sizes:
        vault, info = cached_vault(size, args.rebuild)
        restore(vault, info["head"])
        current_hooks(vault)
        try:
            results[size] = {**(measure_freshness if args.only_watch else measure)(vault, args.repeat), **info}
            if not args.no_watch:
                restore(vault, info["head"])
                results[size].update(measure_watched(vault, args.repeat))
                restore(vault, info["head"])
                results[size].update(measure_auto(vault, args.repeat))
        finally:
            restore(vault, info["head"])
    rows = [
        ("python -c pass", "python", "s"), ("validate hook, one staged note", "hook", "s"),
        ("  the commit's hook (check --stage) alone", "hook_check", "s"),
        ("git commit of one note, hooks", "commit", "s"), ("  same, a file no cortex hook reads", "commit_framework", "s"),
        ("  the cortex hooks' share (difference)", "commit_cortex", "s"),
        ("  same note, a hook doing nothing", "commit_noop", "s"),
        ("  cortex's own (hooks less doing nothing)", "commit_own", "s"),
        ("  cortex's processes in it, CPU (measured)", "commit_cpu", "s"),
        ("    the commit guard, CPU", "commit_guard_cpu", "s"),
        ("    the hook (check --stage), CPU", "commit_hook_cpu", "s"),
        ("    the hook, wall", "commit_hook_wall", "s"),
        ("git commit of one note, no hooks", "commit_plain", "s"),
        ("cortex index after one new note", "index_one", "s"), ("cortex index, nothing to do", "index_idle", "s"),
        ("cold query, hybrid", "query_hybrid", "s"), ("cold query, lexical", "query_lexical", "s"),
        ("cortex status", "status", "s"), ("cortex maintain, nothing due", "maintain_idle", "s"),
        ("cortex run, 1,000 observations", "run_1000", "s"), ("git add + commit, 1,000 files", "git_1000", "s"),
        ("with cortex watch: index, nothing to do", "index_idle_w", "s"),
        ("  index after one note written", "index_edit_w", "s"),
        ("  index after one note committed", "index_one_w", "s"),
        ("  cortex status", "status_w", "s"), ("  query answered by it, hybrid", "query_hybrid_w", "s"),
        ("  query answered by it, lexical", "query_lexical_w", "s"),
        ("  cortex status after one note committed", "status_one_w", "s"),
        ("  query after one note committed", "query_one_w", "s"),
        ("watch: auto — first query (starts it)", "query_first_a", "s"),
        ("  it started (else: below its size)", "auto_started", ""),
        ("  then: index, nothing to do", "index_idle_a", "s"), ("  then: cortex status", "status_a", "s"),
        ("  then: query, hybrid", "query_hybrid_a", "s"), ("  then: query, lexical", "query_lexical_a", "s"),
        ("maintain --force --only dedup", "dedup", "s"), ("full index build", "index_build_seconds", "s"),
        (".git size after (MB)", "git_mb", "MB"), ("loose objects after", "loose_objects", ""),
        ("vault build (write, add, commit, gc)", "build_seconds", "s"),
    ]
    print(f"cost as the vault grows (median of {args.repeat}; real CLI; shared 2-core machine)")
    print(f"  {'operation':<40}" + "".join(f"{s:>12,}" for s in sizes)
          + (f"{'ratio':>9}{'÷ python':>10}" if len(sizes) > 1 else ""))
    for label, key, _unit in rows:
        values = [results[s].get(key) for s in sizes]
        if all(v is None for v in values):
            continue
        cells = "".join(f"{v:>12.3f}" if isinstance(v, float) else f"{v!s:>12}" for v in values)
        ratio = ""
        if len(sizes) > 1 and key in ONE_NOTE and values[0]:
            # the same ratio over python -c pass's own, which a busy machine moves alike
            py = results[sizes[-1]]["python"] / results[sizes[0]]["python"]
            ratio = f"{values[-1] / values[0]:>8.2f}×{values[-1] / values[0] / py:>9.2f}×"
        print(f"  {label:<40}{cells}{ratio}")
    for s in sizes:
        r = results[s]
        if "run_1000" in r:
            print(f"  {s:,} notes: cortex run 1,000 = {r['run_1000'] / r['git_1000']:.2f}× git's own (target ≤ 2×)")
    print(f"  ratio: largest / smallest vault (÷ python: over python -c pass's own ratio); one-note costs "
          f"should stay ≤ 1.3× "
          f"({', '.join(ONE_NOTE)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
