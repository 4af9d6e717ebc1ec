"""The time a question names: "last month", "two weeks ago", "in the past few days".

An agent asks its memory about a time as a person would ("what did I buy last
weekend?", "which book did I finish a week ago?"), and the note that answers was written
then. `span()` reads the English phrases of relative time in a question and returns the
span of creation times they point to, measured back from the moment of asking; the
query (`cortex.search.query.search`) puts the notes of that span first. Only phrases
that point back from now count: a date ("on March 3rd") or a question about a time ("how
many weeks ago did I …?") names no span to look in.

The spans are generous on purpose (a person's "last month" may be six weeks back, and
a note is often written a day after the thing it tells): a span only decides which
notes come first, never which are found.
"""

from __future__ import annotations

import re
from typing import NamedTuple

DAY = 86_400.0
UNIT_DAYS = {"hour": 1 / 24, "day": 1.0, "week": 7.0, "month": 30.5, "year": 365.0}
COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "few": 3, "several": 4}
# "last week" reaches back past the week before this one; "last month" past the calendar month.
LAST_DAYS = {"day": 2.0, "night": 2.0, "week": 14.0, "weekend": 10.0, "month": 62.0, "year": 400.0}
# "This month" and "this year" are mostly behind the one who asks; "this weekend" and
# "this week" are as often ahead ("what should I cook this weekend?"): no span.
THIS_DAYS = {"month": 31.0, "year": 366.0}
WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
# Around "N units ago": a third of the distance either way, and never less than two days.
AGO_SLACK = 0.35
MIN_SLACK_DAYS = 2.0
LATE_DAYS = 1.0  # a span ends a day after the moment asked: clocks and time zones differ

_COUNT = r"(\d{1,3}|a couple of|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(hour|day|week|month|year)s?"
_AGO = re.compile(rf"\b{_COUNT} {_UNIT} ago\b")
_ASKS_HOW_LONG = re.compile(r"\bhow (?:many (?:hour|day|week|month|year)s|long) ago\b")
_PAST_N = re.compile(rf"\b(?:last|past|previous|recent) {_COUNT} {_UNIT}\b")
_LAST = re.compile(r"\b(last|past|previous|this) (day|night|week|weekend|month|year)\b")
_LAST_WEEKDAY = re.compile(rf"\b(?:last|this past) ({WEEKDAYS})\b")
_YESTERDAY = re.compile(r"\byesterday\b")
# Words that ask about a time without naming a topic: "what happened yesterday?", "show
# me my notes from last week", "what did we do in the past three days".
IDLE_WORDS = frozenset("""
a all an and any anything are at been change changed changes did do does doing done during else everything for
from get got go going gone had happen happened happening has have i in is it latest me memories my new news note
notes of on or our over recent recently remember remind show since so something tell that the there this to up
update updated updates us was we were what which worked you
""".split())


class Span(NamedTuple):
    """Creation times from `since` (inclusive) to `until` (exclusive), epoch seconds,
    and the phrase that named them."""

    since: float
    until: float
    phrase: str


def _count(word: str) -> int:
    """ "3" -> 3, "a couple of" -> 2, "a few" -> 3, "an" -> 1."""
    if word.isdigit():
        return int(word)
    return COUNTS[word.removesuffix(" of").split()[-1]]


def span(text: str, now_ts: float) -> Span | None:
    """The span of time `text` names, measured back from `now_ts`; None when it names
    none. The first phrase found decides: "N units ago" (around that moment), "the past
    N units" (from then until now), "last week/month/…", "this month/year", "last
    Tuesday", "yesterday"."""
    t = " ".join(text.lower().split())
    late = now_ts + LATE_DAYS * DAY
    if not _ASKS_HOW_LONG.search(t):
        m = _AGO.search(t)
        if m:
            back = _count(m.group(1)) * UNIT_DAYS[m.group(2)]
            slack = max(MIN_SLACK_DAYS, AGO_SLACK * back)
            return Span(now_ts - (back + slack) * DAY, min(late, now_ts - (back - slack) * DAY), m.group(0))
    m = _PAST_N.search(t)
    if m:
        back = _count(m.group(1)) * UNIT_DAYS[m.group(2)]
        return Span(now_ts - (back + 1.0) * DAY, late, m.group(0))
    m = _LAST.search(t)
    if m:
        back = (THIS_DAYS if m.group(1) == "this" else LAST_DAYS).get(m.group(2))
        if back is not None:
            return Span(now_ts - back * DAY, late, m.group(0))
    m = _LAST_WEEKDAY.search(t)
    if m:
        return Span(now_ts - 14.0 * DAY, late, m.group(0))
    m = _YESTERDAY.search(t)
    if m:
        return Span(now_ts - 2.0 * DAY, late, m.group(0))
    return None


def topic(text: str, named: Span | None) -> str:
    """`text` without the phrase that names its time: "two days ago" names no topic, and
    searched as words it would find notes that say "days" and count "ago" as a word no
    note answers."""
    if named is None:
        return text
    return _without(text, named) or text  # nothing left: the text as it was


def _without(text: str, named: Span) -> str:
    rest = re.sub(re.escape(named.phrase), " ", " ".join(text.split()), count=1, flags=re.IGNORECASE)
    return " ".join(rest.split())


def only_time(text: str, named: Span | None) -> bool:
    """Whether `text` asks about the time it names and about nothing else ("what
    happened yesterday?"): every word but the phrase's is an idle one. Such a question
    is a listing of that time's notes, not a search for its words."""
    if named is None:
        return False
    return all(word in IDLE_WORDS for word in re.findall(r"[a-z]+", _without(text, named).lower()))
