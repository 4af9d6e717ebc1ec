"""Query latency and index build speed on a synthetic 50,000-note vault.

The vault is a real git repository of note files rendered by cortex's own renderer
(text drawn from the ../shared/bench corpora, types, dates and scores at random), built
once and cached under /tmp. Measured:

* full build (`SearchIndex.rebuild`, reading every file) in notes/s;
* incremental update after one new note, in-process and as a cold `cortex index`;
* cold `cortex query` processes (hybrid and --lexical-only), median of several runs,
  also as a ratio to a bare `python -c pass` measured in the same run;
* the same cold `cortex query` processes while `cortex watch` runs, which answers them
  from the index it keeps loaded (every one checked to have been served);
* warm in-process queries through the Python API: median and p95 (hybrid also without
  the feedback from the best results, in turn with it, query by query).

The machine may be shared (CI, other processes), so CPU time is printed beside wall time.

    .venv/bin/python bench/bench_query_latency.py [--notes 50000] [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as every process that searches sets it (search.session)
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data import load  # noqa: E402
from bench_retrieval import NO_FEEDBACK, no_feedback  # noqa: E402

PY = sys.executable
# Cold processes run as an installed cortex does: with compiled bytecode cached (a
# PYTHONDONTWRITEBYTECODE=1 environment would recompile every module on every start).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["PATH"] = os.path.dirname(PY) + os.pathsep + os.environ.get("PATH", "")
# A cold query is measured without a watcher: in a vault of 20,000 notes or more the first
# query would start one by itself (`watch: auto`) and it would answer the others. The
# watched rows start theirs with `cortex watch --background`.
ENV["CORTEX_WATCH"] = "off"


def sentences(limit: int) -> list[str]:
    docs = load("lme")[0] + load("scifact")[0]
    out = []
    for d in docs:
        for s in re.split(r"(?<=[.!?])\s+", d["text"]):
            s = " ".join(s.split())
            if 30 <= len(s) <= 240:
                out.append(s)
    random.Random(7).shuffle(out)
    return out[:limit]


def make_vault(root: Path, n: int) -> None:
    from cortex.notes import NoteDraft, make_title, render_note, source_hash, uuid7
    from cortex.taxonomy import DEFAULT_TYPES
    from cortex.timefmt import format_time

    rng = random.Random(42)
    pool = sentences(4 * n)
    now = datetime(2026, 11, 1, tzinfo=timezone.utc)
    tags = ["work", "home", "health", "travel", "code", "family", "money", "music", "food", "books"]
    people = ["Alice", "Bob", "Chen", "Dana", "Eve", "Farid", "Grace", "Hiro"]
    from cortex.vault import Vault

    Vault.init(root)  # a vault as `cortex init` makes it (cortex refuses a bare repository)
    for i in range(n):
        spec = DEFAULT_TYPES[rng.randrange(len(DEFAULT_TYPES))]
        body = " ".join(pool[(i * 2) % len(pool): (i * 2) % len(pool) + rng.randint(1, 2)])[:500] or f"note {i}"
        created = now - timedelta(minutes=rng.randrange(2 * 365 * 24 * 60))
        h = source_hash(body)
        draft = NoteDraft(
            id=uuid7(int(created.timestamp() * 1000)), type=spec.name, category=spec.category,
            created=format_time(created), source_hash=h, title=make_title(body), body=body,
            bucket=rng.choice(["explicit", "ambient"]), attribution=rng.choice(["owner", "agent-1", "agent-2"]),
            confidence=round(rng.uniform(0.5, 1.0), 2), importance=round(rng.uniform(0.5, 1.0), 2),
            entities=tuple((p, "person") for p in rng.sample(people, rng.randint(0, 2))),
            tags=tuple(rng.sample(tags, rng.randint(0, 2))),
            session_id="cli",
        )
        folder = root / spec.partition / spec.folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{created:%Y-%m-%d}-{h[:8]}-{i}.md").write_text(render_note(draft), encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.org"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--no-verify", "-m", f"{n} synthetic notes"], check=True)


CPU: dict[str, list[float]] = {}


def timed(cmd: list[str], runs: int, label: str = "") -> list[float]:
    """Wall ms per run; the CPU ms (user + sys, the process and its git children) go to
    CPU[label]: on a shared machine, CPU time says what the command costs by itself."""
    out = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
        out.append((time.perf_counter() - t) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
        CPU.setdefault(label, []).append(cpu)
    return out


def p95(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--no-build", action="store_true", help="reuse the cached vault's index (skip the build figure)")
    args = ap.parse_args()

    from cortex.search.freshness import GitProbe
    from cortex.search.index import SearchIndex
    from cortex.search.query import search

    cache = Path(f"/tmp/cortex-search-latency-vault-{args.notes}")
    if not (cache / ".bench-complete").exists() or not (cache / "observer" / "config.yml").exists():
        shutil.rmtree(cache, ignore_errors=True)
        t = time.perf_counter()
        make_vault(cache, args.notes)
        (cache / ".bench-complete").write_text("ok")
        print(f"(built a {args.notes}-note vault in {cache} in {time.perf_counter() - t:.0f}s; cached)", file=sys.stderr)
    root = cache
    extra = root / "mind" / "facts" / "bench-new-note.md"
    extra.unlink(missing_ok=True)
    queries = [q["question"] for q in load("lme")[1]][:200]

    # full build from the files
    idx = SearchIndex(root)
    t, c = time.perf_counter(), time.process_time()
    report = idx.rebuild(force=not args.no_build)
    build_s, build_cpu = time.perf_counter() - t, time.process_time() - c
    notes = report.notes

    # incremental: one new note, in-process, then one more through a cold `cortex index`
    idx = SearchIndex(root).load()
    extra.write_text(extra_note("The harbour ferry now leaves at seven fifteen"), encoding="utf-8")
    t = time.perf_counter()
    inc = idx.refresh(GitProbe.start(root))
    inc_ms = (time.perf_counter() - t) * 1000
    extra.write_text(extra_note("The harbour ferry now leaves at eight"), encoding="utf-8")
    inc_cold = timed([PY, "-m", "cortex", "--vault", str(root), "index"], 1, "index")[0]
    assert inc.added + inc.changed == 1, inc  # changed: left indexed by an earlier --no-build run

    # cold processes (one unmeasured run of each first, which caches bytecode)
    for warm_up in ([PY, "-c", "pass"], [PY, "-m", "cortex", "--vault", str(root), "query", "x", "--paths"],
                    [PY, "-m", "cortex", "--vault", str(root), "query", "x", "--paths", "--lexical-only"]):
        timed(warm_up, 1, "warm-up")
    bare = timed([PY, "-c", "pass"], args.runs, "bare")
    cold = {}
    for label, extra_args in (("hybrid", []), ("lexical-only", ["--lexical-only"])):
        runs = []
        for i in range(args.runs):
            runs += timed([PY, "-m", "cortex", "--vault", str(root), "query", queries[i], "--limit", "10", "--paths",
                           *extra_args], 1, label)
        cold[label] = runs

    # the same cold processes while `cortex watch` runs: the watcher answers from the index
    # it keeps loaded (cortex/search/served.py); its own count says every one was served
    served = served_queries(root, queries, args.runs)

    # warm, in-process
    idx = SearchIndex(root).load()
    search(idx, "warm up")
    warm, warm_cpu = defaultdict(list), defaultdict(list)
    for mode in ("hybrid", "lexical", "semantic"):
        for i, q in enumerate(queries[:100]):
            # hybrid without the feedback from the best results (docs/query.md, step 9) in
            # turn with it, query by query: what it costs, whatever the machine's load
            for label in ((mode, NO_FEEDBACK)[:: 1 if i % 2 else -1] if mode == "hybrid" else (mode,)):
                with no_feedback() if label == NO_FEEDBACK else nullcontext():
                    t, c = time.perf_counter(), time.process_time()
                    search(idx, q, limit=10, mode=mode)
                    warm[label].append((time.perf_counter() - t) * 1000)
                    warm_cpu[label].append((time.process_time() - c) * 1000)
    extra.unlink(missing_ok=True)

    bare_med = statistics.median(bare)
    print(f"\n### Query latency: {notes} notes ({root})\n")
    print("| measure | value | target |")
    print("|---|---|---|")
    if report.rebuilt:
        print(f"| full build (read + parse + index + embed) | {notes / build_s:,.0f} notes/s wall ({build_s:.1f}s), "
              f"{notes / build_cpu:,.0f} notes/s of CPU | >= 1,000 notes/s |")
    print(f"| incremental, one new note (in-process refresh) | {inc_ms:.0f} ms | <= 1 s |")
    print(f"| incremental, one new note (cold `cortex index`) | {inc_cold:.0f} ms wall, {CPU['index'][0]:.0f} ms CPU | <= 1 s |")
    print(f"| bare `python -c pass` | median {bare_med:.0f} ms wall, {statistics.median(CPU['bare']):.0f} ms CPU | |")
    for label, target in (("hybrid", 250), ("lexical-only", 150)):
        med = statistics.median(cold[label])
        cpu = statistics.median(CPU[label])
        print(f"| cold `cortex query` {label} | median {med:.0f} ms wall ({med / bare_med:.1f}x bare python), "
              f"p95 {p95(cold[label]):.0f} ms; median {cpu:.0f} ms CPU "
              f"({cpu / statistics.median(CPU['bare']):.1f}x bare python) | median <= {target} ms |")
    for label, target in (("hybrid", 250), ("lexical-only", 150)):
        med = statistics.median(served[label])
        print(f"| `cortex query` {label}, answered by `cortex watch` | median {med:.0f} ms wall "
              f"({med / bare_med:.1f}x bare python), p95 {p95(served[label]):.0f} ms; "
              f"median {statistics.median(CPU['served ' + label]):.0f} ms CPU of the query process | median <= {target} ms |")
    for mode, target in (("hybrid", "p95 <= 20 ms"), (NO_FEEDBACK, ""), ("lexical", ""), ("semantic", "")):
        print(f"| warm in-process {mode} | median {statistics.median(warm[mode]):.1f} ms, "
              f"p95 {p95(warm[mode]):.1f} ms wall; CPU median {statistics.median(warm_cpu[mode]):.1f} ms, "
              f"p95 {p95(warm_cpu[mode]):.1f} ms | {target} |")
    return 0


def served_queries(root: Path, queries: list[str], runs: int) -> dict[str, list[float]]:
    """Cold `cortex query` processes answered by a running watcher: started, its index
    loaded (it loads when it starts), each figure checked against its count of answers."""
    import json

    def watch(*args: str) -> str:
        return subprocess.run([PY, "-m", "cortex", "--vault", str(root), "watch", *args], capture_output=True,
                              text=True, env=ENV, check=True).stdout

    watch("--background")
    try:
        deadline = time.monotonic() + 300
        while (json.loads(watch("--status", "--json"))["daemon"]["queries"]["state"]) != "ready":
            if time.monotonic() > deadline:
                raise SystemExit("the watcher did not load the search index within 300 s")
            time.sleep(0.2)
        before = json.loads(watch("--status", "--json"))["daemon"]["queries"]["served"]
        out = {}
        for label, extra_args in (("hybrid", []), ("lexical-only", ["--lexical-only"])):
            out[label] = []
            for i in range(runs):
                out[label] += timed([PY, "-m", "cortex", "--vault", str(root), "query", queries[i], "--limit", "10",
                                     "--paths", *extra_args], 1, "served " + label)
        served = json.loads(watch("--status", "--json"))["daemon"]["queries"]["served"] - before
        if served != 2 * runs:
            raise SystemExit(f"the watcher served {served} of {2 * runs} queries: the figures would mix both paths")
        return out
    finally:
        watch("--stop")


def extra_note(body: str) -> str:
    from cortex.notes import NoteDraft, make_title, render_note, source_hash, uuid7
    from cortex.timefmt import format_time, utcnow

    now = utcnow()
    return render_note(NoteDraft(id=uuid7(int(now.timestamp() * 1000)), type="fact", category="concept",
                                 created=format_time(now), source_hash=source_hash(body), title=make_title(body),
                                 body=body, bucket="explicit", attribution="owner", confidence=0.9, importance=0.7))


if __name__ == "__main__":
    raise SystemExit(main())
