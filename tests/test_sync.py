"""`cortex sync` between real clones of a bare remote: what cortex settles, what it
leaves to a person, and that nothing is lost or doubled on the way."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sync_helpers import (active, converge, cx, field, fsck, git, head_tree, make_fleet, notes, person_commit, sh,
                          shared_memory, sync, write)

BODY = "The ledger runs on Postgres 16 in production"


def test_same_observation_on_two_machines_the_same_day_is_one_note_reinforced(tmp_path):
    _, (a, b) = make_fleet(tmp_path, 2)
    for m in (a, b):
        write(m, BODY)
        cx(m, "run")
    sync(a)
    report = json.loads(sync(b, "--json").stdout)
    assert report["integrated"] == "merge" and report["pushed"]
    converge(a, b)
    found = [t for t in active(a).values() if BODY in t]
    assert len(found) == 1  # one note, not two and not an add/add conflict
    text = found[0]
    assert field(text, "reinforced") == "1"
    other = field(text, "merged_from").strip('[]"')
    assert other != field(text, "id") and field(text, "id") < other  # the older id keeps the note
    assert "<<<<<<<" not in text
    cx(a, "validate", "--all")


def test_the_days_brief_written_on_two_machines_does_not_stop_the_sync(tmp_path):
    """`cortex brief --write` scheduled nightly on two machines: each commits
    vault/events/<day>-brief.md of what it saw. The second sync stopped for a person (an
    add/add conflict in a digest either machine can make again), and every sync after."""
    from cortex.mergedriver import merge_note

    _, (a, b) = make_fleet(tmp_path, 2)
    for m, body in ((a, BODY), (b, "The cranes at pier seven are inspected on Tuesdays")):
        write(m, body)
        cx(m, "run")
        cx(m, "brief", "--write", "--now", "2026-03-02T23:00:00Z")
    written = [(m / "vault/events/2026-03-02-brief.md").read_text() for m in (a, b)]
    sync(a)
    assert sync(b, check=False).returncode == 0
    converge(a, b)
    briefs = [p for p in git(a, "ls-files", "vault/events").split() if p.endswith("-brief.md")]
    assert briefs == ["vault/events/2026-03-02-brief.md"]
    assert "<<<<<<<" not in (a / briefs[0]).read_text()
    assert (a / briefs[0]).read_text() == (b / briefs[0]).read_text() in written
    assert merge_note("", *written) == merge_note("", *reversed(written))  # the same one kept on either side
    # a brief a person wrote into since it was shared is merged as any note: never dropped for the longer one
    edited = written[0].rstrip("\n") + "\n\nAsk Maya whether the cranes passed.\n"
    merged, clean = merge_note(written[0], edited, written[1] + "\n" * 400)
    assert not clean or "Ask Maya whether the cranes passed." in merged


def _folded_on_several_machines(tmp_path, n, order, repeats=False):
    """``n`` machines memorize one observation the same day (the last one's note reaches
    the remote first), every other machine folds that note into its own before hearing of
    the others, then they sync in ``order``: each fold kept a different id (its own, the
    older), and each differs from the others only in what cortex writes. ``repeats``: the
    first note is repeated once before it travels, and the first machine's after its
    fold — each counted once."""
    _, machines = make_fleet(tmp_path, n)
    for i, m in enumerate(machines):
        # one agent session each, one hour apart: the ids' order is the machines'
        write(m, BODY, timestamp=f"2026-02-16T1{i}:00:00Z", session_id=f"0b7e1c1e-1d2a-4b8e-9c5f-3f1b2a6d7e1{i}")
        cx(m, "run")
    ids = [field(t, "id") for m in machines for t in active(m).values() if BODY in t]
    *folders, first = machines
    if repeats:
        _reinforce(first, BODY, "2026-02-16T20:00:00Z")
    sync(first)
    for m in folders:
        sync(m, "--no-push")
    if repeats:
        _reinforce(folders[0], BODY, "2026-02-16T21:00:00Z")
    for i in order:
        sync(machines[i])
    converge(*machines)
    (text,) = [t for t in active(machines[0]).values() if BODY in t]
    assert "<<<<<<<" not in text
    assert field(text, "id") == ids[0] == min(ids)  # the older id keeps the note
    assert sorted(json.loads(field(text, "merged_from"))) == sorted(ids)[1:]
    brought = dict.fromkeys(sorted(ids)[1:], 1)
    if repeats:
        brought[ids[-1]] = 2  # the first note and its repeat
    assert json.loads(field(text, "merged_counts")) == brought
    assert field(text, "reinforced") == str(n - 1 + 2 * repeats), text  # each repeat once
    cx(machines[0], "validate", "--all")


def test_same_observation_the_same_day_on_three_machines_folded_two_ways_is_one_note(tmp_path):
    """Two machines each fold the third's note into their own: both changed the note's id
    from the one they merged from, each to its own. Nobody changed a word: the sync folds
    the two as it folds any two notes of one memory, never stopping for a person."""
    _folded_on_several_machines(tmp_path, 3, order=(0, 1), repeats=True)


@pytest.mark.parametrize("order", [(1, 0, 2), (2, 0, 1)])
def test_same_observation_the_same_day_on_four_machines_folded_three_ways_counts_each_once(tmp_path, order):
    _folded_on_several_machines(tmp_path, 4, order)


def test_same_observation_on_different_days_folds_into_one_note(tmp_path):
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY, timestamp="2026-02-16T10:00:00Z")
    write(b, BODY, timestamp="2026-02-18T09:00:00Z")
    for m in (a, b):
        cx(m, "run")
    sync(a)
    out = json.loads(sync(b, "--json").stdout)
    assert out["settled"] and out["settled"][0]["reinforced"] == 1
    converge(a, b)
    live = [t for t in active(a).values() if BODY in t]
    assert len(live) == 1
    assert field(live[0], "last_reinforced").startswith("2026-02-18T09:00")
    folded = [t for p, t in notes(a).items() if p.startswith("mind/archive/") and BODY in t]
    assert len(folded) == 1 and field(folded[0], "merged_into") == field(live[0], "id")
    cx(a, "validate", "--all")


def _reinforce(machine, body, timestamp):
    write(machine, body, timestamp=timestamp)
    assert json.loads(cx(machine, "run", "--json").stdout)["reinforced"] == 1
    cx(machine, "reinforce")


def test_reinforcements_on_both_machines_add_up(tmp_path):
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    converge(a, b)
    _reinforce(a, BODY, "2026-03-01T10:00:00Z")
    _reinforce(a, BODY, "2026-03-02T10:00:00Z")
    _reinforce(b, BODY, "2026-03-05T10:00:00Z")
    converge(a, b)
    (text,) = [t for t in active(b).values() if BODY in t]
    assert field(text, "reinforced") == "3"  # base 0 + 2 + 1, not 2 and not a conflict
    assert field(text, "last_reinforced").startswith("2026-03-05T10:00")


def test_the_merge_leaves_no_temporary_files_in_the_working_tree_for_a_persons_commit_to_take(tmp_path):
    """git hands a merge driver the versions it merges as `.merge_file_XXXXXX` files in its
    current directory. Made in the vault's working tree while the sync merges, a person's
    `git add -A` and commit then (Obsidian Git's, every minute) took them, and the sync
    pushed them. A driver that lists the working tree while it merges sees none there; the
    folders' own .gitattributes still say which driver merges a file."""
    def prepare(seed):
        (seed / "people").mkdir()
        (seed / "people" / ".gitattributes").write_text("*.txt merge=probe\n")
        (seed / "people" / "list.txt").write_text("ann\nbob\ncid\n")
        git(seed, "add", "people")
        git(seed, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-q", "-m", "people")

    _, (a, b) = make_fleet(tmp_path, 2, prepare)
    seen = tmp_path / "seen"  # the working tree's top while the driver merges
    git(b, "config", "merge.probe.driver", f"ls -A '{b}' > '{seen}' && git merge-file %A %O %B")
    for machine, old, new in ((a, "ann", "Ann"), (b, "cid", "Cid")):
        person_commit(machine, "people/list.txt", (machine / "people/list.txt").read_text().replace(old, new), "list")
    sync(a)
    assert json.loads(sync(b, "--json").stdout)["integrated"] == "merge"
    listed = seen.read_text().split()
    assert "mind" in listed and not [name for name in listed if name.startswith(".merge_file_")]
    assert (b / "people/list.txt").read_text() == "Ann\nbob\nCid\n"
    assert git(b, "status", "--porcelain", "--untracked-files=all") == ""
    assert ".merge_file_" not in git(b, "ls-tree", "-r", "--name-only", "HEAD")
    # and those a person's own `git merge` makes there are ignored
    assert sh(b, "git", "check-ignore", "-q", ".merge_file_6ETaX0", check=False).returncode == 0


def test_decayed_on_one_machine_reinforced_on_the_other_stays_alive(tmp_path):
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY, timestamp="2024-01-10T10:00:00Z")
    cx(a, "run")
    converge(a, b)
    assert json.loads(cx(a, "decay", "--json").stdout)["changed"] == 1
    _reinforce(b, BODY, "2026-11-01T10:00:00Z")
    converge(a, b)
    live = [(p, t) for p, t in active(a).items() if BODY in t]
    assert len(live) == 1, notes(a).keys()
    path, text = live[0]
    assert path.startswith("mind/facts/") and field(text, "archived") is None and field(text, "reinforced") == "1"
    assert not [p for p, t in notes(a).items() if p.startswith("mind/archive/") and BODY in t]
    cx(a, "validate", "--all")


def test_a_memory_a_person_archived_on_one_machine_and_repeated_on_the_other_stays_archived(tmp_path):
    """A person drags a memory into `mind/archive/` (no archive fields: their decision,
    not cortex's); the other machine's agent, not told yet, says it again. The sync
    counts the repeat on the archived note and brings nothing back, on either machine."""
    a, b, path = shared_memory(tmp_path, BODY)
    archived = "mind/archive/" + path.removeprefix("mind/")
    (a / archived).parent.mkdir(parents=True, exist_ok=True)
    git(a, "mv", path, archived)
    git(a, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-q", "-m", "vault backup")
    _reinforce(b, BODY, "2026-11-01T10:00:00Z")
    converge(a, b)
    for machine in (a, b):
        assert not [p for p, t in active(machine).items() if BODY in t]
        kept = [(p, t) for p, t in notes(machine).items() if BODY in t]
        assert [p for p, _ in kept] == [archived] and field(kept[0][1], "reinforced") == "1"
        fsck(machine)


def test_forgotten_on_one_machine_repeated_on_the_other_stays_forgotten(tmp_path):
    a, b, path = shared_memory(tmp_path, BODY)
    assert cx(a, "forget", path, "--reason", "moved to MySQL").returncode == 0
    _reinforce(b, BODY, "2026-11-01T10:00:00Z")  # b's agent, not told yet, says it again
    converge(a, b)
    for machine in (a, b):
        assert not [p for p, t in active(machine).items() if BODY in t]
        kept = [(p, t) for p, t in notes(machine).items() if BODY in t]
        assert len(kept) == 1 and kept[0][0].startswith("mind/archive/")
        text = kept[0][1]
        assert field(text, "archive_reason") == "forgotten" and field(text, "reinforced") == "1"
        fsck(machine)
    cx(a, "validate", "--all")


def test_a_note_another_machine_committed_without_the_hooks_is_named_by_the_sync_that_brings_it(tmp_path):
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")  # a valid note, through cortex
    (a / "mind" / "facts" / "quick.md").write_text("---\ntype: fact\n---\nTyped in a hurry.\n")
    git(a, "add", "-A")
    git(a, "commit", "-q", "--no-verify", "-m", "quick note, hooks skipped")
    sync(a)
    done = sync(b, "--json")
    invalid = json.loads(done.stdout)["invalid"]
    assert list(invalid) == ["mind/facts/quick.md"]  # the note cortex wrote passes
    assert any("missing required field(s)" in p for p in invalid["mind/facts/quick.md"])
    text = sync(b)  # nothing new: nothing said
    assert "fail cortex's checks" not in text.stdout + text.stderr
    # a commit through the hooks completes the note, and the next sync says nothing
    person_commit(a, "mind/facts/quick.md", "---\ntype: fact\n---\nTyped in a hurry, then committed properly.\n",
                  "complete it")
    sync(a)
    done = sync(b)
    assert "fail cortex's checks" not in done.stdout + done.stderr and (b / "mind/facts/quick.md").exists()


def memorized_and_edited_on_both(tmp_path, type_, days):
    """BODY memorized on a and on b (on ``days``), then a person on each machine edits
    their own copy: a rewrites the line, b adds one. (a, b, a's path, b's path)."""
    _, (a, b) = make_fleet(tmp_path, 2)
    for m, day in zip((a, b), days):
        write(m, BODY, type_=type_, timestamp=f"2026-02-{day}T10:00:00Z")
        cx(m, "run")
    (ra,), (rb,) = ([p for p, t in active(m).items() if BODY in t] for m in (a, b))
    person_commit(a, ra, (a / ra).read_text().replace(BODY, BODY + ", on a dedicated host"), "edit on a")
    person_commit(b, rb, (b / rb).read_text() + "Approved by the CTO in February.\n", "edit on b")
    return a, b, ra, rb


def test_same_observation_the_same_day_edited_on_both_machines_is_left_to_a_person(tmp_path):
    """One path added on both sides (no common ancestor to merge the bodies with): the
    fold keeps both people's words, the body with conflict markers, never one side whole."""
    a, b, rel, other = memorized_and_edited_on_both(tmp_path, "fact", (16, 16))
    assert rel == other
    hint = stopped_by_conflict(a, b, rel)
    sh(b, "git", "merge", "origin/main", check=False)
    text = (b / rel).read_text()
    assert "on a dedicated host" in text and "Approved by the CTO" in text and "<<<<<<<" in text
    assert field(text, "reinforced") == "1" and field(text, "merged_from")  # the fold itself is settled
    assert "git merge origin/main" in hint
    resolved = "\n".join(line for line in text.splitlines() if line[:7] not in ("<<<<<<<", "=======", ">>>>>>>")
                         and line != BODY) + "\n"
    person_commit(b, rel, resolved, "settle the ledger note: both")
    converge(a, b)
    (text,) = [t for t in active(a).values() if "on a dedicated host" in t]
    assert "Approved by the CTO" in text and field(text, "reinforced") == "1"
    cx(a, "validate", "--all")


@pytest.mark.parametrize("type_", ["decision", "fact"])  # vault/ removes a folded twin, mind/ archives it
def test_same_observation_on_different_days_edited_on_both_machines_keeps_both_notes(tmp_path, type_):
    a, b, ra, rb = memorized_and_edited_on_both(tmp_path, type_, (16, 18))
    assert ra != rb
    sync(a)
    done = json.loads(sync(b, "--json").stdout)
    assert done["settled"] == [{"apart": [rb], "beside": ra}]
    first = sync(a, "--json")  # a hears of the pair: told there once too
    assert json.loads(first.stdout)["settled"] == [{"apart": [rb], "beside": ra}]
    converge(a, b)
    live = active(a)
    assert "on a dedicated host" in live[ra] and "Approved by the CTO" in live[rb]  # both, in place
    # nothing changed between them: a repeat counted on either, synced, tells it no more
    _reinforce(b, BODY, "2026-03-01T10:00:00Z")
    for machine in (b, a, b, a):
        done = sync(machine, "--json")
        assert json.loads(done.stdout)["settled"] == [] and "kept apart" not in done.stderr
    assert "kept apart" not in sync(a).stderr
    cx(a, "validate", "--all")


def test_a_twin_edited_on_one_machine_only_stays_beside_the_other_said_so(tmp_path):
    """A fold is for one observation memorized twice: a note whose words are no longer the
    observation's (here a person's edit; a teammate's note claiming the hash looks the
    same) is neither folded nor kept over the other. Both stay, the sync says so."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY, timestamp="2026-02-16T10:00:00Z")
    write(b, BODY, timestamp="2026-02-18T09:00:00Z", session_id="0b7e1c1e-1d2a-4b8e-9c5f-3f1b2a6d7e10")
    for m in (a, b):
        cx(m, "run")
    (ra,), (rb,) = ([p for p, t in active(m).items() if BODY in t] for m in (a, b))
    person_commit(b, rb, (b / rb).read_text() + "Approved by the CTO in February.\n", "edit on b")
    sync(a)
    done = sync(b, "--json")
    assert json.loads(done.stdout)["settled"] == [{"apart": [rb], "beside": ra}]
    assert f"kept apart  {rb} beside {ra}" in done.stderr
    converge(a, b)
    live = active(a)
    assert "Approved by the CTO" in live[rb] and field(live[ra], "merged_into") is None


def near_duplicates_on_two_machines(tmp_path):
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, "Maya prefers small, reviewable pull requests", timestamp="2026-01-10T10:00:00Z", type_="preference")
    write(a, "Maya prefers small reviewable pull requests.", timestamp="2026-01-12T10:00:00Z", type_="preference")
    cx(a, "run")
    converge(a, b)
    return a, b


def test_a_dedup_merge_on_one_machine_keeps_an_edit_made_on_the_other(tmp_path):
    a, b = near_duplicates_on_two_machines(tmp_path)
    merged = json.loads(cx(a, "dedup", "--json").stdout)
    assert merged["changed"] == 1
    newer = merged["items"][0]["merge"]
    edited_body = "Maya prefers small pull requests, and a description of how each was tested"
    text = (b / newer).read_text()
    person_commit(b, newer, text.replace("Maya prefers small reviewable pull requests.", edited_body), "Sharpen the memory")
    converge(a, b)
    kept = [t for t in active(a).values() if edited_body in t]
    assert len(kept) == 1 and field(kept[0], "merged_into") is None  # the edit lives, active
    cx(a, "validate", "--all")


def test_one_near_duplicate_pair_merged_on_two_machines_counts_once(tmp_path):
    a, b = near_duplicates_on_two_machines(tmp_path)
    for machine in (a, b):  # both merge the pair before either hears of the other's merge
        assert json.loads(cx(machine, "dedup", "--json").stdout)["changed"] == 1
    _reinforce(b, "Maya prefers small, reviewable pull requests", "2026-02-01T10:00:00Z")
    converge(a, b)
    (text,) = [t for t in active(a).values() if "Maya prefers" in t]
    assert field(text, "reinforced") == "2", text  # the duplicate once, b's repeat once
    assert field(text, "merged_counts").count(": 1") == 1
    cx(a, "validate", "--all")


def test_a_repeat_of_a_note_merged_into_a_note_since_merged_on_is_counted_at_the_chains_end(tmp_path):
    """Two machines each merge a near-duplicate pair before they hear of each other: one
    the shared note into an older one only it has, the other a newer note of its own into
    the shared one. After the sync the newest is merged into a note itself merged on. A
    repeat of the newest's words counts on the note at the end; stopping one step short
    brought the middle note back from the archive beside it, one memory current twice."""
    _, (a, b) = make_fleet(tmp_path, 2)
    middle = "The payments API rate limit is 100 requests per second per key"
    write(a, middle, timestamp="2026-01-12T10:00:00Z")
    cx(a, "run")
    converge(a, b)
    write(a, "The payments API rate limit is 100 requests per second for every key", timestamp="2026-01-10T10:00:00Z")
    newest = "The payments API rate limit is 100 requests per second for each key"
    write(b, newest, timestamp="2026-01-14T10:00:00Z")
    for machine in (a, b):
        cx(machine, "run")
        assert json.loads(cx(machine, "dedup", "--json").stdout)["changed"] == 1
    sync(b)
    settled = sync(a).stderr  # the newest, merged into the middle one there, counted here
    assert re.search(r"settled  mind/facts/\S+ counts the repeats of mind/archive/\S+, mind/archive/", settled), settled
    converge(a, b)
    _reinforce(a, newest, "2026-02-01T10:00:00Z")
    (text,) = [t for t in active(a).values() if "payments API" in t]
    assert "for every key" in text and field(text, "reinforced") == "3", text  # two merged, one repeat
    cx(a, "validate", "--all")


def stopped_by_conflict(a, b, rel) -> str:
    """a syncs, then b's sync stops at ``rel`` with nothing changed: the hint."""
    sync(a)
    before = git(b, "rev-parse", "HEAD")
    done = sync(b, "--json", check=False)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["error"] == "conflict" and report["paths"] == [rel]
    assert "git merge origin/main" in report["hint"]
    assert git(b, "rev-parse", "HEAD") == before and git(b, "status", "--porcelain") == ""  # nothing touched
    return report["hint"]


def test_both_machines_rewriting_one_body_stops_with_the_file_and_the_command(tmp_path):
    a, b, rel = shared_memory(tmp_path, BODY)
    for m, new in ((a, "The ledger runs on Postgres 17 in production"), (b, "The ledger moved to CockroachDB")):
        person_commit(m, rel, (m / rel).read_text().replace(BODY, new), f"edit on {m.name}")
    stopped_by_conflict(a, b, rel)
    # The person follows the hint: the markers are refused by validate and by the hook.
    sh(b, "git", "merge", "origin/main", check=False)
    assert "<<<<<<<" in (b / rel).read_text()
    bad = cx(b, "validate", "--all", check=False)
    assert bad.returncode == 1 and "merge conflict" in bad.stdout + bad.stderr
    sh(b, "git", "add", rel)
    refused = sh(b, "git", "commit", "-q", "--no-edit", check=False)
    assert refused.returncode != 0 and "merge conflict" in refused.stdout + refused.stderr
    person_commit(b, rel, git(b, "show", f"HEAD:{rel}"), "settle the ledger note: CockroachDB it is")
    converge(a, b)
    assert "CockroachDB" in (a / rel).read_text()
    cx(a, "validate", "--all")


def test_a_conflict_names_a_note_with_accents_as_it_is_named(tmp_path):
    """git quotes such a name in its listings ("Caf\\303\\251 notes.md"): the message and
    --json give the name a person sees in Obsidian."""
    _, (a, b) = make_fleet(tmp_path, 2)
    rel = "Café notes/Gîte über Ærø.md"
    (a / rel).parent.mkdir()
    person_commit(a, rel, "Le café ouvre à 7h.\n", "café")
    converge(a, b)
    for m, hour in ((a, "8h"), (b, "9h")):
        person_commit(m, rel, f"Le café ouvre à {hour}.\n", f"edit on {m.name}")
    sync(a)
    done = sync(b, "--json", check=False)
    assert done.returncode == 1 and json.loads(done.stdout)["paths"] == [rel]
    said = sync(b, check=False)
    assert said.returncode == 1 and f"settle: {rel}" in said.stderr, said.stderr


def test_the_reflog_names_who_moved_the_branch_as_gits_own_move_would(tmp_path, monkeypatch):
    """A sync in a CI job or a unit with git's identity in its environment: the reflog of
    its fast-forward named the config's user.name (libgit2's default signature) at the
    wall clock, where `git update-ref` names GIT_COMMITTER_NAME/EMAIL at GIT_COMMITTER_DATE."""
    _, (a, b) = make_fleet(tmp_path, 2)
    person_commit(a, "vault/events/offsite.md", "---\ntitle: Offsite\n---\nThe offsite is in Porto.\n", "offsite")
    sync(a)
    git(b, "config", "user.name", "Config Person")
    git(b, "config", "user.email", "config@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Ana Lima")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "ana@example.com")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "@1700000000 +0100")
    before = git(b, "rev-parse", "HEAD").strip()
    sync(b)
    after = git(b, "rev-parse", "HEAD").strip()
    assert after != before
    ours = {log: (b / ".git/logs" / log).read_text().splitlines()[-1] for log in ("HEAD", "refs/heads/main")}
    git(b, "update-ref", "-m", "cortex sync: fast-forward origin/main", "HEAD", before, after)
    git(b, "update-ref", "-m", "cortex sync: fast-forward origin/main", "HEAD", after, before)
    gits = {log: (b / ".git/logs" / log).read_text().splitlines()[-1] for log in ("HEAD", "refs/heads/main")}
    assert ours == gits
    assert ours["HEAD"].split("\t")[0].endswith("Ana Lima <ana@example.com> 1700000000 +0100")


