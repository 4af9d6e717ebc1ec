"""``cortex status``: what is waiting, what is stored, when things last ran.

Cheap on purpose (agents and prompts call it): no git library; note counts come from the
HEAD cache (`cortex/headcache.py`), so the cost does not grow with the vault.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, NamedTuple, TYPE_CHECKING

from cortex import buffer
from cortex.fsutil import open_regular
from cortex.layout import PARTITIONS

if TYPE_CHECKING:
    from cortex.vault import Vault

NO_TYPE = "(no type)"  # by_type's key for a note in no type's folder that declares no known type

def _note_counts(vault: Vault, index_state: dict | None) -> list[tuple[str, str, int]]:
    """(folder, declared type or "", notes) of the working tree's notes: HEAD's counts from
    the HEAD cache, corrected by what git names as added, changed, deleted or untracked
    (a person's note not yet committed counts too). Both follow the change, not the
    vault: `git status -uno` names the tracked notes that changed, and the untracked ones
    are the search index's last record of them, with git asked again only about the
    folders that moved since (`freshness.untracked_now`); git's own search for untracked
    files walks every folder of the vault, and happens only when there is no record.
    Obsidian's templates are no notes: HEAD's in their folders (`layout.template_folders`,
    as the settings say now) are taken off, a range of the cache each, and no change in
    them is counted."""
    from cortex.headcache import fields, folder_of, sync
    from cortex.layout import in_folders, is_note_path, template_folders
    from cortex.search.freshness import GitProbe, untracked_now

    watched = _watched_changes(vault.root, index_state)
    probe = None if watched is not None else GitProbe.start(vault.root)  # runs while the HEAD cache syncs
    cache = sync(vault.root)
    try:
        counts: Counter[tuple[str, str]] = Counter({(f, t or ""): n for f, t, n in cache.counts()})
        templates = template_folders(vault.root)
        for rel in {rel for folder in templates for rel in cache.paths_below(folder)}:  # one folder may hold the other
            counts[folder_of(rel), cache.declared_type(rel) or ""] -= 1
        changed: set[str] = set()
        if watched is not None:
            changed = watched.notes
            for folder in watched.folders:  # named whole by the watcher: all it held, all it holds
                changed.update(cache.paths_below(folder))
                changed.update(_notes_below(vault.root, folder))
            from cortex.search.freshness import left_out

            new = [rel for rel in changed if is_note_path(rel) and rel.partition("/")[0] in PARTITIONS
                   and not cache.has_path(rel) and (vault.root / rel).exists()]
            changed.difference_update(left_out(vault.root, new))  # git would not list them either
        elif probe.result().ok:
            dirs, dirty = (index_state or {}).get("dirs"), (index_state or {}).get("dirty")
            untracked = None
            if isinstance(dirs, dict) and isinstance(dirty, list):
                untracked = untracked_now(vault.root, probe, dirs, dirty)
            if untracked is None:
                untracked = probe.untracked(everywhere=True) or set()
            changed = probe.dirty | untracked
        for rel in sorted(changed):
            if not is_note_path(rel) or rel.partition("/")[0] not in PARTITIONS or in_folders(rel, templates):
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


class _Watched(NamedTuple):
    notes: set[str]
    folders: list[str]


def _watched_changes(root, index_state: dict | None) -> _Watched | None:
    """The notes that may differ from HEAD, without a git status, while ``cortex watch``
    runs: those the search index's last update found differing from the HEAD it recorded
    (``dirty``), whatever the watcher names since that update's token, and, when HEAD
    moved since, what the commits between changed (a diff of two trees). More than differ,
    perhaps — each is counted as HEAD has it and as the file is — never fewer. None (ask
    git) when any of them cannot say."""
    from cortex.gitlock import head_oid
    from cortex.search.freshness import changed_between, watcher_changes

    state = index_state or {}
    dirty, token, head = state.get("dirty"), state.get("watch"), state.get("head")
    now = head_oid(root)
    if not isinstance(dirty, list) or not isinstance(token, str) or not isinstance(head, str) or not now:
        return None
    word = watcher_changes(root, token)
    if word is None or word[1] is None:
        return None
    committed = changed_between(root, head, now)
    if committed is None:
        return None
    notes = committed.union(str(p) for p in dirty)
    folders = []
    for path in word[1]:
        if path.endswith("/"):
            folders.append(path[:-1])
        else:
            notes.add(path)
    return _Watched(notes, folders)


def _notes_below(root, folder: str) -> set[str]:
    from cortex.search.freshness import note_dirs, scan_dir

    if not (root / folder).is_dir():
        return set()
    return {path for rel in note_dirs(root, folder) for path in scan_dir(root, rel)}


def _count_lines(path, start: int, end: int) -> int:
    if not path.exists():
        return 0
    n = 0
    with os.fdopen(open_regular(path), "rb") as fh:
        fh.seek(start)
        while start < end and (chunk := fh.read(min(1 << 20, end - start))):
            n += chunk.count(b"\n")
            start += len(chunk)
    return n


def _index_state(root) -> dict | None:
    """What the search index recorded at its last update (its state.json)."""
    import json

    from cortex.search.freshness import search_state

    try:
        data = json.loads(search_state(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def index_status(root, data: dict | None) -> dict[str, Any]:
    """Whether the search index has seen the notes as they are: the HEAD and the folder
    times it recorded at its last update (`data`), against the vault's now. A stale index
    is no fault: the next query brings it up to date."""
    if data is None:
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
    from cortex.gitlock import head_oid

    head_moved = data.get("head") != head_oid(root)
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
    held, repeats = vault.quarantine.summary()
    index_state = _index_state(vault.root)
    counts: Counter[tuple[str, str]] = Counter()  # (partition, type) of active notes
    types_of: dict[str, list[str]] = {}  # folder -> the types that live there
    archived = 0
    # The notes at HEAD, counted per folder and declared type in the HEAD cache, which
    # follows HEAD by diffs: the same cost in a vault of 200,000 notes as of 10,000.
    for folder, declared, n in _note_counts(vault, index_state):
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
        elif types:  # goal_short and goal_long both live in mind/goals: the note says which
            label = declared if declared in types else parts[1]
        else:  # a folder of no type (vault/inbox, vault/Decisions): the note's own type, not the folder's name
            label = declared if declared in vault.taxonomy else NO_TYPE
        counts[parts[0], label] += n
    partitions: dict[str, dict[str, int]] = {"vault": {}, "mind": {}}
    for (partition, label), n in sorted(counts.items()):
        partitions.setdefault(partition, {})[label] = n
    size, said = buffer.settle(vault.buffer_path)  # a batch a killed writer left half-appended: cut away
    unread = buffer.unread_from(vault.buffer_path, state.offset, state.last_line)
    backlog = max(0, size - unread)
    pending = state.reinforcements
    return {
        "vault": str(vault.root),
        "backlog": {"bytes": backlog, "lines": _count_lines(vault.buffer_path, min(unread, size), size),
                    **({"notes": said} if said else {})},
        "notes": {
            "total": sum(counts.values()),
            "archived": archived,
            "by_partition": {p: sum(v.values()) for p, v in partitions.items()},
            "by_type": partitions,
        },
        "quarantine": held,
        "quarantine_repeats": repeats,
        "pending_reinforcements": {"notes": len(pending), "observations": sum(int(e.get("count", 0)) for e in pending.values())},
        "run_in_progress": state.pending is not None,
        "git_operation": _git_operation(vault.root),
        "last_run": state.last_run,
        "jobs": {name: _job_view(record) for name, record in sorted(state.jobs.items())},
        "index": index_status(vault.root, index_state),
        "sync": sync_status(vault.root, state),
        "watch": _watch_status(vault.root),
        "warnings": _warnings(vault.root),
    }


def _git_operation(root) -> dict[str, Any] | None:
    """The person's git operation in progress (a rebase, a cherry-pick stopped on a
    conflict, ...): cortex commits nothing beside one that replays commits."""
    from cortex.gitlock import git_dir_of
    from cortex.gitop import in_progress

    op = in_progress(git_dir_of(root))
    return None if op is None else {**op.to_json(), "commits_wait": op.replays}


def _watch_status(root) -> dict[str, Any]:
    """Whether `cortex watch` runs for this vault (its lock is held exactly while it does)."""
    from cortex.watcher import daemon_status, other_cortex, running

    pid = running(root)
    view = {"running": bool(pid), "pid": pid if pid and pid > 0 else None}
    if pid:
        view["other_cortex"] = other_cortex(daemon_status(root))
    return view


def _warnings(root) -> list[str]:
    """What a person should know of the vault or change in it (a nightly workflow or a
    commit hook an older cortex wrote; commits signed by the person's git, but not by
    cortex)."""
    from cortex.distribution import workflow_warning
    from cortex.scaffold import hooks_warning

    return [w for w in (workflow_warning(root), hooks_warning(root), signing_warning(root)) if w]


def signing_warning(root) -> str | None:
    """What to say where the person's git signs every commit (``commit.gpgSign``): cortex
    writes its commits with pygit2, which signs none, so a history the person keeps
    signed gains unsigned commits (`cortex run`'s, maintenance's, sync's merges) and a
    remote that requires signatures refuses them. Said, not silently done."""
    from cortex import gitcli

    if not gitcli.config_bool(root, "commit.gpgSign"):
        return None
    return ("warning: commit.gpgSign is set, but cortex's own commits (`cortex run`, maintenance, `cortex sync`'s "
            "merges) are not signed: a remote that requires signed commits refuses them, and `git log "
            "--show-signature` shows them unsigned. Keep such a vault on a branch or remote that accepts them")
