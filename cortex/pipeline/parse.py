"""Stage 1: a raw buffer line → a JSON object, or a ``parse`` rejection.

Whatever its bytes, a line ends here as an object or a ``Rejection`` that says why: the
buffer is written by ``>>`` as well as ``cortex write``, so nothing about it is trusted.
Bounds come from ``Limits`` (``limits:`` in ``observer/config.yml``): a line's size is
capped before it is read (``cortex.buffer``), its nesting and numbers while it is parsed,
and a string that is not text (a lone surrogate such as ``\\ud800``) is refused before
any later stage has to encode it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from cortex.config import Limits
from cortex.model import Rejection

DEFAULT_LIMITS = Limits()
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_BITS_PER_DIGIT = math.log2(10)


class _Refused(ValueError):
    pass


def _no_constant(name: str):
    raise _Refused(f"{name} is not JSON")


def _number_hooks(limits: Limits) -> dict[str, Any]:
    cap = limits.max_number_digits

    def parse_int(text: str) -> int:
        if len(text) > cap:
            raise _Refused(f"a number of {len(text)} digits (limit {cap})")
        return int(text)

    def parse_float(text: str) -> float:
        if len(text) > cap:
            raise _Refused(f"a number of {len(text)} characters (limit {cap})")
        value = float(text)
        if not math.isfinite(value):
            raise _Refused(f"the number {text} is out of range")
        return value

    return {"parse_int": parse_int, "parse_float": parse_float, "parse_constant": _no_constant}


def loads(text: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Strict, bounded JSON: Python's reader also takes NaN and Infinity (no other reader
    of the buffer would), numbers of any length and nesting to the recursion limit."""
    try:
        obj = json.loads(text, **_number_hooks(limits))
    except RecursionError:
        raise _Refused(f"nested deeper than {limits.max_depth} levels") from None
    problem = check_value(obj, limits)
    if problem:
        raise _Refused(problem)
    return obj


def check_value(obj: Any, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """What makes a decoded value unusable, or None: nesting past the bound, a number too
    long to be a score, a string or key that is not text. Iterative, so depth cannot
    exhaust the stack; also run on objects that never were JSON text (the MCP server's)."""
    stack: list[tuple[Any, str, int]] = [(obj, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            bad = _SURROGATE.search(value)
            if bad:
                return f"{where or '(line)'}: a lone surrogate U+{ord(bad.group()):04X} at character {bad.start()} is not text"
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if value.bit_length() > limits.max_number_digits * _BITS_PER_DIGIT:
                return f"{where or '(line)'}: a number of more than {limits.max_number_digits} digits"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"{where or '(line)'}: {value} is not a finite number"
        elif isinstance(value, (dict, list, tuple)):
            if depth >= limits.max_depth:
                return f"{where or '(line)'}: nested deeper than {limits.max_depth} levels"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and _SURROGATE.search(key):
                    return f"{where or '(line)'}: a key with a lone surrogate is not text"
                stack.append((item, f"{where}.{key}" if where else str(key), depth + 1))
    return None


def parse_line(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any] | Rejection:
    if len(raw) > limits.max_line_bytes:
        return oversize(len(raw), limits)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejection("parse", f"not UTF-8 at byte {exc.start}")
    # A byte-order mark opens what Windows tools write as UTF-8 (PowerShell's pipes and
    # Out-File, Notepad), and a file of them appended to the buffer puts it at a line's
    # start: a mark of the encoding, never JSON, so it is no reason to hold the line.
    text = text.removeprefix("\ufeff")
    try:
        obj = loads(text, limits)
    except json.JSONDecodeError as exc:
        return Rejection("parse", f"malformed JSON: {exc.msg} at column {exc.colno}")
    except _Refused as exc:
        return Rejection("parse", f"refused: {exc}", {"rule": "limits"})
    except ValueError as exc:  # e.g. an integer past Python's own digit limit
        return Rejection("parse", f"malformed JSON: {exc}")
    if not isinstance(obj, dict):
        return Rejection("parse", f"expected a JSON object, got {type(obj).__name__}")
    return obj


def oversize(size: int, limits: Limits) -> Rejection:
    return Rejection(
        "parse",
        f"the line is {size:,} bytes, over the limit of {limits.max_line_bytes:,} "
        "(limits.max_line_bytes in observer/config.yml); only its start is kept here",
        {"rule": "limits", "bytes": size},
    )