def test_a_persons_uncommitted_edit_is_never_touched(tmp_path):
    a, b, rel = shared_memory(tmp_path, BODY)
    _reinforce(a, BODY, "2026-03-01T10:00:00Z")
    sync(a)
    wip = (b / rel).read_text().replace(BODY, "half-written thought")
    (b / rel).write_text(wip)
    done = sync(b, "--json", check=False)
    assert done.returncode == 1 and json.loads(done.stdout)["error"] == "local_changes"
    assert (b / rel).read_text() == wip
    # An unrelated staged file stays staged through a sync that moves other notes.
    (b / rel).write_text(wip.replace("half-written thought", BODY))
    git(b, "checkout", "--", rel)
    (b / "vault" / "people").mkdir(parents=True, exist_ok=True)
    (b / "notes.txt").write_text("staged by a person\n")
    git(b, "add", "notes.txt")
    sync(b)
    assert git(b, "diff", "--cached", "--name-only").split() == ["notes.txt"]
    assert field((b / rel).read_text(), "reinforced") == "1"


def test_an_unreachable_remote_exits_75_and_keeps_everything(tmp_path):
    remote, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    head = git(a, "rev-parse", "HEAD")
    # the network is down: ssh cannot reach the host (as ssh says it)
    git(a, "config", "core.sshCommand", "sh -c 'echo \"ssh: connect to host gitbox port 22: Network is unreachable\" >&2; exit 255'")
    git(a, "remote", "set-url", "origin", "ssh://gitbox/srv/notes.git")
    done = sync(a, "--json", check=False)
    assert done.returncode == 75
    assert json.loads(done.stdout)["error"] == "unreachable" and "unreachable" in done.stderr
    assert "Network is unreachable" in done.stderr  # git's reason, not its boilerplate
    assert "repository exists" not in done.stderr
    assert git(a, "rev-parse", "HEAD") == head
    write(a, "The vault stays usable while offline")
    cx(a, "run")  # still usable
    git(a, "remote", "set-url", "origin", str(remote))
    converge(a, b)
    assert len([t for t in active(b).values() if "offline" in t or BODY in t]) == 2


