"""The maintenance jobs on real vaults: reinforce, decay, dedup, graph; locks and idempotence."""

from __future__ import annotations

import json
from datetime import timedelta
import xml.etree.ElementTree as ET

import pytest

from conftest import git, observation
from cortex.importance import effective_importance
from cortex.notes import source_hash
from cortex.maintenance.base import JobContext
from cortex.maintenance.dedup_check import verdict
from cortex.maintenance.graph import build_graph, export, find_nodes, neighbors
from cortex.maintenance.due import run_due, run_job
from cortex.taxonomy import DEFAULT_TAXONOMY
from maint_helpers import MONTH, T0, commit_count, make_note, meta, note_paths, subjects, when

LOCKED = (("maintainer", "human"),)


def reinforce_by_run(vault, body: str, at: str, type_: str = "fact") -> None:
    vault.write(observation(body=body, type=type_, timestamp=at))
    vault.run(now=when(at))


# --- reinforce -------------------------------------------------------------------------------

def test_reinforcement_map_is_applied_then_cleared(vault):
    path = make_note(vault, "fact", "The staging database is rebuilt every night at 02:00.")
    note_id = meta(vault, path)["id"]
    for at in ("2026-02-01T10:00:00.000Z", "2026-02-03T11:00:00.000Z"):
        reinforce_by_run(vault, "The  staging database is REBUILT every night at 02:00.", at)
    assert vault.load_state().reinforcements[note_id]["count"] == 2

    result = run_job(vault, "reinforce", now=when("2026-02-04T00:00:00Z"))
    m = meta(vault, path)
    assert result.changed == 1 and subjects(vault, 1) == ["reinforce: 1 memory"]
    assert m["reinforced"] == 2 and when(m["last_reinforced"]) == when("2026-02-03T11:00:00Z")
    assert vault.load_state().reinforcements == {}
    assert git(vault.root, "status", "--porcelain") == ""

    before = commit_count(vault)
    assert run_job(vault, "reinforce", now=when("2026-02-04T01:00:00Z")).commit is None
    assert commit_count(vault) == before


def test_a_tally_of_digits_alone_is_written_as_a_string(vault, monkeypatch):
    """The tally is a random token of hex digits; one of digits alone (one in forty) read
    as a number (`00001111` even as an octal 585) where a person's tools and YAML expect
    the token: it is written quoted, and every reader sees the string."""
    import secrets

    import yaml

    from cortex.notes import split_frontmatter

    path = make_note(vault, "fact", "The staging database is rebuilt every night at 02:00.")
    reinforce_by_run(vault, "The staging database is rebuilt every night at 02:00.", "2026-02-01T10:00:00.000Z")
    monkeypatch.setattr(secrets, "token_hex", lambda n: "00001111")
    run_job(vault, "reinforce", now=when("2026-02-04T00:00:00Z"))
    text = (vault.root / path).read_text(encoding="utf-8")
    assert meta(vault, path)["reinforced_tally"] == "00001111"
    assert yaml.safe_load(split_frontmatter(text)[0])["reinforced_tally"] == "00001111"


def test_reinforcing_an_archived_memory_brings_it_back(vault):
    path = make_note(vault, "goal_short", "Close all open security alerts in the dotfiles repo.", importance=0.5)
    run_job(vault, "decay", now=T0 + 3 * MONTH)
    archived = path.replace("mind/goals/", "mind/archive/goals/")
    assert note_paths(vault) == [archived] and meta(vault, archived)["archive_reason"] == "faded"

    reinforce_by_run(vault, "Close all open security alerts in the dotfiles repo.", "2026-04-10T09:00:00.000Z", "goal_short")
    run_job(vault, "reinforce", now=when("2026-04-10T10:00:00Z"))
    assert note_paths(vault) == [path]
    m = meta(vault, path)
    assert "archived" not in m and "archive_reason" not in m and m["reinforced"] == 1
    assert when(m["last_reinforced"]) == when("2026-04-10T09:00:00Z")
    assert git(vault.root, "status", "--porcelain") == ""
    # freshly reinforced: decay leaves it where it is
    assert run_job(vault, "decay", now=when("2026-04-11T00:00:00Z")).changed == 0


def test_reinforce_survives_a_crash_between_commit_and_state(vault, monkeypatch):
    path = make_note(vault, "fact", "Ledgerline stores money as integer cents.")
    reinforce_by_run(vault, "Ledgerline stores money as integer cents.", "2026-02-01T10:00:00.000Z")
    from cortex.gitrepo import GitRepo

    def killed(self, changes, before):
        raise KeyboardInterrupt  # the process dies right after the commit

    monkeypatch.setattr(GitRepo, "materialize", killed)
    with pytest.raises(KeyboardInterrupt):
        run_job(vault, "reinforce", now=when("2026-02-02T00:00:00Z"))
    monkeypatch.undo()
    assert vault.load_state().reinforcements  # not cleared: the state was never told
    before = commit_count(vault)
    run_job(vault, "reinforce", now=when("2026-02-02T00:05:00Z"))
    assert commit_count(vault) == before  # recovered, not re-applied
    assert meta(vault, path)["reinforced"] == 1 and vault.load_state().reinforcements == {}
    assert git(vault.root, "status", "--porcelain") == ""


# --- decay -----------------------------------------------------------------------------------

def test_decay_per_type_walkthrough_example():
    commitment = {"type": "commitment", "importance": 0.8, "created": "2026-01-05T09:00:00.000Z"}
    assert effective_importance(commitment, DEFAULT_TAXONOMY, T0 + 2 * MONTH) == pytest.approx(0.6)
    preference = {"type": "preference", "importance": 0.3, "created": "2020-01-01T00:00:00.000Z"}
    assert effective_importance(preference, DEFAULT_TAXONOMY, T0 + 60 * MONTH) == pytest.approx(0.3)
    decision = {"type": "decision", "importance": 0.5, "created": "2020-01-01T00:00:00.000Z"}
    assert effective_importance(decision, DEFAULT_TAXONOMY, T0 + 60 * MONTH) == pytest.approx(0.5)


