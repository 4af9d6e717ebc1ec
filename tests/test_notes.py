"""The note format: identity rules, the title rule, exact rendering, round trips."""

from __future__ import annotations

import re

import pytest

from cortex.notes import (
    NoteDraft,
    make_title,
    note_filename,
    parse_note,
    render_note,
    set_fields,
    source_hash,
    uuid7,
)

DESIGN_BODY = "Use local git only — no remote push in daemon. Reduces complexity and eliminates network failure mode."


def test_title_matches_the_design_example():
    assert make_title(DESIGN_BODY) == "Use local git only — no remote push in daemon. Reduces complexity and…"


@pytest.mark.parametrize(
    "body, title",
    [
        ("short body", "short body"),
        ("x" * 80, "x" * 80),  # exactly 80: not cut
        ("word " * 30, ("word " * 16).strip() + "…"),  # 79 chars end on a word
        ("y" * 120, "y" * 79 + "…"),  # no word boundary: hard cut
        ("line one\nline   two", "line one line two"),  # whitespace folded
    ],
)
def test_title_rule(body, title):
    assert make_title(body) == title
    assert len(make_title(body)) <= 80


def test_source_hash_normalises_case_whitespace_and_unicode():
    a = source_hash("Café  au\tlait\n")
    assert a == source_hash("café au lait")
    assert a == source_hash("Cafe\u0301 au lait")  # NFD → NFC
    assert a != source_hash("cafe au lait")
    assert re.fullmatch(r"[0-9a-f]{64}", a)


def test_uuid7_layout_and_time_order():
    a, b = uuid7(1_700_000_000_000), uuid7(1_700_000_000_001)
    for u in (a, b):
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", u)
    assert a < b
    assert a[:13].replace("-", "") == f"{1_700_000_000_000:012x}"


def test_file_names_and_collision_suffix():
    h = "e7f4a2b9" + "0" * 56
    assert note_filename("2026-02-16", h) == "2026-02-16-e7f4a2b9.md"
    assert note_filename("2026-02-16", h, 2) == "2026-02-16-e7f4a2b9-2.md"


def draft(**kw) -> NoteDraft:
    base = dict(
        id="019503a7-c18f-7b1d-a3b2-9c4f7e2d1a0b",
        type="decision",
        category="concept",
        created="2026-02-16T15:23:14.527Z",
        source_hash=source_hash(DESIGN_BODY),
        title=make_title(DESIGN_BODY),
        body=DESIGN_BODY,
        bucket="explicit",
        attribution="owner",
        confidence=0.95,
        importance=1.0,
        entities=(("owner", "person"), ("Cortex", "project")),
        tags=("git", "daemon"),
        context="Discussing observer daemon deployment and git sync strategy",
        source_quote="Let's use local git only — no remote push in the daemon",
        session_id="022a598a-7ca8-4ccf-80bb-f1919386421e",
    )
    base.update(kw)
    return NoteDraft(**base)


EXPECTED = f"""---
id: "019503a7-c18f-7b1d-a3b2-9c4f7e2d1a0b"
type: decision
category: concept
created: 2026-02-16T15:23:14.527Z
source_hash: {source_hash(DESIGN_BODY)}
# ---
title: "Use local git only — no remote push in daemon. Reduces complexity and…"
bucket: explicit
attribution: owner
confidence: 0.95
importance: 1.0
entities:
  - {{name: owner, type: person}}
  - {{name: Cortex, type: project}}
links: ["[[owner]]", "[[Cortex]]"]
tags: [git, daemon]
context: "Discussing observer daemon deployment and git sync strategy"
source_quote: "Let's use local git only — no remote push in the daemon"
session_id: "022a598a-7ca8-4ccf-80bb-f1919386421e"
last_reinforced: 2026-02-16T15:23:14.527Z
---

{DESIGN_BODY}
"""


def test_render_is_exactly_the_design_format():
    assert render_note(draft()) == EXPECTED


