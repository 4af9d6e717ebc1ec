"""``cortex status``: what is waiting, what is stored, when things last ran.

Cheap on purpose (agents and prompts call it): no git library; note counts come from the
HEAD cache (`cortex/headcache.py`), so the cost does not grow with the vault.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, TYPE_CHECKING

from cortex import buffer
from cortex.layout import PARTITIONS

if TYPE_CHECKING:
    from cortex.vault import Vault

def _note_counts(vault: Vault) -> list[tuple[str, str, int]]:
    """(folder, declared type or "", notes) of the working tree's notes: HEAD's counts from
    the HEAD cache, corrected by what ``git status`` names as added, changed or deleted
    since (a person's note not yet committed counts too). Both follow the change, not the
    vault: the cost does not grow with the number of notes."""
    from cortex import gitcli
    from cortex.headcache import fields, folder_of, sync
    from cortex.layout import is_note_path

    cache = sync(vault.root)
    try:
        counts: Counter[tuple[str, str]] = Counter({(f, t or ""): n for f, t, n in cache.counts()})
        done = gitcli.run_bytes(vault.root, "--no-optional-locks", "-c", "core.quotepath=off", "status",
                                "--porcelain=v1", "-z", "-uall", "--no-renames", "--", *PARTITIONS)
        changed = []
        if done is not None and done.ok:
            for entry in done.out.split(b"\0"):
                if len(entry) > 3:
                    changed.append(entry[3:].decode("utf-8", "surrogateescape"))
        for rel in changed:
            if not is_note_path(rel):
                continue
            before = cache.declared_type(rel)
            if before is not None:
                counts[folder_of(rel), before] -= 1
            path = vault.root / rel
            if path.is_file() and not path.is_symlink():
                try:
                    with open(path, "rb") as fh:
                        head = fh.read(4096)
                except OSError:
                    continue
                counts[folder_of(rel), fields(head)[1] or ""] += 1
        return [(f, t, n) for (f, t), n in sorted(counts.items()) if n > 0]
    finally:
        cache.close()


def _count_lines(path, start: int) -> int:
    if not path.exists():
        return 0
    n = 0
    with open(path, "rb") as fh:
        fh.seek(start)
        while chunk := fh.read(1 << 20):
            n += chunk.count(b"\n")
    return n


def _git_head(root) -> str | None:
    """HEAD's commit id from .git's files (no git library: status stays cheap)."""
    git = root / ".git"
    try:
        if git.is_file():  # a worktree or submodule: `gitdir: <path>`
            git = (root / git.read_text().strip().removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head or None
        common = git / "commondir"  # a worktree's branches live in the main repository
        refs = (git / common.read_text().strip()).resolve() if common.exists() else git
        return _read_ref(refs, head[5:])
    except OSError:
        return None


def _read_ref(git, ref: str) -> str | None:
    try:
        return (git / ref).read_text().strip()
    except FileNotFoundError:
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    return None


def index_status(root) -> dict[str, Any]:
    """Whether the search index has seen the notes as they are: the HEAD and the folder
    times it recorded at its last update, against the vault's now. A stale index is no
    fault: the next query brings it up to date."""
    import json

    try:
        data = json.loads((root / ".cortex" / "search" / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"state": "missing", "hint": "the next `cortex query` (or `cortex index`) builds it"}
    from cortex.search.records import FORMAT

    if data.get("format") != FORMAT:
        return {"state": "stale", "hint": "built by another cortex version: the next `cortex query` rebuilds it"}
    changed = []
    for rel, mtime in (data.get("dirs") or {}).items():
        try:
            if (root / rel).stat().st_mtime_ns != mtime:
                changed.append(rel)
        except OSError:
            changed.append(rel)
    head_moved = data.get("head") != _git_head(root)
    state = "fresh" if not (changed or head_moved) else "stale"
    out: dict[str, Any] = {"state": state, "head": data.get("head"), "head_moved": head_moved, "changed_folders": sorted(changed)}
    if state == "stale":
        out["hint"] = "the next `cortex query` updates it"
    return out


_JOB_FIELDS = ("schedule", "last_run", "next_run", "last_result", "last_error")


def _job_view(record: Any) -> dict[str, Any]:
    """A job's bookkeeping as a person reads it; the jobs' own caches and crash-recovery
    records stay in state.json."""
    if not isinstance(record, dict):
        return {}
    view = {k: record[k] for k in _JOB_FIELDS if k in record}
    held = record.get("held")
    if held:  # reinforcements waiting for a person to unlock their notes
        view["held"] = sum(int(h.get("count", 1) or 1) for h in held.values() if isinstance(h, dict))
    if record.get("pending"):
        view["interrupted"] = True  # completed by the job's next run
    return view


def sync_status(root, state) -> dict[str, Any] | None:
    """Ahead/behind the upstream as of the last fetch (no network), None without a remote."""
    from cortex import gitcli

    res = gitcli.run(root, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}")
    if not res.ok:
        return None
    upstream = res.out.strip()
    counts = gitcli.ahead_behind(root, "HEAD", "@{u}") or (0, 0)
    record = state.extra.get("sync") or {}
    return {"upstream": upstream, "ahead": counts[0], "behind": counts[1], "last_sync": record.get("last_sync")}


def vault_status(vault: Vault) -> dict[str, Any]:
    state = vault.load_state()
    counts: Counter[tuple[str, str]] = Counter()  # (partition, type) of active notes
    types_of: dict[str, list[str]] = {}  # folder -> the types that live there
    archived = 0
    # The notes at HEAD, counted per folder and declared type in the HEAD cache, which
    # follows HEAD by diffs: the same cost in a vault of 200,000 notes as of 10,000.
    for folder, declared, n in _note_counts(vault):
        parts = folder.split("/")
        if parts[0] not in PARTITIONS or len(parts) < 2:
            continue  # a person's notes outside vault/ and mind/: no type to count by
        if parts[:2] == ["mind", "archive"]:
            archived += n
            continue
        if folder not in types_of:
            types_of[folder] = [s.name for s in vault.taxonomy.types_for_directory(folder)]
        types = types_of[folder]
        if len(types) == 1:
            label = types[0]
        else:  # goal_short and goal_long both live in mind/goals: the note says which
            label = declared if declared in types else parts[1]
        counts[parts[0], label] += n
    partitions: dict[str, dict[str, int]] = {"vault": {}, "mind": {}}
    for (partition, label), n in sorted(counts.items()):
        partitions.setdefault(partition, {})[label] = n
    size = buffer.size(vault.buffer_path)
    backlog = max(0, size - state.offset)
    pending = state.reinforcements
    return {
        "vault": str(vault.root),
        "backlog": {"bytes": backlog, "lines": _count_lines(vault.buffer_path, min(state.offset, size))},
        "notes": {
            "total": sum(counts.values()),
            "archived": archived,
            "by_partition": {p: sum(v.values()) for p, v in partitions.items()},
            "by_type": partitions,
        },
        "quarantine": vault.quarantine.count(),
        "pending_reinforcements": {"notes": len(pending), "observations": sum(int(e.get("count", 0)) for e in pending.values())},
        "run_in_progress": state.pending is not None,
        "last_run": state.last_run,
        "jobs": {name: _job_view(record) for name, record in sorted(state.jobs.items())},
        "index": index_status(vault.root),
        "sync": sync_status(vault.root, state),
    }
