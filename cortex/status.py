"""``cortex status``: what is waiting, what is stored, when things last ran.

Cheap on purpose (agents and prompts call it): file system only, no git library.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from cortex import buffer


def _count_lines(path, start: int) -> int:
    if not path.exists():
        return 0
    n = 0
    with open(path, "rb") as fh:
        fh.seek(start)
        while chunk := fh.read(1 << 20):
            n += chunk.count(b"\n")
    return n


def vault_status(vault) -> dict[str, Any]:
    state = vault.load_state()
    per_folder: Counter[str] = Counter()
    archived = 0
    for path in vault.iter_note_paths():
        rel = path.relative_to(vault.root).parts
        if rel[:2] == ("mind", "archive"):
            archived += 1
        else:
            per_folder["/".join(rel[:2])] += 1
    partitions: dict[str, dict[str, int]] = {"vault": {}, "mind": {}}
    for directory, n in sorted(per_folder.items()):
        partition, _, folder = directory.partition("/")
        types = [s.name for s in vault.taxonomy.types_for_directory(directory)]
        label = types[0] if len(types) == 1 else folder
        partitions.setdefault(partition, {})[label] = n
    size = buffer.size(vault.buffer_path)
    backlog = max(0, size - state.offset)
    pending = state.reinforcements
    return {
        "vault": str(vault.root),
        "backlog": {"bytes": backlog, "lines": _count_lines(vault.buffer_path, min(state.offset, size))},
        "notes": {
            "total": sum(per_folder.values()),
            "archived": archived,
            "by_partition": {p: sum(v.values()) for p, v in partitions.items()},
            "by_type": partitions,
        },
        "quarantine": len(vault.quarantine.entries()),
        "pending_reinforcements": {"notes": len(pending), "observations": sum(int(e.get("count", 0)) for e in pending.values())},
        "run_in_progress": state.pending is not None,
        "last_run": state.last_run,
        "jobs": state.jobs,
    }
