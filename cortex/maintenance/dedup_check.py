"""The lexical check of near-duplicate detection: what a bag-of-tokens embedding cannot see.

Two bodies whose static embeddings are close are still different memories when they
carry other numbers or dates, opposite polarity ("prefers" / "avoids", "still" / "no
longer"), a name one mentions and the other does not (Maya / Jonas), a reversed
comparison ("tabs over spaces" / "spaces over tabs") or an antonym swap (dark / light).
Pure functions of the text; measured by ``bench/bench_dedup_quality.py``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

_TOKEN_RE = re.compile(r"\d+(?:[.,:/-]\d+)*(?:st|nd|rd|th|am|pm|k|m|%)?|[^\W\d_]+(?:['’][^\W\d_]+)?")
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15", "twenty": "20",
    "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "once": "1", "twice": "2", "single": "1",
    "first": "1", "second": "2", "third": "3", "half": "0.5", "double": "2", "dozen": "12",
}
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february",
             "march", "april", "june", "july", "august", "september", "october", "november", "december",
             "morning", "evening", "afternoon", "night", "weekend", "weekly", "daily", "monthly", "nightly", "hourly"}
# "nightly" and "every night" name the same period.
_PERIODS = {"nightly": "night", "daily": "day", "weekly": "week", "monthly": "month", "hourly": "hour",
            "yearly": "year", "annually": "year", "annual": "year"}
_WEEKDAYS |= set(_PERIODS) | set(_PERIODS.values())
# Words that turn a statement around. Their count's parity is the statement's polarity.
_NEGATIVE = {
    "not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot", "can't", "won't",
    "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "shouldn't", "mustn't", "hasn't",
    "haven't", "stop", "stopped", "stops", "avoid", "avoids", "avoided", "hate", "hates", "hated", "dislike",
    "dislikes", "disliked", "against", "refuse", "refuses", "dropped", "drop", "removed", "remove", "forbid",
    "forbidden", "banned", "rejects", "rejected", "reject", "less", "fewer", "worse", "slower", "disabled",
    "disable", "unless", "no longer",
}
_STOP = {
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "at", "by", "is", "are", "was", "be",
    "it", "its", "that", "this", "as", "from", "we", "i", "our", "their", "they", "he", "she", "his", "her",
    "has", "have", "had", "should", "must", "will", "would", "can", "so", "than", "then", "them", "all", "any",
    "every", "each", "there", "which", "who", "what", "when", "always", "just", "only", "very", "also",
}


# Capitalised words that start sentences without naming anything: a capitalised word
# outside this list that the other text lacks is taken for a name (Maya vs Jonas).
_COMMON_STARTS = set("""
a about add after all also always an and any as at avoid back backfill be before bring build but by
caching can check close configure consider cut deploy do document double during each ensure every expand
failing failed feature finish fix follow for from get give go grow have if in invoices invoice keep launch
let logging make members merge migrations mocking move never no not on once one our payments pin plan
please prefer production pull put read reduce remove replace reproduce request resolve retire review run
secrets set ship since small start stop switch take test testing that the their then there these this
those to today try turn two upgrade use we when while with within write writing customer hosting
""".split())
_COMPARATIVES = {"over", "than", "versus", "vs"}
_TO_VERBS = {"be", "have", "get", "keep", "stay", "use", "do", "make", "run", "go"}
_PREFER_MARK = {"prefer"}  # stems: "prefers x to y" is a comparison, "wants x to be" is not
_ANTONYMS = [
    ("dark", "light"), ("long", "short"), ("slow", "fast"), ("slow", "speed"), ("high", "low"),
    ("early", "late"), ("more", "less"), ("increase", "decrease"), ("enable", "disable"), ("allow", "forbid"),
    ("allow", "deny"), ("include", "exclude"), ("before", "after"), ("start", "stop"), ("accept", "reject"),
    ("approve", "reject"), ("good", "bad"), ("like", "dislike"), ("love", "hate"), ("hid", "caught"),
    ("hide", "catch"), ("overkill", "fit"), ("easy", "hard"), ("small", "large"), ("small", "big"),
    ("cheap", "expensive"), ("old", "new"), ("always", "never"), ("win", "lose"), ("success", "failure"),
    ("pass", "fail"), ("on", "off"), ("open", "closed"), ("public", "private"), ("sync", "async"),
    ("online", "offline"), ("manual", "automatic"), ("frontend", "backend"), ("front", "back"),
    ("staging", "production"), ("dev", "prod"), ("development", "production"), ("test", "production"),
    ("read", "write"), ("left", "right"), ("up", "down"), ("upper", "lower"),
    ("min", "max"), ("minimum", "maximum"), ("input", "output"), ("import", "export"), ("upload", "download"),
    ("push", "pull"), ("client", "server"), ("inbound", "outbound"), ("internal", "external"),
    ("first", "last"), ("top", "bottom"), ("true", "false"), ("add", "remove"), ("create", "delete"),
    ("buy", "sell"), ("send", "receive"), ("upstream", "downstream"), ("horizontal", "vertical"),
    ("required", "optional"), ("mandatory", "optional"), ("strict", "lenient"), ("hot", "cold"),
    ("warm", "cold"), ("wide", "narrow"), ("senior", "junior"), ("parent", "child"), ("primary", "secondary"),
    ("primary", "replica"), ("leader", "follower"), ("above", "below"), ("inside", "outside"),
    ("allowlist", "denylist"), ("whitelist", "blacklist"), ("ascending", "descending"), ("asc", "desc"),
    ("north", "south"), ("east", "west"), ("light", "heavy"), ("gain", "loss"), ("profit", "loss"),
    ("positive", "negative"), ("major", "minor"), ("encrypt", "decrypt"), ("compress", "decompress"),
]
# A word and the same word behind one of these is its opposite (safe / unsafe).
_NEGATING_PREFIXES = ("un", "non", "in", "im", "ir", "il", "dis", "de")


def _forms(word: str) -> frozenset[str]:
    """The inflections a plain suffix rule gives (increase: increases, increased,
    increasing), so the antonym list names each word once."""
    stem = word[:-1] if word.endswith("e") else word
    forms = {word, word + "s", word + "es", word + "d", word + "ed", stem + "ed", stem + "ing", word + "ing",
             word + "er", word + "est", word + "ly"}
    if word.endswith("y"):  # deny: denies, denied
        forms |= {word[:-1] + "ies", word[:-1] + "ied"}
    return frozenset(forms)


_ANTONYM_FORMS = [(_forms(x), _forms(y), x, y) for x, y in _ANTONYMS]


def _opposite_words(a: frozenset[str], b: frozenset[str]) -> str | None:
    only_a, only_b = a - b, b - a
    if not only_a or not only_b:
        return None
    for fx, fy, x, y in _ANTONYM_FORMS:
        if (only_a & fx and only_b & fy and not a & fy and not b & fx) or (
            only_a & fy and only_b & fx and not a & fx and not b & fy
        ):
            return f"opposite words ({x} / {y})"
    for first, second in ((only_a, only_b), (only_b, only_a)):
        for word in first:
            for prefix in _NEGATING_PREFIXES:
                if word.startswith(prefix) and len(word) - len(prefix) >= 4 and word[len(prefix):] in second:
                    return f"opposite words ({word[len(prefix):]} / {word})"
    return None


@dataclass(frozen=True)
class Lexical:
    words: frozenset[str]  # content-word stems
    numbers: frozenset[str]  # digits, number words, dates and times, weekdays and months
    polarity: int  # parity of negative words
    names: frozenset[str]  # capitalised words that are not common sentence starts (lowercased)
    order: tuple[tuple[str, str], ...]  # (x, y) of "x over y", "x than y", "prefer x to y"
    raw: frozenset[str]  # every lowercased word
    sequence: tuple[str, ...]  # content-word stems and comparison markers, in order


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=100_000)
def lexical(text: str) -> Lexical:
    text = unicodedata.normalize("NFKC", text).replace("’", "'")
    words, numbers, names, negative = set(), set(), set(), 0
    sequence: list[str] = []  # content words and comparison markers, in order
    prev_end = 0
    for m in _TOKEN_RE.finditer(text):
        token = m.group(0)
        low = token.lower()
        if low.endswith("'s"):
            low, token = low[:-2], token[:-2]
        sentence_start = prev_end == 0 or any(c in ".!?:;\n—(\"" for c in text[prev_end : m.start()])
        prev_end = m.end()
        if sequence and sequence[-1] == "<to" and low in _TO_VERBS:
            sequence.pop()  # "prefers standups to be short" compares nothing
        if token[0].isdigit():
            numbers.add(low.rstrip("%").replace(",", ""))
        elif low in _NUMBER_WORDS:
            numbers.add(_NUMBER_WORDS[low])
        elif low in _WEEKDAYS:
            numbers.add(_PERIODS.get(low, low))
        else:
            if low in _NEGATIVE or low.endswith("n't"):
                negative += 1
            elif low in _COMPARATIVES or low == "to" and any(w in _PREFER_MARK for w in sequence[-3:]):
                sequence.append("<" + low)
            elif low not in _STOP:
                words.add(_stem(low))
                sequence.append(_stem(low))
            # A capitalised word starting a sentence is a name unless it is a common
            # start or a gerund ("Running the script twice is safe").
            common_start = sentence_start and (low in _COMMON_STARTS or low.endswith("ing"))
            if token[0].isupper() and low not in _STOP and not common_start:
                names.add(low)
    order = []
    for k, item in enumerate(sequence):
        if item.startswith("<") and 0 < k < len(sequence) - 1 and not sequence[k + 1].startswith("<"):
            order.append((sequence[k - 1], sequence[k + 1]))
    raw = frozenset(t.lower() for t in _TOKEN_RE.findall(text))
    return Lexical(frozenset(words), frozenset(numbers), negative % 2, frozenset(names), tuple(order), raw, tuple(sequence))


def _mentions(name: str, lex: Lexical, text_lower: str) -> bool:
    return name in text_lower or _stem(name) in lex.words


def lexical_veto(a: Lexical, b: Lexical, a_text: str, b_text: str) -> str | None:
    """Why two similar texts are different memories (None: nothing found)."""
    if a.numbers != b.numbers:
        return "different numbers or dates"
    if a.polarity != b.polarity:
        return "opposite polarity"
    a_low, b_low = a_text.lower(), b_text.lower()
    for name in sorted(a.names):
        if not _mentions(name, b, b_low):
            return f"names differ ({name})"
    for name in sorted(b.names):
        if not _mentions(name, a, a_low):
            return f"names differ ({name})"
    for first, second in ((a, b), (b, a)):
        for x, y in first.order:  # "x over y" against a text with y before x
            if x in second.sequence and y in second.sequence and second.sequence.index(y) < second.sequence.index(x):
                return f"reversed comparison ({x} / {y})"
    return _opposite_words(a.raw, b.raw)


def overlap(a: Lexical, b: Lexical) -> float:
    union = a.words | b.words
    return len(a.words & b.words) / len(union) if union else 1.0


def verdict(cosine: float, a_text: str, b_text: str, threshold: float) -> tuple[bool, str]:
    """(duplicate?, why) for two bodies of the same type."""
    if cosine < threshold:
        return False, f"cosine {cosine:.3f} below {threshold:g}"
    a, b = lexical(a_text), lexical(b_text)
    veto = lexical_veto(a, b, a_text, b_text)
    if veto:
        return False, veto
    return True, "near-duplicate"
