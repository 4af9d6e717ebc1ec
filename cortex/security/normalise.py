"""Text normalisation for the security layers.

Two outputs from one input:

* :func:`storable` — what may be written to a note: the original text with every
  hidden or invisible character removed (zero-width, bidi controls, the U+E0000 tag
  block, variation-selector smuggling). Nothing else is changed, so a person reads
  exactly what the agent wrote.
* :func:`views` — the texts the scanners look at: the text NFKC-normalised with
  homoglyphs folded, plus every payload that was hidden or encoded in it (tag
  characters, variation selectors, invisible-operator bit streams, base64 / base32 /
  hex runs, rot13). An attack that survives only in an encoding is still scanned.

Pure functions, standard library only.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

# Characters that render as nothing. Category Cf covers zero-width spaces and joiners,
# bidi overrides, the word joiner and invisible operators, soft hyphen and the tag
# block; the variation selectors are Mn and listed by range.
_VARIATION = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
_TAGS = re.compile("[\U000e0000-\U000e007f]")
_EXTRA_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0")


def _is_hidden(ch: str) -> bool:
    if ch in "\n\t\r":
        return False
    cp = ord(ch)
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF:
        return True
    if ch in _EXTRA_INVISIBLE:
        return True
    cat = unicodedata.category(ch)
    return cat == "Cf" or (cat == "Cc")


def strip_hidden(text: str) -> str:
    """Remove every character that renders as nothing (keeps newlines and tabs)."""
    if text.isascii():
        # Fast path: only C0 controls can hide in ASCII.
        return "".join(ch for ch in text if ch >= " " or ch in "\n\t\r") if _has_c0(text) else text
    if _MAYBE_HIDDEN.search(text) is None:
        return text
    return "".join(ch for ch in text if not _is_hidden(ch))


_C0 = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Every code point that can render as nothing is one of these; a text without any is
# returned as it is, without the per-character walk.
_MAYBE_HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2]"
)


def _has_c0(text: str) -> bool:
    return _C0.search(text) is not None


def storable(text: str) -> str:
    """The text that may reach a note: the original, hidden characters removed."""
    return strip_hidden(text)


def has_hidden(text: str) -> bool:
    """True when the text carries characters a reader cannot see."""
    return strip_hidden(text) != text


# --- homoglyphs --------------------------------------------------------------------
# Cyrillic, Greek and other letters that look like Latin ones (the confusables that
# real smuggling uses; Unicode's confusables.txt is much larger, these cover the
# letters that pass for ASCII in running text).
_CONFUSABLES = {
    # Cyrillic lower
    "а": "a", "в": "b", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j",
    "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y",
    "х": "x", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ү": "y", "ɡ": "g", "ӏ": "l",
    # Cyrillic upper
    "А": "A", "В": "B", "Е": "E", "Ё": "E", "К": "K", "М": "M", "Н": "H", "О": "O",
    "Р": "P", "С": "C", "Т": "T", "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S",
    "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W", "Ү": "Y", "Ӏ": "I",
    # Greek
    "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
    "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Latin look-alikes outside ASCII
    "ı": "i", "ȷ": "j", "ℓ": "l", "ꞵ": "b", "ɑ": "a", "ǀ": "l", "ⅰ": "i",
}
_FOLD_TABLE = str.maketrans(_CONFUSABLES)
_WORD = re.compile(r"\w+")


def fold_homoglyphs(text: str) -> str:
    """Map look-alike letters to Latin in the words where they pass for Latin.

    A word is folded when every letter of it outside ASCII is a look-alike: a word mixing
    Latin and look-alike letters ("іgnore"), or one made only of look-alikes ("аѕ") where
    the text around it is mostly Latin. A word with any other letter of its own script
    is a real word of that language and is left alone: "Олег" in an English sentence
    (л and г pass for nothing), "Ελένη", Russian or Greek prose. Folding those turned a
    name into noise, which the classifier then read as an attack.
    """
    if text.isascii():
        return text
    latin = sum(1 for ch in text if "a" <= ch.lower() <= "z")
    other = sum(1 for ch in text if ch in _CONFUSABLES or (ch.isalpha() and ord(ch) > 0x24F))
    mostly_latin = latin >= other

    def fold_word(m: re.Match) -> str:
        w = m.group(0)
        if w.isascii() or not all(ch.isascii() or ch in _CONFUSABLES for ch in w):
            return w
        if mostly_latin or any("a" <= ch.lower() <= "z" for ch in w):
            return w.translate(_FOLD_TABLE)
        return w

    return _WORD.sub(fold_word, text)


def canonical(text: str) -> str:
    """Hidden characters removed, NFKC, homoglyphs folded: the main scanning view."""
    return fold_homoglyphs(unicodedata.normalize("NFKC", strip_hidden(text)))


# --- hidden payloads ----------------------------------------------------------------


def _decode_tags(text: str) -> str:
    # Tag characters mirror ASCII at U+E0000 + code point.
    out = [chr(ord(ch) - 0xE0000) for ch in text if 0xE0020 <= ord(ch) <= 0xE007E]
    return "".join(out)


def _decode_variation_selectors(text: str) -> str:
    cps = [ord(ch) for ch in text if 0xFE00 <= ord(ch) <= 0xFE0F or 0xE0100 <= ord(ch) <= 0xE01EF]
    if len(cps) < 4:
        return ""
    # Two byte mappings are in use: the usual one (bytes 0-15 at U+FE00, 16-255 at
    # U+E0100) and a direct one (byte b at U+E0100 + b). Keep whichever reads as text.
    usual = bytes((cp - 0xFE00) if cp < 0xE0000 else (cp - 0xE0100 + 16) for cp in cps if cp < 0xE0000 or cp - 0xE0100 + 16 < 256)
    direct = bytes(cp - 0xE0100 for cp in cps if cp >= 0xE0100)
    best = ""
    for raw in (usual, direct):
        s = raw.decode("utf-8", errors="replace")
        if _readable(s) and (not best or _letter_share(s) > _letter_share(best)):
            best = s
    return best


_BIT_CHARS = {"\u2062": "0", "\u2064": "1"}


def _decode_invisible_bits(text: str) -> str:
    # Invisible times / invisible plus as 0/1 bits, zero-width space between words,
    # 7 or 8 bits a character.
    stream = "".join(ch for ch in text if ch in "\u2062\u2064\u200b")
    if stream.count("\u2062") + stream.count("\u2064") < 14:
        return ""
    best = ""
    for width in (7, 8):
        words = []
        for chunk in stream.split("\u200b"):
            bits = "".join(_BIT_CHARS[c] for c in chunk)
            words.append("".join(chr(int(bits[i : i + width], 2)) for i in range(0, len(bits) - width + 1, width)))
        s = " ".join(words)
        if _readable(s) and _letter_share(s) > _letter_share(best):
            best = s
    return best


# --- encoded runs -------------------------------------------------------------------

_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
_B32_RUN = re.compile(r"(?<![A-Z2-7])[A-Z2-7]{16,}=*")
_HEX_RUN = re.compile(r"(?<!\w)(?:[0-9A-Fa-f]{2}[ :]?){8,}(?![0-9A-Fa-f])")


def _letter_share(s: str) -> float:
    if not s:
        return 0.0
    return sum(ch.isalpha() or ch == " " for ch in s) / len(s)


def _readable(s: str) -> bool:
    """Decoded bytes that read as words, not as binary or as another code."""
    if len(s) < 6 or "\ufffd" in s:
        return False
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in s) / len(s)
    return printable > 0.95 and _letter_share(s) > 0.7 and " " in s.strip()


def _try_b64(run: str) -> str:
    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return ""
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        s = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return ""
    return s if _readable(s) else ""


def _try_b32(run: str) -> str:
    body = run.rstrip("=")
    padded = body + "=" * (-len(body) % 8)
    try:
        s = base64.b32decode(padded).decode("utf-8")
    except (binascii.Error, ValueError):
        return ""
    return s if _readable(s) else ""


def _try_hex(run: str) -> str:
    digits = re.sub(r"[ :]", "", run)
    if len(digits) % 2:
        return ""
    try:
        s = bytes.fromhex(digits).decode("utf-8")
    except ValueError:
        return ""
    return s if _readable(s) else ""


# Frequent English words: a rot13 view is kept only when it reads as English much
# better than the original does.
_COMMON = frozenset(
    """the be to of and a in that have i it for not on with he as you do at this but his
    by from they we say her she or an will my one all would there their what so up out if
    about who get which go me when make can like time no just him know take people into
    year your good some could them see other than then now look only come its over think
    also back after use two how our work first well way even new want because any these
    give day most us is are was were been has had did said print ignore previous
    instructions instruction system prompt tell reply answer following text above below
    say write output repeat forget rules""".split()
)


_LOWER_WORDS = re.compile(r"[a-z]+")
_WORDS = re.compile(r"[A-Za-z]+")
# What the "rot13" codec does (encodings/rot_13.py), without the codec lookup of each call.
_ROT13 = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                       "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm")


def _english_hits(s: str) -> int:
    return sum(1 for w in _LOWER_WORDS.findall(s.lower()) if w in _COMMON)


def _rot13_view(text: str) -> str:
    # Line by line: an encoded payload usually follows a plain-English preamble.
    found = []
    for line in text.splitlines():
        words = _WORDS.findall(line)
        if len(words) < 3:
            continue
        rotated = line.translate(_ROT13)
        after = _english_hits(rotated)
        # The rotated line must read as English the way prose does (a quarter of its
        # words common) and clearly better than the original (counted only then: most
        # lines are plain text, whose rotation reads as nothing).
        if after >= 2 and after >= 0.25 * len(words) and after > 2 * _english_hits(line):
            found.append(rotated)
    return "\n".join(found)


def decoded_payloads(text: str) -> list[str]:
    """Every payload hidden or encoded in ``text`` that reads as words."""
    out: list[str] = []
    if not text.isascii():
        for decoder in (_decode_tags, _decode_variation_selectors, _decode_invisible_bits):
            s = decoder(text)
            if s and len(s.strip()) >= 4:
                out.append(s)
    visible = strip_hidden(text)
    if len(visible) >= 16:
        for m in _B64_RUN.finditer(visible):
            s = _try_b64(m.group(0))
            if s:
                out.append(s)
        for m in _B32_RUN.finditer(visible):
            s = _try_b32(m.group(0))
            if s:
                out.append(s)
        for m in _HEX_RUN.finditer(visible):
            s = _try_hex(m.group(0))
            if s:
                out.append(s)
    rot = _rot13_view(visible)
    if rot:
        out.append(rot)
    spaced = _unspaced_view(visible)
    if spaced:
        out.append(spaced)
    return out


# Letters written one by one ("i g n o r e   a l l") slip past every word a pattern
# names. Where a text has a run of at least six single letters or digits, each followed
# by one space, every such run (from two letters) is read as a word; two or more spaces
# (or punctuation) end one.
_SPACED_LONG = re.compile(r"(?<![^\W_])(?:[^\W_] ){5,}[^\W_](?![^\W_])")
_SPACED_RUN = re.compile(r"(?<![^\W_])(?:[^\W_] )+[^\W_](?![^\W_])")


def _unspaced_view(text: str) -> str:
    if not _SPACED_LONG.search(text):
        return ""
    return _SPACED_RUN.sub(lambda m: m.group(0).replace(" ", ""), text)


def views(text: str) -> list[str]:
    """The texts to scan: the canonical text first, then each decoded payload.

    Payloads are decoded once more in case of nesting (base64 inside tag characters).
    """
    main = canonical(text)
    result = [main]
    seen = {main}
    frontier = decoded_payloads(text)
    for depth in range(2):
        nxt: list[str] = []
        for payload in frontier:
            v = canonical(payload)
            if v not in seen:
                seen.add(v)
                result.append(v)
                if depth == 0:
                    nxt.extend(decoded_payloads(payload))
        frontier = nxt
    return result
