"""Scheduled maintenance: reinforce, decay, dedup, graph, maintain, schedule, cron, brief."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, TYPE_CHECKING

from cortex.cli.app import JSON, arg, command, emit_json, flag, group, info, open_vault, opt
from cortex.errors import UsageError

if TYPE_CHECKING:
    from cortex.vault import Vault

NOW = opt("--now", hidden=True, help="Pretend the time is this ISO-8601 instant (testing and replays).")


def _now(text: Optional[str]):
    from cortex.timefmt import parse_time, utcnow

    if not text:
        return utcnow()
    try:
        return parse_time(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _skips(result) -> None:
    for s in result.skipped[:20]:
        where = s.get("path") or (f"{s['superseded']} (superseded by {s['by']})" if "superseded" in s
                                  else f"{s.get('merge')} → {s.get('keep')}")
        info(f"  skipped {where}: {s['why']}")
    if len(result.skipped) > 20:
        info(f"  … and {len(result.skipped) - 20} more skipped (--json shows all)")
    for w in result.warnings:
        info(f"  warning: {w}")


def _job(name: str, json_: bool, dry_run: bool, now: Optional[str], line) -> None:
    from cortex.maintenance.due import run_job

    result = run_job(open_vault(), name, now=_now(now), dry_run=dry_run)
    if json_:
        emit_json(result.to_json())
    else:
        for item in result.items:
            print(line(item))
    verb = "would change" if dry_run else "changed"
    commit = f", commit {result.commit[:10]}" if result.commit else ""
    info(f"cortex {name}: {verb} {result.changed} note{'' if result.changed == 1 else 's'}{commit} in {result.seconds:.2f}s")
    _skips(result)


@command(JSON, flag("--dry-run", help="Show what would be written; change nothing."), NOW)
def reinforce(json_: bool, dry_run: bool, now: Optional[str]) -> None:
    """Apply pending reinforcements to the notes (last_reinforced, count); bring faded ones back
    from the archive (a forgotten or replaced memory stays there)."""
    _job("reinforce", json_, dry_run, now, _reinforced_line)


def _reinforced_line(item: dict) -> str:
    line = f"{item['path']}  +{item['count']} (reinforced {item['reinforced']})"
    if item.get("restored_from"):
        return line + "  back from the archive"
    if item.get("kept_archived"):
        return line + f"  stays archived ({item['kept_archived']})"
    return line


@command(JSON, flag("--dry-run", help="List what would fade; move nothing."), NOW)
def decay(json_: bool, dry_run: bool, now: Optional[str]) -> None:
    """Archive memories whose effective importance fell below the forget threshold (mind only)."""
    _job("decay", json_, dry_run, now, _decayed_line)


def _decayed_line(item: dict) -> str:
    if item.get("restored_in"):
        return f"{item['path']}  kept: brought back by {item['restored_by']} in {item['restored_in'][:10]}"
    return f"{item['path']} → {item['archived_to']}  ({item['effective_importance']:.2f})"


@command(JSON, flag("--dry-run", help="List candidate pairs with their scores; merge nothing."), NOW)
def dedup(json_: bool, dry_run: bool, now: Optional[str]) -> None:
    """Merge near-duplicate memories of the same type into the older note, and archive a
    memory the newest one of its subject contradicts (another number, date, polarity or state)."""
    from cortex.maintenance.due import run_job

    result = run_job(open_vault(), "dedup", now=_now(now), dry_run=dry_run)
    merged = [i for i in result.items if "merge" in i]
    superseded = [i for i in result.items if "superseded" in i]
    if json_:
        emit_json(result.to_json())
    else:
        for i in merged:
            print(f"merge  {i['cosine']:.3f}  {i['merge']} → {i['keep']}")
        for i in superseded:
            print(f"supersede  {i['superseded']} by {i['by']}  ({i['why']})")
        if dry_run:
            for s in result.skipped:
                if "cosine" in s:
                    print(f"keep   {s['cosine']:.3f}  {s['merge']} ≠ {s['keep']}  ({s['why']})")
                elif "restored" in s:  # a pair a person split
                    print(f"apart  {s.get('merge') or s['superseded']} ≠ {s.get('keep') or s['by']}  ({s['why']})")
    verb = "would merge" if dry_run else "merged"
    commit = f", commit {result.commit[:10]}" if result.commit else ""
    also = f", {'would supersede' if dry_run else 'superseded'} {len(superseded)} contradicted" if superseded else ""
    info(f"cortex dedup: {verb} {len(merged)} near-duplicate{'' if len(merged) == 1 else 's'}{also}{commit} "
         f"in {result.seconds:.2f}s")
    if not dry_run:
        _skips(result)


graph_group = group("graph", JSON, help="The graph of notes, entities and tags (.git/cortex/graph.json).")


def _graph(vault: Vault):
    from cortex.maintenance.base import JobContext
    from cortex.maintenance.graph import current_graph
    from cortex.timefmt import utcnow

    with vault.lock():
        return current_graph(JobContext(vault, utcnow()))


@graph_group.runs
def graph(json_: bool) -> None:
    """Build the graph when the notes changed; print its size."""
    from cortex.maintenance.due import run_job

    result = run_job(open_vault(), "graph")
    item = result.items[0]
    if json_:
        emit_json(item)
        return
    nodes = ", ".join(f"{n} {k}" for k, n in sorted(item["nodes"].items()))
    edges = ", ".join(f"{n} {k}" for k, n in sorted(item["edges"].items()))
    print(f"nodes  {nodes or 'none'}\nedges  {edges or 'none'}")
    info(f"cortex graph: {'rebuilt' if item['rebuilt'] else 'up to date'}: {item['path']}")


@graph_group.command(arg("name", help="An entity, #tag, note id, path, file name or title."), JSON, name="neighbors")
def graph_neighbors(name: str, json_: bool) -> None:
    """Everything one edge away from NAME."""
    from cortex.errors import CortexError
    from cortex.maintenance.graph import find_nodes, neighbors

    graph_, _ = _graph(open_vault())
    keys = find_nodes(graph_, name)
    if not keys:
        if json_:
            emit_json([])  # nothing found, in the shape a match prints: a script reads JSON either way
        raise CortexError(f"nothing in the graph is called {name!r}", "try an entity name, #tag, or a note's title or path")
    rows = [{"node": key, **graph_.nodes[key], "neighbors": neighbors(graph_, key)} for key in keys]
    if json_:
        emit_json(rows)
        return
    for row in rows:
        print(f"{row['node']}  {row['label']}")
        for n in row["neighbors"]:
            arrow = "→" if n["direction"] == "out" else "←"
            print(f"  {arrow} {n['edge']:<13} {n.get('kind', '?'):<6} {n.get('label', n['node'])}" + (f"  ({n['path']})" if n.get("path") else ""))


@graph_group.command(
    opt("--format", "-f", dest="format_", default="dot", metavar="dot|graphml|mermaid",
        help="DOT (Graphviz), GraphML or Mermaid."),
    opt("--output", "-o", type=Path, help="Write to this file instead of stdout."),
    name="export",
)
def graph_export(format_: str, output: Optional[Path]) -> None:
    """The whole graph as Graphviz DOT, GraphML or a Mermaid diagram."""
    from cortex.maintenance.graph import export

    if format_ not in ("dot", "graphml", "mermaid"):
        raise UsageError("--format must be dot, graphml or mermaid")
    graph_, _ = _graph(open_vault())
    text = export(graph_, format_)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        info(f"wrote {output} ({len(graph_.nodes)} nodes, {len(graph_.edges)} edges)")


@command(
    flag("--force", help="Run every selected job now, due or not."),
    opt("--only", metavar="JOB,...", help="A subset: reinforce, decay, dedup, graph, index."),
    flag("--list", dest="list_", help="Show each job's schedule, last and next run; run nothing."),
    JSON,
    NOW,
)
def maintain(force: bool, only: Optional[str], list_: bool, json_: bool, now: Optional[str]) -> int:
    """Run every maintenance job that is due, in order, catching up on missed runs."""
    from cortex.maintenance.due import run_due, schedule_table

    vault = open_vault()
    clock = _now(now)
    if list_:
        rows = schedule_table(vault, clock)
        if json_:
            emit_json(rows)
        else:
            for r in rows:
                print(f"{r['job']:<10} {r['schedule']:<12} last {r['last_run'] or 'never':<25} next {r['next_run']}"
                      + (f"  (last error: {r['last_error']})" if r["last_error"] else ""))
        return 0
    jobs = [j.strip() for j in only.split(",") if j.strip()] if only is not None else None
    if jobs == []:
        raise UsageError("--only needs at least one job: reinforce, decay, dedup, graph, index")
    unknown = [j for j in jobs or () if j not in ("reinforce", "decay", "dedup", "graph", "index")]
    if unknown:
        raise UsageError(f"no job {', '.join(unknown)}: use reinforce, decay, dedup, graph, index")
    report = run_due(vault, now=clock, force=force, only=jobs)
    if json_:
        emit_json(report.to_json())
    if not (report.results or report.errors):  # the hourly cron call, most hours: one line in cron.log
        soonest = min(report.not_due.items(), key=lambda item: item[1], default=None)
        info("cortex maintain: nothing due" + (f" (next: {soonest[0]} at {soonest[1]})" if soonest else ""))
        return 0
    for r in report.results:
        commit = f", commit {r.commit[:10]}" if r.commit else ""
        info(f"  {r.job:<10} changed {r.changed}{commit} ({r.seconds:.2f}s)")
    for warning in dict.fromkeys(w for r in report.results for w in r.warnings):  # each once, not once per job
        info(f"  warning: {warning}")
    for job, when in report.not_due.items():
        info(f"  {job:<10} not due (next {when})")
    for job, error in report.errors.items():
        info(f"  {job:<10} FAILED: {error}")
    info(f"cortex maintain: {len(report.results)} job{'' if len(report.results) == 1 else 's'} ran, "
         f"{report.commits} commit{'' if report.commits == 1 else 's'} in {report.seconds:.2f}s")
    # 75: git was busy, nothing half-done; the next run catches up
    return report.exit_code if report.errors else 0


@command(
    opt("--run-every", default="5m", help="How often to call `cortex run` (e.g. 5m, 30s)."),
    opt("--maintain-every", default="15m", help="How often to call `cortex maintain` (it runs only due jobs)."),
    name="schedule",
)
def schedule_(run_every: str, maintain_every: str) -> int:
    """Stay in the foreground: `cortex run` every few minutes, `cortex maintain` when jobs are due."""
    from cortex.maintenance.scheduler import Loop, parse_every

    try:
        every_run, every_maintain = parse_every(run_every), parse_every(maintain_every)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    vault = open_vault()
    return Loop(vault.root, run_every=every_run, maintain_every=every_maintain).serve()


@command()
def cron() -> None:
    """Print crontab lines, a systemd user timer (Persistent=true) and a CI schedule for this vault."""
    from cortex.maintenance.scheduler import cron_text, executable

    print(cron_text(open_vault().root, executable()), end="")


@command(
    opt("--since", default="24h", help="How far back (e.g. 24h, 7d)."),
    flag("--write", help="Also commit the brief as a note in vault/events/."),
    JSON,
    NOW,
)
def brief(since: str, write: bool, json_: bool, now: Optional[str]) -> None:
    """The digest: memorized, reinforced, merged, faded, quarantined, most active entities."""
    from cortex.maintenance.brief import make_brief, render_brief, write_brief
    from cortex.timefmt import parse_duration

    try:
        window = parse_duration(since)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    vault = open_vault()
    clock = _now(now)
    data = make_brief(vault, since=clock - window, now=clock)
    # written before it is printed: a write that fails (the vault busy) prints no brief,
    # which a script would take for one written, only the failure
    path = write_brief(vault, data, clock) if write else None
    if json_:
        emit_json(data)
    else:
        print(render_brief(data), end="")
    if write:
        info(f"cortex brief: {'written to ' + path if path else 'unchanged'}")
