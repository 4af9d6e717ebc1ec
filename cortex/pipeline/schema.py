"""Stage 2: JSON Schema (``schemas/observation.schema.json``) plus the taxonomy.

Over-long body, context or quote is cut to its cap with a warning first,
so only the remaining rules can reject a line.
"""

from __future__ import annotations

import math
import re

from typing import Any

from cortex.fields import CAPS
from cortex.model import Observation, Rejection
from cortex.notes import digits_alone
from cortex.pipeline.context import Context
from cortex.timefmt import parse_time


def truncate(obj: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    cut = []
    for name, cap in CAPS.items():
        value = obj.get(name)
        if isinstance(value, str) and len(value) > cap:
            obj = {**obj, name: value[:cap]}
            cut.append(f"{name} truncated from {len(value)} to {cap} characters")
    return obj, tuple(cut)


MIN_YEAR, MAX_YEAR = 1970, 2199
_NO_ZONE = re.compile(r"[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?$")

# What each patterned field must look like, in words (the regex is the schema's).
_EXPECTED = {
    "timestamp": "an ISO-8601 timestamp such as 2026-02-16T15:23:14Z",
    "type": "a type name: lowercase letters, digits and _ (see observer/taxonomy.yml)",
    "body": "text (it has no visible character)",
    "attribution": "a single line (no control characters)",
    "name": "a single line (no control characters)",
    "session_id": "a UUID or `cli`",
    "tags": "a tag: letters, digits, _ and -, nested with / (ops/deploy)",
}


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "(line)"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "not":
        return f"{where}: {error.instance!r} is the staging type, not a note type"
    if error.validator == "pattern":
        field = str(error.absolute_path[-1]) if error.absolute_path else ""
        expected = _EXPECTED.get(field) or _EXPECTED.get(str(error.absolute_path[0]) if error.absolute_path else "")
        return f"{where}: {error.instance!r} is not " + (expected or f"of the form {error.validator_value}")
    return f"{where}: {error.message}"


def _unique_tags(tags) -> tuple[str, ...]:
    """Tags as first written, one per lowercase form: the security stage must see a pasted
    key in its own case (AKIA…); rendering lowercases them."""
    seen: dict[str, str] = {}
    for tag in tags:
        seen.setdefault(tag.lower(), tag)
    return tuple(seen.values())


def validate(obj: dict[str, Any], key: str, ctx: Context) -> Observation | Rejection:
    obj, truncated = truncate(obj)
    validator = ctx.observation_validator
    if not validator.is_valid(obj):
        errors = sorted(validator.iter_errors(obj), key=lambda e: (list(e.absolute_path), e.validator))
        return Rejection("schema", "; ".join(_describe(e) for e in errors[:5]), {"rule": errors[0].validator})
    for n, tag in enumerate(obj.get("tags") or ()):
        unseen = digits_alone(tag)
        if unseen:  # written, it would be no tag in Obsidian: said now, not found missing later
            return Rejection("schema", f"tags.{n}: {': '.join(unseen)}", {"rule": "tag"})
    type_name = obj["type"]
    if type_name not in ctx.taxonomy:
        meant = ctx.taxonomy.meant(type_name)
        return Rejection(
            "schema",
            f"type: {type_name!r} is not in the taxonomy ("
            + (f"did you mean {meant!r}? " if meant else "")
            + f"add it to observer/taxonomy.yml, or use one of {', '.join(ctx.taxonomy.names())})",
            {"rule": "taxonomy"},
        )
    try:
        timestamp = parse_time(obj["timestamp"])
    except ValueError:
        return Rejection("schema", f"timestamp: {obj['timestamp']!r} is not a valid ISO-8601 time", {"rule": "timestamp"})
    if not MIN_YEAR <= timestamp.year <= MAX_YEAR:  # an agent's clock or placeholder, not a date
        return Rejection("schema", f"timestamp: {obj['timestamp']!r} is outside {MIN_YEAR}–{MAX_YEAR}", {"rule": "timestamp"})
    warnings = list(truncated)
    if _NO_ZONE.search(obj["timestamp"]):
        warnings.append(f"timestamp {obj['timestamp']!r} has no time zone: read as UTC")
    scores = {}
    for name in ("confidence", "importance"):
        value = obj.get(name)
        if value is not None:
            if not math.isfinite(value):
                return Rejection("schema", f"{name}: {value} is not a number between 0 and 1", {"rule": "finite"})
            clamped = min(1.0, max(0.0, float(value)))
            if clamped != value:
                warnings.append(f"{name} {value} clamped to {clamped}")
            scores[name] = clamped
    return Observation(
        key=key,
        timestamp=timestamp,
        bucket=obj["bucket"],
        type=type_name,
        body=obj["body"],
        attribution=obj["attribution"],
        session_id=obj["session_id"],
        entities=tuple((e["name"].strip(), e["type"]) for e in obj.get("entities") or ()),
        tags=_unique_tags(obj.get("tags") or ()),
        confidence=scores.get("confidence"),
        importance=scores.get("importance"),
        context=obj.get("context") or None,
        source_quote=obj.get("source_quote") or None,
        supersedes=(obj.get("supersedes") or "").strip() or None,
        warnings=tuple(warnings),
        truncated=truncated,
    )