def test_render_parses_back_to_the_same_values():
    note = parse_note(render_note(draft()))
    assert note.meta["id"] == "019503a7-c18f-7b1d-a3b2-9c4f7e2d1a0b"
    assert note.meta["entities"] == [{"name": "owner", "type": "person"}, {"name": "Cortex", "type": "project"}]
    assert note.meta["tags"] == ["git", "daemon"]
    assert note.meta["importance"] == 1.0
    assert source_hash(note.body) == note.meta["source_hash"]


@pytest.mark.parametrize(
    "text",
    [
        'quotes " and \\ backslashes',
        "colons: hashes # and [brackets] {braces}",
        "yes",
        "2024",
        "line\nbreak and\ttab",
        "unicode — ünïcødé 日本語 🚀",
        "odd separators \u2028 \u2029 \x85",
    ],
)
def test_awkward_strings_survive_a_round_trip(text):
    d = draft(context=text, source_quote=text, attribution=text, entities=((text, "person"),), tags=("a",))
    note = parse_note(render_note(d))
    assert note.meta["context"] == text
    assert note.meta["attribution"] == text
    assert note.meta["entities"][0]["name"] == text


def test_set_fields_touches_only_the_named_lines():
    text = render_note(draft()).replace("tags: [git, daemon]\n", "tags: [git, daemon]  # people comment here\n")
    out = set_fields(text, {"last_reinforced": "2026-03-01T00:00:00.000Z", "reinforced": "2"})
    assert out.count("\n") == text.count("\n") + 1
    assert "last_reinforced: 2026-03-01T00:00:00.000Z\n" in out
    assert "reinforced: 2\n" in out
    assert "# people comment here" in out
    assert out.replace("last_reinforced: 2026-03-01T00:00:00.000Z\nreinforced: 2\n", "last_reinforced: 2026-02-16T15:23:14.527Z\n") == text


def test_set_fields_replaces_a_block_list_and_removes_keys():
    text = render_note(draft())
    out = set_fields(text, {"entities": "[]", "links": None})
    meta = parse_note(out).meta
    assert meta["entities"] == [] and "links" not in meta
    assert parse_note(out).body == parse_note(text).body


@pytest.mark.parametrize(
    "text",
    ['plain', 'quotes " and \\ backslashes', "yes", "2024", "a: b # c", "line\nbreak", "odd \u2028 \x85", "ünï 日本 🚀", "-lead", "[x]"],
)
@pytest.mark.parametrize("score", [0.0, 0.1, 0.333333, 0.55555, 1.0])
def test_draft_meta_equals_what_yaml_reads_back(text, score):
    """`cortex run` validates its notes from draft_meta instead of re-reading the YAML."""
    from cortex.notes import draft_meta, rendered_note
    from cortex.timefmt import jsonable as _jsonable

    d = draft(context=text, source_quote=text, attribution=text, entities=((text, "person"), ("Cortex", "project")),
              tags=("a", "b/c"), confidence=score, importance=score, title=make_title(text))
    rendered, note = rendered_note(d)
    reread = parse_note(rendered)
    assert _jsonable(reread.meta) == _jsonable(draft_meta(d)) == _jsonable(note.meta)
    assert (reread.body, reread.frontmatter, reread.body_line, dict(reread.key_lines)) == (
        note.body, note.frontmatter, note.body_line, dict(note.key_lines))


def test_a_date_that_does_not_exist_is_a_syntax_error_with_its_line():
    """YAML reads `2026-02-30` as a date Python cannot make: that was a traceback (the
    hook, the index), where broken frontmatter is a problem with a line."""
    from cortex.notes import NoteSyntaxError

    with pytest.raises(NoteSyntaxError) as caught:
        parse_note("---\ntags: [garden]\ndate: 2026-02-30\n---\nPruned the pears.\n")
    assert caught.value.line == 3 and "a date that does not exist" in str(caught.value)
    assert parse_note('---\ndate: "2026-02-30"\n---\nx\n').meta["date"] == "2026-02-30"  # quoted: text
