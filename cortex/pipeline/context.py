"""Everything a stage needs, passed in: settings, taxonomy, the clock, id source."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

from cortex.config import Calibration, Settings
from cortex.taxonomy import Taxonomy


@dataclass(frozen=True)
class Context:
    taxonomy: Taxonomy
    settings: Settings
    calibration: Calibration
    observation_validator: Any  # a compiled jsonschema validator for observation lines
    scanner: Any  # cortex.security.Scanner
    now: datetime
    new_id: Callable[[int], str]  # unix ms -> UUIDv7
    skip_trust: bool = False  # quarantine promote: the person vouched for the source
    skip_injection: bool = False  # quarantine promote --force
    # Type folders cortex must not write into, with the reason (a symbolic link on the
    # way, which would lead the note out of the repository or into .git/).
    refused_dirs: Mapping[str, str] = field(default_factory=dict)
