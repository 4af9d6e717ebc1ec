"""Stage 1: a raw buffer line → a JSON object, or a ``parse`` rejection."""

from __future__ import annotations

import json
from typing import Any

from cortex.model import Rejection


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def loads(text: str) -> Any:
    """Strict JSON: Python's reader also takes NaN and Infinity, which no other reader
    of the buffer would."""
    return json.loads(text, parse_constant=_no_constant)


def parse_line(raw: bytes) -> dict[str, Any] | Rejection:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejection("parse", f"not UTF-8 at byte {exc.start}")
    try:
        obj = loads(text)
    except json.JSONDecodeError as exc:
        return Rejection("parse", f"malformed JSON: {exc.msg} at column {exc.colno}")
    except ValueError as exc:
        return Rejection("parse", f"malformed JSON: {exc}")
    if not isinstance(obj, dict):
        return Rejection("parse", f"expected a JSON object, got {type(obj).__name__}")
    return obj
