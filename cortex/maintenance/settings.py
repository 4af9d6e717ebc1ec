"""The ``maintenance:`` section of ``observer/config.yml``.

    maintenance:
      forget_threshold: 0.2       # effective importance below this: archived by decay (0 to 0.5)
      dedup_threshold: 0.85       # embedding cosine at or above this: a candidate pair
      jobs:                       # when `cortex maintain` finds each job due (UTC)
        reinforce: every 1h
        decay: daily 03:00
        dedup: daily 03:00
        graph: daily 03:00
        index: every 1h
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any, TYPE_CHECKING

from cortex.errors import ConfigError
from cortex.layout import read_settings_text
from cortex.timefmt import parse_duration

if TYPE_CHECKING:
    from cortex.vault import Vault

DEFAULT_FORGET_THRESHOLD = 0.2
# The run memorizes nothing below its `threshold`, 0.5 by default: a forget threshold
# above it would have decay archive memories the day they were memorized (1.0, a
# teammate's pushed setting, archives every one), so none is accepted.
MAX_FORGET_THRESHOLD = 0.5
DEFAULT_DEDUP_THRESHOLD = 0.85
DEFAULT_WHEN = {
    "reinforce": "every 1h",
    "decay": "daily 03:00",
    "dedup": "daily 03:00",
    "graph": "daily 03:00",
    "index": "every 1h",
}
_DAILY_RE = re.compile(r"(?:daily\s+)?(?:at\s+)?([01]?\d|2[0-3]):([0-5]\d)")


@dataclass(frozen=True)
class When:
    """Every interval, or daily at a UTC time of day."""

    every: timedelta | None = None
    at: time | None = None

    @classmethod
    def parse(cls, text: str) -> "When":
        raw = str(text).strip().lower()
        m = _DAILY_RE.fullmatch(raw)
        if m:
            return cls(at=time(int(m.group(1)), int(m.group(2))))
        try:
            return cls(every=parse_duration(raw.removeprefix("every").strip()))
        except ValueError:
            raise ConfigError(f"maintenance schedule {text!r} is not understood",
                              "write `every 1h`, `every 30m` or `daily 03:00` (UTC)") from None

    def next_after(self, last: datetime) -> datetime:
        """The first due time strictly after ``last``."""
        if self.every is not None:
            return last + self.every
        candidate = last.replace(hour=self.at.hour, minute=self.at.minute, second=0, microsecond=0)
        return candidate if candidate > last else candidate + timedelta(days=1)

    def __str__(self) -> str:
        if self.every is not None:
            secs = int(self.every.total_seconds())
            for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
                if secs % n == 0:
                    return f"every {secs // n}{unit}"
            return f"every {secs}s"
        return f"daily {self.at.strftime('%H:%M')}"


@dataclass(frozen=True)
class MaintenanceSettings:
    forget_threshold: float = DEFAULT_FORGET_THRESHOLD
    dedup_threshold: float = DEFAULT_DEDUP_THRESHOLD
    when: dict[str, When] = field(default_factory=lambda: {k: When.parse(v) for k, v in DEFAULT_WHEN.items()})


def number(data: dict, key: str, default: float, high: float = 1.0) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= high:
        raise ConfigError(f"observer/config.yml: maintenance.{key} must be a number from 0 to {high:g}, got {value!r}",
                          _WHY_AT_MOST.get(key, ""))
    return float(value)


def forget_threshold(data: dict) -> float:
    """``maintenance.forget_threshold``: decay archives a memory whose effective
    importance falls below it; from 0 to ``MAX_FORGET_THRESHOLD``."""
    return number(data, "forget_threshold", DEFAULT_FORGET_THRESHOLD, MAX_FORGET_THRESHOLD)


_WHY_AT_MOST = {"forget_threshold": f"above {MAX_FORGET_THRESHOLD:g} (the run's default threshold) decay would archive "
                                    "memories the day they are memorized; the default is "
                                    f"{DEFAULT_FORGET_THRESHOLD:g}"}


def parse_maintenance(data: Any) -> MaintenanceSettings:
    if data is None:
        return MaintenanceSettings()
    if not isinstance(data, dict):
        raise ConfigError("observer/config.yml: `maintenance:` must be a mapping")
    when = {k: When.parse(v) for k, v in DEFAULT_WHEN.items()}
    jobs = data.get("jobs") or {}
    if not isinstance(jobs, dict):
        raise ConfigError("observer/config.yml: maintenance.jobs must map job names to `every 1h` / `daily 03:00`")
    for name, text in jobs.items():
        if name not in DEFAULT_WHEN:
            raise ConfigError(f"observer/config.yml: unknown maintenance job {name!r}", f"use {', '.join(DEFAULT_WHEN)}")
        when[name] = When.parse(text)
    return MaintenanceSettings(
        forget_threshold=forget_threshold(data),
        dedup_threshold=number(data, "dedup_threshold", DEFAULT_DEDUP_THRESHOLD),
        when=when,
    )


def load_maintenance(vault: Vault) -> MaintenanceSettings:
    path: Path = vault.root / "observer" / "config.yml"
    if not path.exists():
        return MaintenanceSettings()
    import yaml

    try:
        data = yaml.safe_load(read_settings_text(path)) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_maintenance(data.get("maintenance") if isinstance(data, dict) else None)
