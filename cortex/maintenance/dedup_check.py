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
# Opposites that are two states of one property: a thing is one or the other, so a swap
# is a changed value (``changed_value``).
_STATE_PAIRS = [
    ("dark", "light"), ("long", "short"), ("slow", "fast"), ("high", "low"), ("early", "late"),
    ("increase", "decrease"), ("enable", "disable"), ("allow", "forbid"), ("allow", "deny"),
    ("include", "exclude"), ("accept", "reject"), ("approve", "reject"), ("good", "bad"), ("like", "dislike"),
    ("love", "hate"), ("hid", "caught"), ("hide", "catch"), ("easy", "hard"), ("small", "large"),
    ("small", "big"), ("cheap", "expensive"), ("always", "never"), ("success", "failure"), ("pass", "fail"),
    ("on", "off"), ("open", "closed"), ("public", "private"), ("sync", "async"), ("online", "offline"),
    ("manual", "automatic"), ("true", "false"), ("required", "optional"), ("mandatory", "optional"),
    ("strict", "lenient"), ("hot", "cold"), ("warm", "cold"), ("wide", "narrow"), ("ascending", "descending"),
    ("asc", "desc"),
]
# Opposites that need not exclude each other: roles a thing can play both (imports and
# exports, client and server, minimum and maximum) or words whose sense depends on what
# they qualify (old / new, more / less, before / after). Different memories, but a swap
# is not taken for a correction.
_ROLE_PAIRS = [
    ("slow", "speed"), ("more", "less"), ("before", "after"), ("start", "stop"), ("overkill", "fit"),
    ("old", "new"), ("win", "lose"), ("frontend", "backend"), ("front", "back"), ("staging", "production"),
    ("dev", "prod"), ("development", "production"), ("test", "production"), ("read", "write"),
    ("left", "right"), ("up", "down"), ("upper", "lower"), ("min", "max"), ("minimum", "maximum"),
    ("input", "output"), ("import", "export"), ("upload", "download"), ("push", "pull"), ("client", "server"),
    ("inbound", "outbound"), ("internal", "external"), ("first", "last"), ("top", "bottom"), ("add", "remove"),
    ("create", "delete"), ("buy", "sell"), ("send", "receive"), ("upstream", "downstream"),
    ("horizontal", "vertical"), ("senior", "junior"), ("parent", "child"), ("primary", "secondary"),
    ("primary", "replica"), ("leader", "follower"), ("above", "below"), ("inside", "outside"),
    ("allowlist", "denylist"), ("whitelist", "blacklist"), ("north", "south"), ("east", "west"),
    ("light", "heavy"), ("gain", "loss"), ("profit", "loss"), ("positive", "negative"), ("major", "minor"),
    ("encrypt", "decrypt"), ("compress", "decompress"),
]
_ANTONYMS = _STATE_PAIRS + _ROLE_PAIRS  # near-duplicates: any opposite keeps two notes apart
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


# --- a memory that contradicts an older one -------------------------------------------

# Words that carry a statement's tense or negation but not its subject ("does not
# support" / "supports", "no longer uses" / "uses").
_FRAME = {"do", "does", "did", "doe", "longer", "anymore", "now", "still", "using", "use", "used"}
# A word with digits in it names a thing (Q3, v2, eu-west-1, p95): part of the subject.
_IDENTIFIER_RE = re.compile(r"\b[^\W\d_]+\d[\w.-]*")
_DIGIT_LETTERS = str.maketrans("0123456789", "abcdefghij")
_STATES = [(_forms(x), _forms(y)) for x, y in _STATE_PAIRS]
_STATE_STEMS = [(frozenset(_stem(w) for w in fx), frozenset(_stem(w) for w in fy)) for fx, fy in _STATES]
_CLOCK_RE = re.compile(r"^(\d{1,2})(?::(\d{2}))?(am|pm)?$")


