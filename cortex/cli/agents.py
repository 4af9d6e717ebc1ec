"""`cortex mcp`: the vault served to agents over the Model Context Protocol (stdio).

Module level imports only the standard library and the CLI's conventions: the MCP SDK, search and git
load inside the command, so `cortex --help` stays fast.
"""

from __future__ import annotations

from typing import Optional

from cortex.cli.app import command, flag, open_vault, opt


@command(
    flag("--process-after-writes",
         help="Run `cortex run` shortly after each burst of writes, so an observation is searchable within seconds."),
    opt("--debounce", type=float, default=1.5, metavar="SECONDS", min=0.0,
        help="Quiet time after the last write before processing."),
    opt("--attribution", default="agent", help="Attribution of observations that name none."),
    opt("--session", help="Session id of observations that name none (default: a new UUID per server)."),
    opt("--refresh", type=float, default=1.0, metavar="SECONDS", min=0.1,
        help="How often to look for notes changed by others (cheap checks)."),
    opt("--model", metavar="PATH",
        help="A model2vec model folder to embed with (default: $CORTEX_SEARCH_MODEL, else the shipped model)."),
)
def mcp(process_after_writes: bool, debounce: float, attribution: str, session: Optional[str], refresh: float,
        model: Optional[str]) -> None:
    """Serve the vault to agents over MCP on stdin/stdout: observe, query, recent, get_note, forget, brief, status.

    Register it in an MCP client as the command `cortex --vault PATH mcp` (docs/agents.md).
    Logs go to stderr; stdout carries the protocol.
    """
    import os

    # Each query multiplies one vector by the embedding matrix: OpenBLAS's thread pool
    # spins for that and, on a machine busy with an agent, an editor and builds, costs
    # more than it gains (bench/bench_mcp.py: CPU per query 27 -> 16 ms, p95 55 -> 34 ms).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from cortex.mcp_server import serve

    vault = open_vault()
    serve(vault, model=model or os.environ.get("CORTEX_SEARCH_MODEL") or None, attribution=attribution,
          session_id=session, process_after_writes=process_after_writes, debounce=debounce, refresh_interval=refresh)
