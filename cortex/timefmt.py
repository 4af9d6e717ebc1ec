"""Timestamps: ISO-8601 in UTC with milliseconds and a ``Z`` (``2026-02-16T15:23:14.527Z``)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


_FRACTION_RE = re.compile(r"(?<=\d{2}:\d{2}:\d{2})\.(\d+)")


def _for_fromisoformat(text: str) -> str:
    """ISO-8601 as every supported Python's ``fromisoformat`` reads it: 3.10 takes no
    trailing ``Z`` and only 3 or 6 fraction digits (3.11 takes any)."""
    if text[-1:] in "zZ":
        text = text[:-1] + "+00:00"
    return _FRACTION_RE.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)


def parse_time(value: object) -> datetime:
    """Parse an ISO-8601 string (or a datetime/date from YAML) into an aware UTC datetime."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if not text or not text[0].isdigit():
            raise ValueError(f"not an ISO-8601 timestamp: {value!r}")
        dt = datetime.fromisoformat(_for_fromisoformat(text))
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.astimezone(timezone.utc)
    except OverflowError:  # 9999-12-31 at -14:00 is year 10000 in UTC: every caller handles ValueError
        raise ValueError(f"not a timestamp the calendar can hold in UTC: {value!r}") from None


def format_time(dt: datetime) -> str:
    try:
        dt = dt.astimezone(timezone.utc)
    except OverflowError:  # a person's `created: 9999-12-31T23:59:59-14:00`: year 10000 in UTC
        return dt.isoformat()
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


MAX_DURATION = timedelta(days=1000 * 365)


class DurationTooLong(ValueError):
    pass


def parse_duration(text: str) -> timedelta:
    """``30d``, ``24h``, ``1w2d``, ``90m`` → timedelta."""
    cleaned = text.strip().lower()
    matches = list(_DURATION_RE.finditer(cleaned))
    if not matches or "".join(m.group(0) for m in matches).replace(" ", "") != cleaned.replace(" ", ""):
        raise ValueError(f"not a duration: {text!r} (try 30d, 24h, 90m, 2w)")
    seconds = sum(float(m.group(1)) * _UNITS[m.group(2)] for m in matches)
    if seconds > MAX_DURATION.total_seconds():  # utcnow() minus more overflows the calendar
        raise DurationTooLong(f"{text!r} is too long a duration: at most {MAX_DURATION.days // 365} years")
    return timedelta(seconds=seconds)


def parse_when(text: str | None) -> float | None:
    """An ISO date/time, or a duration back from now (``7d``, ``24h``), as epoch seconds.
    Raises ValueError with what to write instead."""
    if text is None or not str(text).strip():
        return None
    try:
        return parse_time(text).timestamp()
    except ValueError:
        pass
    try:
        return (utcnow() - parse_duration(text)).timestamp()
    except DurationTooLong:
        raise
    except ValueError:
        raise ValueError(f"{text!r}: use a date (2026-01-31), a timestamp, or a duration back from now (7d, 24h)") from None


def jsonable(value):
    """Datetimes (as YAML reads unquoted timestamps) turned back into text, recursively."""
    kind = type(value)
    if kind is str or kind is float or kind is int or value is None:
        return value
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    return value
