"""A question that names a time ("last month", "a week ago") looks first among the notes
of that time (docs/query.md, "A time in the question"): the phrases `when.span` reads,
and the real CLI putting the note of that time first, marked, ahead of a note that
matches the words better."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
from test_search import ENV, commit_all, write_note

from cortex.search import when
from cortex.search.when import DAY, span
from cortex.vault import Vault

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc).timestamp()


def days_back(text: str) -> tuple[float, float, str] | None:
    found = span(text, NOW)
    return None if found is None else ((NOW - found.since) / DAY, (NOW - found.until) / DAY, found.phrase)


@pytest.mark.parametrize("text, phrase, reaches, ends", [
    ("Which book did I finish a week ago?", "a week ago", 9.45, 4.55),  # around the moment: a third either way
    ("What did I buy a couple of days ago?", "a couple of days ago", 4.0, 0.0),  # never less than two days
    ("We moved the budget review 3 months ago", "3 months ago", 123.5, 59.5),
    ("How many times did I bake in the past two weeks?", "past two weeks", 15.0, -1.0),  # until now, and a day on
    ("Which pair of shoes did I clean last month?", "last month", 62.0, -1.0),
    ("What game did I finally beat last weekend?", "last weekend", 10.0, -1.0),
    ("Who did I meet for lunch last Tuesday?", "last tuesday", 14.0, -1.0),
    ("what broke YESTERDAY", "yesterday", 2.0, -1.0),
    ("what did the build say in the last 24 hours", "last 24 hours", 2.0, -1.0),
    ("the alert from an hour ago", "an hour ago", 2.0417, -1.0),  # two days either way at least
    ("How much have I made from selling eggs this month?", "this month", 31.0, -1.0),
])
def test_the_phrases_of_relative_time_name_a_span_back_from_now(text, phrase, reaches, ends):
    back, end, said = days_back(text)
    assert said == phrase
    assert back == pytest.approx(reaches, abs=0.05) and end == pytest.approx(ends, abs=0.05)


@pytest.mark.parametrize("text", [
    "How many weeks ago did I attend the bird watching workshop?",  # asks for a time, names none
    "How long ago did we switch to PostgreSQL?",
    "What did I do on March 3rd?",  # a date, not a span back from now
    "What was my last name before I changed it?",
    "Where did I go on my most recent trip?",
    "which database did we choose",
    "What should I cook this weekend?",  # a weekend or a week named "this" is as often ahead
    "I have three deadlines this week, which first?",
])
def test_a_question_that_asks_for_a_time_or_names_a_date_names_no_span(text):
    assert span(text, NOW) is None


def cortex(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cortex", "--vault", str(root), "query", *args],
                          env=ENV, capture_output=True, text=True)


@pytest.fixture(scope="module")
def vault(tmp_path_factory):
    now = datetime.now(timezone.utc)
    v, _ = Vault.init(tmp_path_factory.mktemp("when") / "v")
    for i in range(60):  # a vault past the few-notes rules, with notes of every age
        write_note(v.root, f"mind/facts/f{i}.md", f"The harbour ferry {i} leaves the pier at {i % 12 + 6} o'clock.",
                   type_="fact", created=now - timedelta(days=i * 3))
    write_note(v.root, "mind/facts/pan.md", "Decided to buy a cast iron pan: the best pan to buy, and the last pan I will buy.",
               type_="fact", created=now - timedelta(days=80))
    write_note(v.root, "mind/facts/smoker.md", "Went to buy a smoker for the garden at the hardware store after comparing "
               "a dozen models over the weekend.", type_="fact", created=now - timedelta(days=8))
    commit_all(v.root)
    return v.root


def test_the_note_of_the_time_named_comes_first_and_says_so(vault):
    plain = cortex(vault, "what did I buy", "--json")
    assert plain.returncode == 0, plain.stderr
    paths = [r["path"] for r in json.loads(plain.stdout)["results"]]
    assert paths[:2] == ["mind/facts/pan.md", "mind/facts/smoker.md"]  # the words favour the pan

    timed = cortex(vault, "what did I buy a week ago", "--json")
    assert timed.returncode == 0, timed.stderr
    results = json.loads(timed.stdout)["results"]
    assert [r["path"] for r in results[:2]] == ["mind/facts/smoker.md", "mind/facts/pan.md"]
    assert results[0]["when"] == "a week ago" and results[1]["when"] is None
    assert results[0]["score"] < results[1]["score"]  # first for its time, not for a score made up

    text = cortex(vault, "what did I buy a week ago")
    assert "created in the time asked about (a week ago)" in text.stdout.split("2. ")[0]


def test_an_explicit_time_filter_wins_over_the_phrase(vault):
    done = cortex(vault, "what did I buy a week ago", "--since", "400d", "--paths")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["mind/facts/pan.md", "mind/facts/smoker.md"]
    done = cortex(vault, "what did I buy a week ago", "--until", "30d", "--paths")
    assert done.stdout.splitlines()[0] == "mind/facts/pan.md"


def test_a_time_with_no_note_of_it_changes_nothing_and_nonsense_stays_refused(vault):
    plain = cortex(vault, "what did I buy", "--paths")
    timed = cortex(vault, "what did I buy yesterday", "--paths")
    assert timed.returncode == 0 and timed.stdout == plain.stdout
    assert cortex(vault, "zzzqqq last month", "--paths").returncode == 1


@pytest.mark.parametrize("text, only", [
    ("What happened yesterday?", True),
    ("what did we do last week", True),
    ("Show me my notes from the past three days", True),
    ("what changed in the past two days", True),
    ("last week", True),  # the phrase alone
    ("what did I buy a week ago", False),
    ("How do I tune the sitar I got yesterday?", False),
])
def test_a_question_about_a_time_and_nothing_else_is_told_apart(text, only):
    assert when.only_time(text, span(text, NOW)) is only


def test_a_question_about_a_time_alone_lists_the_notes_of_that_time_newest_first(vault):
    done = cortex(vault, "what did I do last week?", "--json")
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    # the notes created 0-14 days back (ferries 0-4 and the smoker), newest first, each marked
    assert [r["path"] for r in results] == [f"mind/facts/f{i}.md" for i in range(3)] + [
        "mind/facts/smoker.md", "mind/facts/f3.md", "mind/facts/f4.md"]
    assert {r["when"] for r in results} == {"last week"}
    assert cortex(vault, "what happened 3 years ago", "--paths").returncode == 1  # no note that old


def test_the_phrase_is_taken_out_of_the_searched_text_case_and_all():
    text = "Which  Book did I finish A Week Ago?"
    assert when.topic(text, span(text, NOW)) == "Which Book did I finish ?"
    assert when.topic("Ingrid Quist", None) == "Ingrid Quist"
    assert when.topic("yesterday", span("yesterday", NOW)) == "yesterday"  # nothing left: the text as it was


def test_the_time_order_is_read_whole_and_a_span_is_counted_before_it_is_read(tmp_path):
    """The `ts` column read as one array (`lexical._time_order_fast`) gives what Whoosh's
    own reader gives, across segments and deletions; `created_between` takes [since,
    until) and declines a span wider than asked, reading nothing."""
    from cortex.search import lexical
    from cortex.search.index import SearchIndex
    from cortex.search.records import NoteRecord

    def record(i: int, ts: float) -> NoteRecord:
        return NoteRecord(path=f"mind/facts/n{i}.md", body=f"note {i}", id=f"id-{i}", type="fact", category="concept",
                          partition="mind", created_ts=ts, importance=0.5, confidence=0.9)

    idx = SearchIndex(tmp_path)
    idx.build([record(i, NOW - (i % 7) * DAY) for i in range(40)])  # equal times: index order kept
    idx.lexical.write([record(100, NOW - 0.5 * DAY), record(3, NOW - 20 * DAY)], deletes=["mind/facts/n5.md"])
    idx.lexical.refresh()
    reader = idx.lexical.searcher.reader()
    assert len(list(reader.leaf_readers())) > 1 and reader.has_deletions()  # the case worth checking
    fast = lexical._time_order_fast(reader)
    assert fast == lexical._time_order_slow(reader) and len(fast[1]) == 40

    between = idx.lexical.created_between(NOW - 0.9 * DAY, NOW + 1, at_most=50)
    assert between == [f"mind/facts/n{i}.md" for i in range(0, 40, 7)] + ["mind/facts/n100.md"]  # newest first
    assert idx.lexical.created_between(NOW - 0.9 * DAY, NOW, at_most=50) == ["mind/facts/n100.md"]  # until excluded
    assert idx.lexical.created_between(NOW - 0.9 * DAY, None, at_most=50) == between  # open ends
    assert idx.lexical.created_between(None, NOW - 19 * DAY, at_most=50) == ["mind/facts/n3.md"]
    assert idx.lexical.created_between(NOW - 30 * DAY, NOW + 1, at_most=10) is None
    assert idx.lexical.created_between(NOW - 30 * DAY, NOW - 25 * DAY, at_most=10) == []
    idx.close()


def test_a_wide_span_is_a_filter_on_the_search_and_ranks_the_same(vault, monkeypatch):
    """A span of more than `SPAN_SCORED` notes is searched through the time filter; its
    results are the ones the note-by-note scoring of a small span gives."""
    from cortex.search import query
    from cortex.search.question import Question
    from cortex.search.session import Session

    session = Session(vault)
    session.open()
    asked = Question(text="what did I buy a week ago")
    scored = [(h.path, h.when, h.score) for h in session.ask(asked).hits]
    monkeypatch.setattr(query, "SPAN_SCORED", 0)
    filtered = [(h.path, h.when, h.score) for h in session.ask(asked).hits]
    assert filtered == scored and scored[0][:2] == ("mind/facts/smoker.md", "a week ago")


def test_notes_of_one_second_are_listed_newest_first_and_since_until_are_exact(tmp_path, ready_vault):
    """`created` carries milliseconds: notes created within one second are listed newest
    first, and --since/--until cut between them (the index kept whole seconds: the order
    within a second was the index's, and --since 10:00:00.600 dropped a note of .900)."""
    v = Vault(ready_vault(tmp_path / "v"))
    base = datetime(2026, 11, 27, 10, 0, 0, tzinfo=timezone.utc)
    for ms, name in ((900, "alpha"), (100, "bravo"), (500, "charlie"), (1000, "delta")):
        write_note(v.root, f"mind/facts/{name}.md", f"The {name} server hosts a service.", type_="fact",
                   created=base + timedelta(milliseconds=ms))
    commit_all(v.root)

    def listed(*args: str) -> list[str]:
        done = cortex(v.root, "--type", "fact", "--paths", *args)
        return [line.removeprefix("mind/facts/").removesuffix(".md") for line in done.stdout.split()]

    assert listed() == ["delta", "alpha", "charlie", "bravo"]
    assert listed("--since", "2026-11-27T10:00:00.600Z") == ["delta", "alpha"]
    assert listed("--until", "2026-11-27T10:00:00.600Z") == ["charlie", "bravo"]
    assert listed("--recent", "3650d") == ["delta", "alpha", "charlie", "bravo"]