def test_decay_archives_below_the_threshold_and_nothing_else(vault):
    fading = make_note(vault, "commitment", "Maya will rotate the Stripe API keys after the incident.", importance=0.5)
    holding = make_note(vault, "commitment", "Jonas will add idempotency keys to the invoice API.", importance=0.52,
                        created=T0 + MONTH * 0.2)
    pref = make_note(vault, "preference", "Maya prefers Neovim as her editor.", importance=0.25)
    decision = make_note(vault, "decision", "Store money as integer cents.", importance=0.5)
    now = T0 + 3.05 * MONTH  # 0.5 - 0.305 = 0.195 < 0.2; 0.52 - 0.285 = 0.235 stays
    result = run_job(vault, "decay", now=now)
    assert [i["path"] for i in result.items] == [fading]
    assert result.items[0]["effective_importance"] == pytest.approx(0.195, abs=1e-3)
    archived = fading.replace("mind/commitments/", "mind/archive/commitments/")
    assert set(note_paths(vault)) == {archived, holding, pref, decision}
    assert subjects(vault, 1)[0] == "decay: 1 memory faded below 0.2"
    assert meta(vault, archived)["importance"] == 0.5  # nothing rewritten but the archive fields
    before = commit_count(vault)
    assert run_job(vault, "decay", now=now).commit is None and commit_count(vault) == before


def test_a_memory_a_person_moves_back_from_the_archive_stays_where_they_put_it(vault):
    """The move back is the person's decision: their commit (the hook) clears the archive
    fields and counts the move as a reinforcement, so the next decay leaves the memory
    where it is; one whose own importance is below the threshold gets a new memory's."""
    from conftest import cortex

    old = T0.replace(year=2020)
    kept = make_note(vault, "fact", "The fax machine is on floor two.", created=old, name="Fax")
    low = make_note(vault, "fact", "The spare badge is in the top drawer.", created=old, importance=0.05, name="Badge")
    done = cortex("--vault", str(vault.root), "maintain", "--force", "--only", "decay")
    assert done.returncode == 0, done.stderr
    assert not (vault.root / kept).exists() and not (vault.root / low).exists()
    for path in (kept, low):
        git(vault.root, "mv", path.replace("mind/facts/", "mind/archive/facts/"), path)
    git(vault.root, "commit", "-q", "-m", "still true")  # through the hooks
    assert git(vault.root, "status", "--porcelain") == ""
    for path in (kept, low):
        fields = meta(vault, path)
        assert not {"archived", "archive_reason"} & set(fields)
        assert fields["last_reinforced"].year >= 2026
    assert meta(vault, kept)["importance"] == 0.7 and meta(vault, low)["importance"] == 0.5

    done = cortex("--vault", str(vault.root), "maintain", "--force", "--json")
    assert done.returncode == 0, done.stderr
    decay = next(j for j in json.loads(done.stdout)["ran"] if j["job"] == "decay")
    assert decay["changed"] == 0
    assert (vault.root / kept).exists() and (vault.root / low).exists()


def _decay_by_cli(vault) -> dict:
    from conftest import cortex

    done = cortex("--vault", str(vault.root), "maintain", "--force", "--only", "decay", "--json")
    assert done.returncode == 0, done.stderr
    return next(j for j in json.loads(done.stdout)["ran"] if j["job"] == "decay")


def _bring_back(vault, how: str, path: str) -> None:
    """A person brings ``path`` back from the archive with git, by ``how``."""
    archived = path.replace("mind/facts/", "mind/archive/facts/")
    if how == "revert decay":
        git(vault.root, "revert", "--no-edit", "HEAD")  # no pre-commit hook runs
    elif how == "revert forget":
        git(vault.root, "revert", "--no-edit", git(vault.root, "log", "-1", "--format=%H", "--grep=^forget:").strip())
    elif how == "cherry-pick":  # a revert made on another branch, picked onto this one
        git(vault.root, "checkout", "-q", "-b", "side")
        git(vault.root, "revert", "--no-edit", "HEAD")
        git(vault.root, "checkout", "-q", "-")
        git(vault.root, "cherry-pick", "side")
    else:  # checkout the version before the archive, through the hooks
        before = git(vault.root, "log", "-1", "--format=%H", "--", archived).strip()
        git(vault.root, "checkout", "-q", f"{before}~1", "--", path)
        git(vault.root, "rm", "-q", archived)
        git(vault.root, "commit", "-q", "-m", "still true")


@pytest.mark.parametrize("how", ["revert decay", "revert forget", "cherry-pick", "checkout"])
def test_a_memory_a_person_brings_back_with_git_stays(vault, how):
    """A revert (of the decay or of the forget that archived it), a cherry-picked revert
    or an older version checked out brings the memory back with its old fields and runs
    no hook that would refresh them: decay counts the restoring commit as a
    reinforcement at its time, writes it into the note, and archives nothing."""
    from conftest import cortex

    old = T0.replace(year=2020)
    path = make_note(vault, "fact", "The fax machine is on floor two.", created=old, name="Fax")
    if how == "revert forget":  # forgotten before decay ever saw it
        done = cortex("--vault", str(vault.root), "forget", path, "--reason", "not sure")
        assert done.returncode == 0, done.stderr
    else:
        assert [i["path"] for i in _decay_by_cli(vault)["items"]] == [path]
    assert not (vault.root / path).exists()
    _bring_back(vault, how, path)
    assert (vault.root / path).exists() and "archived" not in meta(vault, path)
    restoring = git(vault.root, "log", "-1", "--format=%H %ct").split()

    decay = _decay_by_cli(vault)
    assert (vault.root / path).exists() and not (vault.root / "mind/archive/facts/Fax.md").exists()
    assert [(i["path"], i["restored_in"]) for i in decay["items"]] == [(path, restoring[0])]
    assert meta(vault, path)["last_reinforced"].timestamp() == int(restoring[1])
    assert subjects(vault, 1) == ["decay: 1 brought back by a person kept"]
    assert git(vault.root, "status", "--porcelain") == ""
    before = commit_count(vault)
    assert _decay_by_cli(vault)["changed"] == 0 and commit_count(vault) == before


