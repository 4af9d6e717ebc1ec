"""`reinforced` arithmetic: each repeat counted once, whatever the order of folds and merges."""

from itertools import permutations

import yaml

from cortex.counts import Count, fold, merge3, parse_merged, render_merged


def test_a_legacy_count_is_all_own_repeats():
    legacy = Count(3)
    assert legacy.own == 3 and legacy.merged == {}
    assert fold(legacy, [("b", Count(0))]) == Count(4, {"b": 1})


def test_folding_the_same_notes_in_any_order_gives_one_total():
    notes = {"b": Count(0), "c": Count(2), "d": fold(Count(0), [("e", Count(1))])}
    totals = set()
    for order in permutations(notes):
        keep = Count(1)
        for note_id in order:
            keep = fold(keep, [(note_id, notes[note_id])])
        totals.add((keep.total, tuple(sorted(keep.merged.items()))))
    # own 1 + b 1 + c 3 + d 1 + e 2 (e brought itself and its own repeat, through d)
    assert totals == {(8, (("b", 1), ("c", 3), ("d", 1), ("e", 2)))}


def test_two_machines_folding_one_note_count_it_once_and_keep_both_own_repeats():
    base = Count(1)
    ours = fold(Count(2), [("b", Count(0))])  # one more own repeat here, and b folded
    theirs = fold(Count(1), [("b", Count(1))])  # b folded there after b had a repeat of its own
    merged = merge3(base, ours, theirs)
    assert merged.merged == {"b": 2}  # the later view of b, once
    assert merged.total == 2 + 2  # own: base 1 + ours' 1; b: itself + its repeat


def test_merge3_is_symmetric():
    base = fold(Count(0), [("x", Count(0))])
    ours = fold(Count(base.total + 2, base.merged), [("y", Count(0))])
    theirs = fold(base, [("y", Count(0)), ("z", Count(3))])
    assert merge3(base, ours, theirs) == merge3(base, theirs, ours)
    assert merge3(base, ours, theirs).total == 2 + 1 + 1 + 4  # own 2; x, y; z with its 3


def test_render_is_canonical_yaml_and_parse_drops_what_a_hand_edit_broke():
    merged = {"0199-b": 2, "0199-a": 1}
    text = render_merged(merged)
    assert text == render_merged(dict(reversed(list(merged.items()))))
    assert parse_merged(yaml.safe_load(f"merged_counts: {text}")["merged_counts"]) == merged
    assert parse_merged({"a": 1, "b": "two", "c": 0, "d": True, 5: 1, "": 3}) == {"a": 1}
    assert parse_merged(["a", 1]) == {}
