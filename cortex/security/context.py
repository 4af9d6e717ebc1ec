"""Credentials found by what surrounds them rather than by a provider's format.

A value is a credential when something near it says so: a name it is assigned to
(``NPM_TOKEN=…``, ``"apiKey": "…"``, ``export X_SECRET=…``, ``set -x X_TOKEN …``), a
credential word in a sentence ("the Vercel credential for the side project is …", "her
Datadog access token …", "stored as …"), a webhook URL or a credential-named query
parameter, or the ``data:`` of a Kubernetes ``Secret``. The words are data
(``secret_rules.yml``, section ``context``).

Context alone is not enough: the value must also read as a credential (random-looking,
a long hex run, or a chosen password after a password word), so "the token hash is
<sha256>", "TOKENIZER_VERSION=2.14.1", "SSH_KEY_PATH=/home/…" and "the access token
expired" stay as written. Names whose parts say the value is something else (``id``,
``hash``, ``path``, ``ttl``, ``version``…) are no credential names.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote

from cortex.security import secrets as S


@dataclass(frozen=True)
class ContextWords:
    stems: frozenset[str]  # name parts that make a name a credential's
    password_stems: frozenset[str]  # ... a chosen password's (any shape with a digit/symbol)
    not_secret: frozenset[str]  # name parts that say the value is something else
    prose: tuple[str, ...]  # credential words in sentences ("access token", "credential")
    query: frozenset[str]  # URL query parameters that carry credentials
    commands: tuple[tuple[str, str, str], ...] = ()  # (command, flag, form): a password on a command line


def words_from(data: dict) -> ContextWords:
    c = data.get("context") or {}
    return ContextWords(
        stems=frozenset(c.get("name_parts", ())),
        password_stems=frozenset(c.get("password_parts", ())),
        not_secret=frozenset(c.get("not_secret_parts", ())),
        prose=tuple(c.get("prose_words", ())),
        query=frozenset(c.get("query_parameters", ())),
        commands=tuple((f["command"], f["flag"], f["form"]) for f in c.get("command_flags", ())),
    )


def command_words(w: ContextWords) -> tuple[str, ...]:
    """A word each command's every match holds (the last of its name: "login" for
    `docker login`), for the cheap gate (``secrets.might_hold``)."""
    return tuple(re.split(r"[^\w-]+", alt.rstrip(")"))[-1].lower() for command, _, _ in w.commands
                 for alt in command.split("|"))


_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def name_parts(name: str) -> list[str]:
    """``AWS_SECRET_ACCESS_KEY`` -> aws, secret, access, key; ``apiKey`` -> api, key."""
    return [p.lower() for p in _PART.findall(name)]


def credential_name(name: str, w: ContextWords) -> str | None:
    """"password", "credential" or None: what a name says its value is."""
    parts = name_parts(name)
    if not parts or any(p in w.not_secret for p in parts):
        return None
    joined = "".join(parts)
    if any(p in w.password_stems for p in parts):
        return "password"
    if any(p in w.stems for p in parts) or joined in w.stems:
        return "credential"
    return None


# --- what a credential value looks like ------------------------------------------------

_VERSION = re.compile(r"v?\d+(?:\.\d+)+(?:[-+.][\w.]+)?", re.IGNORECASE)
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", re.IGNORECASE)
_HEXRUN = re.compile(r"[0-9a-fA-F]{16,}")
_FINGERPRINT = re.compile(r"(?:SHA\d*|MD5|sha\d+-)[:\-]", re.IGNORECASE)
_PATHLIKE = re.compile(r"(?:~|\.{1,2})?/?(?:[\w.\-@]+/)+[\w.\-@]*")


def _looks_path(value: str) -> bool:
    """A file path or a path-like name: no segment of it reads as a generated key."""
    if not _PATHLIKE.fullmatch(value):
        return False
    return not any(len(seg) >= 16 and S.looks_random(seg) and not S.identifier_like(seg) for seg in value.split("/"))


def credential_value(value: str, kind: str) -> bool:
    if len(value) < (6 if kind == "password" else 12) or S.is_placeholder(value):
        return False
    if S._UUID.search(value) or _VERSION.fullmatch(value) or _EMAIL.fullmatch(value) or "://" in value:
        return False
    if value.isdigit() or value.startswith(("$", "%")) or _FINGERPRINT.match(value) or _looks_path(value):
        return False
    if kind == "password" and S.looks_chosen(value) and not S.identifier_like(value):
        return True
    if _HEXRUN.fullmatch(value):
        return True
    return S.looks_random(value, min_entropy=2.5, min_switch_ratio=0.15) and not S.identifier_like(value)


# --- where a value stands ---------------------------------------------------------------

# Each run of value characters starting after a space, quote, bracket, "=" or ":" (so
# "NPM_TOKEN=<v>" offers both the whole and <v>).
_VALUE = re.compile(r"(?:^|(?<=[\s\"'`,;<>()\[\]{}=:]))(?=([^\s\"'`,;<>()\[\]{}=:][^\s\"'`,;<>()\[\]{}]{5,}))")
_CONNECT = r"(?:is|was|are|were|reads|read|as|to|now|becomes|equals|=|:)"
_IDENT = r"[A-Za-z_][A-Za-z0-9_.\-]*"


@lru_cache(maxsize=4)
def _left_patterns(prose: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    words = "|".join(sorted((re.escape(p).replace(r"\ ", r"[\s_\-]?") for p in prose), key=len, reverse=True))
    # NAME = value, NAME: value, "NAME": "value", NAME := value, export NAME=value,
    # set -x NAME value, setenv NAME value, key="NAME" value="value"
    assigned = re.compile(
        rf"(?:\bexport\s+)?[\"']?({_IDENT})[\"']?(?:\s*(?::=|=>|=|:)\s*|\s+value\s*=\s*)[\"'`]?$"
        rf"|(?:\bset\s+-x|\bsetenv)\s+({_IDENT})\s+[\"']?$"
    )
    # a credential word, then at most six words and a connector ("is", "as", ":")
    stated = re.compile(
        rf"(?<![A-Za-z])({words})s?(?![A-Za-z])((?:\s+[\w.'\-]+){{0,6}}?)\s*(?:\s{_CONNECT}\s*)?(?:\s+now)?\s*:?\s*[\"'`(]?$",
        re.IGNORECASE,
    )
    # the word right before the value ("her Datadog access token <value>")
    adjacent = re.compile(rf"(?<![A-Za-z])({words})s?\s*[\"'`(:]?\s*$", re.IGNORECASE)
    return assigned, stated, adjacent


def _left_kind(left: str, w: ContextWords) -> str | None:
    assigned, stated, adjacent = _left_patterns(w.prose)
    m = assigned.search(left)
    if m:
        kind = credential_name(m.group(1) or m.group(2), w)
        if kind:
            return kind
    m = adjacent.search(left) or stated.search(left)
    if m is None:
        return None
    between = (m.group(2) or "") if m.re.groups >= 2 else ""
    filler = name_parts(between)
    if any(p in w.not_secret for p in filler) or "." in between.rstrip("."):
        return None
    if m.re is stated and filler and not re.search(rf"\s{_CONNECT}\s*(?:now)?\s*:?\s*[\"'`(]?$", left):
        return None  # words after the credential word but nothing that joins them to the value
    word = m.group(1).lower()
    return "password" if any(p in w.password_stems for p in name_parts(word)) else "credential"


def _k8s_spans(text: str) -> list[tuple[int, int]]:
    """Values under ``data:``/``stringData:`` in a text that declares ``kind: Secret``."""
    if not re.search(r"(?m)^\s*kind:\s*[\"']?Secret\b", text):
        return []
    spans = []
    for block in re.finditer(r"(?m)^([ \t]*)(data|stringData):[ \t]*\n((?:\1[ \t]+\S.*(?:\n|$))+)", text):
        for item in re.finditer(r"(?m)^[ \t]+[\w.\-]+:[ \t]*[\"']?([^\s\"']{4,})", block.group(3)):
            value = item.group(1)
            if S.is_placeholder(value):
                continue
            if block.group(2) == "data" and not _is_base64(value):
                continue
            start = block.start(3) + item.start(1)
            spans.append((start, start + len(value)))
    return spans


def _is_base64(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s<>\"'`]+")


def _url_spans(text: str, w: ContextWords) -> list[tuple[int, int]]:
    spans = []
    for m in _URL.finditer(text):
        url = m.group(0).rstrip(".,)")
        base = m.start()
        path_start = url.find("/", url.find("://") + 3)
        if path_start < 0:
            continue
        query_at = url.find("?", path_start)
        path = url[path_start : query_at if query_at >= 0 else len(url)]
        host = url[url.find("://") + 3 : path_start]
        if "hook" in host.lower() or "hook" in path.lower():
            pos = path_start
            for seg in path.split("/"):
                if len(seg) >= 16 and (_HEXRUN.fullmatch(seg) or S.looks_random(seg, min_entropy=2.5, min_switch_ratio=0.15)):
                    spans.append((base + pos, base + pos + len(seg)))
                pos += len(seg) + 1
        if query_at >= 0:
            for q in re.finditer(r"[?&]([\w.\-]+)=([^&#\s]+)", url[query_at:]):
                name, value = q.group(1), q.group(2)
                if (name.lower() in w.query or credential_name(name, w)) and credential_value(unquote(value), "credential"):
                    start = base + query_at + q.start(2)
                    spans.append((start, start + len(value)))
    return spans


_FORM = {
    "pair": r"[ =]?[\"']?[^\s:\"'$]+:([^\s\"'@]+)",  # -u user:PASS (not user:PASS@host, a URL's)
    "attached": r"([^\s\"']+)",  # -pPASS
    "value": r"(?:\s+|=)[\"']?([^\s\"']+)",  # -p PASS, --password=PASS
}


@lru_cache(maxsize=4)
def _command_pattern(commands: tuple[tuple[str, str, str], ...]) -> re.Pattern | None:
    branches = [rf"(?<![\w./-])(?:{command})(?![\w-])[^\n|;&]{{0,200}}?\s(?:{flag}){_FORM[form]}"
                for command, flag, form in commands]
    return re.compile("|".join(f"(?:{b})" for b in branches), re.IGNORECASE) if branches else None


def _command_spans(text: str, w: ContextWords) -> list[tuple[int, int]]:
    """Passwords given on a command line by the command's own flag (``command_flags``)."""
    rx = _command_pattern(w.commands)
    spans = []
    for m in rx.finditer(text) if rx is not None else ():
        group = next(g for g in range(1, (rx.groups or 0) + 1) if m.group(g) is not None)
        value = m.group(group)
        if credential_value(value, "password"):
            spans.append(m.span(group))
    return spans