def test_a_memory_cortex_brought_back_itself_fades_again(vault):
    """Only a person's commit counts as a restoration: a memory an agent's repeat brought
    back (the reinforce job's commit) fades from that reinforcement like any other."""
    body = "Close all open security alerts in the dotfiles repo."
    path = make_note(vault, "goal_short", body, importance=0.5)
    run_job(vault, "decay", now=T0 + 3 * MONTH)
    reinforce_by_run(vault, body, "2026-04-10T09:00:00.000Z", "goal_short")
    run_job(vault, "reinforce", now=when("2026-04-10T10:00:00Z"))
    assert path in note_paths(vault)
    result = run_job(vault, "decay", now=when("2026-04-10T09:00:00Z") + 3 * MONTH)
    assert [i["path"] for i in result.items] == [path] and "restored_in" not in result.items[0]


def test_forget_threshold_is_configurable(vault):
    path = make_note(vault, "opinion", "Maya thinks GraphQL is overkill for Ledgerline.", importance=0.6)
    with open(vault.root / "observer" / "config.yml", "a") as fh:
        fh.write("\nmaintenance:\n  forget_threshold: 0.5\n")
    assert run_job(vault, "decay", now=T0 + 3 * MONTH).items[0]["path"] == path  # 0.6 - 0.15 = 0.45


def test_a_forget_threshold_that_would_archive_fresh_memories_is_refused(vault):
    """observer/config.yml is shared: a teammate's `forget_threshold: 1.0` would have the
    next decay archive every memory, even one memorized a second ago."""
    from conftest import cortex

    for body in ("The CI runner image is rebuilt every Monday.", "Jonas reviews every change to invoicing."):
        assert cortex("--vault", str(vault.root), "write", "--type", "fact", "--body", body,
                      "--attribution", "maya").returncode == 0
    assert cortex("--vault", str(vault.root), "run").returncode == 0
    kept = note_paths(vault)
    assert len(kept) == 2
    with open(vault.root / "observer" / "config.yml", "a") as fh:
        fh.write("\nmaintenance:\n  forget_threshold: 1.0\n")
    git(vault.root, "commit", "-qam", "config: tidy maintenance", "--no-verify")

    done = cortex("--vault", str(vault.root), "maintain", "--force", "--only", "decay")
    assert done.returncode == 1
    assert "maintenance.forget_threshold must be a number from 0 to 0.5, got 1.0" in done.stderr
    assert "decay would archive memories the day they are memorized" in done.stderr
    assert note_paths(vault) == kept

    from cortex.config import Settings
    from cortex.maintenance.settings import MAX_FORGET_THRESHOLD

    assert MAX_FORGET_THRESHOLD <= Settings().threshold  # nothing the run keeps by default is below it


def test_a_memory_a_person_moves_into_the_archive_stays_there_when_an_agent_repeats_it(vault):
    """A person drags a memory into `mind/archive/facts/` (no archive fields: cortex did
    not archive it). The agent's repeat is counted on the note where it lies; the move is
    the person's decision, and no job undoes it."""
    from conftest import cortex

    body = "The gantry crane is inspected every Friday."
    path = make_note(vault, "fact", body)
    archived = "mind/archive/facts/" + path.rsplit("/", 1)[1]  # dropped straight into the folder
    (vault.root / "mind/archive/facts").mkdir(parents=True, exist_ok=True)
    git(vault.root, "mv", path, archived)
    git(vault.root, "commit", "-q", "-m", "vault backup")  # through the hooks
    reinforce_by_run(vault, body, "2026-02-10T09:00:00.000Z")
    done = cortex("--vault", str(vault.root), "maintain", "--force", "--json")
    assert done.returncode == 0, done.stderr
    assert note_paths(vault) == [archived]
    m = meta(vault, archived)
    assert m["reinforced"] == 1 and not {"archived", "archive_reason"} & set(m)
    assert git(vault.root, "status", "--porcelain") == ""


def test_a_near_duplicate_merged_into_a_memory_a_person_deleted_stays_archived_when_repeated(vault):
    """Dedup archived one of two near-duplicates, merged into the other; a person deleted
    the other. A repeat of the archived one's words once brought it back out of the
    archive: the memory the person deleted, under its twin's name."""
    from conftest import cortex

    kept = make_note(vault, "fact", "The yard gate closes at nine in the evening on weekdays")
    twin = make_note(vault, "fact", "On weekdays the yard gate closes at nine in the evening",
                     created=T0 + timedelta(days=2))
    run_job(vault, "dedup", now=T0 + timedelta(days=3))
    archived = "mind/archive/" + twin.split("/", 1)[1]
    assert note_paths(vault) == sorted([kept, archived])
    git(vault.root, "rm", "-q", kept)
    git(vault.root, "commit", "-q", "-m", "vault backup")  # the person's deletion, through the hooks
    reinforce_by_run(vault, "On weekdays the yard gate closes at nine in the evening", "2026-02-20T09:00:00.000Z")
    done = cortex("--vault", str(vault.root), "maintain", "--force", "--json")
    assert done.returncode == 0, done.stderr
    assert note_paths(vault) == [archived]
    assert meta(vault, archived)["reinforced"] == 1
    assert "the note it merged into was deleted" in done.stdout
    assert git(vault.root, "status", "--porcelain") == ""