@pytest.mark.parametrize("gone", ["deleted", "never made", "not a repository"])
def test_a_remote_with_no_repository_says_what_to_do_and_exits_1_not_75(tmp_path, gone):
    """Trying again cannot help (a scheduler would retry forever on 75): a person is told."""
    remote, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    head = git(a, "rev-parse", "HEAD")
    if gone == "deleted":
        remote.rename(tmp_path / "gone.git")
    elif gone == "never made":
        git(a, "remote", "set-url", "origin", str(tmp_path / "no" / "such.git"))
    else:
        (tmp_path / "plain").mkdir()
        git(a, "remote", "set-url", "origin", str(tmp_path / "plain"))
    done = sync(a, "--json", check=False)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["error"] == "not_found" and out["exit_code"] == 1
    assert "no repository at its address" in out["message"] and "does not appear to be a git repository" in out["message"]
    assert "git remote set-url origin" in out["hint"] and "75" not in out["hint"]
    assert git(a, "rev-parse", "HEAD") == head
    write(a, "A memory made while the remote was missing")
    assert cx(a, "run", "--sync", check=False).returncode == 1  # the run commits; the sync's code is said
    if gone == "deleted":
        (tmp_path / "gone.git").rename(remote)
    git(a, "remote", "set-url", "origin", str(remote))
    converge(a, b)
    assert len([t for t in active(b).values() if "missing" in t or BODY in t]) == 2


GIT_SAID = "\nPlease make sure you have the correct access rights\nand the repository exists.\n"


@pytest.mark.parametrize("err, reason", [
    ("fatal: '/srv/notes.git' does not appear to be a git repository\nfatal: Could not read from remote repository.\n"
     + GIT_SAID, "'/srv/notes.git' does not appear to be a git repository"),
    ("ssh: Could not resolve hostname gitbox: Name or service not known\r\n"
     "fatal: Could not read from remote repository.\n" + GIT_SAID,
     "ssh: Could not resolve hostname gitbox: Name or service not known"),
    ("Warning: Permanently added 'github.com' (ED25519) to the list of known hosts.\r\n"
     "git@github.com: Permission denied (publickey).\r\nfatal: Could not read from remote repository.\n" + GIT_SAID,
     "git@github.com: Permission denied (publickey)."),
    ("remote: Repository not found.\nfatal: repository 'https://github.com/maya/notes.git/' not found\n",
     "repository 'https://github.com/maya/notes.git/' not found"),
    ("fatal: unable to access 'https://gitbox/notes.git/': Could not resolve host: gitbox\n",
     "unable to access 'https://gitbox/notes.git/': Could not resolve host: gitbox"),
    ("fatal: Could not read from remote repository.\n" + GIT_SAID, "Could not read from remote repository."),
    ("", None),
])
def test_a_failed_fetch_is_told_by_gits_reason_never_its_boilerplate(err, reason):
    from cortex.gitcli import failure_reason

    assert failure_reason(err) == reason


