"""A small JSON Schema checker for the keywords the note schema uses.

Why: importing ``jsonschema`` costs ~100 ms (referencing, rpds, attrs), more than the
whole budget of the git hook for one note. The note schema needs only a dozen keywords,
so ``compile_schema`` checks those itself and hands any schema that uses something else
(a person's extended ``schemas/note.schema.json`` with ``oneOf``, ``$ref``, ...) to
jsonschema's Draft 2020-12 validator (``reference_validator``). Errors carry the attributes
the note validator reads from jsonschema's (``absolute_path``, ``validator``,
``validator_value``, ``message``, ``instance``); tests compare both on the same inputs.

Both match a ``pattern`` as JSON Schema defines it (ECMA-262): ``$`` is the end of the text.
Python's ``$`` also matches before a final line break, so ``re.search`` let ``"cli\\n"``
through ``^(cli|...)$`` (a note id, a session id, a time with a line break after it).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples"})
KEYWORDS = frozenset(
    {"type", "required", "properties", "pattern", "enum", "minLength", "maxLength", "minimum", "maximum", "items"}
)

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    # jsonschema counts 1.0 as an integer too
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


@dataclass
class SchemaError:
    message: str
    validator: str
    absolute_path: deque = field(default_factory=deque)
    instance: Any = None  # the value that failed
    validator_value: Any = None  # the keyword's value in the schema (``"array"`` for a ``type``)


def supported(schema: Any) -> bool:
    """True when every keyword, at every depth, is one this module checks."""
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        if key not in KEYWORDS:
            return False
        if key == "type" and not (value in _TYPES or (isinstance(value, list) and all(t in _TYPES for t in value))):
            return False
        if key == "properties" and not all(supported(s) for s in value.values()):
            return False
        if key == "items" and not supported(value):
            return False
    return True


class LiteValidator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    def iter_errors(self, instance: Any) -> Iterator[SchemaError]:
        yield from self._check(self.schema, instance, ())

    def _check(self, schema: dict, value: Any, path: tuple) -> Iterator[SchemaError]:
        def err(message: str, keyword: str) -> SchemaError:
            return SchemaError(message, keyword, deque(path), value, schema[keyword])

        for key, rule in schema.items():
            if key == "type":
                types = rule if isinstance(rule, list) else [rule]
                if not any(_TYPES[t](value) for t in types):
                    yield err(f"{value!r} is not of type {', '.join(repr(t) for t in types)}", key)
            elif key == "enum":
                if not any(_equal(value, e) for e in rule):
                    yield err(f"{value!r} is not one of {rule!r}", key)
            elif key == "pattern" and isinstance(value, str):
                if not ecma_pattern(rule).search(value):
                    yield err(f"{value!r} does not match {rule!r}", key)
            elif key == "minLength" and isinstance(value, str) and len(value) < rule:
                yield err(f"{value!r} is too short" if rule > 1 else f"{value!r} should be non-empty", key)
            elif key == "maxLength" and isinstance(value, str) and len(value) > rule:
                yield err(f"{value!r} is too long", key)
            elif key == "minimum" and _TYPES["number"](value) and value < rule:
                yield err(f"{value!r} is less than the minimum of {rule!r}", key)
            elif key == "maximum" and _TYPES["number"](value) and value > rule:
                yield err(f"{value!r} is greater than the maximum of {rule!r}", key)
            elif key == "required" and isinstance(value, dict):
                for name in rule:
                    if name not in value:
                        yield err(f"{name!r} is a required property", key)
            elif key == "properties" and isinstance(value, dict):
                for name, sub in rule.items():
                    if name in value:
                        yield from self._check(sub, value[name], path + (name,))
            elif key == "items" and isinstance(value, list):
                for i, item in enumerate(value):
                    yield from self._check(rule, item, path + (i,))


_ECMA: dict[str, re.Pattern] = {}


def ecma_pattern(pattern: str) -> re.Pattern:
    """A schema's ``pattern`` compiled to match as JSON Schema means it: each ``$`` outside a
    character class becomes ``\\Z``, the end of the text, where Python's ``$`` also matches
    before a final ``\\n``. Escapes and classes keep Python's meaning."""
    compiled = _ECMA.get(pattern)
    if compiled is None:
        out, i, in_class = [], 0, False
        while i < len(pattern):
            ch = pattern[i]
            if ch == "\\":
                out.append(pattern[i : i + 2])
                i += 2
                continue
            if in_class:
                in_class = ch != "]"
            elif ch == "[":
                in_class, start = True, i
                i += 1 + (pattern[i + 1 : i + 2] == "^")
                i += pattern[i : i + 1] == "]"  # a ] opening a class is one of its characters
                out.append(pattern[start:i])
                continue
            elif ch == "$":
                ch = r"\Z"
            out.append(ch)
            i += 1
        compiled = _ECMA[pattern] = re.compile("".join(out))
    return compiled


_REFERENCE = None


def reference_validator(schema: dict[str, Any]):
    """jsonschema's Draft 2020-12 validator for ``schema``, its ``pattern`` matched by
    ``ecma_pattern`` (jsonschema's own uses ``re.search`` as it is)."""
    global _REFERENCE
    if _REFERENCE is None:
        from jsonschema import Draft202012Validator, ValidationError, validators

        def pattern(validator, rule, instance, schema):
            if validator.is_type(instance, "string") and not ecma_pattern(rule).search(instance):
                yield ValidationError(f"{instance!r} does not match {rule!r}")

        _REFERENCE = validators.extend(Draft202012Validator, {"pattern": pattern})
    return _REFERENCE(schema)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):  # JSON keeps true and 1 apart
        return type(a) is type(b) and a == b
    return a == b


def compile_schema(schema: dict[str, Any]):
    """An object with ``iter_errors(instance)``: the fast checker when it covers the
    schema, else jsonschema's Draft 2020-12 validator (``reference_validator``)."""
    if supported(schema):
        return LiteValidator(schema)
    return reference_validator(schema)