def test_a_faded_memory_filed_flat_comes_back_into_its_month_folder(vault):
    """A memory cortex named but found directly in its type's folder (an older vault's
    flat layout) fades; a repeat brings it back into the month folder cortex files it in."""
    body = "The loading dock closes at six."
    name = f"2026-01-05-{source_hash(body)[:8]}"
    path = make_note(vault, "goal_short", body, importance=0.5, name=name)
    assert path == f"mind/goals/{name}.md"
    run_job(vault, "decay", now=T0 + 3 * MONTH)
    assert note_paths(vault) == [f"mind/archive/goals/{name}.md"]
    reinforce_by_run(vault, body, "2026-04-10T09:00:00.000Z", "goal_short")
    run_job(vault, "reinforce", now=when("2026-04-10T10:00:00Z"))
    assert note_paths(vault) == [f"mind/goals/2026-01/{name}.md"]


def test_a_pending_reinforcement_keeps_a_memory_from_fading(vault):
    make_note(vault, "goal_short", "Get the Ledgerline test suite under 3 minutes.", importance=0.5)
    reinforce_by_run(vault, "Get the Ledgerline test suite under 3 minutes.", "2026-03-20T09:00:00.000Z", "goal_short")
    assert run_job(vault, "decay", now=when("2026-03-21T00:00:00Z")).changed == 0


# --- locked notes -----------------------------------------------------------------------------

@pytest.mark.parametrize("lock", [LOCKED, (("locked", "true"),)])
def test_locked_notes_are_untouched_by_every_job(vault, lock):
    old = make_note(vault, "commitment", "Maya will write the incident report for the checkout outage.",
                    importance=0.3, extra=lock)
    dup_a = make_note(vault, "preference", "Maya prefers tabs over spaces in Go code.", extra=lock)
    dup_b = make_note(vault, "preference", "In Go code Maya prefers tabs rather than spaces.", created=T0 + MONTH)
    reinforce_by_run(vault, "Maya will write the incident report for the checkout outage.",
                     "2026-02-01T10:00:00.000Z", "commitment")
    before = {p: (vault.root / p).read_bytes() for p in (old, dup_a)}
    report = run_due(vault, now=T0 + 12 * MONTH, force=True)
    assert not report.errors
    for p, data in before.items():
        assert (vault.root / p).read_bytes() == data
    assert dup_b in note_paths(vault)  # its only duplicate is locked: no merge either way
    state = vault.load_state()
    assert state.reinforcements == {} and state.jobs["reinforce"]["held"][meta(vault, old)["id"]]["count"] == 1



def test_reinforcements_held_while_locked_are_applied_once_unlocked(vault):
    from maint_helpers import commit_files

    body = "Maya keeps the release checklist in the wiki."
    path = make_note(vault, "opinion", body, importance=0.3, extra=LOCKED)
    reinforce_by_run(vault, body, "2026-02-01T10:00:00.000Z", "opinion")
    run_job(vault, "reinforce", now=when("2026-02-01T11:00:00Z"))
    assert "reinforced" not in meta(vault, path)  # locked: not rewritten, the count is held
    text = (vault.root / path).read_text()
    commit_files(vault, {path: text.replace("maintainer: human\n", "")}, "person: unlock")
    run_job(vault, "reinforce", now=when("2026-02-02T09:00:00Z"))
    assert meta(vault, path)["reinforced"] == 1
    assert meta(vault, path)["last_reinforced"] == when("2026-02-01T10:00:00Z")
    assert not vault.load_state().jobs["reinforce"].get("held")


def test_held_reinforcements_of_a_deleted_note_are_dropped(vault):
    body = "Jonas keeps the on-call rota in the shared calendar."
    path = make_note(vault, "opinion", body, extra=LOCKED)
    reinforce_by_run(vault, body, "2026-02-01T10:00:00.000Z", "opinion")
    run_job(vault, "reinforce", now=when("2026-02-01T11:00:00Z"))
    assert vault.load_state().jobs["reinforce"]["held"]
    git(vault.root, "rm", "-q", path)
    git(vault.root, "commit", "-q", "--no-verify", "-m", "person: remove")
    result = run_job(vault, "reinforce", now=when("2026-02-02T09:00:00Z"))
    assert any("no such note any more" in w for w in result.warnings)
    assert not vault.load_state().jobs["reinforce"].get("held")

def test_a_note_being_edited_is_left_for_later(vault):
    path = make_note(vault, "goal_short", "Launch the Tidewatch public beta before Easter.", importance=0.5)
    (vault.root / path).write_text((vault.root / path).read_text() + "\nA person is typing here.\n")
    result = run_job(vault, "decay", now=T0 + 6 * MONTH)
    assert result.changed == 0 and result.skipped[0]["path"] == path
    assert path in note_paths(vault)


# --- dedup -----------------------------------------------------------------------------------

