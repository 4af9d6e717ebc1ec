"""``observer/state.json``: the buffer position, the reinforcement map, job bookkeeping,
and the write-ahead record of a run in flight (``pending``).

The file is only ever replaced atomically; every change goes through ``save``.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortex.errors import CortexError
from cortex.fsutil import atomic_write_json, read_regular


def new_buffer_id() -> str:
    return secrets.token_hex(6)


class StateCorrupt(CortexError):
    """state.json is only ever replaced whole, so a broken one was edited or damaged by
    something else. Guessing would risk memorizing or reinforcing lines twice."""

    def __init__(self, path: Path, why: object) -> None:
        super().__init__(
            f"{path} is unreadable ({why})",
            "restore it from a backup, or move it aside to start over: the next run then reads the whole "
            "buffer again, and lines already memorized count as reinforcements",
        )


@dataclass
class State:
    offset: int = 0
    buffer_id: str = field(default_factory=new_buffer_id)
    # the line that ends at ``offset`` (``buffer.mark``): a buffer truncated and written
    # again past the offset since is read from its start (``buffer.unread_from``)
    last_line: dict[str, Any] | None = None
    # the buffer's unfinished last line as the last run left it (``buffer.unfinished_tail``
    # and the buffer id): the same at the next run, its writer is taken as dead
    unfinished: dict[str, Any] | None = None
    # note id -> {"count": n, "last": iso timestamp, "path": last known path}
    reinforcements: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: dict[str, Any] | None = None
    last_run: dict[str, Any] | None = None
    jobs: dict[str, Any] = field(default_factory=dict)  # job name -> bookkeeping
    # rotated buffers still followed (buffer id -> offset read): a writer that opened the
    # buffer before its rotation may still append to it (cortex/cycle.py)
    retired: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown keys, kept as they were

    @classmethod
    def load(cls, path: Path) -> "State":
        try:
            data = json.loads(read_regular(path).decode("utf-8"))
        except FileNotFoundError:
            return cls()
        except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
            raise StateCorrupt(path, exc) from None
        if not isinstance(data, dict):
            raise StateCorrupt(path, "not a JSON object")
        _check_fields(path, data)
        known = {"offset", "buffer_id", "last_line", "unfinished", "reinforcements", "pending", "last_run", "jobs",
                 "retired"}
        return cls(
            offset=data.get("offset") or 0,
            buffer_id=str(data.get("buffer_id") or new_buffer_id()),
            last_line=data.get("last_line"),
            unfinished=data.get("unfinished"),
            reinforcements=dict(data.get("reinforcements") or {}),
            pending=data.get("pending"),
            last_run=data.get("last_run"),
            jobs=dict(data.get("jobs") or {}),
            retired=dict(data.get("retired") or {}),
            extra={k: v for k, v in data.items() if k not in known},
        )

    def save(self, path: Path) -> None:
        atomic_write_json(
            path,
            {
                **self.extra,
                "offset": self.offset,
                "buffer_id": self.buffer_id,
                "last_line": self.last_line,
                "unfinished": self.unfinished,
                "reinforcements": self.reinforcements,
                "pending": self.pending,
                "last_run": self.last_run,
                "jobs": self.jobs,
                "retired": self.retired,
            },
        )

    def new_buffer(self) -> None:
        """Read the buffer from its start, its lines keyed anew (a rotation, a replacement)."""
        self.offset, self.buffer_id, self.last_line = 0, new_buffer_id(), None

    def add_reinforcement(self, note_id: str, at: str, path: str | None) -> None:
        entry = self.reinforcements.setdefault(note_id, {"count": 0, "last": at})
        entry["count"] = int(entry.get("count", 0)) + 1
        if at > str(entry.get("last", "")):
            entry["last"] = at
        if path:
            entry["path"] = path


# --- what each known field may hold ------------------------------------------------------
# state.json is cortex's own file, but a person or another program can still edit it: a
# field of the wrong kind is StateCorrupt (a message with what to do), never a crash deep
# in a run, and never a buffer id that would name a file outside the archive.

_BUFFER_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _position(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _buffer_id(value: object) -> bool:
    return isinstance(value, str) and _BUFFER_ID.fullmatch(value) is not None


def _reinforcement(value: object) -> bool:
    return (isinstance(value, dict) and _position(value.get("count", 0))
            and isinstance(value.get("last", ""), str) and isinstance(value.get("path", ""), (str, type(None))))


def _line_mark(value: object) -> bool:
    return isinstance(value, dict) and _position(value.get("offset")) and isinstance(value.get("sha256"), str)


def _pending(value: object) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("batch"), str)
            and isinstance(value.get("groups"), list) and isinstance(value.get("reinforcements"), list)
            and (value.get("target_offset") is None or _position(value["target_offset"]))
            and (value.get("target_mark") is None or _line_mark(value["target_mark"])))


FIELDS: dict[str, tuple[Any, str]] = {  # name -> (check of a value that is not null, what belongs there)
    "offset": (_position, "a byte position, a whole number 0 or more"),
    "buffer_id": (lambda v: v == "" or _buffer_id(v), "a buffer id of letters, digits, - and _"),
    "last_line": (_line_mark, "null, or the offset and sha256 of the line before the offset"),
    "unfinished": (lambda v: isinstance(v, dict) and all(_position(v.get(k)) for k in ("size", "mtime_ns")),
                   "null, or the size and mtime_ns of a buffer whose last line has no newline"),
    "reinforcements": (lambda v: isinstance(v, dict) and all(map(_reinforcement, v.values())),
                       "an object of note ids, each with a count (a whole number) and the last time"),
    "pending": (_pending, "null, or the record of a run in flight"),
    "last_run": (lambda v: isinstance(v, dict), "null, or an object"),
    "jobs": (lambda v: isinstance(v, dict) and all(isinstance(r, dict) for r in v.values()),
             "an object of job names, each an object"),
    "retired": (lambda v: isinstance(v, dict) and all(_buffer_id(k) and _position(o) for k, o in v.items()),
                "an object of buffer ids, each with a byte position"),
}


def _check_fields(path: Path, data: dict[str, Any]) -> None:
    for name, (valid, belongs) in FIELDS.items():
        value = data.get(name)
        if value is not None and not valid(value):
            shown = json.dumps(value, ensure_ascii=False)
            shown = shown if len(shown) <= 60 else shown[:59] + "…"
            raise StateCorrupt(path, f'"{name}" is {shown}, where {belongs} belongs')
