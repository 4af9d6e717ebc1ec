"""Frozen records that flow through ``cortex run``: a buffer line becomes an
``Observation``, then a ``Scored`` one, then a note or a reinforcement; a line that
stops early becomes a ``Rejection``. Plans and reports are values too."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cortex.errors import HELD_REASONS


@dataclass(frozen=True)
class Rejection:
    """A line that will not become a note. ``held`` lines go to the quarantine;
    the others (below threshold, untrusted-and-dropped) to the skipped log."""

    reason: str  # parse | schema | injection | untrusted | unsafe_path | deleted | below_threshold | dropped
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def held(self) -> bool:
        return self.reason in HELD_REASONS


@dataclass(frozen=True)
class Line:
    """One complete buffer line, as the buffer reads it."""

    offset: int  # byte offset of the line's first byte
    end: int  # byte offset just past its newline
    raw: bytes  # without the newline (an over-size line: its first bytes only)
    oversize: bool = False  # longer than limits.max_line_bytes: refused unread


@dataclass(frozen=True)
class Observation:
    key: str  # "<buffer id>:<byte offset>": the line's identity, stable across crashes
    timestamp: datetime
    bucket: str
    type: str
    body: str
    attribution: str
    session_id: str
    entities: tuple[tuple[str, str], ...] = ()
    tags: tuple[str, ...] = ()
    confidence: float | None = None
    importance: float | None = None
    context: str | None = None
    source_quote: str | None = None
    supersedes: str | None = None  # the id or path of the memory this one replaces
    warnings: tuple[str, ...] = ()
    redactions: tuple[str, ...] = ()
    truncated: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scored:
    obs: Observation
    confidence: float
    importance: float
    signals: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlannedNote:
    path: str  # repo-relative, e.g. "mind/facts/2026-02-16-e7f4a2b9.md"
    note_id: str
    source_hash: str
    text: str
    key: str  # the buffer line it came from
    session_id: str
    title: str
    attribution: str
    supersedes: str | None = None  # the memory it replaces, as the observation named it


@dataclass(frozen=True)
class Reinforcement:
    note_id: str
    path: str
    at: str
    key: str
    supersedes: str | None = None  # a repeat given as the correction of another memory


@dataclass
class Plan:
    """What one pass will do. Printing it is ``--dry-run``; ``runner.apply`` performs it."""

    notes: list[PlannedNote] = field(default_factory=list)
    reinforcements: list[Reinforcement] = field(default_factory=list)
    rejections: list[tuple[str, str, Rejection]] = field(default_factory=list)  # (key, raw line, why)
    buffer_id: str | None = None  # the buffer file the lines came from (current or rotated)
    target_offset: int | None = None
    target_mark: dict | None = None  # the last line read (``buffer.mark``), kept with the offset
    lines_read: int = 0
    empty_lines: int = 0
    redacted: int = 0
    truncated: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass
class RunReport:
    read: int = 0
    memorized: int = 0
    reinforced: int = 0
    below_threshold: int = 0
    quarantined: dict[str, int] = field(default_factory=dict)
    quarantine_repeats: int = 0  # of ``quarantined``: counted on an entry already held, no new entry
    dropped: int = 0
    redacted: int = 0
    truncated: int = 0
    empty: int = 0
    commits: int = 0
    recovered: bool = False  # a killed run's decision finished first
    held_back: bool = False  # ... a decision a run saved and left uncommitted, git being busy (exit 75)
    recovered_notes: int = 0  # of ``memorized``: notes an earlier run had decided (either), committed by this one
    rotated: bool = False
    dry_run: bool = False
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)  # archived here: replaced by a new note
    plan: Plan | None = None  # kept by --dry-run so the plan can be shown

    @property
    def quarantined_total(self) -> int:
        return sum(self.quarantined.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "memorized": self.memorized,
            "reinforced": self.reinforced,
            "below_threshold": self.below_threshold,
            "quarantined": dict(sorted(self.quarantined.items())),
            "quarantine_repeats": self.quarantine_repeats,
            "dropped": self.dropped,
            "redacted": self.redacted,
            "truncated": self.truncated,
            "empty": self.empty,
            "commits": self.commits,
            "recovered": self.recovered,
            "held_back": self.held_back,
            "recovered_notes": self.recovered_notes,
            "rotated": self.rotated,
            "dry_run": self.dry_run,
            "seconds": round(self.seconds, 3),
            "warnings": self.warnings,
            "paths": self.paths,
            "superseded": self.superseded,
        }
