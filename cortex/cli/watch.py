"""``cortex watch``: the file watcher that spares git a stat of every note (large vaults)."""

from __future__ import annotations

from cortex.cli.app import JSON, command, emit_json, flag, info, open_vault
from cortex.errors import UsageError


def watch_status(root) -> dict:
    from cortex import watcher

    pid = watcher.running(root)
    daemon = watcher.daemon_status(root) if pid else None
    state = watcher.state_dir(root)
    return {"running": bool(pid), "pid": pid if pid and pid > 0 else None, "daemon": daemon,
            "other_cortex": watcher.other_cortex(daemon), "log": str(state / "log"),
            "auto_failed": None if pid else watcher.auto_failure(state)}


def _clock(epoch: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(epoch))


@command(
    flag("--background", "-b", help="Start the watcher detached and return once it answers."),
    flag("--stop", help="Stop the running watcher (cortex's checks then stat every note again)."),
    flag("--status", help="Say whether a watcher runs, and what it has seen."),
    JSON,
    flag("--auto", hidden=True, help="The watcher `watch: auto` starts: it ends after `watch.idle` seconds without a question."),
)
def watch(background: bool, stop: bool, status: bool, json_: bool, auto: bool) -> None:
    """Watch the vault's files, so that cortex's checks stat only the changed notes (Linux; large vaults).

    Before a query, and in `cortex status`, cortex asks git which notes changed, and git
    stats every tracked file to find notes edited in place: 0.14 s at 200,000 notes.
    While the watcher runs, cortex's own git calls ask it instead (git's fsmonitor
    protocol, on cortex's copy of the index). The person's git is never pointed at it:
    nothing in .git/config changes. It also answers `cortex query` from a search index it
    keeps loaded (no start-up of the search engines per query), brought up to date
    before each answer as a query would. In a vault of 20,000 notes or more, `cortex
    query`, `index` and `status` start one by themselves (`watch: auto` in
    observer/config.yml, the default; `watch: off` or CORTEX_WATCH=off to keep them
    from it), which ends after an hour without a question. Without an option the watcher runs in the foreground
    until Ctrl-C; `--background` for a login script or a systemd user unit. Exit 0, or
    1 with what to do."""
    from cortex import watcher
    from cortex.fsmonitor import stopped

    if sum((background, stop, status, auto)) > 1:
        raise UsageError("give one of --background, --stop, --status")
    vault = open_vault()
    root = vault.root
    if status:
        view = watch_status(root)
        if json_:
            emit_json(view)
        elif view["running"]:
            daemon = view["daemon"] or {}
            info(f"watching {root} (pid {view['pid']}): {daemon.get('folders', '?')} folders, "
                 f"{daemon.get('changes', '?')} changes seen, {daemon.get('overflows', 0)} overflows")
            served = daemon.get("queries") or {}
            info(f"  queries: index {served.get('state', 'idle')}, {served.get('served', 0)} answered, "
                 f"{served.get('declined', 0)} left to the query itself")
            if daemon.get("auto"):
                info(f"  started automatically: ends by itself at {_clock(daemon['auto']['ends_at'])} unless a "
                     f"command asks before ({daemon['auto']['idle']:g}s without a question)")
            if daemon.get("blind"):
                info(f"  every answer is 'everything': {daemon['blind']}")
            if view["other_cortex"]:
                info(f"  {view['other_cortex']}")
            if not view["daemon"] and stopped(str(watcher.state_dir(root))):
                info(f"  stopped (Ctrl-Z, SIGSTOP): it answers nothing until continued, and queries answer alone "
                     f"meanwhile — `kill -CONT {view['pid']}` (`fg` in its terminal), or `cortex watch --stop`")
        else:
            info(f"not watching {root}: cortex's checks stat every note (`cortex watch --background` to start)")
            if view["auto_failed"]:
                info(f"  the last automatic start failed: {view['auto_failed']}")
        return
    if stop:
        pid = watcher.stop(root)
        if json_:
            emit_json({"stopped": pid})
        else:
            info(f"stopped the watcher (pid {pid})" if pid else "no watcher was running")
        return
    if background:
        already = watcher.running(root)
        pid = watcher.start_background(root)
        view = watch_status(root)
        if json_:
            emit_json(view)
        else:
            info(f"{'already watching' if already else 'watching'} {root} (pid {pid}); `cortex watch --stop` stops it")
            if already and (view["daemon"] or {}).get("auto"):
                info("  it was started automatically and ends after an idle stretch: for one that stays, "
                     "`cortex watch --stop`, then `cortex watch --background`")
        return
    if auto:
        watcher.serve_auto(root)
        return
    watcher.serve(root, on_ready=lambda: info(f"watching {root}; Ctrl-C stops"))
