"""Injection patterns compiled and tried only when they could match: the pattern layer of
``Scanner`` (``cortex run``, the git hook, the MCP server).

Why: compiling the ~60 shipped injection patterns costs ~70 ms, and working out their
words ~35 ms more, in every process that scans (a quarter of the hook's budget for one
note, a tenth of a 1,000-line run), and almost every text matches none of them. Each
pattern has words any match must contain (``ignore-previous-instructions`` cannot match
a text holding none of "ignore", "disregard", "forget", ...). Those words are worked out
once from the parsed pattern and cached in ``pattern-words.json`` (keyed by the
pattern file, the vault's extra patterns and the Python version); a scan then
compiles just the patterns whose words occur in the text, and runs the scanner's own
``match_patterns`` over them, so the first pattern that matches is the one the full
scan would report.

The words are sound, not clever: a run of literal characters in a sequence, a repeated
item that must occur once, a group, or an alternation whose every branch needs a word;
anything else (classes, lookarounds) is taken to need nothing, and a pattern needing
nothing is always compiled. Case: the patterns ignore case, and ``re`` then also lets
``i`` match ``ı`` and ``İ``, ``s`` match ``ſ``, ``k`` match ``K``; the text is folded
the same way before looking.

The cache lies where the caller says, which must be a place no other machine can write
(the vault's git directory, ``layout.private_cache_dir``): its key is a hash of public
inputs, so a copy handed over (a teammate's force-added ``.cortex/pattern-words.json``,
which a pull writes over the ignored file) could say no pattern needs compiling.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Callable, Sequence

from cortex.security import injection, normalise

# Characters `re` matches to an ASCII letter under IGNORECASE that str.lower() does
# not turn into it (a test recomputes this over every code point).
FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def word_view(text: str) -> str:
    """``text`` as a pattern's words are looked for in it: lowercase, and folded as ``re``
    matches under IGNORECASE (``ſ`` is an s, ``ı`` an i), so no match is ever missed."""
    return text.translate(FOLD).lower()
CACHE_VERSION = 1


def _sre():
    """The stdlib's own regex parser (what re.compile reads) and its opcodes."""
    try:
        from re import _constants, _parser  # Python 3.11+
    except ImportError:  # Python 3.10
        import sre_constants as _constants
        import sre_parse as _parser
    return _parser, _constants


def needles(pattern: str, flags: int) -> list[str] | None:
    """Lowercase strings one of which every match contains, or None (no such words)."""
    parser, _ = _sre()
    best = _sequence(list(parser.parse(pattern, flags)))
    return sorted(best) if best else None


def _sequence(items: list) -> set[str] | None:
    _, c = _sre()
    candidates: list[set[str]] = []
    run: list[str] = []

    def close() -> None:
        if run:
            candidates.append({"".join(run).lower()})
            run.clear()

    for op, av in items:
        if op is c.LITERAL and av < 128:
            run.append(chr(av))
            continue
        close()
        if op is c.SUBPATTERN:
            sub = _sequence(list(av[-1]))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)) and av[0] >= 1:
            sub = _sequence(list(av[2]))
        elif op is c.BRANCH:
            alternatives = [_sequence(list(branch)) for branch in av[1]]
            sub = set().union(*alternatives) if all(alternatives) else None
        elif op is getattr(c, "ATOMIC_GROUP", None):
            sub = _sequence(list(av))
        else:
            sub = None
        if sub:
            candidates.append(sub)
    close()
    if not candidates:
        return None
    return max(candidates, key=lambda words: min(len(w) for w in words))


class PatternGate:
    """``check(text) -> Verdict | None``, the pattern layer of ``Scanner.scan``."""

    def __init__(self, cache_dir: Path | None, extra_patterns: Sequence = (),
                 save: Callable[[Path, dict], None] | None = None) -> None:
        """``save(path, obj)`` keeps the worked-out words in ``cache_dir`` for the next
        process (the caller owns how the vault's caches are written); without a cache
        they are worked out here."""
        source = (injection.DATA_DIR / "injection_patterns.yml").read_bytes()
        key = hashlib.sha256(
            source + repr(list(extra_patterns)).encode() + f"|{sys.version_info[:2]}|{CACHE_VERSION}".encode()
        ).hexdigest()
        cache_path = cache_dir / "pattern-words.json" if cache_dir is not None else None
        entries = self._load(cache_path, key) if cache_path is not None else None
        if entries is None:
            compiled = injection.default_patterns() + injection.compile_patterns(extra_patterns)
            entries = [[p.name, p.regex.pattern, p.regex.flags, needles(p.regex.pattern, p.regex.flags)] for p in compiled]
            self._compiled = {i: p for i, p in enumerate(compiled)}
            if save is not None and cache_path is not None:
                save(cache_path, {"key": key, "patterns": entries})
        else:
            self._compiled = {}
        self._entries = entries
        self._words = [frozenset(words) if words else None for _, _, _, words in entries]
        self._vocabulary = sorted({w for words in self._words for w in words or ()})

    @staticmethod
    def _load(path: Path, key: str) -> list | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data.get("patterns") if isinstance(data, dict) and data.get("key") == key else None

    def _pattern(self, i: int):
        if i not in self._compiled:
            name, pattern, flags, _ = self._entries[i]
            self._compiled[i] = injection.Pattern(name, re.compile(pattern, flags))
        return self._compiled[i]

    def check(self, text: str):
        if not text.strip():
            return None
        return self.check_views(text, normalise.views(text))

    def check_views(self, text: str, seen: list[str]):
        """``check`` over views of ``text`` already made (the Scanner makes them once for
        its layers)."""
        # the very text match_patterns searches: each view with its spaces collapsed
        flat = injection._SPACES
        folded = "\n".join(word_view(flat.sub(" ", v)) for v in seen)
        present = {w for w in self._vocabulary if w in folded}  # each word looked for once
        chosen = [self._pattern(i) for i, words in enumerate(self._words) if words is None or not words.isdisjoint(present)]
        return injection.match_patterns(text, chosen, seen)