@pytest.mark.parametrize("err, kind", [
    ("fatal: '/srv/notes.git' does not appear to be a git repository\nfatal: Could not read from remote repository.\n"
     + GIT_SAID, "missing"),
    ("ERROR: Repository not found.\nfatal: Could not read from remote repository.\n" + GIT_SAID, "missing"),  # GitHub, ssh
    ("remote: Repository not found.\nfatal: repository 'https://github.com/maya/notes.git/' not found\n", "missing"),
    ("remote: The project you were looking for could not be found or you don't have permission to view it.\n"
     "fatal: repository 'https://gitlab.com/maya/notes.git/' not found\n", "missing"),
    ("git@github.com: Permission denied (publickey).\r\nfatal: Could not read from remote repository.\n" + GIT_SAID,
     "auth"),
    ("fatal: could not read Username for 'https://github.com': terminal prompts disabled\n", "auth"),
    ("fatal: unable to access 'https://gitbox/notes.git/': The requested URL returned error: 403\n", "auth"),
    ("ssh: Could not resolve hostname gitbox: Name or service not known\r\n"
     "fatal: Could not read from remote repository.\n" + GIT_SAID, "network"),
    ("ssh: connect to host gitbox port 22: Connection refused\r\nfatal: Could not read from remote repository.\n"
     + GIT_SAID, "network"),
    ("fatal: unable to access 'https://gitbox/notes.git/': The requested URL returned error: 503\n", "network"),
    ("fatal: Could not read from remote repository.\n" + GIT_SAID, "network"),  # nothing said why: try again
    ("error: cannot lock ref 'refs/remotes/origin/main': Unable to create '/v/.git/refs/remotes/origin/main.lock': "
     "File exists.\n", "busy"),
])
def test_a_failed_fetch_is_classed_by_the_reason_git_gives(err, kind):
    """Whether trying again can help is read from git's reason line, never from the
    boilerplate git adds after any ssh or local failure."""
    from cortex.gitcli import failure_kind

    assert failure_kind(err) == kind


def test_a_push_a_remote_hook_refuses_is_told_with_the_remotes_reason(tmp_path):
    remote, (a,) = make_fleet(tmp_path, 1)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text('#!/bin/sh\necho "GH006: Protected branch update failed for refs/heads/main: 1 review required." >&2\n'
                    'echo "" >&2\necho "See the branch rules." >&2\nexit 1\n')
    hook.chmod(0o755)
    write(a, BODY)
    cx(a, "run")
    head = git(a, "rev-parse", "HEAD")
    done = sync(a, "--json", check=False)
    assert done.returncode == 1
    out = json.loads(done.stdout)
    assert out["error"] == "push_refused"
    assert out["message"] == ("origin refused the push to main (pre-receive hook declined): GH006: Protected branch "
                              "update failed for refs/heads/main: 1 review required. See the branch rules.")
    assert "\t" not in done.stderr and "remote:" not in done.stderr
    assert git(a, "rev-parse", "HEAD") == head


def test_a_branch_the_team_renamed_is_not_made_again_by_a_sync(tmp_path):
    """The team renames `main` to `trunk` on the remote. A machine that had not heard
    took the missing branch for a rewrite, and `--accept-rewrite` pushed `main` again:
    its notes went where no other machine looks, said as "pushed". The sync now says the
    branch is gone, names the remote's default and pushes nothing, even when asked to
    accept a rewrite; following the hint takes its notes to trunk."""
    remote, (a, b) = make_fleet(tmp_path, 2)
    sync(a)
    sync(b)
    sh(a, "git", "push", "-q", "origin", "main:trunk")
    sh(remote, "git", "symbolic-ref", "HEAD", "refs/heads/trunk")
    sh(a, "git", "push", "-q", "origin", "--delete", "main")
    write(b, BODY)
    cx(b, "run")
    for extra in ((), ("--accept-rewrite",)):
        done = sync(b, "--json", *extra, check=False)
        out = json.loads(done.stdout)
        assert (done.returncode, out["error"]) == (1, "branch_gone"), done.stdout
        assert "origin has no branch main any more" in out["message"] and "default branch is now trunk" in out["message"]
        assert "git branch --set-upstream-to origin/trunk" in out["hint"]
        assert git(remote, "branch", "--list", "main").strip() == ""  # not made again
    sh(b, "git", "fetch", "-q", "origin", "trunk")
    sh(b, "git", "branch", "-q", "--set-upstream-to", "origin/trunk")
    out = json.loads(sync(b, "--json").stdout)
    assert out["pushed"] and (out["branch"], out["remote_branch"]) == ("main", "trunk")
    write(b, "A second memory made after following the rename")
    cx(b, "run")
    assert sync(b).stderr.startswith("cortex sync with origin/trunk: up to date, pushed")  # where it went
    sh(a, "git", "branch", "-q", "-m", "trunk")
    sh(a, "git", "fetch", "-q", "origin")
    sh(a, "git", "branch", "-q", "--set-upstream-to", "origin/trunk")
    sync(a)
    assert [t for t in active(a).values() if BODY in t]


def test_a_shared_repository_made_again_empty_takes_the_vaults_history(tmp_path):
    """What a missing remote's hint says: make a new empty repository there and `cortex
    sync` pushes this vault to it. The sync took the empty remote for a rewrite and
    pushed nothing (exit 1)."""
    remote, (a,) = make_fleet(tmp_path, 1)
    write(a, BODY)
    cx(a, "run")
    sync(a)
    shutil.rmtree(remote)
    sh(tmp_path, "git", "init", "-q", "--bare", str(remote))
    out = json.loads(sync(a, "--json").stdout)
    assert out["pushed"] and "a new, empty repository" in out["warnings"][0]
    assert git(remote, "rev-parse", "main") == git(a, "rev-parse", "HEAD")


def test_a_force_pushed_remote_stops_the_sync_and_nothing_is_reset(tmp_path):
    remote, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    converge(a, b)
    base = git(b, "rev-parse", "HEAD~1").strip()
    sh(b, "git", "push", "-q", "--force", "origin", f"{base}:refs/heads/main")
    write(a, "Another memory made before the rewrite was noticed")
    cx(a, "run")
    head = git(a, "rev-parse", "HEAD")
    done = sync(a, "--json", check=False)
    assert done.returncode == 1
    out = json.loads(done.stdout)
    assert out["error"] == "rewritten" and "--accept-rewrite" in out["hint"]
    assert git(a, "rev-parse", "HEAD") == head
    sync(a, "--accept-rewrite")
    assert BODY in "".join(active(a).values()) and git(a, "rev-parse", "HEAD") == git(a, "rev-parse", "origin/main")