def test_dedup_merges_paraphrases_into_the_older_note(vault):
    older = make_note(vault, "preference", "Maya prefers tabs over spaces in Go code.", tags=["go"])
    newer = make_note(vault, "preference", "In Go code Maya prefers tabs rather than spaces.", created=T0 + MONTH)
    other = make_note(vault, "preference", "Maya prefers spaces over tabs in Python code.", created=T0 + MONTH)
    dry = run_job(vault, "dedup", now=T0 + 2 * MONTH, dry_run=True)
    assert [(i["keep"], i["merge"]) for i in dry.items] == [(older, newer)] and dry.items[0]["cosine"] >= 0.85
    assert commit_count(vault) and newer in note_paths(vault)  # dry run: nothing moved

    result = run_job(vault, "dedup", now=T0 + 2 * MONTH)
    archived = newer.replace("mind/preferences/", "mind/archive/preferences/")
    assert set(note_paths(vault)) == {older, archived, other}
    kept, gone = meta(vault, older), meta(vault, archived)
    assert kept["merged_from"] == [gone["id"]] and kept["reinforced"] == 1
    assert when(kept["last_reinforced"]) == T0 + MONTH
    assert gone["merged_into"] == kept["id"] and gone["archive_reason"] == "merged"
    assert subjects(vault, 1)[0].startswith("dedup: 1 near-duplicate merged")
    assert git(vault.root, "status", "--porcelain") == ""
    before = commit_count(vault)
    assert run_job(vault, "dedup", now=T0 + 2 * MONTH).commit is None and commit_count(vault) == before
    assert result.changed == 1


def test_dedup_archives_a_memory_the_newest_of_its_subject_contradicts(vault):
    standup = make_note(vault, "fact", "The team standup is at 09:30 every weekday.")
    moved = make_note(vault, "fact", "The team standup is at 10:15 every weekday.", created=T0 + MONTH)
    retro = make_note(vault, "fact", "The team retro is at 15:00 every other Friday.", created=T0 + MONTH)
    flags = make_note(vault, "fact", "Feature flags are enabled in staging.")
    flags_now = make_note(vault, "fact", "Feature flags are disabled in staging.", created=T0 + MONTH)
    both = make_note(vault, "fact", "The sync worker imports bank statements as CSV files.")
    also = make_note(vault, "fact", "The sync worker exports bank statements as CSV files.", created=T0 + MONTH)
    edited = make_note(vault, "fact", "Payroll runs on the 25th of each month.")
    make_note(vault, "fact", "Payroll runs on the 28th of each month.", created=T0 + MONTH)
    (vault.root / edited).write_text((vault.root / edited).read_text() + "\nA person is still writing here.\n")

    dry = run_job(vault, "dedup", now=T0 + 2 * MONTH, dry_run=True)
    assert {(i["superseded"], i["by"]) for i in dry.items} == {(standup, moved), (flags, flags_now)}
    result = run_job(vault, "dedup", now=T0 + 2 * MONTH)
    assert result.changed == 2 and [s["superseded"] for s in result.skipped] == [edited]
    archived = {p: p.replace("mind/facts/", "mind/archive/facts/") for p in (standup, flags)}
    paths = set(note_paths(vault))
    assert set(archived.values()) <= paths and not {standup, flags} & paths
    assert {moved, retro, flags_now, both, also, edited} <= paths  # the current ones, other subjects, roles, the edit
    for old, new in ((standup, moved), (flags, flags_now)):
        gone = meta(vault, archived[old])
        assert gone["archive_reason"] == "superseded" and gone["superseded_by"] == meta(vault, new)["id"]
    assert "2 contradicted memories superseded" in subjects(vault, 1)[0]
    assert git(vault.root, "status", "--porcelain").strip() == f"M {edited}"  # the person's edit, untouched


def test_a_memory_repeated_after_its_contradiction_is_the_current_one(vault):
    seven = make_note(vault, "fact", "The team has 7 engineers.", last_reinforced=T0 + 3 * MONTH)
    nine = make_note(vault, "fact", "The team has 9 engineers.", created=T0 + MONTH)
    result = run_job(vault, "dedup", now=T0 + 4 * MONTH)
    assert [(i["superseded"], i["by"]) for i in result.items] == [(nine, seven)]  # 7 was said again, last
    assert seven in note_paths(vault) and nine not in note_paths(vault)


def test_dedup_never_crosses_types_or_partitions(vault):
    make_note(vault, "preference", "Maya prefers small pull requests with one concern each.")
    make_note(vault, "opinion", "Maya prefers small pull requests, one concern each.", created=T0 + MONTH)
    make_note(vault, "decision", "Ledgerline stores money as integer cents.")
    make_note(vault, "decision", "Ledgerline keeps money as integer cents.", created=T0 + MONTH)
    make_note(vault, "fact", "Ledgerline stores money as integer cents in PostgreSQL.", created=T0 + MONTH)
    before = note_paths(vault)
    assert run_job(vault, "dedup", now=T0 + 2 * MONTH).changed == 0
    assert note_paths(vault) == before


def test_a_merged_duplicate_reinforces_the_note_it_joined(vault):
    older = make_note(vault, "lesson", "Small pull requests get reviewed faster.")
    make_note(vault, "lesson", "Pull requests that are small get reviewed more quickly.", created=T0 + MONTH)
    run_job(vault, "dedup", now=T0 + 2 * MONTH)
    reinforce_by_run(vault, "Pull requests that are small get reviewed more quickly.", "2026-04-01T09:00:00.000Z", "lesson")
    run_job(vault, "reinforce", now=when("2026-04-01T10:00:00Z"))
    assert meta(vault, older)["reinforced"] == 2  # the merge, then this observation
    assert len(note_paths(vault)) == 2


def _dedup_by_cli(vault) -> dict:
    from conftest import cortex

    done = cortex("--vault", str(vault.root), "maintain", "--force", "--only", "dedup", "--json")
    assert done.returncode == 0, done.stderr
    return next(j for j in json.loads(done.stdout)["ran"] if j["job"] == "dedup")


