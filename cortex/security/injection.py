"""The pattern layer of injection detection.

Patterns are data (``cortex/data/injection_patterns.yml``), extendable per vault. They run
on every view :func:`cortex.security.normalise.views` produces: the canonical text and
each payload decoded from it. A payload carried in an invisible channel (tag
characters, variation selectors, invisible-operator bits) is itself a finding: nobody
hides ordinary text from the reader.

Standard library and PyYAML only; no numpy here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from cortex.security import normalise, secrets

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True)
class Verdict:
    """An injection finding."""

    layer: str  # "pattern" | "classifier"
    score: float  # pattern: 1.0; classifier: probability
    rule: str  # pattern name, or "classifier"
    excerpt: str  # the matched text (short)


@dataclass(frozen=True)
class Pattern:
    name: str
    regex: re.Pattern


_FLAGS = re.IGNORECASE | re.DOTALL


class PatternRefused(ValueError):
    """A pattern of the vault's own that cannot be used (``vault_patterns``), named."""


def compile_patterns(raw: Sequence[str | dict]) -> tuple[Pattern, ...]:
    """Patterns from config: plain strings (named ``extra-N``) or ``{name, pattern}``."""
    out = []
    for i, item in enumerate(raw, 1):
        if isinstance(item, str):
            name, pattern = f"extra-{i}", item
        else:
            name, pattern = str(item.get("name") or f"extra-{i}"), str(item["pattern"])
        try:
            out.append(Pattern(name, re.compile(pattern, _FLAGS)))
        except re.error as exc:
            raise PatternRefused(f"injection pattern {name!r} is not a valid regular expression: {exc}") from exc
    return tuple(out)


def vault_patterns(raw: Sequence) -> tuple[Pattern, ...]:
    """A vault's own patterns (``security.injection_patterns``, in the tracked and shared
    ``observer/config.yml``), compiled; ``PatternRefused`` naming the first one refused: not a
    string or ``{name, pattern}``, too long, beyond the number allowed, not a regular
    expression, or one that can take exponential time (``backtracking``), which would
    hold every teammate's commit and run on a note that triggers it."""
    if not raw:
        return ()
    from cortex.security.backtracking import MAX_PATTERN_CHARS, MAX_PATTERNS, exponential_risk

    if len(raw) > MAX_PATTERNS:
        raise PatternRefused(f"security.injection_patterns holds {len(raw)} patterns, over the {MAX_PATTERNS} allowed")
    for i, item in enumerate(raw, 1):
        if not (isinstance(item, str) or isinstance(item, dict) and isinstance(item.get("pattern"), str)):
            raise PatternRefused(f"injection pattern {i} is {item!r}: write a string, or `{{name: ..., pattern: ...}}`")
    compiled = compile_patterns(raw)
    for pattern in compiled:
        source = pattern.regex.pattern
        if len(source) > MAX_PATTERN_CHARS:
            raise PatternRefused(f"injection pattern {pattern.name!r} is {len(source)} characters long, "
                             f"over the {MAX_PATTERN_CHARS} allowed")
        why = exponential_risk(source, pattern.regex.flags)
        if why:
            raise PatternRefused(f"injection pattern {pattern.name!r} ({source!r}) can take exponential time on some "
                             f"text ({why}): rewrite it so each part of a text can be matched one way only "
                             "(docs/security.md, \"A vault's own patterns\")")
    return compiled


@lru_cache(maxsize=1)
def default_patterns() -> tuple[Pattern, ...]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load((DATA_DIR / "injection_patterns.yml").read_text(encoding="utf-8"), Loader=loader) or {}
    return compile_patterns(data.get("patterns", []))


_SPACES = re.compile(r"[ \t\f\v]+")


def _excerpt(s: str, limit: int = 80) -> str:
    # Redact before cutting: a credential cut in half is no longer recognisable, and the
    # excerpt is written to the quarantine file.
    s = " ".join(secrets.redact(s)[0].split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def hidden_payload(text: str) -> str:
    """Readable text carried in an invisible channel, or ''."""
    if text.isascii():
        return ""
    for decoder in (normalise._decode_tags, normalise._decode_variation_selectors, normalise._decode_invisible_bits):
        s = decoder(text)
        if len(s.strip()) >= 4 and sum(ch.isalpha() for ch in s) >= 3:
            return s
    return ""


def match_patterns(text: str, patterns: Sequence[Pattern], views: Sequence[str] | None = None) -> Verdict | None:
    """The first pattern that matches any view of ``text``, as a Verdict."""
    payload = hidden_payload(text)
    if payload:
        return Verdict("pattern", 1.0, "hidden-payload", _excerpt(payload))
    for view in views if views is not None else normalise.views(text):
        flat = _SPACES.sub(" ", view)
        for p in patterns:
            m = p.regex.search(flat)
            if m:
                return Verdict("pattern", 1.0, p.name, _excerpt(m.group(0)))
    return None