def test_accept_rewrite_merges_a_history_made_anew_from_a_new_first_commit(tmp_path):
    """A teammate purges the shared history: one new first commit holding today's files,
    force-pushed. The sync stops and offers `--accept-rewrite`, which failed in its turn
    with git's "refusing to merge unrelated histories" (exit 1, nothing a person could run
    next). It merges now: nothing of either side lost, and what the remote brought is what
    this vault lacked — not every file of the new history told as added."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    converge(a, b)
    write(b, "Memorized here before the purge was heard of")
    cx(b, "run")
    git(a, "checkout", "-q", "--orphan", "purged")
    sh(a, "git", "commit", "-q", "--no-verify", "-m", "purge the history")
    git(a, "branch", "-q", "-M", "purged", "main")
    git(a, "push", "-q", "--force", "origin", "main")
    stopped = sync(b, "--json", check=False)
    assert stopped.returncode == 1 and json.loads(stopped.stdout)["error"] == "rewritten"
    done = sync(b, "--accept-rewrite", "--json", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["pushed"] and report["integrated"] == "merge"
    assert report["brought"]["added"] == 0 and report["brought"]["settings"] == [], report["brought"]
    texts = "".join(active(b).values())
    assert BODY in texts and "Memorized here before the purge" in texts
    converge(a, b)
    assert "Memorized here before the purge" in "".join(active(a).values())
    assert cx(a, "validate", "--all").returncode == 0


def test_a_vault_begun_on_its_own_stops_at_the_team_remote_until_told_to_merge(tmp_path):
    """The first machine's steps done on a second (`cortex init`, `git remote add origin`
    the team's remote, `cortex sync`): two histories with no commit in common. The sync
    said only "git merge-tree failed: fatal: refusing to merge unrelated histories"; it
    says what happened and both ways on (`unrelated`, exit 1, nothing changed), and
    `--accept-rewrite` merges the two vaults, every note of both kept."""
    remote, (a,) = make_fleet(tmp_path, 1)
    write(a, BODY)
    cx(a, "run")
    sync(a)
    alone = tmp_path / "alone"
    sh(tmp_path, str(cx.__globals__["CORTEX"]), "init", str(alone))
    git(alone, "remote", "add", "origin", str(remote))
    write(alone, "A memory of the machine that began its own vault")
    cx(alone, "run")
    head = git(alone, "rev-parse", "HEAD")
    done = sync(alone, "--json", check=False)
    out = json.loads(done.stdout)
    assert (done.returncode, out["error"], out["exit_code"]) == (1, "unrelated", 1), done.stdout
    assert "shares no history" in out["message"] and "--accept-rewrite" in out["hint"] and "cortex clone" in out["hint"]
    assert git(alone, "rev-parse", "HEAD") == head and git(alone, "status", "--porcelain") == ""
    assert f"| `{out['error']}` |" in (Path(__file__).parent.parent / "docs" / "sync.md").read_text()
    sync(alone, "--accept-rewrite")
    converge(a, alone)
    texts = "".join(active(a).values())
    assert BODY in texts and "A memory of the machine that began its own vault" in texts


def test_a_vault_that_took_the_rewritten_history_syncs_again_without_pushing_it_back(tmp_path):
    remote, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    converge(a, b)
    # a person on a drops the last commit (say it leaked something) and force-pushes
    git(a, "reset", "-q", "--hard", "HEAD~1")
    sh(a, "git", "push", "-q", "--force", "origin", "main")
    base = git(a, "rev-parse", "HEAD").strip()
    (removed,) = [p for p, t in active(b).items() if BODY in t]
    done = sync(a, "--json")  # the machine that force-pushed: HEAD is the new history
    assert json.loads(done.stdout)["rewritten"] == [removed] and "is not a deletion" in done.stderr
    done = sync(b, "--json", check=False)
    assert done.returncode == 1 and json.loads(done.stdout)["error"] == "rewritten"
    git(b, "reset", "-q", "--keep", "origin/main")  # the hint's second way
    for told in ([removed], []):  # said once, by the sync that takes it
        done = json.loads(sync(b, "--json").stdout)
        assert done["integrated"] == "up to date" and done["rewritten"] == told
    assert git(b, "rev-parse", "HEAD").strip() == base == git(a, "rev-parse", "origin/main").strip()
    assert sh(remote, "git", "rev-parse", "main").stdout.strip() == base  # the removed commit stays removed
    assert BODY not in "".join(active(b).values())
    # built on the new history, it pushes as ever
    write(b, "A memory made after taking the rewritten history")
    cx(b, "run")
    assert json.loads(sync(b, "--json").stdout)["pushed"]
    sync(a)
    assert BODY not in "".join(active(a).values()) and "rewritten history" in "".join(active(a).values())


def test_a_commit_a_plain_git_pull_brought_that_the_remote_then_removed_is_not_pushed_back(tmp_path):
    """b took the commit with a person's `git pull` (its last sync was before it); a
    force-push then removes it. b's sync stops and names the notes, as after a sync."""
    remote, (a, b) = make_fleet(tmp_path, 2)
    write(a, "A memory everyone keeps", timestamp="2026-02-15T10:00:00Z")
    cx(a, "run")
    converge(a, b)
    write(a, BODY)
    cx(a, "run")
    sync(a)
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    (removed,) = [p for p, t in active(b).items() if BODY in t]
    git(a, "reset", "-q", "--hard", "HEAD~1")
    sh(a, "git", "push", "-q", "--force", "origin", "main")
    base = git(a, "rev-parse", "HEAD").strip()
    head = git(b, "rev-parse", "HEAD")
    done = sync(b, "--json", check=False)
    assert done.returncode == 1
    out = json.loads(done.stdout)
    assert out["error"] == "rewritten" and removed in out["message"] and "--accept-rewrite" in out["hint"]
    assert git(b, "rev-parse", "HEAD") == head
    assert sh(remote, "git", "rev-parse", "main").stdout.strip() == base  # not pushed back
    sync(b, "--accept-rewrite")  # the person keeps it: it comes back, said by them
    assert BODY in "".join(active(b).values()) and sh(remote, "git", "rev-parse", "main").stdout.strip() != base


def test_a_vault_holding_a_commit_the_rewrite_removed_still_stops(tmp_path):
    """Built on the new tip is not enough: a HEAD that still holds a removed commit (a
    person's reset to it, a merge of it) would push it back."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    converge(a, b)
    removed = git(a, "rev-parse", "HEAD").strip()
    sh(a, "git", "push", "-q", "--force", "origin", "HEAD~1:refs/heads/main")
    git(b, "fetch", "-q", "origin")
    git(b, "reset", "-q", "--keep", "origin/main")
    sh(b, "git", "-c", "user.name=P", "-c", "user.email=p@x", "merge", "-q", "--no-edit", "--no-ff", removed)
    done = sync(b, "--json", check=False)
    assert done.returncode == 1 and json.loads(done.stdout)["error"] == "rewritten"


def test_a_push_overtaken_by_another_machine_is_merged_and_pushed_again(tmp_path):
    from cortex.sync import push

    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    write(b, "A memory from the other machine")
    cx(b, "run")
    sync(b)
    assert push(a, "origin", "main") == "raced"  # a has not fetched what b pushed
    report = json.loads(sync(a, "--json").stdout)
    assert report["pushed"] and report["integrated"] == "merge"
    converge(a, b)
    fsck(a)


def test_joining_with_git_clone_and_cortex_init_rewrites_nothing(tmp_path):
    remote, (a,) = make_fleet(tmp_path, 1)
    write(a, BODY)
    cx(a, "run")
    sync(a)
    joined = tmp_path / "joined"
    sh(tmp_path, "git", "clone", "-q", str(remote), str(joined))
    head = git(joined, "rev-parse", "HEAD")
    sh(tmp_path, str(cx.__globals__["CORTEX"]), "init", str(joined))
    assert git(joined, "rev-parse", "HEAD") == head and git(joined, "status", "--porcelain") == ""
    assert "cortex.mergedriver" in git(joined, "config", "merge.cortex-note.driver")
    assert (joined / ".git" / "hooks" / "pre-commit").exists()
    status = json.loads(cx(joined, "status", "--json").stdout)
    assert status["sync"]["upstream"] == "origin/main" and status["sync"]["ahead"] == 0
    write(joined, "Joined machines memorize too")
    cx(joined, "run", "--sync")
    assert git(joined, "rev-parse", "HEAD") == git(joined, "rev-parse", "origin/main")
    sync(a)
    assert "Joined machines memorize too" in "".join(active(a).values())


def test_sync_on_run_is_a_machines_own_git_config_over_the_teams_default(tmp_path):
    """Sync on run lived only in observer/config.yml, which is tracked and shared: set on
    one machine and left uncommitted, that machine's `cortex run` failed (exit 1, "your
    uncommitted changes are in files the remote changed too") each time anyone committed
    a change to the file; committed, it turned sync on run on for every machine. A
    machine's own `git config cortex.syncOnRun` now decides for it."""
    remote, (alice, carol) = make_fleet(tmp_path, 2)
    joined = sh(tmp_path, str(cx.__globals__["CORTEX"]), "clone", str(remote), str(tmp_path / "dave"))
    assert "git -C" in joined.stderr and "config cortex.syncOnRun true" in joined.stderr  # the Next: line
    git(carol, "config", "cortex.syncOnRun", "true")  # carol's machine only
    config = alice / "observer" / "config.yml"
    config.write_text(config.read_text() + "\nlock_timeout: 20\n")
    git(alice, "commit", "-qam", "longer lock timeout")
    sync(alice)
    write(carol, "Carol's agent memorizes and shares")
    done = cx(carol, "run", check=False)
    assert done.returncode == 0, done.stderr
    assert "lock_timeout: 20" in (carol / "observer" / "config.yml").read_text()  # merged before the run
    assert git(carol, "status", "--porcelain") == ""
    sync(alice)
    assert "Carol's agent memorizes and shares" in "".join(active(alice).values())  # pushed after it

    # the team's default on, one machine (the CI, say) off for itself; --sync still wins
    config.write_text(config.read_text() + "sync:\n  on_run: true\n")
    git(alice, "commit", "-qam", "sync on every run")
    sync(alice)
    sync(carol)
    git(carol, "config", "cortex.syncOnRun", "false")
    write(carol, "Kept on this machine until it syncs")
    cx(carol, "run")
    assert git(carol, "rev-list", "--count", "origin/main..HEAD").strip() == "1"  # not pushed
    write(alice, "Alice follows the team default")
    cx(alice, "run")
    assert git(alice, "rev-list", "--count", "origin/main..HEAD").strip() == "0"  # pushed
    cx(carol, "run", "--sync")
    assert git(carol, "rev-list", "--count", "origin/main..HEAD").strip() == "0"

    git(carol, "config", "cortex.syncOnRun", "maybe")
    bad = cx(carol, "run", check=False)
    assert bad.returncode == 1 and "cortex.syncOnRun" in bad.stderr and "true or false" in bad.stderr


def pushed_to_a_bare_remote_whose_head_names_master(tmp_path: Path) -> tuple[Path, Path]:
    """A vault with one memory pushed as `main` to a bare remote that `git init --bare`
    left with HEAD on its default name (master here): (the vault, the remote)."""
    seed = tmp_path / "seed"
    sh(tmp_path, str(cx.__globals__["CORTEX"]), "init", str(seed))
    write(seed, BODY)
    cx(seed, "run")
    remote = tmp_path / "remote.git"
    sh(tmp_path, "git", "-c", "init.defaultBranch=master", "init", "-q", "--bare", str(remote))
    sh(seed, "git", "push", "-q", str(remote), "HEAD:refs/heads/main")
    return seed, remote


