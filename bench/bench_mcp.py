"""Warm query latency through `cortex mcp`, on a 50,000-note vault.

Figures, not pass/fail (issue 6's target is printed beside them):

- the vault: 50,000 notes in the DESIGN §4 format, every type and folder, from the same
  generator as bench_run.py; built once and cached under /tmp/cortex-bench-mcp/ (its
  search index too, so later runs start warm);
- the real server, `cortex --vault V mcp`, in a subprocess, driven by the MCP SDK's own
  client over stdio; time from spawn until the index is loaded;
- ~200 `query` calls (plain and filtered) after 20 warm-up calls, timed at the client:
  each figure is a full JSON-RPC round trip through the pipes, search and fencing
  included; then `recent` and `get_note`;
- for scale, a few one-shot `cortex query` runs of the CLI on the same vault.

Run: `.venv/bin/python bench/bench_mcp.py` (or `make bench`). `--rebuild` drops the cache.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_run  # noqa: E402  (the 50,000-note vault generator)

CACHE = Path(os.environ.get("CORTEX_BENCH_MCP_CACHE", "/tmp/cortex-bench-mcp"))
CACHE_VERSION = f"mcp-v1/{bench_run.CACHE_VERSION}"
QUERIES = 200
WARM_UP = 20
TARGET_P95_MS = 20.0
CORTEX = bench_run.CORTEX


def ensure_vault(rebuild: bool) -> Path:
    """The cached vault with its search index built (a server normally finds one on disk)."""
    base = CACHE / "vault-50k"
    stamp = CACHE / "vault-50k.stamp"
    if rebuild or not stamp.exists() or stamp.read_text() != CACHE_VERSION:
        stamp.unlink(missing_ok=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        bench_run.build_vault(base)
        start = time.perf_counter()
        subprocess.run([*CORTEX, "--vault", str(base), "index"], check=True, capture_output=True)
        print(f"built its search index in {time.perf_counter() - start:.0f} s (`cortex index`)", file=sys.stderr)
        stamp.write_text(CACHE_VERSION)
    return base


def make_queries(n: int, seed: int = 7) -> list[dict]:
    """Plain queries in the generator's vocabulary, one in four with a CLI-style filter."""
    rnd = random.Random(seed)
    words = [bench_run.SUBJECTS, bench_run.VERBS, bench_run.OBJECTS, bench_run.PROJECTS, bench_run.TOOLS]
    types = ["fact", "decision", "lesson", "preference", "task", "constraint"]
    out = []
    for i in range(n):
        parts = [rnd.choice(rnd.choice(words)) for _ in range(rnd.randint(2, 4))]
        args: dict = {"text": " ".join(parts), "limit": 10}
        kind = i % 4
        if kind == 1:
            args["type"] = rnd.choice(types)
        elif kind == 2:
            args["partition"] = rnd.choice(["mind", "vault"])
        elif kind == 3:
            args["tag"] = rnd.choice(["ops", "billing", "pwa", "ci", "data"])
        out.append(args)
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


async def drive(vault: Path, queries: list[dict], errlog) -> dict:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from cortex.mcp_server import unfence

    params = StdioServerParameters(command=CORTEX[0], args=[*CORTEX[1:], "--vault", str(vault), "mcp"],
                                   env=dict(os.environ), cwd=str(vault))
    figures: dict = {}
    t0 = time.perf_counter()
    async with stdio_client(params, errlog=errlog) as (r, w):
        async with ClientSession(r, w, read_timeout_seconds=1800) as session:
            await session.initialize()
            figures["initialize_s"] = time.perf_counter() - t0
            while True:  # the server loads (or on the first run builds) the index in the background
                status = json.loads((await session.call_tool("status", {})).content[0].text)
                index = status["server"]["index"]
                if not index.get("loading"):
                    break
                await anyio.sleep(1.0)  # status walks the vault: do not steal the loader's CPU
            if "error" in index:
                raise SystemExit(f"the server could not load the index: {index['error']}")
            figures["ready_s"] = time.perf_counter() - t0
            figures["notes"] = index["notes"]

            async def timed(name: str, args: dict) -> tuple[float, str]:
                start = time.perf_counter()
                result = await session.call_tool(name, args)
                elapsed = (time.perf_counter() - start) * 1000
                if result.is_error:
                    raise SystemExit(f"{name}({args}) failed: {result.content[0].text}")
                return elapsed, result.content[0].text

            for args in queries[:WARM_UP]:
                await timed("query", args)
            lat, hits, first = [], [], None
            for args in queries[WARM_UP:]:
                ms, text = await timed("query", args)
                lat.append(ms)
                records = unfence(text)
                hits.append(len(records))
                first = first or (records[0] if records else None)
            figures["query_ms"] = lat
            figures["hits"] = hits
            figures["recent_ms"] = [(await timed("recent", {"within": "3650d", "limit": 10}))[0] for _ in range(50)]
            if first:
                figures["get_note_ms"] = [(await timed("get_note", {"id_or_path": first["id"]}))[0] for _ in range(50)]
    return figures


def cli_query_ms(vault: Path, texts: list[str]) -> list[float]:
    out = []
    for text in texts:
        start = time.perf_counter()
        subprocess.run([*CORTEX, "--vault", str(vault), "query", text, "--json"], capture_output=True)
        out.append((time.perf_counter() - start) * 1000)
    return out


def row(label: str, values: list[float], target: str = "") -> str:
    return (f"{label:<40} {statistics.median(values):>8.2f} {pct(values, 95):>8.2f} {pct(values, 99):>8.2f} "
            f"{max(values):>8.2f}   {target}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rebuild", action="store_true", help="rebuild the cached 50,000-note vault")
    ap.add_argument("--queries", type=int, default=QUERIES)
    ap.add_argument("--cli-runs", type=int, default=5, help="one-shot `cortex query` runs for comparison")
    args = ap.parse_args()

    vault = ensure_vault(args.rebuild)
    queries = make_queries(args.queries + WARM_UP)
    with open(CACHE / "server.log", "w") as errlog:
        figures = anyio.run(drive, vault, queries, errlog)
    cli = cli_query_ms(vault, [q["text"] for q in queries[: args.cli_runs]]) if args.cli_runs else []

    print(f"vault: {figures['notes']:,} notes indexed (cached at {vault}); server log: {CACHE / 'server.log'}")
    print(f"server: initialize answered after {figures['initialize_s']:.2f} s, index ready after {figures['ready_s']:.2f} s")
    print(f"queries: {len(figures['query_ms'])} timed after {WARM_UP} warm-up, 1 in 4 filtered (type / partition / tag); "
          f"mean {statistics.mean(figures['hits']):.1f} results each")
    print()
    print(f"{'latency, client round trip (ms)':<40} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}   target")
    print(row("query through cortex mcp (warm)", figures["query_ms"], f"p95 ≤ {TARGET_P95_MS:g} ms"))
    print(row("recent through cortex mcp", figures["recent_ms"]))
    if "get_note_ms" in figures:
        print(row("get_note by id through cortex mcp", figures["get_note_ms"]))
    if cli:
        print(row(f"one-shot `cortex query` CLI ({len(cli)} runs)", cli, "for scale: a process per query"))


if __name__ == "__main__":
    main()
