"""Warm query latency through `cortex mcp`, on a 50,000-note vault.

Figures, not pass/fail (issue 6's target is printed beside them):

- the vault: 50,000 notes from bench_query_latency.py's generator (sentences of the
  ../shared/bench corpora rendered as notes), built once and cached under
  /tmp/cortex-bench-mcp/ with its search index (`cortex index`); where that generator is
  missing, bench_run.py's synthetic vault;
- the real server, `cortex --vault V mcp`, in a subprocess: time from spawn until
  `initialize` answers and until the index is loaded;
- 200 `query` calls (LongMemEval questions; one in four with a type, partition or tag
  filter) after 20 warm-up calls, each timed as a full round trip over the pipes:
  * through the MCP SDK's own client (`ClientSession`), as a Python agent host sees it;
  * through a bare JSON-RPC client writing lines to the server's stdin, which leaves
    only the server's own time (protocol, search, fencing);
- the same queries through the server's `Memory` in this process (no protocol): what
  search itself costs, so the difference is the server's own overhead;
- `recent` (a 30-day window, and the whole vault: the worst case) and `get_note` by id;
- for scale, a few one-shot `cortex query` processes on the same vault.

Run: `.venv/bin/python bench/bench_mcp.py` (or `make bench`). `--rebuild` drops the cache.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

# As `cortex mcp` does, so the in-process row runs search the way the server does.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_run  # noqa: E402

QUERIES = 200
WARM_UP = 20
NOTES = 50_000
TARGET_P95_MS = 20.0
CORTEX = bench_run.CORTEX
FALLBACK_CACHE = Path(os.environ.get("CORTEX_BENCH_MCP_CACHE", "/tmp/cortex-bench-mcp"))


# --- the vault and the queries ---------------------------------------------------------------

def ensure_vault(rebuild: bool) -> tuple[Path, list[str], list[str]]:
    """(vault, query texts, tags used by the notes): bench_query_latency's vault if its
    generator is here, else bench_run's."""
    try:
        from _data import load
        from bench_query_latency import make_vault
    except ImportError:
        return _fallback_vault(rebuild)
    # Its generator, our own copy: that bench rebuilds the index of its vault while it runs.
    root = FALLBACK_CACHE / f"vault-lme-{NOTES}"
    if rebuild or not (root / ".bench-complete").exists() or not (root / "observer" / "config.yml").exists():
        shutil.rmtree(root, ignore_errors=True)
        start = time.perf_counter()
        make_vault(root, NOTES)
        (root / ".bench-complete").write_text("ok")
        print(f"built a {NOTES:,}-note vault at {root} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    _ensure_index(root)
    texts = [q["question"] for q in load("lme")[1]]
    tags = ["work", "home", "health", "travel", "code", "family", "money", "music", "food", "books"]
    return root, texts, tags


def _fallback_vault(rebuild: bool) -> tuple[Path, list[str], list[str]]:
    root = FALLBACK_CACHE / "vault-50k"
    stamp = FALLBACK_CACHE / "vault-50k.stamp"
    version = f"mcp-v1/{bench_run.CACHE_VERSION}"
    if rebuild or not stamp.exists() or stamp.read_text() != version:
        stamp.unlink(missing_ok=True)
        FALLBACK_CACHE.mkdir(parents=True, exist_ok=True)
        bench_run.build_vault(root)
        stamp.write_text(version)
    _ensure_index(root)
    rnd = random.Random(7)
    words = [bench_run.SUBJECTS, bench_run.VERBS, bench_run.OBJECTS, bench_run.PROJECTS, bench_run.TOOLS]
    texts = [" ".join(rnd.choice(rnd.choice(words)) for _ in range(rnd.randint(2, 4))) for _ in range(500)]
    return root, texts, ["ops", "billing", "pwa", "ci", "data"]


def _ensure_index(root: Path) -> None:
    """A server normally finds its index on disk and current: `cortex index` makes it so
    (a no-op when it is; a rebuild after a format change), outside the timings."""
    start = time.perf_counter()
    subprocess.run([*CORTEX, "--vault", str(root), "index"], check=True, capture_output=True)
    if time.perf_counter() - start > 5:
        print(f"built the search index in {time.perf_counter() - start:.0f} s (`cortex index`)", file=sys.stderr)


def make_calls(texts: list[str], tags: list[str], n: int, seed: int = 7) -> list[dict]:
    rnd = random.Random(seed)
    types = ["fact", "decision", "lesson", "preference", "task", "event"]
    out = []
    for i in range(n):
        args: dict = {"text": texts[i % len(texts)], "limit": 10}
        kind = i % 4
        if kind == 1:
            args["type"] = rnd.choice(types)
        elif kind == 2:
            args["partition"] = rnd.choice(["mind", "vault"])
        elif kind == 3:
            args["tag"] = rnd.choice(tags)
        out.append(args)
    return out


# --- two clients -------------------------------------------------------------------------------

def server_argv(vault: Path) -> list[str]:
    return [*CORTEX, "--vault", str(vault), "mcp"]


async def with_sdk(vault: Path, calls: list[dict], errlog) -> dict:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from cortex.mcp_server import unfence

    argv = server_argv(vault)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ), cwd=str(vault))
    figures: dict = {}
    t0 = time.perf_counter()
    async with stdio_client(params, errlog=errlog) as (r, w):
        async with ClientSession(r, w, read_timeout_seconds=1800) as session:
            await session.initialize()
            figures["initialize_s"] = time.perf_counter() - t0
            while True:  # the server loads the index in the background
                status = json.loads((await session.call_tool("status", {})).content[0].text)
                index = status["server"]["index"]
                if not index.get("loading"):
                    break
                await anyio.sleep(0.5)
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

            for args in calls[:WARM_UP]:
                await timed("query", args)
            lat, hits, first = [], [], None
            for args in calls[WARM_UP:]:
                ms, text = await timed("query", args)
                lat.append(ms)
                records = unfence(text)
                hits.append(len(records))
                first = first or (records[0] if records else None)
            figures["query_ms"], figures["hits"] = lat, hits
            figures["recent_ms"] = [(await timed("recent", {"within": "30d"}))[0] for _ in range(30)]
            figures["recent_all_ms"] = [(await timed("recent", {"within": "3650d"}))[0] for _ in range(3)]
            if first:
                figures["get_note_ms"] = [(await timed("get_note", {"id_or_path": first["id"]}))[0] for _ in range(30)]
    return figures


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux /proc), None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def with_raw_jsonrpc(vault: Path, calls: list[dict], errlog) -> tuple[list[float], float | None]:
    """Round trips of `tools/call query` written straight to the server's stdin, and the
    server's CPU time per query (a figure a busy machine does not inflate as much)."""
    proc = subprocess.Popen(server_argv(vault), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
                            text=True, bufsize=1, cwd=str(vault))
    ids = iter(range(1, 1_000_000))

    def rpc(method: str, params: dict | None = None) -> dict:
        n = next(ids)
        msg = {"jsonrpc": "2.0", "id": n, "method": method, **({"params": params} if params is not None else {})}
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("the server closed its output")
            reply = json.loads(line)
            if reply.get("id") == n:
                return reply

    try:
        rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "0"}})
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        for args in calls[:WARM_UP]:  # the first waits until the index is loaded
            rpc("tools/call", {"name": "query", "arguments": args})
        lat = []
        cpu_before = cpu_seconds(proc.pid)
        for args in calls[WARM_UP:]:
            start = time.perf_counter()
            reply = rpc("tools/call", {"name": "query", "arguments": args})
            lat.append((time.perf_counter() - start) * 1000)
            if reply.get("error") or reply["result"].get("isError"):
                raise SystemExit(f"query {args} failed: {reply}")
        cpu_after = cpu_seconds(proc.pid)
        cpu_ms = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) * 1000 / len(lat)
        return lat, cpu_ms
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def in_process_ms(vault: Path, calls: list[dict]) -> list[float]:
    from cortex.agent_memory import Memory
    from cortex.vault import Vault

    memory = Memory(Vault(vault))
    memory.load()
    names = {"type": "types", "partition": "partitions", "tag": "tags"}
    lat = []
    for i, args in enumerate(calls):
        kwargs = {names.get(k, k): v for k, v in args.items() if k != "text"}
        start = time.perf_counter()
        memory.query(args["text"], **kwargs)
        if i >= WARM_UP:
            lat.append((time.perf_counter() - start) * 1000)
    return lat