def test_cortex_clone_checks_out_the_pushed_branch_of_a_bare_remote_whose_head_names_another(tmp_path):
    # `git init --bare` leaves HEAD on its default name (master here); machines push main.
    seed, remote = pushed_to_a_bare_remote_whose_head_names_master(tmp_path)
    joined = tmp_path / "joined"
    done = sh(tmp_path, str(cx.__globals__["CORTEX"]), "clone", str(remote), str(joined))
    assert "branch main" in done.stderr and "nothing rewritten" in done.stderr
    assert head_tree(joined) == head_tree(seed)  # the shared history, not a second one
    assert git(joined, "symbolic-ref", "--short", "HEAD").strip() == "main"
    sync(joined)
    assert sh(tmp_path, "git", "-C", str(remote), "branch", "--format=%(refname:short)").stdout.split() == ["main"]

    sh(seed, "git", "push", "-q", str(remote), "HEAD:refs/heads/other")
    refused = sh(tmp_path, str(cx.__globals__["CORTEX"]), "clone", str(remote), str(tmp_path / "two"), check=False)
    assert refused.returncode == 1 and "--branch main" in refused.stderr
    named = sh(tmp_path, str(cx.__globals__["CORTEX"]), "clone", "--branch", "other", str(remote), str(tmp_path / "three"))
    assert "branch other" in named.stderr and head_tree(tmp_path / "three") == head_tree(seed)