def _split_by_dedup(vault, kind: str) -> tuple[str, str, str]:
    """Two notes dedup pairs (a near-duplicate, or a contradicted memory and the newer one
    that contradicts it), paired by ``cortex maintain``: (older, newer, the one archived)."""
    if kind == "merge":
        older = make_note(vault, "preference", "Maya prefers tabs over spaces in Go code.", name="Tabs")
        newer = make_note(vault, "preference", "In Go code Maya prefers tabs rather than spaces.", created=T0 + MONTH,
                          name="Tabs-Go")
    else:
        older = make_note(vault, "fact", "The team standup is at 09:30 every weekday.", name="Standup")
        newer = make_note(vault, "fact", "The team standup is at 10:15 every weekday.", created=T0 + MONTH,
                          name="Standup-moved")
    first = _dedup_by_cli(vault)
    gone = newer if kind == "merge" else older
    assert first["changed"] == 1 and not (vault.root / gone).exists()
    return older, newer, gone


@pytest.mark.parametrize("kind", ["merge", "supersede"])
@pytest.mark.parametrize("how", ["revert", "git mv"])
def test_a_pair_a_person_splits_stays_apart(vault, kind, how):
    """A person who reverts the ``dedup:`` commit, or moves the note back out of the
    archive (through the hook, which clears ``merged_into`` / ``superseded_by`` and makes
    the note the one said last), said the two are different memories: the next dedup
    neither merges nor supersedes the pair again (nor the other way round), and says why."""
    from conftest import cortex

    older, newer, gone = _split_by_dedup(vault, kind)
    if how == "revert":
        git(vault.root, "revert", "--no-edit", "HEAD")  # no hook runs
    else:
        git(vault.root, "mv", gone.replace("mind/", "mind/archive/", 1), gone)
        git(vault.root, "commit", "-q", "-m", "two different memories")
    assert "archive_reason" not in meta(vault, gone)
    restoring = git(vault.root, "rev-parse", "HEAD").strip()
    before = commit_count(vault)

    dedup = _dedup_by_cli(vault)
    assert dedup["changed"] == 0 and dedup["commit"] is None and commit_count(vault) == before
    assert (vault.root / older).exists() and (vault.root / newer).exists()
    # moved back through the hook, the old standup is the one said last: it would supersede the new one
    again = newer if (kind, how) == ("supersede", "git mv") else gone
    side = "merge" if kind == "merge" else "superseded"
    assert [(s[side], s["restored"], s["restored_in"], s["why"]) for s in dedup["skipped"]] == [
        (again, gone, restoring, f"kept apart: a person brought it back in {restoring[:10]}")]
    assert git(vault.root, "status", "--porcelain") == ""
    assert _dedup_by_cli(vault)["changed"] == 0 and commit_count(vault) == before
    dry = cortex("--vault", str(vault.root), "dedup", "--dry-run")
    assert dry.returncode == 0 and "would merge 0 near-duplicates in" in dry.stderr, dry.stderr
    assert f"(kept apart: a person brought it back in {restoring[:10]})" in dry.stdout


def test_a_note_a_person_split_off_still_merges_with_other_duplicates(vault):
    """Kept apart is a pair: a new duplicate of both merges into the older note as any
    would, and the note the person brought back stays where they put it."""
    older, newer, gone = _split_by_dedup(vault, "merge")
    git(vault.root, "revert", "--no-edit", "HEAD")
    again = make_note(vault, "preference", "For Go code, Maya prefers tabs over spaces.", created=T0 + 2 * MONTH,
                      name="Tabs-again")
    dedup = _dedup_by_cli(vault)
    assert [(i["keep"], i["merge"]) for i in dedup["items"]] == [(older, again)]
    assert [(s["keep"], s["merge"]) for s in dedup["skipped"]] == [(older, newer)]
    assert (vault.root / newer).exists() and not (vault.root / again).exists()
    assert meta(vault, older)["merged_from"] == [meta(vault, again.replace("mind/", "mind/archive/", 1))["id"]]


def test_only_the_memory_it_was_joined_to_is_kept_apart(vault):
    """The archived copy names the memory cortex joined it to: a restoration keeps that
    pair apart, not the note from every other."""
    from cortex.gitrepo import GitRepo
    from cortex.maintenance.restored import kept_apart

    older, newer, gone = _split_by_dedup(vault, "merge")
    git(vault.root, "revert", "--no-edit", "HEAD")
    other = make_note(vault, "preference", "Maya prefers short commit messages.", created=T0 + 2 * MONTH)
    notes = {n.path: n for n in JobContext(vault, T0 + 3 * MONTH).snapshot()}
    split = kept_apart(GitRepo(vault.root), [(notes[older], notes[newer]), (notes[other], notes[newer])])
    assert list(split) == [(older, newer)] and split[older, newer][0].path == gone


def test_dedup_reads_history_only_for_tonights_pairs_since_both_existed(vault, monkeypatch):
    """One ``git log`` for the pairs about to be merged or superseded, their paths only,
    back to when the newer of each pair was created (a day's slack for clocks); none when
    nothing is to merge."""
    from cortex import gitcli
    from cortex.maintenance.restored import SLACK

    logs, real = [], gitcli.run

    def run(root, *args, **kw):
        logs.append((args, kw.get("input")))
        return real(root, *args, **kw)

    monkeypatch.setattr(gitcli, "run", run)
    make_note(vault, "fact", "The office plants are watered on Fridays.")
    make_note(vault, "fact", "The coffee machine is descaled every month.")
    assert run_job(vault, "dedup", now=T0 + MONTH).changed == 0
    assert [args for args, _ in logs if "log" in args] == []  # no pair tonight: no history read

    older, newer, _ = _split_by_dedup(vault, "merge")
    git(vault.root, "revert", "--no-edit", "HEAD")
    logs.clear()
    result = run_job(vault, "dedup", now=T0 + 3 * MONTH)
    assert result.changed == 0 and [s["restored"] for s in result.skipped] == [newer]
    reads = [(args, stdin) for args, stdin in logs if "log" in args]
    assert len(reads) == 1
    args, stdin = reads[0]
    assert f"--since={int((T0 + MONTH - SLACK).timestamp())}" in args
    assert stdin == f"HEAD\n--\n{older}\n{newer}\n"