def cli_query_ms(vault: Path, texts: list[str]) -> list[float]:
    out = []
    for text in texts:
        start = time.perf_counter()
        subprocess.run([*CORTEX, "--vault", str(vault), "query", text, "--paths"], capture_output=True,
                       env={**os.environ, "CORTEX_WATCH": "off"})  # each a cold process: none starts a watcher
        out.append((time.perf_counter() - start) * 1000)
    return out


# --- report ------------------------------------------------------------------------------------

def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def row(label: str, values: list[float], target: str = "") -> str:
    return (f"{label:<46} {statistics.median(values):>8.2f} {pct(values, 95):>8.2f} {pct(values, 99):>8.2f} "
            f"{max(values):>8.2f}   {target}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rebuild", action="store_true", help="rebuild the cached 50,000-note vault")
    ap.add_argument("--queries", type=int, default=QUERIES)
    ap.add_argument("--cli-runs", type=int, default=5, help="one-shot `cortex query` runs for comparison")
    args = ap.parse_args()

    vault, texts, tags = ensure_vault(args.rebuild)
    calls = make_calls(texts, tags, args.queries + WARM_UP)
    log_path = Path("/tmp/cortex-bench-mcp-server.log")
    with open(log_path, "w") as errlog:
        sdk = anyio.run(with_sdk, vault, calls, errlog)
        raw, raw_cpu_ms = with_raw_jsonrpc(vault, calls, errlog)
    local = in_process_ms(vault, calls)
    cli = cli_query_ms(vault, texts[: args.cli_runs]) if args.cli_runs else []

    print(f"vault: {sdk['notes']:,} notes indexed ({vault}); server log: {log_path}")
    print(f"server start: initialize answered after {sdk['initialize_s']:.2f} s, index loaded after {sdk['ready_s']:.2f} s")
    print(f"queries: {len(sdk['query_ms'])} timed after {WARM_UP} warm-up, one in four filtered (type / partition / "
          f"tag), {statistics.mean(sdk['hits']):.1f} results on average; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print()
    print(f"{'latency, round trip over stdio (ms)':<46} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}   target")
    print(row("query, bare JSON-RPC client (server's time)", raw, f"p95 ≤ {TARGET_P95_MS:g} ms (warm)"))
    if raw_cpu_ms is not None:
        print(f"{'  server CPU time per query (all threads)':<46} {raw_cpu_ms:>8.2f}")
    print(row("query, MCP SDK client (ClientSession)", sdk["query_ms"]))
    print(row("query, in process: search alone, no server", local))
    print(row("recent, 30 days (SDK)", sdk["recent_ms"]))
    print(row("recent, the whole vault in the window (SDK)", sdk["recent_all_ms"]))
    if "get_note_ms" in sdk:
        print(row("get_note by id (SDK)", sdk["get_note_ms"]))
    if cli:
        print(row(f"one-shot `cortex query` process ({len(cli)} runs)", cli, "for scale: a process per query"))


if __name__ == "__main__":
    main()
