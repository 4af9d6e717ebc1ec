"""``observer/quarantine.jsonl``: every rejected or held buffer line, with its reason.

Entries are keyed by ``<buffer id>:<byte offset>`` so that re-processing a line after a
crash never records it twice. ``discard`` and ``promote`` rewrite the file atomically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator

from cortex.errors import CortexError
from cortex.fsutil import append_locked, atomic_write
from cortex.timefmt import parse_time

# Reasons a line is held or rejected. Security holds need --force to promote.
SECURITY_REASONS = frozenset({"injection"})


@dataclass(frozen=True)
class Entry:
    key: str
    reason: str
    detail: str
    line: str
    at: str
    extra: dict[str, Any]

    @property
    def short_id(self) -> str:
        return self.key.replace(":", "-")

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "reason": self.reason, "detail": self.detail, "line": self.line, "at": self.at, **self.extra}


def _entry(obj: dict[str, Any]) -> Entry:
    from cortex.security.secrets import redact

    base = {"key", "reason", "detail", "line", "at"}
    return Entry(
        key=str(obj.get("key", "")),
        reason=str(obj.get("reason", "")),
        # Redacted again as read: an entry written before its reason was redacted (or by
        # an older cortex) must not show a credential in `cortex quarantine list`.
        detail=redact(str(obj.get("detail", "")))[0],
        line=redact(str(obj.get("line", "")))[0],
        at=str(obj.get("at", "")),
        extra={k: v for k, v in obj.items() if k not in base},
    )


def _held_before(entry: Entry, cutoff: datetime | None) -> bool:
    if cutoff is None:
        return True
    try:
        return parse_time(entry.at) < cutoff
    except ValueError:
        return False


class Quarantine:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _records(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                try:
                    yield json.loads(raw)
                except json.JSONDecodeError:
                    continue  # a torn line from a crash mid-append; its key is re-added

    def entries(self) -> list[Entry]:
        return [_entry(obj) for obj in self._records()]

    def count(self) -> int:
        """How many entries, without redacting each as `entries` does (`cortex status`)."""
        return sum(1 for _ in self._records())

    def keys(self) -> set[str]:
        return {str(obj.get("key", "")) for obj in self._records()}

    def add(self, records: Iterable[dict[str, Any]]) -> int:
        """Append records whose keys are not already present. Returns how many were added."""
        records = list(records)
        if not records:
            return 0
        seen = self.keys()
        fresh = [r for r in records if r["key"] not in seen]
        if fresh:
            data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in fresh)
            append_locked(self.path, data.encode("utf-8"))  # heals a torn last line
        return len(fresh)

    def find(self, ident: str) -> Entry:
        matches = [e for e in self.entries() if ident in (e.key, e.short_id) or e.short_id.endswith(ident)]
        if not matches:
            raise CortexError(f"no quarantine entry {ident!r}", "list them with `cortex quarantine list`")
        if len(matches) > 1:
            raise CortexError(f"{ident!r} matches {len(matches)} entries", "give the full id from `cortex quarantine list`")
        return matches[0]

    def remove(self, keys: set[str]) -> int:
        entries = self.entries()
        kept = [e for e in entries if e.key not in keys]
        self._rewrite(kept)
        return len(entries) - len(kept)

    def purge(self, *, before: datetime | None = None, reason: str | None = None) -> int:
        """Remove the entries held before ``before`` and for ``reason`` (both when both
        are given; an entry whose time cannot be read is never old). How many went."""
        entries = self.entries()
        kept = [e for e in entries if not (_held_before(e, before) and (reason is None or e.reason == reason))]
        self._rewrite(kept)
        return len(entries) - len(kept)

    def _rewrite(self, entries: list[Entry]) -> None:
        data = "".join(json.dumps(e.to_json(), ensure_ascii=False, sort_keys=True) + "\n" for e in entries)
        atomic_write(self.path, data.encode("utf-8"), 0o600)