@pytest.mark.parametrize("a, b, expected", [
    ("Maya prefers tabs over spaces in Go code.", "Maya prefers spaces over tabs in Go code.", False),
    ("The billing cron job runs at 06:00 UTC.", "The billing cron job runs at 07:00 UTC.", False),
    ("Maya owns payments in Ledgerline.", "Jonas owns payments in Ledgerline.", False),
    ("Priya feels the onboarding flow is too long.", "Priya feels the onboarding flow is too short.", False),
    ("Jonas believes manual QA still catches real bugs.", "Jonas believes manual QA no longer catches real bugs.", False),
    ("Ledgerline stores money as integer cents.", "Ledgerline keeps money amounts as integer cents.", True),
    # an antonym in any inflection, and a word against its negated form
    ("The importer increased throughput on Mondays.", "The importer decreased throughput on Mondays.", False),
    ("Requests from the office network are allowed.", "Requests from the office network are denied.", False),
    ("The cleanup script is safe to rerun.", "The cleanup script is unsafe to rerun.", False),
    ("The export job reads from the primary database.", "The export job writes to the primary database.", False),
    # a gerund starting a sentence is no name; "nightly" is "every night"
    ("The import script is safe to run twice.", "Running the import script twice is safe.", True),
])
def test_lexical_check(a, b, expected):
    from cortex.embed import get_model

    va, vb = get_model().encode([a, b])
    assert verdict(float(va @ vb), a, b, 0.85)[0] is expected