def test_joining_with_git_clone_and_cortex_init_takes_the_pushed_branch_of_a_bare_remote_whose_head_names_another(tmp_path):
    """The docs' join by hand, `git clone URL && cortex init`, from a bare remote whose HEAD
    names a branch the machines never pushed: git checks out nothing, and init made a new
    vault there — a second, unrelated history, whose first sync pushed it to `master`
    beside the team's `main` (exit 0, "pushed"): two vaults that never met. Init now takes
    the remote's one branch, as `cortex clone` does; with several it makes nothing and asks."""
    seed, remote = pushed_to_a_bare_remote_whose_head_names_master(tmp_path)
    joined = tmp_path / "joined"
    sh(tmp_path, "git", "clone", "-q", str(remote), str(joined))
    done = sh(tmp_path, str(cx.__globals__["CORTEX"]), "init", str(joined))
    assert git(joined, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert "branch main checked out" in done.stderr
    assert git(joined, "rev-parse", "HEAD") == git(seed, "rev-parse", "HEAD")  # the shared history, nothing rewritten
    write(joined, "Joined machines memorize too")
    cx(joined, "run", "--sync")
    assert sh(tmp_path, "git", "-C", str(remote), "branch", "--format=%(refname:short)").stdout.split() == ["main"]
    sh(seed, "git", "pull", "-q", "--no-rebase", str(remote), "main")
    assert "Joined machines memorize too" in "".join(active(seed).values())

    sh(seed, "git", "push", "-q", str(remote), "HEAD:refs/heads/other")
    two = tmp_path / "two"
    sh(tmp_path, "git", "clone", "-q", str(remote), str(two))
    refused = sh(tmp_path, str(cx.__globals__["CORTEX"]), "init", str(two), check=False)
    assert refused.returncode == 1 and "origin/main, origin/other" in refused.stderr, refused.stderr
    assert "switch main" in refused.stderr
    assert git(two, "rev-parse", "--verify", "-q", "HEAD", check=False) == "" and list(two.iterdir()) == [two / ".git"]


def test_overlapping_folds_on_two_machines_count_each_repeat_once(tmp_path):
    """Three machines memorize one observation on three days. The second one's note
    reaches the others raw; the first folds it into its own, the third folds its own into
    it, each before hearing of the other. Every fold is recorded by the absorbed note's id
    (``merged_counts``), so the merges that follow count each repeat once: reinforced 2,
    where adding the folds' increments made it 3."""
    _, (a, b, c) = make_fleet(tmp_path, 3)
    for machine, day in ((b, 18), (a, 16), (c, 20)):
        write(machine, BODY, timestamp=f"2026-02-{day}T10:00:00Z")
        cx(machine, "run")
    sh(b, "git", "push", "--quiet", "origin", "HEAD")  # b's note travels as it is
    sync(a, "--no-push")  # a folds b's note into its own (older) one
    sync(c)  # c folds its own into b's note, and pushes
    converge(a, b, c)
    (text,) = [t for t in active(a).values() if BODY in t]
    assert field(text, "reinforced") == "2", text
    assert field(text, "timestamp") is None and field(text, "created").startswith("2026-02-16")
    merged = field(text, "merged_counts")
    assert merged.count(": 1") == 2, text  # b's note and c's, once each
    folded = {field(t, "id"): field(t, "merged_into")
              for p, t in notes(a).items() if p.startswith("mind/archive/") and BODY in t}
    assert len(folded) == 2
    for into in folded.values():  # c's note went into b's, b's into a's: each chain ends here
        while into in folded:
            into = folded[into]
        assert into == field(text, "id")
    cx(a, "validate", "--all")


def test_a_sync_killed_while_git_wrote_the_working_files_is_finished_by_the_next(tmp_path):
    """`git read-tree -u` writes the working files before cortex swaps in the index and
    moves HEAD: killed between the two, the next sync must not take its own half-written
    files for a person's changes. Simulated at that instant: the journal written, one of
    the move's files written and one not, and a person's edit made since to a third. The
    next `cortex sync` finishes the move (the missing file written, HEAD and index
    moved), leaves the person's edit alone and syncs."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, "The staging database is rebuilt nightly at 02:00.")
    cx(a, "run")
    sync(a)
    sync(b)
    shared = next(p for p in git(b, "ls-files", "mind").split() if p.endswith(".md"))
    for body in ("The queue drains in 5 seconds.", "Backups are kept for 30 days."):
        write(b, body)
    cx(b, "run")
    (b / shared).write_text((b / shared).read_text() + "\nEdited on b.\n")
    git(b, "commit", "-qam", "an edit on b", "--no-verify")
    sync(b)
    git(a, "fetch", "-q", "origin")
    old, new = git(a, "rev-parse", "HEAD").strip(), git(a, "rev-parse", "origin/main").strip()
    added = git(a, "diff", "--name-only", "--diff-filter=A", old, new).split()
    assert len(added) == 2
    (a / ".git" / "cortex-move").write_text(f"{old} {new}\n")
    tmp_index = a / ".git" / "cortex-index.tmp"
    shutil.copyfile(a / ".git" / "index", tmp_index)
    subprocess.run(["git", "read-tree", "-m", "-u", old, new], cwd=a, check=True,
                   env={**os.environ, "GIT_INDEX_FILE": str(tmp_index)})
    (a / added[1]).unlink()  # killed before git wrote this one
    person = (a / shared).read_text().replace("nightly", "every night") + "A person's line.\n"
    (a / shared).write_text(person)  # since the kill: neither the old text nor the new
    report = json.loads(cx(a, "sync", "--json").stdout)
    assert "sync" in report["recovered"]
    assert git(a, "rev-parse", "HEAD").strip() == new or git(a, "merge-base", "--is-ancestor", new, "HEAD") == ""
    for path in added:
        assert (a / path).read_text() == git(a, "show", f"{new}:{path}")
    assert (a / shared).read_text() == person  # the person's edit, untouched
    assert git(a, "status", "--porcelain", "--untracked-files=no").split() == ["M", shared]
    assert not (a / ".git" / "cortex-move").exists()


KILLED_BEFORE_ITS_COMMIT = r"""
import os, signal, sys
import cortex.runner
from cortex.cli import main

decided = cortex.runner.finish

def finish(*args, recovering=False, **kwargs):
    if not recovering:  # the run's plan and blobs are recorded: SIGKILL before its commit
        os.kill(os.getpid(), signal.SIGKILL)
    return decided(*args, recovering=recovering, **kwargs)

cortex.runner.finish = finish
sys.exit(main(sys.argv[1:]))
"""


def test_a_run_killed_before_its_commit_is_finished_by_the_next_sync(tmp_path):
    """`cortex sync` finishes what a killed `cortex run` decided before it merges (the
    repository is opened for it then, not on every sync): the note is committed once,
    the buffer's line counted as read, and the commit pushed."""
    _, (a,) = make_fleet(tmp_path, 1)
    sync(a)
    write(a, "The staging database is rebuilt nightly at 02:00.")
    killed = subprocess.run([sys.executable, "-c", KILLED_BEFORE_ITS_COMMIT, "--vault", str(a), "run"],
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert notes(a) == {}
    report = json.loads(cx(a, "sync", "--json").stdout)
    assert report["recovered"] == ["run"] and report["pushed"]
    texts = list(notes(a).values())
    assert len(texts) == 1 and texts[0].rstrip().endswith("The staging database is rebuilt nightly at 02:00.")
    assert git(a, "rev-parse", "HEAD") == git(a, "rev-parse", "origin/main")
    assert json.loads(cx(a, "run", "--json").stdout)["read"] == 0  # the line was read, once
    assert json.loads(cx(a, "sync", "--json").stdout)["recovered"] == []


def test_a_run_held_back_by_a_busy_git_is_finished_by_the_next_sync_which_says_so(tmp_path):
    """A run that met a person's held index.lock saved its decision and exited 75: the
    next sync commits it and says it was held back, not that a run was interrupted."""
    _, (a,) = make_fleet(tmp_path, 1)
    sync(a)
    (a / "observer" / "config.yml").write_text((a / "observer" / "config.yml").read_text() + "\nlock_timeout: 0.3\n")

    def held_back_run(body: str) -> None:
        write(a, body)
        (a / ".git" / "index.lock").write_text("")  # a person's commit editor is open
        assert cx(a, "run", check=False).returncode == 75
        (a / ".git" / "index.lock").unlink()  # ... and closed

    held_back_run("The staging database is rebuilt nightly at 03:00.")
    report = json.loads(cx(a, "sync", "--json").stdout)
    assert report["recovered"] == [] and report["held_back"] == ["run"] and report["pushed"]
    assert len(notes(a)) == 1
    held_back_run("The staging database keeps seven nightly backups.")
    done = cx(a, "sync")
    assert "held back while git was busy (exit 75)" in done.stderr and "interrupted" not in done.stdout + done.stderr
    assert len(notes(a)) == 2 and git(a, "rev-parse", "HEAD") == git(a, "rev-parse", "origin/main")


def test_a_maintenance_job_held_back_by_a_busy_git_is_not_named_interrupted_by_the_next_sync(tmp_path):
    """A person's git holds the branch's lock while `cortex maintain` commits a decay (its
    journal written): the job exits 75, nothing committed. The next sync said "finished
    first: interrupted decay", a crash to the person or script reading it; the journal
    is closed at once now (what was staged taken back), and the job plans again."""
    _, (a,) = make_fleet(tmp_path, 1)
    (a / "observer" / "config.yml").write_text((a / "observer" / "config.yml").read_text() + "\nlock_timeout: 0.3\n")
    write(a, "Maya will rotate the Stripe API keys after the incident.", type_="commitment",
          timestamp="2024-01-05T09:00:00Z")
    cx(a, "run")
    sync(a)
    head = git(a, "rev-parse", "HEAD")
    (a / ".git" / "refs" / "heads" / "main.lock").write_text("")  # a person's git moving the branch
    busy = cx(a, "maintain", "--force", "--only", "decay", check=False)
    assert busy.returncode == 75 and "git is busy" in busy.stdout + busy.stderr
    (a / ".git" / "refs" / "heads" / "main.lock").unlink()  # ... done
    assert git(a, "rev-parse", "HEAD") == head and git(a, "status", "--porcelain") == " M observer/config.yml\n"
    report = json.loads(sync(a, "--json").stdout)
    assert report["recovered"] == [] and report["held_back"] == []
    assert json.loads(cx(a, "maintain", "--force", "--only", "decay", "--json").stdout)["ran"][0]["changed"] == 1


def test_a_commit_made_while_the_sync_moves_head_is_merged_too(tmp_path, monkeypatch):
    """A person's commit lands between the sync's merge and its move of HEAD: the move is
    refused (HEAD is not what the merge was made on) and the sync merges again, with the
    person's commit in it, rather than failing with 'run cortex sync again'."""
    from cortex.gitrepo import GitRepo
    from cortex.sync import sync as sync_vault
    from cortex.vault import Vault

    _, (a, b) = make_fleet(tmp_path, 2)
    write(b, BODY)
    cx(b, "run")
    sync(b)  # the remote moves on
    write(a, "The queue drains in 5 seconds.")
    cx(a, "run")  # and so does a: the sync makes a merge
    real, landed = GitRepo.move_tree, []

    def a_person_commits_first(self, old, new, reason):
        if not landed:
            (a / "people.md").write_text("A person's note.\n")
            git(a, "add", "people.md")
            git(a, "commit", "-q", "--no-verify", "-m", "a person's commit")
            landed.append(git(a, "rev-parse", "HEAD").strip())
        return real(self, old, new, reason)

    monkeypatch.setattr(GitRepo, "move_tree", a_person_commits_first)
    report = sync_vault(Vault.discover(a))
    assert report.integrated == "merge" and report.pushed and landed
    git(a, "merge-base", "--is-ancestor", landed[0], "HEAD")  # the person's commit is in the history
    assert (a / "people.md").read_text() == "A person's note.\n"
    assert git(a, "status", "--porcelain") == ""
    assert [t for t in active(a).values() if BODY in t]  # and the remote's note
    fsck(a)


def _forgotten_here_memorized_anew_there(tmp_path):
    """a forgets a memory and syncs; b's agent memorizes the same fact on its own another
    day (another note), before b hears. Returns (a, b, b's note)."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY, timestamp="2026-02-16T10:00:00Z")
    cx(a, "run")
    path = next(p for p, t in active(a).items() if BODY in t)
    assert cx(a, "forget", path, "--reason", "moved to MySQL").returncode == 0
    sync(a)
    write(b, BODY, timestamp="2026-02-18T10:00:00Z")
    cx(b, "run")
    twin = next(p for p, t in active(b).items() if BODY in t)
    return a, b, twin


def test_forgotten_on_one_machine_memorized_anew_on_the_other_stays_forgotten(tmp_path):
    """Machine b's agent memorizes a fact on its own (another day: another note) before it
    hears that a person on a forgot it: the sync folds b's note into the forgotten one,
    which stays archived, instead of leaving the wrong memory alive through its twin."""
    a, b, twin = _forgotten_here_memorized_anew_there(tmp_path)
    done = sync(b, "--json")
    settled = json.loads(done.stdout)["settled"]
    assert settled and settled[0]["folded"] == [twin] and settled[0]["stays_archived"] == "forgotten"
    converge(a, b)
    for machine in (a, b):
        assert not [p for p, t in active(machine).items() if BODY in t]
        kept = [(p, t) for p, t in notes(machine).items() if BODY in t and field(t, "archive_reason") == "forgotten"]
        assert len(kept) == 1 and field(kept[0][1], "reinforced") == "1"  # b's memorization counted once
        fsck(machine)
    cx(b, "validate", "--all")
    assert cx(b, "query", "ledger Postgres production", check=False).returncode == 1


def test_forgotten_on_one_machine_memorized_anew_and_edited_on_the_other_keeps_the_persons_words_current(tmp_path):
    """A person on b edits the note b's agent memorized anew before b heard that a's
    forgot the memory: the settle does not fold their words into the archived note; the
    edited note stays where it is, said once on each machine."""
    a, b, twin = _forgotten_here_memorized_anew_there(tmp_path)
    person_commit(b, twin, (b / twin).read_text().replace(BODY, BODY + ", on a dedicated host"), "edit on b")
    done = sync(b, "--json")
    archived = next(p for p, t in notes(b).items() if field(t, "archive_reason") == "forgotten")
    assert json.loads(done.stdout)["settled"] == [{"kept_edited": twin, "forgotten": archived}]
    first = sync(a)
    assert "kept  " + twin in first.stderr and "their words stay current" in first.stderr
    _reinforce(b, BODY, "2026-03-01T10:00:00Z")  # a repeat changes the twin: nothing new to tell
    converge(a, b)
    for machine in (a, b):
        (text,) = [t for p, t in active(machine).items() if BODY in t]
        assert "on a dedicated host" in text and field(text, "archived") is None
        assert field(notes(machine)[archived], "archive_reason") == "forgotten"  # the forget stands for its note
        assert "kept  " not in sync(machine).stderr  # told once
    cx(a, "validate", "--all")
    assert cx(a, "query", "ledger dedicated host", check=False).returncode == 0


def test_forgotten_on_one_machine_with_its_words_edited_on_the_other_comes_back_said_so(tmp_path):
    """One note: a forgets it, a person on b edits its words before hearing. The edit is
    not hidden in the archive: the note is current again, and the sync says why."""
    a, b, path = shared_memory(tmp_path, BODY)
    assert cx(a, "forget", path, "--reason", "moved to MySQL").returncode == 0
    sync(a)
    person_commit(b, path, (b / path).read_text().replace(BODY, BODY + ", on a dedicated host"), "edit on b")
    done = sync(b, "--json")
    assert json.loads(done.stdout)["settled"] == [{"revived": "mind/archive/" + path.removeprefix("mind/"),
                                                    "to": path, "was": "forgotten"}]
    converge(a, b)
    for machine in (a, b):
        text = active(machine)[path]
        assert "on a dedicated host" in text and field(text, "archived") is None
        assert not [p for p in notes(machine) if p.startswith("mind/archive/")]
    cx(a, "validate", "--all")


def test_a_memory_deleted_on_one_machine_and_only_counted_on_the_other_stays_deleted(tmp_path):
    """A person deletes a memory on one machine while the other's agent says it again
    (the reinforce job counts it there): git calls that a modify/delete conflict; the
    sync settles it for the deletion, and the other machine then holds a repeat too."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    converge(a, b)
    path = next(p for p, t in active(a).items() if BODY in t)
    git(a, "rm", "-q", path)
    sh(a, "git", "commit", "-q", "-m", "not true any more")
    _reinforce(b, BODY, "2026-11-01T10:00:00Z")  # b's agent, not told yet, says it again
    sync(b)
    done = sync(a, "--json")
    assert {"kept_deleted": path} in json.loads(done.stdout)["settled"]
    converge(a, b)
    for machine in (a, b):
        assert not [p for p, t in notes(machine).items() if BODY in t]
        assert git(machine, "status", "--porcelain") == ""
        fsck(machine)
    write(b, BODY, timestamp="2026-11-02T10:00:00Z")  # said again on b: held, as on a
    report = json.loads(cx(b, "run", "--json").stdout)
    assert report["memorized"] == 0 and report["quarantined"] == {"deleted": 1}


def test_a_memory_deleted_on_one_machine_and_rewritten_on_the_other_is_left_to_a_person(tmp_path):
    a, b, rel = shared_memory(tmp_path, BODY)
    git(a, "rm", "-q", rel)
    sh(a, "git", "commit", "-q", "-m", "not true any more")
    person_commit(b, rel, (b / rel).read_text().replace(BODY, "The ledger moved to CockroachDB"), "edit on b")
    hint = stopped_by_conflict(a, b, rel)
    assert "`git rm` a file deleted on one side and changed on the other to keep it deleted" in hint
    assert "<<<<<<<" not in hint  # it has no conflict markers
    # The person follows it, keeping their edit: the note is back on both machines.
    sh(b, "git", "merge", "origin/main", check=False)
    git(b, "add", rel)
    sh(b, "git", "commit", "-q", "--no-edit")
    converge(a, b)
    assert "CockroachDB" in (a / rel).read_text()
    cx(a, "validate", "--all")


def deleted_here_memorized_there(a, b) -> tuple[str, str]:
    """a memorizes BODY and a person deletes it there; b's agent, which never had it,
    memorizes it anew another day: (the path deleted on a, the twin on b)."""
    write(a, BODY, timestamp="2026-11-01T10:00:00Z")
    cx(a, "run")
    path = next(p for p, t in active(a).items() if BODY in t)
    git(a, "rm", "-q", path)
    sh(a, "git", "commit", "-q", "-m", "not true")
    write(b, BODY, timestamp="2026-11-02T10:00:00Z")
    assert json.loads(cx(b, "run", "--json").stdout)["memorized"] == 1
    return path, next(p for p, t in active(b).items() if BODY in t)


@pytest.mark.parametrize("first", ["deleting", "repeating"])
def test_a_memory_deleted_on_one_machine_and_memorized_anew_on_the_other_stays_deleted(tmp_path, first):
    """The other machine never had the note: its agent, not told, memorizes the same
    observation anew (another day, another path, one source_hash). Whichever machine
    merges, the deletion stands, and a repeat is held on both after."""
    _, (a, b) = make_fleet(tmp_path, 2)
    path, twin = deleted_here_memorized_there(a, b)
    order = (a, b) if first == "deleting" else (b, a)
    sync(order[0])
    done = sync(order[1], "--json")
    assert {"kept_deleted": twin, "deleted": path} in json.loads(done.stdout)["settled"]
    converge(a, b)
    for machine in (a, b):
        assert not [p for p, t in notes(machine).items() if BODY in t]
        write(machine, BODY, timestamp="2026-11-03T10:00:00Z")
        report = json.loads(cx(machine, "run", "--json").stdout)
        assert report["memorized"] == 0 and report["quarantined"] == {"deleted": 1}, report
        fsck(machine)


def test_a_memory_promoted_after_its_deletion_was_heard_of_stays(tmp_path):
    """The person who wants it after all promotes the held line: that note comes after the
    deletion in history, and no sync removes it."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY)
    cx(a, "run")
    path = next(p for p, t in active(a).items() if BODY in t)
    git(a, "rm", "-q", path)
    sh(a, "git", "commit", "-q", "-m", "not true")
    converge(a, b)
    write(b, BODY, timestamp="2026-11-02T10:00:00Z")
    assert json.loads(cx(b, "run", "--json").stdout)["quarantined"] == {"deleted": 1}
    held = json.loads(cx(b, "quarantine", "list", "--json").stdout)
    cx(b, "quarantine", "promote", held[0]["id"])
    write(a, "Something else entirely happened on a.")
    cx(a, "run")  # so that the next sync is a merge
    converge(a, b)
    for machine in (a, b):
        assert len([p for p, t in active(machine).items() if BODY in t]) == 1


def test_a_twin_a_persons_git_pull_merged_in_is_deleted_by_the_next_sync(tmp_path):
    """A plain `git pull` is git's merge, which cannot know a deleted memory from a new
    one: the next `cortex sync` settles it as its own merge would have."""
    _, (a, b) = make_fleet(tmp_path, 2)
    converge(a, b)
    path, twin = deleted_here_memorized_there(a, b)
    sync(b)
    sh(a, "git", "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    assert (a / twin).exists()  # git's merge kept it
    done = sync(a, "--json")
    assert {"kept_deleted": twin, "deleted": path} in json.loads(done.stdout)["settled"]
    converge(a, b)
    for machine in (a, b):
        assert not [p for p, t in notes(machine).items() if BODY in t]
        assert git(machine, "status", "--porcelain") == ""


def test_a_memory_deleted_on_one_machine_and_archived_on_the_other_stays_deleted(tmp_path):
    """git sees a rename on one side and a deletion on the other (rename/delete); the
    archived note is both the conflicted file and a note added on its side, and is left
    out of the merge once."""
    a, b, rel = shared_memory(tmp_path, BODY)
    git(a, "rm", "-q", rel)
    sh(a, "git", "commit", "-q", "-m", "not true")
    cx(b, "forget", rel, "--reason", "out of date")
    sync(a)
    done = sync(b, "--json")
    settled = json.loads(done.stdout)["settled"]
    assert [item["kept_deleted"] for item in settled] == [rel.replace("mind/", "mind/archive/", 1)]
    converge(a, b)
    for machine in (a, b):
        assert not [p for p, t in notes(machine).items() if BODY in t]
        fsck(machine)


def _pull_concluded_over_a_decay(tmp_path):
    """A person deletes a memory on a while b's decay archives it; a's plain `git pull`
    stops (rename/delete: git leaves the archived copy in the tree), and they conclude it
    the natural way, `git add -A` and commit. (a, b, the deleted path, the archived copy.)"""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY, timestamp="2024-01-10T10:00:00Z")  # old enough to fade
    cx(a, "run")
    converge(a, b)
    (path,) = [p for p, t in active(a).items() if BODY in t]
    archived = path.replace("mind/", "mind/archive/", 1)
    git(a, "rm", "-q", path)
    sh(a, "git", "commit", "-q", "-m", "not true")
    cx(b, "decay")
    sync(b)
    pulled = sh(a, "git", "pull", "--no-rebase", "--no-edit", "origin", "main", check=False)
    assert pulled.returncode == 1
    assert (f"CONFLICT (rename/delete): {path} renamed to {archived} in " in pulled.stdout
            and f"CONFLICT (modify/delete): {archived} deleted in HEAD and modified in " in pulled.stdout)
    git(a, "add", "-A")
    sh(a, "git", "commit", "-q", "--no-edit")
    return a, b, path, archived


def test_a_persons_pull_concluded_where_they_deleted_a_memory_decay_archived_elsewhere_is_settled_by_the_sync(
        tmp_path):
    """The archived copy goes in with the commit that concludes the pull, and the next
    `cortex sync` deletes it."""
    a, b, path, archived = _pull_concluded_over_a_decay(tmp_path)
    assert (a / archived).exists()
    assert {"kept_deleted": archived, "deleted": path, "archived": "faded"} in json.loads(sync(a, "--json").stdout)["settled"]
    converge(a, b)
    for machine in (a, b):
        assert not [p for p, t in notes(machine).items() if BODY in t]
        assert git(machine, "status", "--porcelain") == ""


def test_the_sync_says_it_removed_the_archived_copy_of_a_memory_a_person_deleted(tmp_path):
    """The sync's report and its commit say what happened: the memory the person deleted
    had been archived on the other machine, and its archived copy goes; nothing was
    memorized anew."""
    a, _, path, archived = _pull_concluded_over_a_decay(tmp_path)
    done = sync(a)
    report = done.stdout + done.stderr
    assert (f"settled  {archived} removed, the archived copy of {path}: a person deleted that memory "
            "(archived on the other side: faded)") in report
    assert "memorized anew" not in report
    message = git(a, "log", "-1", "--format=%B", "--grep=^settle:")
    assert f"{archived} deleted (the archived copy of {path}, which a person deleted; archived on the other side: faded)" in message
    assert "memorized anew" not in message


def test_a_persons_merge_stopped_on_a_conflict_is_named_and_the_sync_waits_for_it(tmp_path):
    """The sync blamed "uncommitted changes in files the remote changed too" and advised
    `git stash`, which git refuses with unmerged paths ("needs merge"). It says a merge
    is in progress and how to end it (exit 75), and syncs once it is over."""
    a, b, rel = shared_memory(tmp_path, BODY)
    write(a, "Another machine's memory arrives meanwhile")
    cx(a, "run")
    sync(a)
    text = (b / rel).read_text()
    git(b, "checkout", "-qb", "topic")
    person_commit(b, rel, text.replace(BODY, "Topic's words for the ledger"), "topic's edit")
    git(b, "checkout", "-q", "main")
    person_commit(b, rel, text.replace(BODY, "Main's words for the ledger"), "main's edit")
    assert sh(b, "git", "merge", "topic", check=False).returncode != 0
    head = git(b, "rev-parse", "HEAD")
    done = sync(b, "--json", check=False)
    assert done.returncode == 75 and json.loads(done.stdout)["error"] == "in_progress"
    assert "a merge is in progress in the vault with unresolved conflicts" in done.stderr
    assert "`git merge --abort`" in done.stderr and "stash" not in done.stderr
    assert git(b, "rev-parse", "HEAD") == head and (b / ".git" / "MERGE_HEAD").exists()
    assert "merge in progress" in cx(b, "status").stdout
    git(b, "merge", "--abort")
    sync(b)
    assert any("Another machine's memory" in t for t in active(b).values())


def test_a_twin_memorized_anew_and_edited_by_a_person_is_not_deleted_for_the_other_sides_deletion(tmp_path):
    """The deletion on one side meets a note the other side's person has edited since it
    was memorized: their words now, which no settle deletes; the report says so."""
    _, (a, b) = make_fleet(tmp_path, 2)
    path, twin = deleted_here_memorized_there(a, b)
    note = b / twin
    note.write_text(note.read_text() + "\nChecked with the harbour master: still true.\n")
    git(b, "commit", "-qam", "person: a note of mine")
    sync(a)
    done = sync(b)
    assert f"kept  {twin} (the memory deleted as {path}" in done.stdout + done.stderr
    assert "still true" in note.read_text()
    converge(a, b)
    assert "still true" in (a / twin).read_text() and path not in notes(a)