@lru_cache(maxsize=4)
def _any_word(w: ContextWords) -> re.Pattern:
    words = {*w.stems, *w.password_stems, *(p.split()[-1] for p in w.prose)}
    return re.compile("|".join(sorted(map(re.escape, words), key=len, reverse=True)))


def find(text: str, w: ContextWords) -> list[tuple[int, int, str]]:
    """(start, end, rule) of each credential that context reveals, in text order."""
    found = [(s, e, "k8s-secret-data") for s, e in _k8s_spans(text)] if "kind" in text else []
    found += [(s, e, "url-credential") for s, e in _url_spans(text, w)] if "://" in text else []
    found += [(s, e, "command-password") for s, e in _command_spans(text, w)] if " -" in text else []
    # Only values within reach of a credential word are judged (most texts have none).
    low = text.lower()
    if len(low) != len(text):  # a character whose lowercase is longer: positions would shift
        low = "".join(ch.lower()[0] for ch in text)
    ends = [m.end() for m in _any_word(w).finditer(low)]
    if not ends:
        return sorted(found)
    for m in _VALUE.finditer(text, ends[0]):
        start = m.start()
        i = bisect.bisect_right(ends, start)
        if i == 0 or start - ends[i - 1] > 100:
            continue
        value = m.group(1).rstrip(".:?")  # a password may end with "!" ("Summer2024!")
        if value.isalpha() and value[1:].islower():
            continue  # a word
        if not (credential_value(value, "password") or credential_value(value, "credential")):
            continue
        kind = _left_kind(text[max(0, start - 100) : start], w)
        if kind and credential_value(value, kind):
            found.append((start, start + len(value), "stated-" + kind))
    return sorted(found)