def test_dedup_blocks_by_type_in_chunks(vault, monkeypatch):
    import numpy as np

    from cortex.maintenance import dedup

    monkeypatch.setattr(dedup, "CHUNK_CELLS", 64)  # force many small blocks
    rng = np.random.default_rng(0)
    base = rng.normal(size=(40, 16)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    matrix = np.concatenate([base, base[:5] * 0.999 + 0.001])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    pairs = {(i, j) for i, j, _ in dedup.similar_pairs(matrix, 0.99)}
    assert pairs == {(k, 40 + k) for k in range(5)}


def test_dedup_inverted_file_finds_the_planted_pairs(monkeypatch):
    import numpy as np

    from cortex.maintenance import dedup

    monkeypatch.setattr(dedup, "EXACT_ROWS", 100)  # the inverted file, not the exact product
    monkeypatch.setattr(dedup, "CELL_ROWS", 50)
    rng = np.random.default_rng(1)
    base = rng.normal(size=(1000, 32)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    twins = base[:30] + rng.normal(scale=0.02, size=(30, 32)).astype(np.float32)
    matrix = np.concatenate([base, twins / np.linalg.norm(twins, axis=1, keepdims=True)])
    exact = {(i, j) for i, j, _ in dedup.similar_pairs(matrix, 0.95)}
    found = {(i, j) for i, j, _ in dedup.near_pairs(matrix, 0.95)}
    assert exact == {(k, 1000 + k) for k in range(30)} and found == exact


def test_dedup_blocks_leave_the_merges_unchanged(vault):
    from cortex.embed import get_model
    from cortex.maintenance.dedup import plan_dedup

    bodies = ["Ledgerline's API is built with FastAPI.", "FastAPI is the framework behind the Ledgerline API.",
              "Ledgerline runs PostgreSQL 15.", "Ledgerline runs PostgreSQL 16.", "PostgreSQL 16 runs Ledgerline.",
              "Maya never deploys on Fridays.", "Maya deploys on Fridays.", "Deploys on Fridays are fine for Maya."]
    for k, body in enumerate(bodies):
        make_note(vault, "fact", body, created=T0 + k * MONTH)
    with vault.lock():
        snapshot = JobContext(vault, T0).snapshot()
    embed = lambda notes: get_model().encode([n.body for n in notes])  # noqa: E731
    blocked, full = plan_dedup(snapshot, embed, 0.85), plan_dedup(snapshot, embed, 0.85, explain=True)
    pairs = lambda plan: [(m.keep.path, m.merge.path) for m in plan.merges]  # noqa: E731
    assert pairs(blocked) == pairs(full) and len(pairs(full)) >= 2
    assert any("numbers" in why for *_, why in full.vetoed)


# --- graph -----------------------------------------------------------------------------------

def test_graph_nodes_and_edges(vault):
    project = make_note(vault, "project", "Ledgerline is the co-op's billing service.", name="ledgerline",
                        entities=[("Ledgerline", "project")])
    fact = make_note(vault, "fact", "Maya owns payments in [[ledgerline]]; see [[Stripe|the Stripe notes]].",
                     entities=[("Maya Okafor", "person")], tags=["payments", "team/roles"])
    make_note(vault, "lesson", "Small pull requests get reviewed faster.")
    make_note(vault, "lesson", "Pull requests that are small get reviewed more quickly.", created=T0 + MONTH)
    run_job(vault, "dedup", now=T0 + 2 * MONTH)
    with vault.lock():
        graph = build_graph(JobContext(vault, T0).snapshot())
    fact_key = f"note:{meta(vault, fact)['id']}"
    edges = {(s, k, t) for s, k, t in graph.edges}
    assert (fact_key, "mentions", "entity:maya okafor") in edges
    assert (fact_key, "links_to", f"note:{meta(vault, project)['id']}") in edges  # by file name
    assert (fact_key, "links_to", "entity:stripe") in edges  # emergent entity
    assert (fact_key, "links_to", "entity:maya okafor") in edges  # frontmatter `links`
    assert (fact_key, "tagged", "tag:team/roles") in edges and (fact_key, "attributed_to", "entity:maya") in edges
    assert sum(1 for _, k, _ in graph.edges if k == "merged_into") == 1
    assert graph.nodes["entity:stripe"]["kind"] == "entity" and graph.nodes["tag:payments"]["label"] == "#payments"
    assert {n["node"] for n in neighbors(graph, "entity:maya okafor")} == {fact_key}
    assert find_nodes(graph, "Maya Okafor") == ["entity:maya okafor"] and find_nodes(graph, "#payments") == ["tag:payments"]
    assert export(graph, "dot").startswith("digraph cortex {")
    ET.fromstring(export(graph, "graphml"))
    assert export(graph, "mermaid").startswith("graph LR\n")

    first = run_job(vault, "graph", now=T0)
    assert first.items[0]["edges"]["mentions"] >= 2
    assert run_job(vault, "graph", now=T0).items[0]["rebuilt"] is False
    stored = json.loads((vault.cache_dir / "graph.json").read_text())  # in .git/cortex/: no pull writes there
    assert first.items[0]["path"] == ".git/cortex/graph.json"
    assert stored["nodes"]["entity:ledgerline"]["type"] == "project"


def test_an_entity_obsidian_cannot_link_is_still_one_node(vault):
    """`C#` gets no wikilink (Obsidian forbids # in a note's name, and [[C]] is another
    note); the graph keeps it one entity, apart from a real `C`."""
    csharp = make_note(vault, "fact", "The billing worker is written in C#.", entities=[("C#", "language")])
    make_note(vault, "fact", "The tide model is written in C.", entities=[("C", "language")])
    with vault.lock():
        graph = build_graph(JobContext(vault, T0).snapshot())
    key = f"note:{meta(vault, csharp)['id']}"
    assert meta(vault, csharp)["links"] == []
    graph.nodes[key]["label"] = 'R&D <b>"team"</b>'
    assert '["R#amp;D #lt;b#gt;#quot;team#quot;#lt;/b#gt;"]' in export(graph, "mermaid")
    assert {t for s, k, t in graph.edges if s == key and k in ("mentions", "links_to")} == {"entity:c#"}


# --- the whole session -------------------------------------------------------------------------

def test_second_maintain_makes_no_commit(vault):
    make_note(vault, "preference", "Maya prefers tabs over spaces in Go code.")
    make_note(vault, "preference", "In Go code Maya prefers tabs rather than spaces.", created=T0 + MONTH)
    make_note(vault, "goal_short", "Launch the Tidewatch public beta before Easter.", importance=0.5)
    reinforce_by_run(vault, "Maya prefers tabs over spaces in Go code.", "2026-03-01T09:00:00.000Z", "preference")
    first = run_due(vault, now=T0 + 4 * MONTH, force=True)
    assert first.commits == 3 and not first.errors  # reinforce, decay, dedup
    assert subjects(vault, 3) == ["dedup: 1 near-duplicate merged into 1 note", "decay: 1 memory faded below 0.2",
                                  "reinforce: 1 memory"]
    before = commit_count(vault)
    again = run_due(vault, now=T0 + 4 * MONTH, force=True)
    assert again.commits == 0 and commit_count(vault) == before
    assert git(vault.root, "status", "--porcelain") == ""
    assert vault.note_validator() and all(
        not vault.note_validator().check(p, (vault.root / p).read_text()) for p in note_paths(vault))


def test_a_persons_note_in_mind_from_before_cortex_is_never_archived_by_decay(tmp_path):
    """A folder of the person's that happens to be called `mind/`, committed before `cortex
    init`: a note there with a `type:` of its own but no id never went through the hook, so it
    is no memory yet. The first nightly maintain must not move it into the archive (dedup
    already leaves such a note alone); once a commit completes it, it is a memory like any."""
    from conftest import cortex

    root = tmp_path / "notes"
    (root / "mind" / "Ideas").mkdir(parents=True)
    old = "mind/Ideas/editor.md"
    (root / old).write_text("---\ntype: opinion\ncreated: 2016-05-05\n---\nVim is better than emacs\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-q", "-m", "my old notes")
    assert cortex("init", str(root)).returncode == 0

    done = cortex("--vault", str(root), "maintain", "--force", "--only", "decay", "--json")
    assert done.returncode == 0, done.stderr
    decay = next(j for j in json.loads(done.stdout)["ran"] if j["job"] == "decay")
    assert decay["changed"] == 0
    assert (root / old).read_text() == "---\ntype: opinion\ncreated: 2016-05-05\n---\nVim is better than emacs\n"
    assert git(root, "ls-files", "mind/archive") == ""


def test_a_title_cut_inside_an_emoji_stops_no_maintenance(vault):
    """A JavaScript tool that cuts a title at 80 UTF-16 units and writes it with
    JSON.stringify leaves half an emoji, "\\ud83e", which YAML refuses. The snapshot's fast
    reader took it through JSON as a lone surrogate and then could not save its cache:
    `cortex maintain` and `cortex brief` failed for the whole vault."""
    from conftest import cortex
    from maint_helpers import commit_files

    make_note(vault, "fact", "The ledger runs on Postgres 16")
    commit_files(vault, {"vault/projects/trip.md": '---\ntype: project\ntitle: "Trip \\ud83e"\n---\nA plugin\'s export.\n'})
    for argv in (("maintain", "--force", "--json"), ("brief",)):
        done = cortex("--vault", str(vault.root), *argv)
        assert done.returncode == 0, (argv, done.stderr)