_LEADING_NUMBERED_RE = re.compile(r"^\s*(?:The\s+)?[A-Z][a-z]+\s+\d+\b")  # "Service 3 listens on ..."
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_DATE_RE = re.compile(r"\b(?:(" + "|".join(_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?|(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?("
                      + "|".join(_MONTHS) + r"))\b", re.IGNORECASE)


def _identifier(text: str) -> str:
    return " id" + re.sub(r"\W", "", text).lower().translate(_DIGIT_LETTERS) + " "


def _as_subject(text: str) -> str:
    """``text`` with what names a thing made one plain word, which the tokenizer keeps
    whole: an identifier (``Q3`` → ``idqd``) and a numbered thing that opens the
    statement (``Service 3 listens …``), so that Q3 and Q4, service 3 and service 4 are
    two subjects, not two values; a day of a month one value (``September 14`` →
    ``09-14``), not two; and "per second" a unit, not an ordinal."""
    text = _LEADING_NUMBERED_RE.sub(lambda m: _identifier(m.group(0)), text)
    text = _IDENTIFIER_RE.sub(lambda m: _identifier(m.group(0)), text)

    def date(m: re.Match) -> str:
        month, day = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        return f"{_MONTHS.index(month.lower()) + 1:02d}-{int(day):02d}"

    text = re.sub(r"\b(per|a|each|every|one)\s+second\b", r"\1 sec", text, flags=re.IGNORECASE)  # a unit, not "2nd"
    return _DATE_RE.sub(date, text)


def _value(token: str) -> str:
    """One spelling per value: 2am, 2:00 and 02:00 are 02:00; 12k is 12000."""
    m = _CLOCK_RE.match(token)
    if m and (m.group(2) or m.group(3)):
        hour = int(m.group(1)) % 12 + (12 if m.group(3) == "pm" else 0) if m.group(3) else int(m.group(1))
        return f"{hour:02d}:{m.group(2) or '00'}"
    if token.endswith("k") and token[:-1].replace(".", "", 1).isdigit():
        return str(round(float(token[:-1]) * 1000))
    return token


def _state_swap(only_a: frozenset[str], only_b: frozenset[str]) -> frozenset[str] | None:
    """The stems of the one word each side has alone, when the two are two states of one
    property (``_STATES``, or a word and its negation: safe / unsafe)."""
    if len(only_a) != 1 or len(only_b) != 1:
        return None  # two opposite words, and nothing else, may differ
    (x,), (y,) = only_a, only_b
    negated = any(x == p + y or y == p + x for p in _NEGATING_PREFIXES if len(x) + len(y) - len(p) >= 8)
    if negated or any((x in fx and y in fy) or (x in fy and y in fx) for fx, fy in _STATES):
        return frozenset({_stem(x), _stem(y)})
    return None


def changed_value(older: str, newer: str) -> str | None:
    """Why ``newer`` contradicts ``older``: the same statement — the same names,
    identifiers and content words — with one value changed: other numbers, dates or times
    (where neither set holds the other: a value added is not a change), the opposite
    polarity, or one word swapped for its antonym. None when both can hold: another
    subject, a value added, a detail added, a related claim, a paraphrase.

    Built for precision: any content word that one statement has and the other lacks
    means they may speak of different things, and nothing is claimed."""
    a_text, b_text = _as_subject(older), _as_subject(newer)
    a, b = lexical(a_text), lexical(b_text)
    if a.names != b.names:
        return None
    drop: frozenset[str] = frozenset()
    a_values, b_values = {_value(n) for n in a.numbers}, {_value(n) for n in b.numbers}
    if a_values != b_values:
        if not (a_values and b_values) or a_values < b_values or b_values < a_values:
            return None  # a value added or removed: both may hold
        if len(a_values) > 1 and len(b_values) > 1 and not a_values & b_values:
            return None  # every value changed: more likely another thing than a correction
        why = "other numbers or dates"
    else:
        swap = _state_swap(a.raw - b.raw, b.raw - a.raw)
        if a.polarity != b.polarity:
            why = "opposite polarity"  # "disabled" is a negative word and a state of "enabled"
            # "dislikes" negates "likes": the word it negates is not a subject word
            drop = frozenset(_stem(w[len(p):]) for w in a.raw ^ b.raw for p in _NEGATING_PREFIXES
                             if w.startswith(p) and w[len(p):] in a.raw | b.raw) | (swap or frozenset())
        elif swap is None:
            return None
        else:
            why = "opposite words ({} / {})".format(*sorted(a.raw ^ b.raw))
            drop = swap
    if {w for w in a.words if w not in _FRAME} - drop != {w for w in b.words if w not in _FRAME} - drop:
        return None
    return why


def subject_key(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(names, subject words) of a statement without its values: two statements
    ``changed_value`` can pair have the same key, so the search for contradictions only
    compares notes within one key. State words are left out (``likes`` has no
    counterpart in ``dislikes``, a negative word) and a negating prefix is dropped
    (``unsafe`` keys as ``safe``); a key shared by more is only a candidate."""
    lex = lexical(_as_subject(text))
    words = set()
    for w in lex.words:
        if w in _FRAME or any(w in fx or w in fy for fx, fy in _STATE_STEMS):
            continue
        for p in _NEGATING_PREFIXES:
            if w.startswith(p) and len(w) - len(p) >= 4:
                w = w[len(p):]
                break
        words.add(w)
    return lex.names, frozenset(words)

