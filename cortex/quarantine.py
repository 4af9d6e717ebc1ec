"""``observer/quarantine.jsonl``: every rejected or held buffer line, with its reason.

Entries are keyed by ``<buffer id>:<byte offset>`` so that re-processing a line after a
crash never records it twice. ``discard`` and ``promote`` rewrite the file atomically.

A repeat of a memory a person deleted (reason ``deleted``: the same observation, by its
``source_hash``) is counted on the entry already held for it — ``count`` (times held),
``last_seen`` — instead of becoming an entry of its own: an agent that keeps saying it
grows a number, not the file. The repeat's line itself stays in the buffer's archive
(``observer/archive/``), as every consumed line does. ``seen`` records, per buffer runs
still read, the last offset counted, so a run that reads its lines again after a crash
counts none twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator

from cortex.errors import CortexError, NotFound
from cortex.fsutil import append_locked, atomic_write, own, read_regular
from cortex.timefmt import parse_time

# Reasons a line is held or rejected. Security holds need --force to promote.
SECURITY_REASONS = frozenset({"injection"})
# Reasons whose repeats (the same source_hash) are counted on one entry.
COUNTED_REASONS = frozenset({"deleted"})


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

    @property
    def count(self) -> int:
        """How many times the line was held: 1, more for the repeats counted on it."""
        return _count(self.extra)

    @property
    def last_seen(self) -> str:
        return str(self.extra.get("last_seen") or self.at)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "reason": self.reason, "detail": self.detail, "line": self.line, "at": self.at, **self.extra}


@dataclass(frozen=True)
class Added:
    entries: int  # new entries
    repeats: int  # lines counted on an entry already held (a deleted memory said again)


def _count(obj: dict[str, Any]) -> int:
    try:
        return max(1, int(obj.get("count", 1)))
    except (TypeError, ValueError):
        return 1


def _position(key: str) -> tuple[str, int] | None:
    buffer_id, _, offset = key.rpartition(":")
    return (buffer_id, int(offset)) if buffer_id and offset.isdigit() else None


def _counted(target: dict[str, Any], key: str) -> bool:
    """Whether ``key`` was counted on ``target`` already (its lines read again after a
    crash): a buffer's lines are read in order, so at or before the last one counted."""
    pos = _position(key)
    seen = target.get("seen")
    if pos is None or not isinstance(seen, dict):
        return False
    last = seen.get(pos[0])
    return isinstance(last, int) and pos[1] <= last


def _held_hash(obj: dict[str, Any]) -> str:
    """The ``source_hash`` of the memory an entry holds a repeat of. An older cortex held
    each repeat as an entry of its own, without it: worked out from its line's body as
    the run works it out, so the repeats after an upgrade are counted on that entry
    rather than starting one more."""
    if obj.get("source_hash"):
        return str(obj["source_hash"])
    try:
        body = json.loads(str(obj.get("line", ""))).get("body")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(body, str):
        return ""
    from cortex.notes import source_hash

    return source_hash(body)


def _count_on(target: dict[str, Any], record: dict[str, Any], live: Collection[str]) -> None:
    target["count"] = _count(target) + 1
    target["last_seen"] = record.get("at", "")
    seen = target.get("seen") if isinstance(target.get("seen"), dict) else {}
    pos = _position(record["key"])
    if pos is not None:
        # a buffer no run reads any more is never read again: its mark goes
        seen = {b: o for b, o in seen.items() if not live or b in live}
        seen[pos[0]] = max(pos[1], seen.get(pos[0], -1))
    target["seen"] = seen


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
    """Held before ``cutoff``, and not said again since."""
    if cutoff is None:
        return True
    try:
        return parse_time(entry.last_seen) < cutoff
    except ValueError:
        return False


# The line separators JSON leaves raw in a string (U+2028, U+2029, U+0085) escaped: grep,
# editors and str.splitlines() break a line there, and one entry read as two torn halves.
_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"})


def _line(record: dict[str, Any]) -> str:
    """One entry as one line of quarantine.jsonl, whatever line breaks its text holds."""
    return json.dumps(record, ensure_ascii=False, sort_keys=True).translate(_SEPARATORS) + "\n"


class Quarantine:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _records(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        # Records end at "\n" only: str.splitlines() also breaks at U+2028, U+0085 and
        # other separators JSON keeps raw in a string, and the halves of an entry holding
        # one parsed as torn lines, so the entry vanished from every listing.
        for raw in read_regular(self.path).decode("utf-8").split("\n"):
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

    def summary(self) -> tuple[int, int]:
        """(entries, repeats counted on them) in one read (`cortex status`)."""
        entries = repeats = 0
        for obj in self._records():
            entries += 1
            repeats += _count(obj) - 1
        return entries, repeats

    def keys(self) -> set[str]:
        return {str(obj.get("key", "")) for obj in self._records()}

    def add(self, records: Iterable[dict[str, Any]], live: Collection[str] = ()) -> Added:
        """Append records whose keys are not already present; a repeat of a deleted
        memory already held (same ``source_hash``) is counted on its entry instead.
        ``live``: the buffers runs still read (``seen`` keeps marks for those only)."""
        records = list(records)
        if not records:
            return Added(0, 0)
        existing = list(self._records())
        seen = {str(obj.get("key", "")) for obj in existing}
        held: dict[tuple[str, str], dict[str, Any]] = {}
        for obj in existing:
            if obj.get("reason") in COUNTED_REASONS and (hash_hex := _held_hash(obj)):
                held.setdefault((str(obj["reason"]), hash_hex), obj)
        fresh: list[dict[str, Any]] = []
        repeats = 0
        for record in records:
            if record["key"] in seen:
                continue
            same = (str(record.get("reason")), str(record.get("source_hash") or ""))
            target = held.get(same) if same[0] in COUNTED_REASONS and same[1] else None
            if target is None:
                record = dict(record)
                fresh.append(record)
                seen.add(record["key"])
                if same[0] in COUNTED_REASONS and same[1]:
                    held[same] = record  # this run's later repeats are counted on it
            elif not _counted(target, record["key"]):
                target.setdefault("source_hash", same[1])  # an older cortex's entry: said from now on
                _count_on(target, record, live)
                repeats += 1
        if repeats:  # entries changed in place: the file is written anew, whole
            data = "".join(_line(r) for r in [*existing, *fresh])
            atomic_write(self.path, data.encode("utf-8"), own(0o600))
        elif fresh:
            data = "".join(_line(r) for r in fresh)
            append_locked(self.path, data.encode("utf-8"))  # heals a torn last line
        return Added(len(fresh), repeats)

    def find(self, ident: str) -> Entry:
        matches = [e for e in self.entries() if ident in (e.key, e.short_id) or e.short_id.endswith(ident)]
        if not matches:
            raise NotFound(f"no quarantine entry {ident!r}", "list them with `cortex quarantine list`")
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
        data = "".join(_line(e.to_json()) for e in entries)
        atomic_write(self.path, data.encode("utf-8"), own(0o600))
