"""Credential redaction: every secret in a text becomes ``[REDACTED]``.

Rules are data (``cortex/data/secret_rules.yml``): provider formats first (a prefix and
a shape: ``ghp_…``, ``AKIA…``, ``sk-ant-…``, PEM blocks, passwords in connection
strings), then values assigned to credential-sounding names, then a generic pass for
random-looking tokens that no rule names. What must survive is as important as what must
go: notes carry 64-hex ``source_hash`` values, UUIDs and git SHAs, so hex-only runs,
UUIDs, base64 that decodes to prose, URLs without credentials and placeholders are never
touched by the generic pass.

Values no provider format names are found by their context (``context.py``).
Encoded content (a drawing, an inline image, an SSH public key) is no credential to the
generic pass; a private key is one however encoded (``encoded.py``).

detect-secrets was measured against these rules (``bench/bench_security.py``, the same
texts: the shared set per provider and every phrasing family): its keyword and entropy
plugins found 0.15 of 336 credentials, all 27 of its plugins 0.44 (flagging 0.04 of the
near-misses), cortex's rules 0.99 with no near-miss altered, so cortex keeps its own.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from cortex.security import encoded


DATA_DIR = Path(__file__).resolve().parent.parent / "data"
REDACTED = "[REDACTED]"  # the marker a note carries where a credential was


@dataclass(frozen=True)
class SecretRule:
    name: str
    provider: str
    regex: re.Pattern
    group: int = 0
    needs_random: bool = False
    needs_shape: bool = False  # a chosen password: letters with a digit, a symbol or inner capitals
    always: bool = False  # run even when the text has no long token (see _LONG_TOKEN)
    needles: tuple[str, ...] = ()  # lowercase words one of which every match holds (none: always tried)


@dataclass(frozen=True)
class GenericSettings:
    min_length: int = 24
    min_entropy: float = 3.3
    min_switch_ratio: float = 0.3


@dataclass(frozen=True)
class Finding:
    start: int
    end: int
    provider: str
    rule: str


def _load_yaml(text: str) -> dict:
    import yaml  # only when the rules are first needed

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader) or {}


def parse_rules(data: dict) -> tuple[tuple[SecretRule, ...], GenericSettings]:
    from cortex.security.gate import needles

    rules = []
    for raw in data.get("rules", []):
        flags = re.IGNORECASE if "i" in str(raw.get("flags", "")) else 0
        rules.append(
            SecretRule(
                name=raw["name"],
                provider=raw.get("provider", raw["name"]),
                regex=re.compile(raw["pattern"], flags),
                group=int(raw.get("group", 0)),
                needs_random=bool(raw.get("needs_random", False)),
                needs_shape=bool(raw.get("needs_shape", False)),
                always=bool(raw.get("always", False)),
                needles=tuple(needles(raw["pattern"], flags) or ()),
            )
        )
    generic = GenericSettings(**(data.get("generic") or {}))
    return tuple(rules), generic


@lru_cache(maxsize=1)
def _rules_data() -> dict:
    return _load_yaml((DATA_DIR / "secret_rules.yml").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def default_rules() -> tuple[tuple[SecretRule, ...], GenericSettings]:
    return parse_rules(_rules_data())


@lru_cache(maxsize=1)
def default_context():
    from cortex.security import context

    return context.words_from(_rules_data())


# --- what a credential is not -------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"(.)\1{4,}"  # xxxxx, XXXXX, *****, 00000
    r"|example|sample|dummy|changeme|placeholder|your[_\-]?(?:key|token|secret|password|api)"
    r"|\$\{|\{\{|<[^>]*>|%[A-Z_]+%|^\$[A-Z_]+$"
    r"|^(?:password|passwd|pass|secret|pwd|token)$"  # the word itself, as in user:password@host
    r"|^\[REDACTED\]$",  # cortex's own marker: a redacted text redacts to itself
    re.IGNORECASE,
)
_HEX = re.compile(r"[0-9a-fA-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.search(value))


def entropy(value: str) -> float:
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _class(ch: str) -> int:
    if ch.isdigit():
        return 0
    if ch.isupper():
        return 1
    return 2


def switch_ratio(value: str) -> float:
    """Share of adjacent alphanumerics that change class (digit / upper / lower).

    Random base62 runs near 0.6; words, camelCase names and paths stay under 0.25.
    """
    chars = [ch for ch in value if ch.isascii() and ch.isalnum()]
    if len(chars) < 2:
        return 0.0
    switches = sum(1 for a, b in zip(chars, chars[1:]) if _class(a) != _class(b))
    return switches / (len(chars) - 1)


def _decodes_to_text(value: str) -> bool:
    body = value.rstrip("=")
    if len(body) % 4 == 1:
        return False
    try:
        raw = base64.b64decode(body.replace("-", "+").replace("_", "/") + "=" * (-len(body) % 4), validate=True)
        s = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return len(s) > 0 and sum(ch.isprintable() for ch in s) / len(s) > 0.95


def looks_random(value: str, *, min_entropy: float = 3.0, min_switch_ratio: float = 0.3) -> bool:
    """A value that reads as a generated credential rather than a word, hash or id."""
    if is_placeholder(value) or _UUID.fullmatch(value):
        return False
    classes = {_class(ch) for ch in value if ch.isascii() and ch.isalnum()}
    if len(classes) < 2:
        return False
    return entropy(value) >= min_entropy and switch_ratio(value) >= min_switch_ratio


_SYMBOLS = frozenset("!@#$%^&*+=?~")
_PIECE = r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+"


def identifier_like(value: str) -> bool:
    """A name made of words ("validatedOnEachRequest", "frontend-WebApp-Prod-EU-West1",
    "orders.v2.PaymentCaptured-DLQ-2024Q3"), not a generated key. Split at case changes
    and digits, a name is words (three letters or more, with a vowel) and short acronyms;
    a random key breaks into many one-letter and unpronounceable pieces ("fmj", "Nd")."""
    pieces = [p for p in _rx(_PIECE).findall(value) if not p.isdigit()]
    if not pieces or sum(map(len, pieces)) < 0.6 * sum(ch.isalnum() for ch in value):
        return False
    odd = sum(1 for p in pieces if not _wordlike(p))
    return odd <= max(1, len(pieces) // 4)


def _wordlike(piece: str) -> bool:
    if piece.isupper():
        return 2 <= len(piece) <= 5  # an acronym: EU, DLQ, HTTP
    return len(piece) >= 3 and any(ch in "aeiouy" for ch in piece.lower())


def looks_chosen(value: str) -> bool:
    """A password a person chose ("correct-horse-battery-9", "BlueCactus-42-Orbit"),
    not a word that follows "the password is" in prose ("rotated-monthly", "stored")."""
    if is_placeholder(value) or not any(ch.isalpha() for ch in value):
        return False
    return (any(ch.isdigit() for ch in value) or any(ch.isupper() for ch in value[1:])
            or any(ch in _SYMBOLS for ch in value))


# Public identifiers that look random: subresource-integrity and SSH fingerprints, Go
# module hashes (`h1:` in go.sum and in `go`'s "checksum mismatch"), IPFS content ids, hex
# addresses. A person pastes them into notes; they guard nothing.
_PUBLIC_ID = (
    r"(?:sha(?:256|384|512)-[A-Za-z0-9+/]{40,}={0,2}"
    r"|Qm[1-9A-HJ-NP-Za-km-z]{44}|bafy[a-z2-7]{50,}|0x[0-9a-fA-F]{16,})"
)
_FINGERPRINT_BEFORE = r"(?:SHA256|SHA1|MD5|(?<![\w.])h1):$"
_PATH = r"(?:[~.]?/)?[a-z0-9._\-]+(?:/[a-z0-9._\-]+){2,}/?"


@lru_cache(maxsize=None)
def _rx(pattern: str) -> re.Pattern:
    """Patterns off the common path, compiled on first use: the git hook imports this
    module for every commit and should not pay for what it rarely runs."""
    return re.compile(pattern)


def _public_or_path(text: str, start: int, end: int) -> bool:
    token = text[start:end]
    if _rx(_PUBLIC_ID).fullmatch(token) or _rx(_FINGERPRINT_BEFORE).search(text, max(0, start - 7), start):
        return True
    return _rx(_PATH).fullmatch(token) is not None  # lowercase path segments: a file, not a key


_LONG_TOKEN = re.compile(r"[A-Za-z0-9_\-.+/=:~]{20,}")
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_\-=])[A-Za-z0-9+/_\-]{16,}={0,2}(?![A-Za-z0-9+/_\-=])")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s<>\"'`]+")


def _generic_candidate(token: str, settings: GenericSettings) -> bool:
    token = token.strip("-_/")
    if len(token) < settings.min_length:
        return False
    if _HEX.fullmatch(token) or _UUID.search(token):
        return False  # hashes, git SHAs, ids: notes are full of them
    if is_placeholder(token):
        return False
    classes = {_class(ch) for ch in token if ch.isalnum()}
    if len(classes) < 3 and not (len(classes) == 2 and any(ch in "+/" for ch in token)):
        return False
    if entropy(token) < settings.min_entropy or switch_ratio(token) < settings.min_switch_ratio:
        return False
    if _decodes_to_text(token):
        return False  # base64 of ordinary text is not a credential
    return True


# --- redaction ----------------------------------------------------------------------


def _overlaps(start: int, end: int, taken: list[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in taken)


def find_secrets(
    text: str, rules: Iterable[SecretRule] | None = None, generic: GenericSettings | None = None, *, use_context: bool = True
) -> list[Finding]:
    """Spans of ``text`` that hold credentials, in text order, non-overlapping: provider
    formats and the rules, then values their context names, then random-looking tokens."""
    if rules is None or generic is None:
        default, default_generic = default_rules()
        rules = default if rules is None else rules
        generic = default_generic if generic is None else generic
    found: list[Finding] = []
    taken: list[tuple[int, int]] = []
    # Provider formats all contain a run of 20+ token characters; most prose has none,
    # so one search spares sixty.
    has_token = _LONG_TOKEN.search(text) is not None
    from cortex.security.gate import word_view

    lowered = word_view(text)
    for rule in rules:
        if not (has_token or rule.always):
            continue
        # The rule's words (its provider's prefix, a key's name): a text with none of
        # them cannot match, and most notes hold few, so most rules never run.
        if rule.needles and not any(n in lowered for n in rule.needles):
            continue
        for m in rule.regex.finditer(text):
            start, end = m.span(rule.group)
            if start < 0 or end <= start:
                continue
            value = m.group(rule.group)
            if is_placeholder(value) and rule.provider != "private_key":
                continue
            if rule.needs_random and (not looks_random(value, min_entropy=2.5, min_switch_ratio=0.15)
                                      or identifier_like(value)):
                continue
            if rule.needs_shape and not looks_chosen(value):
                continue
            if _overlaps(start, end, taken):
                continue
            taken.append((start, end))
            found.append(Finding(start, end, rule.provider, rule.name))
    # Values that what surrounds them names as credentials (cortex/security/context.py).
    if use_context:
        from cortex.security import context

        for start, end, rule in context.find(text, default_context()):
            if not _overlaps(start, end, taken):
                taken.append((start, end))
                found.append(Finding(start, end, "generic", rule))
    # The generic pass skips URLs (their paths are long and mixed-case) unless a rule
    # already found a password inside one, and encoded content (cortex/security/
    # encoded.py): an Obsidian drawing, an inline image, an SSH public key.
    url_spans = [m.span() for m in _URL.finditer(text)]
    blocks: list[tuple[int, int]] | None = None  # found for the first token that needs them
    for m in _TOKEN.finditer(text):
        start, end = m.span()
        token = m.group(0)
        if len(token) < generic.min_length or _overlaps(start, end, taken) or _overlaps(start, end, url_spans):
            continue
        if encoded.private_key(token):  # before "decodes to text": base64 of a PEM block is text
            blocks = encoded.blocks(text) if blocks is None else blocks
            start, end = next(((s, e) for s, e in blocks if s <= start and end <= e), (start, end))
            if not _overlaps(start, end, taken):
                taken.append((start, end))
                found.append(Finding(start, end, "private_key", "encoded-private-key"))
            continue
        blocks = encoded.blocks(text) if blocks is None else blocks
        if _overlaps(start, end, blocks) or encoded.content(token):
            continue
        if (_generic_candidate(token, generic) and not _public_or_path(text, start, end)
                and not identifier_like(token)):
            taken.append((start, end))
            found.append(Finding(start, end, "generic", "high-entropy"))
    found.sort(key=lambda f: f.start)
    return found


# Every rule that runs without a long token names one of these words (a test holds the
# rules to it), and the context pass needs one of its own words, "://" or a Secret's
# "kind", so a text with none of them cannot hold a credential cortex would find.
_RULE_WORDS = ("-----begin", "://", "pass", "pwd", "key", "authori", "secret", "token", "credential", "pin")


@lru_cache(maxsize=1)
def _gate_words() -> tuple[str, ...]:
    from cortex.security.context import command_words

    w = default_context()
    words = {*_RULE_WORDS, *w.stems, *w.password_stems, *(p.split()[-1] for p in w.prose), *command_words(w)}
    # a word containing another is implied by it ("apikey" by "key")
    return tuple(sorted(x for x in words if not any(y != x and y in x for y in words)))


def might_hold(text: str) -> bool:
    """Cheap and sound: False only for text in which ``redact`` would find nothing."""
    if _LONG_TOKEN.search(text) is not None:
        return True
    low = text.lower()
    return any(word in low for word in _gate_words())


# Verdicts of the shipped rules on texts seen lately. One run meets each text several
# times (the security stage, the title, the commit message, the buffer's archive scrub);
# the rules are fixed for the process, so the verdict is too. Bounded in entries and in
# the size of a text kept.
_SEEN: dict[str, tuple[str, tuple[str, ...]]] = {}
_SEEN_MAX = 50_000
_SEEN_TEXT_MAX = 16_384


def redact(text: str, rules: Iterable[SecretRule] | None = None) -> tuple[str, tuple[str, ...]]:
    """Replace each credential with ``[REDACTED]``; return the text and one provider
    name per credential."""
    if rules is None:
        seen = _SEEN.get(text)
        if seen is not None:
            return seen
        if not might_hold(text):  # most texts: no rule could match
            return text, ()
    findings = find_secrets(text, rules)
    if not findings:
        result: tuple[str, tuple[str, ...]] = (text, ())
    else:
        parts, last = [], 0
        for f in findings:
            parts.append(text[last : f.start])
            parts.append(REDACTED)
            last = f.end
        parts.append(text[last:])
        result = ("".join(parts), tuple(f.provider for f in findings))
    if rules is None and len(text) <= _SEEN_TEXT_MAX:
        if len(_SEEN) >= _SEEN_MAX:
            _SEEN.clear()
        _SEEN[text] = result
    return result


def scrub_generated(value):
    """What cortex writes of its own (a title, an alias, a commit message, a brief),
    each string in it redacted: derived from redacted text, a cut or a join could still
    leave a credential another scan would see whole."""
    if isinstance(value, str):
        return redact(value)[0]
    if isinstance(value, list):
        return [scrub_generated(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_generated(v) for v in value)
    if isinstance(value, dict):  # its keys too: a note's frontmatter names its own keys
        return {scrub_generated(k): scrub_generated(v) for k, v in value.items()}
    return value


def carries_secret(text: str) -> bool:
    """Whether ``text`` holds a credential as written or lowercased (a tag is lowercased
    in the note, and a lowercased key is still a key)."""
    return bool(redact(text)[1] or redact(text.lower())[1])


# A valid timestamp or session id, as they appear in a buffer line: the cheap gate looks
# past them (both would otherwise pass for long tokens on every line).
_PLAIN_FIELDS = (
    r'"timestamp"\s*:\s*"\d{4}-\d{2}-\d{2}[T ][\d:.]+(?:[Zz]|[+-]\d{2}:?\d{2})?"'
    r'|"session_id"\s*:\s*"(?:cli|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"'
)


class _Pairs(list):
    """A JSON object as written: each (key, value), a key given twice kept twice (a dict
    keeps the last, and a credential in the value it drops was never looked at)."""


def scrub_json_line(raw: bytes) -> bytes:
    """A JSON line with every string's credentials redacted, keys and the values of a key
    given twice included, and every tag that carries one left out (a tag cannot hold
    "[REDACTED]"); a line that is not JSON is redacted as text. A line with nothing to
    redact comes back as it was, byte for byte."""
    import json

    text = raw.decode("utf-8", errors="replace")
    if not might_hold(_rx(_PLAIN_FIELDS).sub("", text)):
        return raw
    found = False

    def clean(value, key=None):
        nonlocal found
        if isinstance(value, str):
            redacted, kinds = redact(value)
            found = found or bool(kinds)
            return redacted
        if isinstance(value, _Pairs):  # before list: it is one
            return _Pairs((clean(k), clean(v, k)) for k, v in value)
        if isinstance(value, list):
            if key == "tags":
                kept = [v for v in value if not (isinstance(v, str) and carries_secret(v))]
                found = found or len(kept) != len(value)
                value = kept
            return [clean(v) for v in value]
        return value

    def dump(value) -> str:
        if isinstance(value, _Pairs):
            return "{" + ", ".join(f"{dump(k)}: {dump(v)}" for k, v in value) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(map(dump, value)) + "]"
        return json.dumps(value, ensure_ascii=False)

    try:
        scrubbed = clean(json.loads(text, object_pairs_hook=_Pairs))
        if not found:
            return raw
        # A lone surrogate ("\ud800" in the line) is written back as the same JSON escape.
        out = dump(scrubbed)
    except (ValueError, RecursionError):  # not JSON, or nested past the stack (the reader's, or this walk's)
        return redact(text)[0].encode("utf-8")
    return out.encode("utf-8", "backslashreplace") + (b"\n" if raw.endswith(b"\n") else b"")
