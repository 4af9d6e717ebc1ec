"""Search over real vaults: real git repositories, note files in cortex's format,
the query library and the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import cortex
from cortex.cli import main
from cortex.layout import search_dir
from cortex.notes import source_hash
from cortex.search.index import SearchIndex
from cortex.search.query import recent, search
from cortex.search.question import Filters
from cortex.vault import Vault

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
_counter = iter(range(1, 10_000))


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def write_note(root: Path, rel: str, body: str, *, type_: str, category: str = "concept", created: datetime = NOW,
               importance: float = 0.6, confidence: float = 0.9, tags=(), entities=(), attribution: str = "owner",
               reinforced: datetime | None = None) -> str:
    n = next(_counter)
    lines = [
        "---",
        f'id: "01950000-0000-7000-8000-{n:012d}"',
        f"type: {type_}",
        f"category: {category}",
        f"created: {_iso(created)}",
        f"source_hash: {source_hash(body)}",
        "# ---",
        f'title: "{body[:80]}"',
        "bucket: explicit",
        f"attribution: {attribution}",
        f"confidence: {confidence}",
        f"importance: {importance}",
    ]
    if entities:
        lines.append("entities:")
        lines += [f"  - {{name: {name}, type: {kind}}}" for name, kind in entities]
    if tags:
        lines.append(f"tags: [{', '.join(tags)}]")
    lines += [f"last_reinforced: {_iso(reinforced or created)}", "---", "", body, ""]
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return rel


# the vault's pre-commit hooks call `cortex`: the one installed beside this Python
ENV = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}


def git(root: Path, *args: str) -> None:
    proc = subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def commit_all(root: Path, message: str = "notes") -> None:
    git(root, "add", "-A", "vault", "mind")
    # The hooks' own tests run them; here a commit is only the event search must notice.
    git(root, "commit", "-q", "--no-verify", "-m", message)


@pytest.fixture
def vault(tmp_path, ready_vault) -> Path:
    return ready_vault(tmp_path / "v")  # as `cortex init` makes it


def fresh_index(root: Path) -> SearchIndex:
    """What every query does: open, rebuild if needed, freshen."""
    from cortex.search.freshness import GitProbe
    from cortex.search.index import IndexUnavailable

    idx = SearchIndex(root)
    probe = GitProbe.start(root)
    try:
        idx.load()
    except IndexUnavailable:
        idx.rebuild()
        return idx
    idx.refresh(probe)
    return idx


def paths(hits) -> list[str]:
    return [h.path for h in hits]


def test_importance_orders_equally_relevant_notes(vault):
    body = "Deploy the billing service with blue green releases"
    low = write_note(vault, "vault/decisions/low.md", body, type_="decision", importance=0.3)
    high = write_note(vault, "vault/decisions/high.md", body, type_="decision", importance=0.95)
    commit_all(vault)
    hits = search(fresh_index(vault), "billing service releases", now=NOW)
    assert paths(hits)[:2] == [high, low]
    assert hits[0].why["effective_importance"] > hits[1].why["effective_importance"]


def test_recency_orders_equally_relevant_notes(vault):
    body = "The team standup moved to ten in the morning"
    old = write_note(vault, "vault/events/old.md", body, type_="event", category="entity", created=NOW - timedelta(days=400))
    new = write_note(vault, "vault/events/new.md", body, type_="event", category="entity", created=NOW - timedelta(days=2))
    commit_all(vault)
    assert paths(search(fresh_index(vault), "when is standup", now=NOW))[:2] == [new, old]


def test_decayed_importance_ranks_below_fresh(vault):
    body = "Finish the quarterly tax filing paperwork"
    # goal_short decays 0.15 a month: a year-old goal has faded to 0 effective importance
    stale = write_note(vault, "mind/goals/stale.md", body, type_="goal_short", importance=0.9,
                       created=NOW - timedelta(days=365))
    fresh = write_note(vault, "mind/goals/fresh.md", body, type_="goal_short", importance=0.6,
                       created=NOW - timedelta(days=1))
    commit_all(vault)
    hits = search(fresh_index(vault), "tax filing", now=NOW)
    assert paths(hits)[:2] == [fresh, stale]
    assert hits[1].why["effective_importance"] == 0.0


def test_archived_excluded_unless_asked(vault):
    live = write_note(vault, "mind/facts/live.md", "The staging database runs on port 5433", type_="fact")
    gone = write_note(vault, "mind/archive/facts/gone.md", "The staging database used to run on port 5432", type_="fact")
    commit_all(vault)
    idx = fresh_index(vault)
    assert paths(search(idx, "staging database port")) == [live]
    assert set(paths(search(idx, "staging database port", filters=Filters(archived=True)))) == {live, gone}
    assert [h.archived for h in search(idx, "used to run", filters=Filters(archived=True))][:1] == [True]


@pytest.fixture
def mixed(vault):
    notes = {
        "pref": write_note(vault, "mind/preferences/p.md", "Alice prefers tea over coffee in meetings", type_="preference",
                           tags=("food", "team"), entities=(("Alice", "person"),), attribution="owner",
                           created=NOW - timedelta(days=40)),
        "dec": write_note(vault, "vault/decisions/d.md", "We chose coffee from the local roaster for meetings",
                          type_="decision", tags=("food",), entities=(("Roaster", "organization"),),
                          attribution="agent-7", created=NOW - timedelta(days=3)),
        "task": write_note(vault, "vault/tasks/t.md", "Order coffee beans before the meetings on Monday", type_="task",
                           category="entity", tags=("errand",), attribution="agent-7", created=NOW - timedelta(days=1)),
        "proj": write_note(vault, "vault/projects/j.md", "Coffee machine upgrade project for the meetings room",
                           type_="project", category="relation", entities=(("Alice", "person"),), attribution="owner",
                           created=NOW - timedelta(days=10)),
    }
    commit_all(vault)
    return vault, notes


@pytest.mark.parametrize(
    "filters, expected",
    [
        (Filters(types=("decision",)), {"dec"}),
        (Filters(types=("decision", "task")), {"dec", "task"}),
        (Filters(categories=("entity",)), {"task"}),
        (Filters(categories=("relation",)), {"proj"}),
        (Filters(partitions=("mind",)), {"pref"}),
        (Filters(partitions=("vault",)), {"dec", "task", "proj"}),
        (Filters(tags=("food",)), {"pref", "dec"}),
        (Filters(tags=("FOOD",), types=("decision",)), {"dec"}),
        (Filters(entities=("alice",)), {"pref", "proj"}),
        (Filters(attributions=("agent-7",)), {"dec", "task"}),
        (Filters(since=(NOW - timedelta(days=5)).timestamp()), {"dec", "task"}),
        (Filters(until=(NOW - timedelta(days=5)).timestamp()), {"pref", "proj"}),
        (Filters(since=(NOW - timedelta(days=20)).timestamp(), until=(NOW - timedelta(days=2)).timestamp()), {"dec", "proj"}),
        (Filters(tags=("nope",)), set()),
    ],
)
def test_every_filter(mixed, filters, expected):
    vault, notes = mixed
    hits = search(fresh_index(vault), "coffee meetings", filters=filters, limit=10, now=NOW)
    by_path = {v: k for k, v in notes.items()}
    assert {by_path[h.path] for h in hits} == expected


def test_recent_view_is_newest_first(mixed):
    vault, notes = mixed
    hits = recent(fresh_index(vault), (NOW - timedelta(days=15)).timestamp(), now=NOW)
    assert paths(hits) == [notes["task"], notes["dec"], notes["proj"]]


def test_an_entity_or_tag_with_a_comma_is_matched_whole(vault):
    note = write_note(vault, "vault/projects/acme.md", "The Acme contract renews in May", type_="project",
                      category="relation", entities=[('"Acme, Inc."', "company")])
    other = write_note(vault, "vault/projects/inc.md", "The Inc magazine interview is in May", type_="project",
                       category="relation", entities=[("Inc.", "company")])
    commit_all(vault)
    idx = fresh_index(vault)
    assert paths(search(idx, "contract interview", filters=Filters(entities=("acme, inc.",)))) == [note]
    assert paths(search(idx, "contract interview", filters=Filters(entities=("Inc.",)))) == [other]
    assert search(idx, "contract", limit=1)[0].entities == ["Acme, Inc."]



def test_a_persons_tags_read_as_obsidian_reads_them_everywhere(vault):
    """`tags: recipes, kitchen` is two tags to Obsidian (a string splits at commas and
    spaces, `#` or not): the index, the query filters and the graph read it so too, and
    nothing rewrites the person's file for it."""
    from cortex.maintenance.base import JobContext
    from cortex.maintenance.graph import build_graph

    (vault / "Marmalade.md").write_text("---\ntags: recipes, Kitchen\n---\nKumquat marmalade needs a long, slow boil.\n")
    (vault / "Curd.md").write_text("---\ntags: [recipes, kitchen]\n---\nLemon curd needs a bain-marie.\n")
    (vault / "Jam.md").write_text("---\ntags: \"#recipes/jam #kitchen\"\n---\nDamson jam sets fast.\n")
    git(vault, "add", "-A")
    git(vault, "commit", "-q", "--no-verify", "-m", "three recipes")
    idx = fresh_index(vault)
    assert search(idx, "kumquat marmalade")[0].tags == ["recipes", "kitchen"]
    assert sorted(paths(search(idx, "needs", filters=Filters(tags=("recipes",))))) == ["Curd.md", "Marmalade.md"]
    assert sorted(paths(search(idx, "needs sets", filters=Filters(tags=("#Kitchen",))))) == ["Curd.md", "Jam.md", "Marmalade.md"]
    assert paths(search(idx, "damson", filters=Filters(tags=("recipes/jam",)))) == ["Jam.md"]
    v = Vault(vault)
    with v.lock():
        graph = build_graph(JobContext(v, NOW).snapshot())
    tags = {k for k, node in graph.nodes.items() if node["kind"] == "tag"}
    assert tags == {"tag:recipes", "tag:kitchen", "tag:recipes/jam"}


def test_recent_spans_segments_and_skips_deleted_notes(vault):
    """The temporal view reads the `ts` column of every segment, minus deleted rows."""
    day = timedelta(days=1)
    old = write_note(vault, "mind/facts/old.md", "The kiln was fired in March", type_="fact", created=NOW - 40 * day)
    gone = write_note(vault, "mind/facts/gone.md", "The glaze recipe uses feldspar", type_="fact", created=NOW - 3 * day)
    first = write_note(vault, "mind/facts/first.md", "Clay arrives on Mondays", type_="fact", created=NOW - 5 * day)
    commit_all(vault)
    fresh_index(vault)  # the first segment
    newest = write_note(vault, "mind/facts/newest.md", "The studio opens at nine", type_="fact", created=NOW - day)
    (vault / gone).unlink()
    commit_all(vault)
    idx = fresh_index(vault)  # a second segment, and a deleted row in the first
    assert paths(recent(idx, None, now=NOW)) == [newest, first, old]
    assert paths(recent(idx, (NOW - 10 * day).timestamp(), now=NOW)) == [newest, first]
    assert paths(recent(idx, None, limit=1, now=NOW)) == [newest]


def _listed(vault: Path, *args: str) -> dict[str, str]:
    """{path: created} of `cortex query ARGS --json`, as a user reads it."""
    found = cortex("--vault", str(vault), "query", *args, "--json")
    assert found.returncode in (0, 1), found.stderr
    return {r["path"]: r["created"] for r in json.loads(found.stdout)["results"]}


def _commit_at(vault: Path, message: str, when: datetime) -> None:
    """`git commit` of what is staged, authored and committed at `when`."""
    stamp = when.isoformat()
    proc = subprocess.run(["git", "-C", str(vault), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                           "--no-verify", "-m", message], capture_output=True, text=True,
                          env={**ENV, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
    assert proc.returncode == 0, proc.stderr


def test_a_note_without_created_is_dated_by_its_first_commit_else_its_mtime(vault):
    """A person's note written in Obsidian often has no `created` (the hook completes one
    only under vault/ and mind/; a note not committed yet, or committed with --no-verify,
    has none either). Such a note was dated nowhere: never listed by `--recent`, never
    found with `--since`. It is dated by the commit that first added it, else (not
    committed) by the file's modification time, and that date is the one shown. An edit
    committed later keeps the first commit's date, and a rebuilt index gives the same."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    day = timedelta(days=1)

    def listed(*args: str) -> dict[str, str]:
        return _listed(vault, *args)

    def commit(message: str, when: datetime) -> None:
        _commit_at(vault, message, when)

    assert listed("--recent", "30d") == {}  # the index is built before the notes come
    crane = vault / "Harbour crane.md"
    crane.write_text("Met Rasmus about the crane budget.\n", encoding="utf-8")
    git(vault, "add", "Harbour crane.md")
    commit("a daily note", now - 3 * day)
    os.utime(crane, (crane.stat().st_atime, (now - 10 * day).timestamp()))  # the file's own time says otherwise
    draft = vault / "Drafts" / "idea.md"
    draft.parent.mkdir()
    draft.write_text("---\ntags: [ideas]\n---\nA tide gauge on the pier.\n", encoding="utf-8")
    os.utime(draft, (draft.stat().st_atime, (now - 5 * day).timestamp()))
    dated = {"Harbour crane.md": _iso(now - 3 * day), "Drafts/idea.md": _iso(now - 5 * day)}

    assert listed("--recent", "7d") == dated
    assert listed("--recent", "4d") == {"Harbour crane.md": dated["Harbour crane.md"]}
    assert listed("tide gauge pier", "--since", _iso(now - 6 * day)) == {"Drafts/idea.md": dated["Drafts/idea.md"]}
    assert listed("tide gauge pier", "--until", _iso(now - 6 * day)) == {}
    crane.write_text("Met Rasmus about the crane budget. He wants the hoist rope swapped.\n", encoding="utf-8")
    git(vault, "add", "Harbour crane.md")
    commit("an edit", now - day)
    assert listed("--recent", "7d") == dated
    assert cortex("--vault", str(vault), "index", "--rebuild").returncode == 0
    assert listed("--recent", "7d") == dated


def test_a_renamed_note_without_created_keeps_the_date_it_was_first_added(vault):
    """A daily note moved from inbox/ to journal/ is the same note: it is dated by the
    commit that first added it under its first name, not by the move, whether the index
    sees the move as it happens (the note edited as it moved: not the same text) or is
    rebuilt from the history."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    day = timedelta(days=1)
    (vault / "inbox").mkdir()
    (vault / "inbox" / "tides.md").write_text("Spring tides flooded the slipway twice this week.\n", encoding="utf-8")
    (vault / "inbox" / "crane.md").write_text("Met Rasmus about the crane budget and the hoist rope.\n"
                                              "He wants a quote from two suppliers by Friday.\n", encoding="utf-8")
    git(vault, "add", "inbox")
    _commit_at(vault, "two daily notes", now - 20 * day)
    first = _iso(now - 20 * day)
    assert _listed(vault, "--recent", "30d") == {"inbox/tides.md": first, "inbox/crane.md": first}

    (vault / "journal").mkdir()
    git(vault, "mv", "inbox/tides.md", "journal/tides.md")
    git(vault, "mv", "inbox/crane.md", "journal/crane.md")
    with (vault / "journal" / "crane.md").open("a", encoding="utf-8") as f:
        f.write("Quote came in.\n")
    git(vault, "add", "journal")
    _commit_at(vault, "filed in the journal", now - 2 * day)
    moved = {"journal/tides.md": first, "journal/crane.md": first}
    assert _listed(vault, "--recent", "30d") == moved
    assert _listed(vault, "--recent", "7d") == {}

    assert cortex("--vault", str(vault), "index", "--rebuild").returncode == 0
    assert _listed(vault, "--recent", "30d") == moved
    assert _listed(vault, "slipway tides", "--since", _iso(now - 7 * day)) == {}


def test_a_persons_note_is_dated_by_its_own_created_whatever_its_case(vault):
    """A years-old Obsidian vault committed today: its templates wrote `Created:` or
    `created_at:`, which were not read, so every such note was dated by that first commit
    and `--recent 7d` listed them all. A person's note (outside vault/ and mind/) without
    `created` is dated by either; `date:` is not read (a template's `date` is as often a
    meeting's, a book's or a deadline's), so that note keeps its commit's date."""
    def listed(*args: str) -> dict[str, str]:
        found = cortex("--vault", str(vault), "query", "sourdough", *args, "--json", "--limit", "20")
        assert found.returncode in (0, 1), found.stderr
        return {r["path"]: r["created"] for r in json.loads(found.stdout)["results"]}

    notes = {"Journal/capital.md": "Created: 2019-11-11\n", "Journal/snake.md": "created_at: 2019-11-12T08:00:00Z\n",
             "Journal/upper.md": "CREATED: '2019-11-13'\n", "Journal/meeting.md": "date: 2019-11-14\n"}
    (vault / "Journal").mkdir()
    for rel, key in notes.items():
        (vault / rel).write_text(f"---\n{key}tags: [bread]\n---\nsourdough starter notes\n", encoding="utf-8")
    git(vault, "add", "Journal")
    stamp = "2021-06-01T00:00:00+00:00"
    proc = subprocess.run(["git", "-C", str(vault), "commit", "-q", "--no-verify", "-m", "my old vault"],
                          capture_output=True, text=True,
                          env={**ENV, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
    assert proc.returncode == 0, proc.stderr

    assert listed("--until", "2020-01-01") == {"Journal/capital.md": "2019-11-11T00:00:00.000Z",
                                               "Journal/snake.md": "2019-11-12T08:00:00.000Z",
                                               "Journal/upper.md": "2019-11-13"}
    assert listed("--since", "2021-01-01") == {"Journal/meeting.md": "2021-06-01T00:00:00.000Z"}
    assert (vault / "Journal/capital.md").read_text(encoding="utf-8").startswith("---\nCreated: 2019-11-11\n")


def test_recent_on_an_empty_vault_finds_nothing(vault, capsys):
    assert recent(fresh_index(vault), None, now=NOW) == []
    assert main(["--vault", str(vault), "query", "--recent", "7d"]) == 1

def test_fresh_after_commit_edit_and_delete(vault):
    write_note(vault, "mind/facts/a.md", "The build server lives in the basement rack", type_="fact")
    commit_all(vault)
    idx = fresh_index(vault)
    assert search(idx, "lighthouse") == []

    # a new note committed (as `cortex run` does): found without `cortex index`
    new = write_note(vault, "mind/facts/b.md", "The lighthouse keeper logs every ship", type_="fact")
    commit_all(vault)
    assert paths(search(fresh_index(vault), "lighthouse")) == [new]

    # a committed note edited in place, as an editor does (same folder, no commit)
    path = vault / "mind/facts/a.md"
    path.write_text(path.read_text().replace("basement rack", "attic cupboard"))
    idx = fresh_index(vault)
    assert paths(search(idx, "attic cupboard")) == ["mind/facts/a.md"]
    assert search(idx, "basement", mode="lexical") == []

    # an untracked note edited in place twice
    draft = write_note(vault, "mind/facts/draft.md", "Draft about penguins", type_="fact")
    assert paths(search(fresh_index(vault), "penguins")) == [draft]
    (vault / draft).write_text((vault / draft).read_text().replace("penguins", "walruses and seals"))
    idx = fresh_index(vault)
    assert paths(search(idx, "walruses")) == [draft]

    # deleted: disappears
    (vault / new).unlink()
    idx = fresh_index(vault)
    assert search(idx, "lighthouse keeper") == []
    assert idx.lexical.doc_count() == len(idx.vectors) == 2


def test_git_names_the_changes_once_the_index_knows_what_was_dirty(vault, monkeypatch):
    """After one update with git's status, a folder whose mtime moved is not listed:
    git names what changed, and notes dirty last time are looked at again."""
    from cortex.search import freshness

    write_note(vault, "mind/facts/a.md", "The build server lives in the basement rack", type_="fact")
    commit_all(vault)
    fresh_index(vault)
    fresh_index(vault)  # the first update records what git calls dirty (nothing)
    assert json.loads((search_dir(vault) / "state.json").read_text())["dirty"] == []
    listed = []
    real_scan = freshness.scan_dir
    monkeypatch.setattr(freshness, "scan_dir", lambda root, rel: listed.append(rel) or real_scan(root, rel))
    draft = write_note(vault, "mind/facts/draft.md", "Draft about penguins", type_="fact")  # untracked
    assert paths(search(fresh_index(vault), "penguins")) == [draft]
    (vault / draft).unlink()  # gone before anyone committed it: git no longer names it
    assert search(fresh_index(vault), "penguins") == []
    path = vault / "mind/facts/a.md"
    path.write_text(path.read_text().replace("basement rack", "attic cupboard"))
    assert paths(search(fresh_index(vault), "attic")) == ["mind/facts/a.md"]
    git(vault, "checkout", "--", "mind/facts/a.md")  # the edit undone: clean again
    idx = fresh_index(vault)
    assert search(idx, "attic") == [] and paths(search(idx, "basement")) == ["mind/facts/a.md"]
    new = write_note(vault, "mind/lessons/b.md", "The lighthouse keeper logs every ship", type_="lesson")
    commit_all(vault)  # a new folder, committed
    assert paths(search(fresh_index(vault), "lighthouse")) == [new]
    assert "mind/facts" not in listed and idx.lexical.doc_count() >= 1


def test_untracked_notes_stay_watched_while_git_is_asked_only_about_changed_folders(vault):
    """`git status` runs without its untracked walk: a person's uncommitted notes (at the
    top, in a type folder, in a new folder) are found when their folder changes, then
    carried from one update to the next, so an edit in place is seen however many
    unrelated updates happened in between."""
    write_note(vault, "mind/facts/a.md", "The build server lives in the basement rack", type_="fact")
    commit_all(vault)
    fresh_index(vault)
    fresh_index(vault)
    top = vault / "Untitled.md"
    top.write_text("Ideas about otters\n", encoding="utf-8")
    draft = write_note(vault, "mind/facts/draft.md", "Draft about penguins", type_="fact")
    (vault / "Projects").mkdir()
    project = vault / "Projects" / "plan.md"
    project.write_text("Plan for the harbour festival\n", encoding="utf-8")
    idx = fresh_index(vault)
    assert paths(search(idx, "otters")) == ["Untitled.md"] and paths(search(idx, "penguins")) == [draft]
    assert paths(search(idx, "harbour festival")) == ["Projects/plan.md"]
    dirty = json.loads((search_dir(vault) / "state.json").read_text())["dirty"]
    assert set(dirty) == {"Untitled.md", draft, "Projects/plan.md"}
    for i in range(2):  # unrelated updates: another folder changes, a commit lands
        write_note(vault, f"mind/lessons/l{i}.md", f"Lesson number {i} about caching", type_="lesson")
        commit_all(vault, f"lesson {i}")
        fresh_index(vault)
    # edited in place (the folders' mtimes do not move)
    top.write_text("Ideas about beavers\n", encoding="utf-8")
    (vault / draft).write_text((vault / draft).read_text().replace("penguins", "walruses"))
    project.write_text("Plan for the lantern parade\n", encoding="utf-8")
    idx = fresh_index(vault)
    assert paths(search(idx, "beavers")) == ["Untitled.md"] and paths(search(idx, "walruses")) == [draft]
    assert paths(search(idx, "lantern parade")) == ["Projects/plan.md"]
    assert search(idx, "otters", mode="lexical") == [] and search(idx, "penguins", mode="lexical") == []
    commit_all(vault, "the draft")  # committed: clean, no longer carried
    fresh_index(vault)
    assert json.loads((search_dir(vault) / "state.json").read_text())["dirty"] == ["Projects/plan.md", "Untitled.md"]
    git(vault, "add", "Untitled.md", "Projects")
    git(vault, "commit", "-q", "--no-verify", "-m", "the person's notes")
    fresh_index(vault)
    assert json.loads((search_dir(vault) / "state.json").read_text())["dirty"] == []


def test_folders_below_a_changed_folder_are_found_by_link_count_or_listing(vault):
    """A folder that gained a note is not listed to find new subfolders when its link
    count says it has none it did not have; a subfolder renamed (same count, a known one
    gone) or added is still found, committed or not."""
    (vault / "Projects" / "harbour").mkdir(parents=True)
    (vault / "Projects" / "harbour" / "plan.md").write_text("Plan for the harbour festival\n", encoding="utf-8")
    write_note(vault, "mind/facts/a.md", "The build server lives in the basement rack", type_="fact")
    commit_all(vault)
    fresh_index(vault)
    fresh_index(vault)
    write_note(vault, "mind/facts/b.md", "The backup runs at night", type_="fact")  # mind/facts moved, no subfolder
    (vault / "Projects" / "harbour").rename(vault / "Projects" / "festival")  # same link count, a known folder gone
    idx = fresh_index(vault)
    assert paths(search(idx, "backup runs")) == ["mind/facts/b.md"]
    assert paths(search(idx, "harbour festival")) == ["Projects/festival/plan.md"]
    (vault / "Projects" / "festival" / "lantern").mkdir()  # a subfolder in a folder whose own mtime moved
    (vault / "Projects" / "festival" / "lantern" / "route.md").write_text("The lantern parade route\n", encoding="utf-8")
    idx = fresh_index(vault)
    assert paths(search(idx, "lantern parade")) == ["Projects/festival/lantern/route.md"]
    commit_all(vault, "the person's notes")
    idx = fresh_index(vault)
    assert paths(search(idx, "lantern parade")) == ["Projects/festival/lantern/route.md"]


def test_edit_then_commit_between_queries(vault):
    write_note(vault, "vault/resources/r.md", "A guide to sourdough baking", type_="resource", category="entity")
    commit_all(vault)
    fresh_index(vault)
    path = vault / "vault/resources/r.md"
    path.write_text(path.read_text().replace("sourdough baking", "kayak repair"))
    commit_all(vault, "edit")  # edited and committed with no query in between
    assert paths(search(fresh_index(vault), "kayak")) == ["vault/resources/r.md"]


def keep_stat_while_rewriting(path: Path, old: str, new: str) -> None:
    """The note's words changed, its size and mtime as they were (`cp -p`, `rsync -a` or
    `touch -r` of a restored copy)."""
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    assert len(old) == len(new) and old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def test_an_edit_that_keeps_size_and_mtime_is_seen_when_git_names_the_note_changed(vault):
    note = vault / "notes" / "shard.md"
    note.parent.mkdir()
    note.write_text("# Shard\n\nWe will shard the orders table by tenant id.\n", encoding="utf-8")
    git(vault, "add", "notes")
    git(vault, "commit", "-qm", "shard", "--no-verify")
    keep_stat_while_rewriting(note, "tenant", "region")  # uncommitted: git status names it
    assert cortex("--vault", str(vault), "query", "region", "--paths").stdout.splitlines() == ["notes/shard.md"]
    keep_stat_while_rewriting(note, "region", "zephyr")
    done = cortex("--vault", str(vault), "index", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["changed"] == 1, done.stdout + done.stderr
    keep_stat_while_rewriting(note, "zephyr", "yonder")
    done = cortex("--vault", str(vault), "query", "yonder", "--paths")
    assert (done.returncode, done.stdout.splitlines()) == (0, ["notes/shard.md"]), done.stderr
    assert cortex("--vault", str(vault), "query", "zephyr", "--paths").returncode == 1  # the old words: nothing
    done = cortex("--vault", str(vault), "index", "--json")  # re-read, not re-indexed: the same bytes
    assert json.loads(done.stdout)["changed"] == 0


def test_move_keeps_embedding_and_counts_as_move(vault):
    write_note(vault, "mind/facts/x.md", "Otters hold hands while sleeping", type_="fact")
    commit_all(vault)
    fresh_index(vault)
    (vault / "mind/archive/facts").mkdir(parents=True)
    os.rename(vault / "mind/facts/x.md", vault / "mind/archive/facts/x.md")
    idx = SearchIndex(vault).load()
    from cortex.search.freshness import GitProbe

    report = idx.refresh(GitProbe.start(vault))
    assert (report.moved, report.added, report.deleted) == (1, 0, 0)
    assert search(idx, "otters") == []
    assert paths(search(idx, "otters", filters=Filters(archived=True))) == ["mind/archive/facts/x.md"]


def test_unchanged_vault_touches_nothing(vault):
    write_note(vault, "mind/facts/x.md", "Nothing changes here", type_="fact")
    commit_all(vault)
    fresh_index(vault)
    idx = SearchIndex(vault).load()
    from cortex.search.freshness import GitProbe

    report = idx.refresh(GitProbe.start(vault))
    assert report.touched == 0


@pytest.mark.parametrize("damage", ["state", "whoosh", "vectors", "postings", "stored", "missing", "vectors.npy emptied",
                                    "vector_keys.order.npy emptied"])
def test_corrupt_or_missing_index_is_rebuilt(vault, damage, capsys):
    note = write_note(vault, "mind/facts/x.md", "Zebras have striped skin underneath", type_="fact")
    commit_all(vault)
    assert main(["--vault", str(vault), "index"]) == 0
    base = search_dir(vault)
    if damage == "state":
        (base / "state.json").write_text("{not json")
    elif damage == "whoosh":
        for f in (base / "whoosh").iterdir():
            if f.suffix in (".toc", ".seg"):
                f.write_bytes(b"garbage")
    elif damage == "vectors":
        (base / "vectors.npy").write_bytes(b"garbage")
    elif damage.endswith(" emptied"):  # numpy reads an empty .npy as the end of input (EOFError)
        (base / damage.split()[0]).write_bytes(b"")
    elif damage in ("postings", "stored"):  # a segment cut short: Whoosh trips only when reading it
        for f in (base / "whoosh").glob("*.pst" if damage == "postings" else "*._stored.col"):
            f.write_bytes(f.read_bytes()[:10])
    else:
        import shutil

        shutil.rmtree(search_dir(vault))
    capsys.readouterr()
    assert main(["--vault", str(vault), "query", "zebras", "--paths"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [note]
    if damage != "vector_keys.order.npy emptied":  # (a lookup file only: without it, keys are found by a byte search)
        assert "rebuilding" in err and "search index" in err
    assert "Traceback" not in err and "Aborted" not in err


def test_the_index_lives_in_the_git_directory_and_an_old_one_in_the_tree_is_removed(vault):
    """The index is kept where no pull writes (Whoosh unpickles its table of contents):
    the one an earlier cortex kept under `.cortex/search/` is never opened, and is removed
    once the new one is built; in a vault with no repository of its own, `.cortex/` stays."""
    import shutil

    note = write_note(vault, "mind/facts/x.md", "Zebras have striped skin underneath", type_="fact")
    commit_all(vault)
    assert cortex("--vault", str(vault), "index").returncode == 0
    assert search_dir(vault) == vault / ".git" / "cortex" / "search" and (search_dir(vault) / "state.json").exists()
    shutil.copytree(search_dir(vault), vault / ".cortex" / "search")  # as an earlier cortex left it
    shutil.rmtree(search_dir(vault))
    done = cortex("--vault", str(vault), "query", "zebras", "--paths")
    assert done.returncode == 0 and done.stdout.splitlines() == [note], done.stderr
    assert not (vault / ".cortex" / "search").exists() and (search_dir(vault) / "state.json").exists()

    plain = vault.parent / "copy"  # the notes without their repository (an export, a backup)
    shutil.copytree(vault, plain, ignore=shutil.ignore_patterns(".git", ".cortex"))
    done = cortex("--vault", str(plain), "query", "zebras", "--paths")
    assert done.returncode == 0 and done.stdout.splitlines() == [note], done.stderr
    assert search_dir(plain) == plain / ".cortex" / "search" and (search_dir(plain) / "state.json").exists()


def test_cortex_index_and_query_rebuild_an_emptied_vector_file(vault):
    """An empty vectors.npy is damage like any other, for `cortex index` as for a query:
    rebuilt with a message, never an "Aborted!" and exit 1 (a query's "nothing found"), nor a bug."""
    note = write_note(vault, "mind/facts/x.md", "Zebras have striped skin underneath", type_="fact")
    commit_all(vault)
    assert cortex("--vault", str(vault), "index").returncode == 0
    matrix = search_dir(vault) / "vectors.npy"
    matrix.write_bytes(b"")
    done = cortex("--vault", str(vault), "index", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rebuilt"] is True and "rebuilding" in done.stderr
    matrix.write_bytes(b"")
    done = cortex("--vault", str(vault), "query", "zebras", "--paths")
    assert (done.returncode, done.stdout.splitlines()) == (0, [note]), done.stderr
    assert "Aborted" not in done.stderr and "rebuilding" in done.stderr


JSON_KEYS = {"rank", "path", "id", "title", "type", "category", "partition", "archived", "tags", "entities",
             "attribution", "created", "snippet", "score", "why", "via", "when"}


def test_json_shape_is_stable(mixed, capsys):
    vault, notes = mixed
    assert main(["--vault", str(vault), "query", "coffee", "--json", "--limit", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"query", "mode", "count", "results", "index"}
    assert data["query"] == "coffee" and data["mode"] == "hybrid" and data["count"] == 2
    assert set(data["index"]) == {"notes", "updated"}
    for r in data["results"]:
        assert set(r) == JSON_KEYS
        assert isinstance(r["tags"], list) and isinstance(r["entities"], list) and isinstance(r["archived"], bool)
        assert {"relevance", "effective_importance", "confidence", "recency", "prior"} <= set(r["why"])
    assert [r["rank"] for r in data["results"]] == [1, 2]
    assert main(["--vault", str(vault), "query", "coffee", "--jsonl", "--type", "task"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["path"] for line in lines] == [notes["task"]]


def test_cli_modes_and_exit_status(mixed, capsys):
    vault, notes = mixed
    v = ["--vault", str(vault), "query"]
    assert main([*v, "roaster", "--lexical-only", "--paths"]) == 0
    assert capsys.readouterr().out.splitlines() == [notes["dec"]]
    assert main([*v, "coffee", "--semantic-only", "--paths"]) == 0
    found = capsys.readouterr().out.splitlines()  # those over the cosine floor (fusion.MIN_COSINE)
    assert found and set(found) <= {notes[k] for k in ("pref", "dec", "task", "proj")}
    assert main([*v, "xylophone quasar", "--paths"]) == 1
    assert capsys.readouterr().out == ""
    assert main([*v, "coffee", "--lexical-only", "--semantic-only"]) == 2
    assert main([*v, "coffee", "--since", "not-a-date"]) == 2
    assert main([*v]) == 2  # no text and no --recent
    assert main([*v, "--recent", "100000d", "--paths"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4
    # a filter value no note can have is a mistake, not an empty result
    for option, value in (("--type", "decisions"), ("--category", "foo"), ("--partition", "Vault")):
        assert main([*v, "coffee", option, value]) == 2
        assert f"{option} {value}: not known here" in capsys.readouterr().err


def test_end_to_end_real_cli(tmp_path):
    """cortex init, write, run, then query through the installed entry point."""
    env = {**ENV, "CORTEX_VAULT": str(tmp_path / "v")}
    env.pop("CORTEX_SEARCH_MODEL", None)

    def cortex(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cortex", *args], env=env, capture_output=True, text=True,
                              cwd=tmp_path)

    assert cortex("init", str(tmp_path / "v")).returncode == 0
    assert cortex("write", "--type", "decision", "--body", "Adopt Rust for the telemetry collector",
                  "--importance", "0.9").returncode == 0
    assert cortex("run").returncode == 0
    found = cortex("query", "telemetry language", "--json")
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    assert results[0]["type"] == "decision" and results[0]["path"].startswith("vault/decisions/")
    # a second observation lands through `cortex run` (a commit): the next query sees it
    assert cortex("write", "--type", "preference", "--body", "I like my espresso without sugar").returncode == 0
    assert cortex("run").returncode == 0
    again = cortex("query", "espresso", "--paths")
    assert again.returncode == 0 and again.stdout.startswith("mind/preferences/")
    assert cortex("query", "zyzzyva marmalade").returncode == 1
    assert cortex("--vault", str(tmp_path / "nope"), "query", "x").returncode == 2


def test_cli_module_imports_stay_light():
    code = ("import sys, cortex.cli; "
            "print(sorted(m for m in ('numpy', 'whoosh', 'model2vec', 'tokenizers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_process_that_searches_keeps_blas_to_one_thread(tmp_path):
    """The CLI, the MCP server and the watcher all search through a Session: one vector
    times a matrix gains nothing from OpenBLAS's thread pool and pays its start-up."""
    code = ("import os, sys; os.environ.pop('OPENBLAS_NUM_THREADS', None); "
            "from cortex.search.session import Session; Session(sys.argv[1]); "
            "import numpy; print(os.environ.get('OPENBLAS_NUM_THREADS'))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True,
                         env=env).stdout
    assert out.strip() == "1"


def test_lexical_only_query_does_not_import_numpy(mixed):
    vault, _ = mixed
    assert main(["--vault", str(vault), "index"]) == 0
    code = ("import sys; from cortex.cli import main; "
            f"rc = main(['--vault', {str(vault)!r}, 'query', 'coffee', '--lexical-only', '--paths']); "
            "print(rc, 'numpy' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stderr.strip().splitlines()[-1] == "0 False"


def test_lexical_term_at_a_time_matches_whoosh_or_and_skips_deleted(tmp_path, monkeypatch):
    from whoosh.query import Or, Term

    from cortex.search import lexical
    from cortex.search.lexical import LexicalIndex
    from cortex.search.records import NoteRecord

    monkeypatch.setattr(lexical, "MIN_PRUNED_DF", 0)  # prune as a large vault would

    lx = LexicalIndex.create(tmp_path / "ix")
    lx.write([NoteRecord(path=f"vault/x/{i}.md", body=f"apple banana {'cherry ' * i}") for i in range(6)])
    lx.write([NoteRecord(path="vault/x/9.md", body="apple cherry cherry")], deletes=["vault/x/1.md", "vault/x/3.md"])
    mine = lx.search("apples and cherries", 10)
    terms = lx.query_terms("apples and cherries")
    theirs = lx.searcher.search(Or([Term("text", t) for t in terms]), limit=10)
    assert [p for p, _ in mine] == [hit["path"] for hit in theirs]
    assert [round(s, 9) for _, s in mine] == [round(hit.score, 9) for hit in theirs]
    # "apple" is in every note: pruned as a query term (lexical.MAX_DF); no deleted note returns
    assert {p for p, _ in mine} == {"vault/x/2.md", "vault/x/4.md", "vault/x/5.md", "vault/x/9.md"}



def test_lexical_scores_are_whooshs_bm25f_to_the_last_bit_at_every_length(tmp_path):
    """The term-at-a-time scorer takes BM25's length part from a table of the 256 encoded
    lengths: every note's score is still exactly what Whoosh's own `Or` query gives, for
    notes of many lengths (short, long, past Whoosh's exact length bytes), in several
    segments, with deletions."""
    from whoosh.query import Or, Term

    from cortex.search.lexical import LexicalIndex
    from cortex.search.records import NoteRecord

    lx = LexicalIndex.create(tmp_path / "ix")
    for batch in range(3):  # a segment each
        lx.write([NoteRecord(path=f"vault/x/{batch}-{n}.md",
                             body=" ".join(["walnut"] * (1 + n % 4) + ["quince"] * (n % 3) + ["filler"] * (n * 7 + batch)))
                  for n in range(60)], deletes=[f"vault/x/{batch - 1}-{n}.md" for n in range(0, 60, 9)] if batch else ())
    terms = lx.query_terms("walnut quince", max_df=1.0)  # neither pruned, however common
    assert sorted(terms) == ["quinc", "walnut"]
    mine = lx.search("walnut quince", 200, max_df=1.0)
    theirs = lx.searcher.search(Or([Term("text", t) for t in terms]), limit=200)
    assert len(mine) == len(theirs) > 100
    assert {p: s for p, s in mine} == {hit["path"]: hit.score for hit in theirs}  # exactly, not rounded



def test_stored_fields_read_past_whooshs_reader_are_whooshs_in_every_segment(tmp_path):
    """A note's stored fields are read from each segment's column directly (the schema
    check a set lookup): the same dict, key order included, as Whoosh's own
    `stored_fields` for every note of an index of several segments with deletions."""
    from cortex.search.lexical import LexicalIndex
    from cortex.search.records import NoteRecord

    lx = LexicalIndex.create(tmp_path / "ix")
    for batch in range(3):  # a segment each
        lx.write([NoteRecord(path=f"vault/x/{batch}-{n}.md", body=f"walnut {batch} {n}", tags=("a", f"t{n}"),
                             entities=(f"Ade {n}",), importance=n / 10) for n in range(8)],
                 deletes=[f"vault/x/{batch - 1}-{n}.md" for n in range(0, 8, 3)] if batch else ())
    lx = LexicalIndex.open(tmp_path / "ix")
    searcher = lx.searcher
    assert len(list(searcher.reader().leaf_readers())) > 1
    assert lx._stored_reader() is not searcher.stored_fields  # the direct read, not Whoosh's call
    for docnum in range(searcher.doc_count_all()):
        mine, theirs = lx._doc(docnum), searcher.stored_fields(docnum)
        assert mine == theirs and list(mine) == list(theirs)
    found = dict(lx.search("walnut", 30))
    assert len(found) == 24 - 6 and all(lx.stored(path)["path"] == path for path in found)



def test_accents_fold_both_ways(vault):
    cafe = write_note(vault, "mind/facts/cafe.md", "Lunch at the Café in Zürich on Fridays", type_="fact")
    resume = write_note(vault, "mind/facts/resume.md", "The resume template is in the HR drive", type_="fact")
    commit_all(vault)
    idx = fresh_index(vault)
    assert paths(search(idx, "cafe zurich", mode="lexical")) == [cafe]
    assert paths(search(idx, "résumé", mode="lexical")) == [resume]
    lodz = write_note(vault, "mind/facts/lodz.md", "The Łódź office sits on Straße 5 near København", type_="fact")
    commit_all(vault)
    assert paths(search(fresh_index(vault), "lodz strasse kobenhavn", mode="lexical")) == [lodz]

def test_a_small_vault_keeps_its_common_query_words(tmp_path):
    """Pruning frequent terms is for large vaults: in a dozen notes "invoice" may be in
    a fifth of them and still be the word the person is looking for."""
    from cortex.search.lexical import LexicalIndex
    from cortex.search.records import NoteRecord

    lx = LexicalIndex.create(tmp_path / "ix")
    bodies = [f"Stripe invoice {i} was paid" for i in range(4)] + [f"Tide note {i}" for i in range(8)] + ["The quagga is extinct"]
    lx.write([NoteRecord(path=f"vault/x/{i}.md", body=b) for i, b in enumerate(bodies)])
    assert lx.query_terms("stripe invoicing quagga") == ["quagga", "invoic", "stripe"]
    assert len(lx.search("stripe invoicing quagga", 10)) == 5


def test_question_words_are_left_out_in_the_form_the_analyzer_gives_them(tmp_path):
    """"was", "has", "his" and "they" shape a question as "did" does, but the stemmer
    makes them "wa", "ha", "hi", "thei": listed as written, they stayed query terms, and
    one the vault lacks weighed most in the query's ceiling."""
    from cortex.search.lexical import QUESTION_WORDS, LexicalIndex, analyzer
    from cortex.search.records import NoteRecord

    assert sorted(w for w in QUESTION_WORDS if [t.text for t in analyzer()(w, mode="query")] != [w]) == []
    lx = LexicalIndex.create(tmp_path / "ix")
    lx.write([NoteRecord(path="vault/x/0.md", body="The database was his choice, they said; it has replicas")])
    assert lx.query_terms("what was his database, has they said") == ["databas", "said"]


def test_a_name_is_looked_up_by_every_word_within_the_postings_budget(tmp_path):
    """The second hop's lookup: only notes holding every word of the name, however common
    one of them is (a query's pruning would have dropped it, and let any note with the
    other word through); none at all when the words together are in more notes than the
    budget, so that the hop costs the same in any vault."""
    from cortex.search.lexical import LexicalIndex
    from cortex.search.records import NoteRecord

    lx = LexicalIndex.create(tmp_path / "ix")
    bodies = ([f"Ade Bello signed off release {i}." for i in range(3)] + [f"Ade reviewed ticket {i}." for i in range(40)]
              + [f"Bello ordered part {i}." for i in range(40)] + ["The quagga is extinct."])
    lx.write([NoteRecord(path=f"vault/x/{i}.md", body=b) for i, b in enumerate(bodies)])
    assert len(lx.query_terms("Ade Bello", budget=50)) == 1  # what a query would keep of the name
    assert sorted(lx.naming("Ade Bello", 20, budget=100)) == [f"vault/x/{i}.md" for i in range(3)]
    assert lx.naming("Ade Bello", 20, budget=50) is None  # 86 notes to visit: not followed
    assert lx.naming("Ade Okafor", 20, budget=100) == []  # a word no note has: no note names it
    assert lx.naming("quagga", 20) == ["vault/x/83.md"]


def test_vector_updates_go_to_a_delta_then_fold_into_the_base(tmp_path, monkeypatch):
    import numpy as np

    from cortex.search import vectors as V

    monkeypatch.setattr(V, "FOLD_MIN", 8)
    rng = np.random.default_rng(3)

    def unit(n):
        m = rng.standard_normal((n, 16)).astype(np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    truth = dict(zip((f"n{i}" for i in range(100)), unit(100)))
    V.VectorStore(tmp_path, np.stack(list(truth.values())), list(truth)).save()
    base = (tmp_path / V.MATRIX).stat()
    for step in range(6):  # new, changed and deleted notes, a few at a time
        store = V.VectorStore.load(tmp_path)
        new = dict(zip((f"s{step}-{i}" for i in range(3)), unit(3)))
        changed = {f"n{step}": unit(1)[0]}
        gone = [f"n{50 + step}"]
        store.apply(list(new.items()) + list(changed.items()), deletes=gone)
        store.save()
        truth.update(new)
        truth.update(changed)
        for path in gone:
            truth.pop(path)
        if step == 0:  # a small update writes the delta alone
            assert (tmp_path / V.MATRIX).stat().st_mtime_ns == base.st_mtime_ns and (tmp_path / V.DELTA).exists()
        loaded = V.VectorStore.load(tmp_path)
        assert len(loaded) == len(truth) and set(loaded.rows) == set(truth)
        for path, vec in truth.items():
            assert np.allclose(loaded.vector(path), vec)
        q = unit(1)[0]
        exact = sorted(truth, key=lambda p: -float(truth[p] @ q))[:5]
        assert [k for k, _ in loaded.top(q, 5)] == exact
    assert not (tmp_path / V.DELTA).exists() or V.VectorStore.load(tmp_path).delta.shape[0] < 8  # folded on the way
    # a delta left behind by a save killed after its fold belongs to an older base: ignored
    stale = V.VectorStore.load(tmp_path)
    stale.apply([("late", unit(1)[0])])
    stale.save()
    kept = (tmp_path / V.DELTA).read_bytes()
    V.VectorStore(tmp_path, np.stack(list(truth.values())), list(truth)).save()  # a new base
    (tmp_path / V.DELTA).write_bytes(kept)
    assert "late" not in V.VectorStore.load(tmp_path).rows and len(V.VectorStore.load(tmp_path)) == len(truth)


def test_a_vector_delta_in_the_format_before_is_read_and_replaced(tmp_path):
    import numpy as np

    from cortex.search import vectors as V

    base = np.eye(4, 8, dtype=np.float32)
    V.VectorStore(tmp_path, base, ["a", "b", "c", "d"]).save()
    store = V.VectorStore.load(tmp_path)
    new_b = np.full(8, 0.5, dtype=np.float32)
    store.apply([("b", new_b), ("e", base[0])], deletes=["c"])
    store.save()
    _, matrix, keys, dead = V._read_delta(tmp_path)
    # the same delta as an earlier cortex wrote it, and no other
    np.savez(tmp_path / V.OLD_DELTA, base=np.array(V._token(tmp_path), dtype=np.int64), matrix=matrix,
             keys=np.array(keys, dtype=str), dead=np.array(sorted(dead), dtype=np.int64))
    (tmp_path / V.DELTA).unlink()
    old = V.VectorStore.load(tmp_path)
    assert set(old.rows) == {"a", "b", "d", "e"} and np.allclose(old.vector("b"), new_b)
    old.apply([("f", base[1])])
    old.save()
    assert (tmp_path / V.DELTA).exists() and not (tmp_path / V.OLD_DELTA).exists()
    assert set(V.VectorStore.load(tmp_path).rows) == {"a", "b", "d", "e", "f"}
    (tmp_path / V.DELTA).write_bytes((tmp_path / V.DELTA).read_bytes()[:-3])  # cut short
    with pytest.raises(ValueError, match="unreadable"):
        V.VectorStore.load(tmp_path)


def test_vector_keys_find_a_row_by_its_whole_path_without_splitting():
    from cortex.search.vectors import Keys

    paths = ["vault/a.md", "", "xvault/a.md", "vault/a.md.md", "mind/Zürich notes.md", "vault/a.m"]
    keys = Keys.of(paths)
    assert len(keys) == len(paths) and list(keys) == paths
    assert [keys[i] for i in range(len(paths))] == paths and keys[-1] == "vault/a.m"
    for i, path in enumerate(paths):
        if path:
            assert keys.row(path) == i
    assert keys.row("a.md") is None and keys.row("vault") is None and keys.row("") is None
    assert keys.row("vault/a.md\nxvault/a.md") is None  # never across lines
    assert Keys.of([]).row("x") is None and len(Keys.of([])) == 0


def test_a_saved_store_finds_rows_by_binary_search_and_ignores_a_lookup_of_another_base(tmp_path):
    import numpy as np

    from cortex.search import vectors as V

    paths = ["vault/b.md", "vault/a.md", "mind/Zürich notes.md", "vault/a.md.md", "a", "vault/a.m"]
    matrix = np.eye(len(paths), 8, dtype=np.float32)
    V.VectorStore(tmp_path, matrix, paths).save()
    store = V.VectorStore.load(tmp_path)
    assert store.keys._order is not None  # the lookup file was written with the base, and used
    assert isinstance(store.keys._order_at, memoryview)  # read as Python ints, not numpy scalars
    for i, path in enumerate(paths):
        assert store.row_of(path) == i and store.keys.row(path) == i and store.keys[i] == path
        assert type(store.keys.row(path)) is int
    assert all(store.keys.row(p) is None for p in ("vault", "vault/a", "zzz", "", "0", "vault/a.md\nvault/b.md"))
    stale = (tmp_path / V.ORDER).read_bytes()
    V.VectorStore(tmp_path, matrix[::-1].copy(), paths[::-1]).save()  # another base, the same paths reversed
    (tmp_path / V.ORDER).write_bytes(stale)  # as if killed between the keys file and its lookup
    store = V.VectorStore.load(tmp_path)
    assert store.keys._order is None  # not the keys file's own: the byte search instead
    assert [store.keys.row(p) for p in paths] == list(range(len(paths)))[::-1]
    # a keys file written in the tick of the one it replaces, at its size, is dated apart
    twin = tmp_path / "twin"
    twin.write_bytes((tmp_path / V.KEYS).read_bytes())
    before = V._token(tmp_path)
    os.utime(twin, ns=(before[2], before[2]))
    V._unlike(twin, before)
    assert twin.stat().st_mtime_ns != before[2]


def test_a_vault_copied_with_its_times_keeps_its_vector_delta_and_lookup(vault, tmp_path):
    """A vault copied or restored with its times kept (`cp -a`, `rsync -a`, a backup) has
    new inodes and the same files. The vector delta and the keys' lookup file named their
    base by the keys file's inode too, so the copy passed both over: the notes changed
    since the last fold lost their vectors for good (a new note unfound by meaning, a
    deleted one's row alive again, and the next update wrote a delta without them), and
    every cold query byte-searched the keys file. The copy answers as the original."""
    from cortex.search import vectors as V

    env = {**ENV, "CORTEX_WATCH": "off"}

    def query(root: Path, text: str) -> list:
        done = subprocess.run([sys.executable, "-m", "cortex", "query", text, "--json"], cwd=root, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return [(r["path"], r["score"]) for r in json.loads(done.stdout)["results"]]

    topics = ["the export job compresses monthly exports", "the sync worker retries station files",
              "tide tables are cached per harbour", "backups rotate every seventh day"]
    for i in range(12):
        write_note(vault, f"mind/facts/f{i}.md", f"{topics[i % 4]} (item {i}).", type_="fact")
    commit_all(vault)
    assert cortex("index", cwd=vault, env=env).returncode == 0  # the base
    write_note(vault, "mind/facts/pilots.md", "Harbour pilots board ships at the outer buoy.", type_="fact")
    (vault / "mind/facts/f3.md").unlink()
    commit_all(vault, "a note added, one removed")
    assert cortex("index", cwd=vault, env=env).returncode == 0  # a delta: one new row, one dead
    store = V.VectorStore.load(search_dir(vault))
    assert store.delta_keys == ["mind/facts/pilots.md"] and len(store.dead) == 1

    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(vault), str(copy)], check=True)
    copied = V.VectorStore.load(search_dir(copy))
    assert copied.delta_keys == store.delta_keys and copied.dead == store.dead and copied.keys._order is not None
    for text in ("where do pilots board ships", "how often do backups rotate"):
        assert query(copy, text) == query(vault, text)
    # an update in the copy keeps what the delta held
    write_note(copy, "mind/facts/lamp.md", "The lighthouse lamp is serviced each spring.", type_="fact")
    commit_all(copy, "one more")
    assert cortex("index", cwd=copy, env=env).returncode == 0
    later = V.VectorStore.load(search_dir(copy))
    assert set(later.delta_keys) == {"mind/facts/pilots.md", "mind/facts/lamp.md"}
    assert "mind/facts/f3.md" not in later.rows and len(later) == 13


def test_a_loaded_store_maps_its_keys_file_and_knows_when_it_is_cut_short(tmp_path):
    """A cold query reads the ~20 lines of the keys file its lookups visit from a map of
    the file: it read the whole file (2 MB at 50,000 notes, ~530 page faults, ~1.2 ms of
    CPU; four times that at 200,000). A file cut short in place under a store kept loaded
    (the watcher's, the MCP server's) is then damage it must see (`intact`), as it sees a
    vector file cut short, instead of reading past its end; a store saved again (a new
    base, renamed into place) keeps the file it mapped readable."""
    import mmap

    import numpy as np

    from cortex.search import vectors as V

    paths = [f"vault/n{i:04d}.md" for i in range(3000)]
    matrix = np.eye(len(paths), 8, dtype=np.float32)
    V.VectorStore(tmp_path, matrix, paths).save()
    store = V.VectorStore.load(tmp_path)
    assert isinstance(store.keys.data, mmap.mmap)
    assert [store.row_of(p) for p in paths[::97]] == list(range(0, len(paths), 97))
    assert store.keys[2999] == paths[2999] and list(store.keys) == paths
    assert store.intact()
    V.VectorStore(tmp_path, np.eye(len(paths), 8, dtype=np.float32), ["vault/new.md", *paths[1:]]).save()  # a new base
    assert store.keys[0] == paths[0] and store.row_of(paths[0]) == 0  # the old map reads the file it was made of
    again = V.VectorStore.load(tmp_path)
    assert again.row_of("vault/new.md") == 0 and again.row_of(paths[0]) is None
    assert again.intact()
    keys_file = tmp_path / V.KEYS
    os.truncate(keys_file, keys_file.stat().st_size // 2)
    assert not again.intact()
    with pytest.raises(ValueError):  # read again: damage, rebuilt by the index
        V.VectorStore.load(tmp_path)


def test_large_vector_store_prefilters_and_agrees_with_exact(tmp_path):
    import numpy as np

    from cortex.search import vectors as V

    rng = np.random.default_rng(0)
    n, d = V.EXACT_LIMIT + 500, 64
    scale = np.linspace(3, 0.2, d).astype(np.float32)  # PCA-like: variance falls with the index
    m = rng.standard_normal((n, d)).astype(np.float32) * scale
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    keys = [f"k{i}" for i in range(n)]
    V.VectorStore(tmp_path, m, keys, 24).save()
    store = V.VectorStore.load(tmp_path, head_dims=24)
    assert store._head is not None
    q = m[7] + 0.01 * rng.standard_normal(d).astype(np.float32)
    q /= np.linalg.norm(q)
    exact = [keys[j] for j in np.argsort(-(m @ q))[:5]]
    assert exact[0] == "k7"
    assert [k for k, _ in store.top(q, 5)] == exact
    store.apply([("k-new", m[7])], deletes=["k3"])  # an update drops the stale head
    assert store._head is None
    assert {k for k, _ in store.top(q, 2)} == {"k7", "k-new"}


def test_query_finds_the_vault_as_vault_discover_does(vault, tmp_path, monkeypatch):
    import importlib

    from cortex.cli.search import _vault_root
    from cortex.errors import VaultNotFound

    shared = importlib.import_module("cortex.cli.app")  # the module, not the Typer app
    (vault / "mind" / "facts").mkdir(parents=True, exist_ok=True)
    monkeypatch.delenv("CORTEX_VAULT", raising=False)
    monkeypatch.setitem(shared._options, "vault", None)
    monkeypatch.chdir(vault / "mind" / "facts")
    assert _vault_root() == Vault.discover().root
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CORTEX_VAULT", str(vault))
    assert _vault_root() == Vault.discover().root
    monkeypatch.setitem(shared._options, "vault", vault / "mind" / "..")
    assert _vault_root() == Vault.discover(vault / "mind" / "..").root
    monkeypatch.setitem(shared._options, "vault", tmp_path / "missing")
    with pytest.raises(VaultNotFound):  # said by the command: exit 2, as in every command
        _vault_root()


def test_unloadable_model_is_an_error_and_keeps_the_index(mixed, capsys, tmp_path):
    vault, notes = mixed
    assert main(["--vault", str(vault), "index"]) == 0
    assert main(["--vault", str(vault), "query", "coffee", "--model", str(tmp_path / "no-model")]) == 2
    assert "no-model" in capsys.readouterr().err
    assert (search_dir(vault) / "state.json").exists()
    assert main(["--vault", str(vault), "query", "roaster", "--paths"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == notes["dec"]


def test_whoosh_import_stand_ins_leave_real_modules_usable():
    code = (
        "import sys\n"
        "from cortex.search.lexical import _import_whoosh\n"
        "_import_whoosh()\n"
        "assert not {'urllib.request', 'cached_property', 'whoosh.lang.morph_en', 'html'} & set(sys.modules)\n"
        "from whoosh.query.terms import variations\n"
        "assert 'run' in set(variations('running'))\n"
        "from whoosh.compat import htmlescape\n"
        "assert htmlescape('<b>R&D</b>', quote=False) == '&lt;b&gt;R&amp;D&lt;/b&gt;'\n"
        "import urllib.request, whoosh.lang.morph_en, html.entities\n"
        "assert urllib.request.__file__ and whoosh.lang.morph_en.__file__ and html.entities.html5['amp;'] == '&'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_the_query_path_reads_the_taxonomy_without_yaml_once_cached(vault):
    """`cortex query` runs in loops: an unchanged taxonomy.yml is read from its JSON copy;
    an edited one is parsed again."""
    (vault / "observer" / "taxonomy.yml").write_text("types:\n  recipe: {category: entity, partition: vault}\n")
    write_note(vault, "vault/recipe/pie.md", "Apple pie needs cold butter", type_="recipe", category="entity")
    commit_all(vault)
    fresh_index(vault)  # builds the index and the cache
    code = ("import sys; from cortex.search.index import SearchIndex; "
            f"idx = SearchIndex({str(vault)!r}); print('recipe' in idx.taxonomy.types, 'yaml' in sys.modules)")
    run = lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert run() == ["True", "False"]
    (vault / "observer" / "taxonomy.yml").write_text("types:\n  tune: {category: entity, partition: vault}\n")
    code = code.replace("'recipe' in", "'tune' in")
    assert run() == ["True", "True"]  # edited: parsed again, and cached for the next one
    assert run() == ["True", "False"]


def test_a_filter_without_text_lists_its_notes_newest_first(mixed, capsys):
    vault, notes = mixed
    v = ["--vault", str(vault), "query"]
    assert main([*v, "--tag", "food", "--paths"]) == 0
    assert capsys.readouterr().out.splitlines() == [notes["dec"], notes["pref"]]
    assert main([*v, "--entity", "Alice", "--paths"]) == 0
    assert capsys.readouterr().out.splitlines() == [notes["proj"], notes["pref"]]
    assert main([*v, "--type", "task", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["mode"] == "list" and [r["path"] for r in listed["results"]] == [notes["task"]]
    assert 0.0 < listed["results"][0]["score"] <= 1.0  # recency, never a timestamp
    assert main([*v, "--tag", "nope"]) == 1


def test_a_tag_finds_the_notes_tagged_with_tags_nested_in_it(vault):
    """Obsidian's `tag:#project` and its tag pane count a note tagged #project/alpha under
    #project; `--tag project` and the graph's `#project` do the same (not #projects)."""
    (vault / "Kickoff.md").write_text("Kickoff of the crane project. #project/alpha\n")
    (vault / "Beta.md").write_text("---\ntags: [Project/Beta]\n---\nBeta notes.\n")
    (vault / "Other.md").write_text("Someone else's work. #projects\n")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "notes")
    found = cortex("--vault", str(vault), "query", "--tag", "project", "--paths")
    assert found.returncode == 0, found.stderr
    assert sorted(found.stdout.split()) == ["Beta.md", "Kickoff.md"]
    found = cortex("--vault", str(vault), "query", "--tag", "#project/alpha", "--paths")
    assert found.stdout.split() == ["Kickoff.md"]
    graph = cortex("--vault", str(vault), "graph", "neighbors", "#project", "--json")
    assert graph.returncode == 0, graph.stderr
    assert sorted(n["path"] for node in json.loads(graph.stdout) for n in node["neighbors"]) == ["Beta.md", "Kickoff.md"]


def test_a_tag_typed_decomposed_on_macos_is_the_same_tag(vault):
    """macOS may hand over `é` as e + U+0301 (NFD). Obsidian reads `#résumé` whole either
    way; cortex read the decomposed one as `#re`, so `--tag résumé` and the graph missed
    the note and a tag `re` appeared."""
    import unicodedata

    decomposed = unicodedata.normalize("NFD", "résumé")
    (vault / "mac.md").write_text(f"Send the updated #{decomposed} to Maya by Friday.\n")
    (vault / "win.md").write_text("Keep the #résumé short, one page.\n")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "vault backup")
    for asked in ("résumé", decomposed):
        found = cortex("--vault", str(vault), "query", "--tag", asked, "--paths")
        assert sorted(found.stdout.split()) == ["mac.md", "win.md"], found.stderr
    graph = cortex("--vault", str(vault), "graph", "neighbors", "#résumé", "--json")
    assert sorted(n["path"] for node in json.loads(graph.stdout) for n in node["neighbors"]) == ["mac.md", "win.md"]
    assert cortex("--vault", str(vault), "graph", "neighbors", "#re").returncode == 1


def test_a_name_written_decomposed_on_macos_is_the_same_entity_and_note(vault):
    """`Café Central` from macOS may be e + U+0301 (NFD), from Windows composed: one entity
    in `--entity` and the graph, and a [[Café Central]] link reaches the note so named."""
    import unicodedata

    decomposed = unicodedata.normalize("NFD", "Café Central")
    (vault / f"{decomposed}.md").write_text("Vienna coffee house.\n")
    (vault / "meeting.md").write_text("Meeting at [[Café Central]] on Monday.\n")
    assert cortex("--vault", str(vault), "write", "--type", "fact", "--body", "Maya meets the team there weekly",
                  "--entity", f"{decomposed}:place").returncode == 0
    assert cortex("--vault", str(vault), "run").returncode == 0
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "vault backup")
    found = cortex("--vault", str(vault), "query", "--entity", "Café Central", "--paths")
    assert found.returncode == 0 and found.stdout.startswith("mind/facts/"), found.stderr
    graph = cortex("--vault", str(vault), "graph", "neighbors", "meeting.md", "--json")
    assert [n["path"] for node in json.loads(graph.stdout) for n in node["neighbors"]] == [f"{decomposed}.md"]
    graph = cortex("--vault", str(vault), "graph", "neighbors", "Café Central", "--json")
    assert [n["edge"] for node in json.loads(graph.stdout) for n in node["neighbors"]] == ["mentions"]


def test_a_note_whose_frontmatter_does_not_parse_is_searched_whole(vault):
    """A note opening with a `---` rule has its first paragraph read as frontmatter that
    does not parse; a template's `{{title}}` breaks the YAML. The commit only warns, and
    every word of such a note is found, as Obsidian's search finds it."""
    (vault / "Rule first.md").write_text("---\n\nThis opens with a horizontal rule and talks about quokkas.\n\n---\n\nend\n")
    (vault / "Broken yaml.md").write_text("---\ntitle: {{title}}\nattendees: x: y\n---\nBody of wombats.\n")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "vault backup")
    for words, path in (("quokkas", "Rule first.md"), ("attendees", "Broken yaml.md"), ("wombats", "Broken yaml.md")):
        found = cortex("--vault", str(vault), "query", words, "--lexical-only", "--paths")
        assert (found.returncode, found.stdout.splitlines()) == (0, [path]), (words, found.stderr)


def test_a_listing_prints_no_timestamp_as_a_score(mixed, capsys):
    vault, _ = mixed
    assert main(["--vault", str(vault), "query", "--recent", "100000d"]) == 0
    out = capsys.readouterr().out
    assert "score" not in out and out.count("\n1. ") + out.startswith("1. ") == 1


def test_nothing_found_mentions_archived_notes_only_when_one_would_match(vault, capsys):
    write_note(vault, "mind/facts/live.md", "The staging database runs on port 5433", type_="fact")
    commit_all(vault)
    v = ["--vault", str(vault), "query", "--lexical-only"]
    assert main([*v, "ledger reconciliation"]) == 1
    assert "archived" not in capsys.readouterr().err
    write_note(vault, "mind/archive/facts/gone.md", "The ledger reconciliation ran on Fridays", type_="fact")
    commit_all(vault)
    assert main([*v, "ledger reconciliation"]) == 1
    assert "1 archived memory would match: add --archived" in capsys.readouterr().err


def test_a_query_in_a_vault_with_no_notes_yet_finds_nothing(tmp_path):
    from tests.conftest import cortex

    assert cortex("init", str(tmp_path / "v")).returncode == 0
    for args in (["query", "staging database"], ["query", "staging database", "--semantic-only"],
                 ["query", "staging database", "--json"], ["query", "--recent", "7d"]):
        done = cortex("--vault", str(tmp_path / "v"), *args)
        assert done.returncode == 1, (args, done.stderr)  # nothing found, not a crash
        assert "a bug" not in done.stderr


def test_a_second_hop_follows_the_best_results_entities_to_the_notes_that_name_them(tmp_path):
    """A question that joins two memories: the first names the project, the second says
    what the project runs. The second comes back through the entity, below the first,
    saying so; a note that shares one word of the name is not reached, nor one the
    filters exclude; nonsense still finds nothing."""
    from tests.conftest import cortex

    root = tmp_path / "v"
    assert cortex("init", str(root)).returncode == 0

    def obs(body, day, kind="fact", entities=()):
        return json.dumps({"timestamp": f"2026-03-0{day}T12:00:00.000Z", "session_id": "cli", "type": kind,
                           "bucket": "explicit", "attribution": "owner", "importance": 0.8, "body": body,
                           "entities": [{"name": n, "type": "project"} for n in entities]})

    lines = [obs("Priya Raman leads the Harbour Kiosk project.", 1, entities=["Priya Raman", "Harbour Kiosk"]),
             obs("The Harbour Kiosk runs Debian 12 on a Raspberry Pi 5.", 2),
             obs("The Harbour Master office closes at six.", 3),
             obs("Decided: the Harbour Kiosk gets a touch screen next spring.", 4, kind="decision"),
             obs("The staging database is rebuilt every night at 02:00.", 5)]
    (root / "observer" / "observations.jsonl").write_text("\n".join(lines) + "\n")
    assert cortex("--vault", str(root), "run").returncode == 0

    def ask(*args):
        done = cortex("--vault", str(root), "query", "which operating system does Priya's project run on", "--json",
                      *args)
        assert done.returncode == 0, done.stderr
        return [(r["snippet"], r["via"]) for r in json.loads(done.stdout)["results"]]

    results = ask()
    assert results[0] == ("Priya Raman leads the Harbour Kiosk project.", None)
    reached = {snippet: via for snippet, via in results[1:] if via}
    assert reached["The Harbour Kiosk runs Debian 12 on a Raspberry Pi 5."]["entity"] == "Harbour Kiosk"
    assert "Decided: the Harbour Kiosk gets a touch screen next spring." in reached
    assert not any("Harbour Master" in snippet for snippet, _ in results)  # one word of the name is not the name
    assert not any("touch screen" in snippet for snippet, _ in ask("--type", "fact"))
    assert cortex("--vault", str(root), "query", "qwxzv plorb").returncode == 1

    # a person's notes, linked as in Obsidian: the link names the entity
    (root / "Projects").mkdir()
    (root / "Projects" / "Rollouts.md").write_text("Marta Okafor owns the [[Tide Gauge|gauge]] rollout this spring.\n")
    (root / "Tide Gauge.md").write_text("The tide gauge reports the water level every ten minutes over LoRa.\n")
    done = cortex("--vault", str(root), "query", "what does Marta Okafor own", "--json")
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert results[0]["path"] == "Projects/Rollouts.md" and results[0]["via"] is None
    assert {"path": "Projects/Rollouts.md", "entity": "Tide Gauge"} in [r["via"] for r in results]
    # as text: a person's note has no type, and its line says where it is and the date it is
    # dated by (no `created`, not committed: the file's); its excerpt reads as text: the
    # link as the words it shows
    saved = datetime.fromtimestamp((root / "Projects" / "Rollouts.md").stat().st_mtime, timezone.utc)
    done = cortex("--vault", str(root), "query", "what does Marta Okafor own")
    assert done.returncode == 0 and f"\n   Projects/Rollouts.md  ({saved:%Y-%m-%d})\n" in done.stdout
    assert "()" not in done.stdout
    assert "Marta Okafor owns the gauge rollout this spring." in done.stdout and "[[" not in done.stdout


def test_an_excerpt_reads_as_text_not_markdown():
    from cortex.search.records import SNIPPET_CHARS, snippet_of

    body = ("# Crane schedule\n\nCrane 4 runs on [[Tide Gauge|the gauge]] days, see [[Quay 3#Power]].\n"
            "> [!warning]- Gate\n> the code changes monthly\n\n## Notes\nC# scripts, issue #12, [[]] stays.\n")
    assert snippet_of(body) == ("Crane schedule Crane 4 runs on the gauge days, see Quay 3. Gate the code changes "
                                "monthly Notes C# scripts, issue #12, stays.")
    assert snippet_of("word " * 200) == ("word " * 200)[:SNIPPET_CHARS]
    assert snippet_of("#tag at the start of a line stays a tag") == "#tag at the start of a line stays a tag"


def test_a_query_during_an_update_waits_for_the_writer_and_rebuilds_nothing(vault):
    """A writer saves the vectors, then the lexical index: a query that reads between the
    two sees one more vector row than notes. It looks again once the writer is done (the
    index's lock), and answers from the updated index without rebuilding it."""
    import fcntl
    import shutil
    import threading

    write_note(vault, "mind/facts/a.md", "Tomatoes ripen late in a cold summer", type_="fact")
    commit_all(vault)
    assert cortex("-C", str(vault), "index", env=ENV).returncode == 0
    folder = search_dir(vault)
    shutil.copytree(folder / "whoosh", vault.parent / "whoosh-before")
    write_note(vault, "mind/facts/b.md", "Tomatoes need staking in the garden", type_="fact")
    commit_all(vault)
    assert cortex("-C", str(vault), "index", env=ENV).returncode == 0
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the writer, between saving the vectors and the lexical index
        (folder / "whoosh").rename(vault.parent / "whoosh-after")
        shutil.copytree(vault.parent / "whoosh-before", folder / "whoosh")

        def finish_writing():
            shutil.rmtree(folder / "whoosh")
            (vault.parent / "whoosh-after").rename(folder / "whoosh")
            fcntl.flock(lock, fcntl.LOCK_UN)

        writer = threading.Timer(1.5, finish_writing)
        writer.start()
        found = cortex("-C", str(vault), "query", "tomatoes", "--json", env=ENV)
        writer.join()
    assert found.returncode == 0, found.stderr
    assert "rebuild" not in found.stderr
    assert {r["path"] for r in json.loads(found.stdout)["results"]} == {"mind/facts/a.md", "mind/facts/b.md"}


def test_a_query_waits_for_a_held_index_lock_only_up_to_the_lock_timeout(vault):
    """A `cortex index` stopped while it holds the index's lock: a query that finds a changed
    note waits lock_timeout, then answers from the index as it is; with no index to answer
    from (the rebuild had cleared it), it exits 75, busy, saying the wait was the configured
    lock_timeout (the subprocess timeout only guards the suite against a hang)."""
    import fcntl

    config = vault / "observer" / "config.yml"
    config.write_text(config.read_text(encoding="utf-8").replace("lock_timeout: 10", "lock_timeout: 1"), encoding="utf-8")
    write_note(vault, "mind/facts/a.md", "Hedgehogs sleep under the shed in winter", type_="fact")
    commit_all(vault)
    assert cortex("-C", str(vault), "index", env=ENV).returncode == 0
    write_note(vault, "mind/facts/b.md", "Hedgehogs also like the compost heap", type_="fact")
    folder = search_dir(vault)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stale = subprocess.run([str(Path(sys.executable).parent / "cortex"), "-C", str(vault), "query", "hedgehogs",
                                "--json"], env=ENV, capture_output=True, text=True, timeout=600)
        assert stale.returncode == 0, stale.stderr
        assert "busy" in stale.stderr
        assert [r["path"] for r in json.loads(stale.stdout)["results"]] == ["mind/facts/a.md"]
        (folder / "state.json").unlink()  # what a rebuild clears first
        busy = subprocess.run([str(Path(sys.executable).parent / "cortex"), "-C", str(vault), "query", "hedgehogs"],
                              env=ENV, capture_output=True, text=True, timeout=600)
    assert busy.returncode == 75, busy.stderr
    assert "busy" in busy.stderr and "cortex waits 1s; set lock_timeout" in busy.stderr, busy.stderr


def leaked_note(root: Path) -> tuple[str, ...]:
    """A note a teammate committed past the hooks, a credential in its title, body and a
    tag; the credentials, built at test time (tests/secret_phrasings.py)."""
    from secret_phrasings import pushed_credentials

    aws_id, aws_secret, github = pushed_credentials()
    body = (f"The ledger deploy uses AWS key {aws_id} with secret aws_secret_access_key={aws_secret} "
            f"and github token {github}")
    write_note(root, "mind/facts/deploy.md", body, type_="fact", tags=("deploy", github.lower()),
               entities=((f"bot {github}", "tool"),))
    commit_all(root, "deploy notes")
    return aws_id, aws_secret, github, github.lower()


def test_a_credential_committed_past_the_hooks_is_never_served_by_query(vault):
    """`git commit --no-verify` (or a note from before cortex was installed) puts a
    credential in the vault; `cortex query` serves what the index stored: the note with
    each credential redacted, in its title, excerpt, tags and names, as the brief is."""
    secrets = leaked_note(vault)
    v = ("--vault", str(vault), "query")
    for args in (["ledger deploy"], ["ledger deploy", "--json"], ["--type", "fact", "--json"]):
        found = cortex(*v, *args)
        assert found.returncode == 0, found.stderr
        assert "[REDACTED]" in found.stdout and "ledger deploy" in found.stdout
        assert not [s for s in secrets if s in found.stdout], args
    (hit,) = json.loads(found.stdout)["results"]
    assert hit["title"].startswith("The ledger deploy uses AWS key [REDACTED]")
    assert hit["tags"] == ["deploy", "[REDACTED]"] and hit["entities"] == ["bot [REDACTED]"]
    # what is indexed is the redacted text: the credential's own words find nothing
    for secret in secrets:
        assert cortex(*v, secret, "--lexical-only", "--paths").stdout == "", secret


def test_chinese_and_japanese_notes_are_found_by_their_words(vault):
    """Chinese and Japanese are written without spaces: a sentence was one term, found by
    no query but the whole sentence (exit 1, "nothing found", for a memory holding the
    words). They are indexed by pairs of characters now; a question the notes do not
    answer still finds nothing."""
    write_note(vault, "mind/facts/db.md", "数据库服务器每天晚上两点重启", type_="fact")
    write_note(vault, "mind/facts/tower.md", "東京タワーの見学は毎週金曜日です", type_="fact")
    write_note(vault, "mind/facts/coffee.md", "The coffee machine is descaled every Friday", type_="fact")
    commit_all(vault)
    for question, start in (("数据库", "数据库服务器"), ("服务器重启", "数据库服务器"), ("東京タワー", "東京タワー")):
        found = cortex("--vault", str(vault), "query", question, "--json")
        assert found.returncode == 0, (question, found.stderr)
        assert [r["title"][:len(start)] for r in json.loads(found.stdout)["results"]] == [start]
    assert cortex("--vault", str(vault), "query", "天气怎么样").returncode == 1
    assert cortex("--vault", str(vault), "query", "coffee machine descaled").returncode == 0


def test_a_korean_word_is_found_with_the_particle_or_ending_joined_to_it(vault):
    """Korean is written with spaces, but a particle joins the word it follows: a note that
    says "데이터베이스를" (the database, as an object) held no term "데이터베이스", and a
    folded Hangul syllable was its letters (jamo), so `cortex query 데이터베이스` found nothing."""
    write_note(vault, "mind/facts/db.md", "우리는 지난주에 데이터베이스를 PostgreSQL로 바꿨다", type_="fact")
    write_note(vault, "mind/facts/meeting.md", "회의는 매주 월요일 아침에 있습니다", type_="fact")
    write_note(vault, "mind/facts/coffee.md", "The coffee machine is descaled every Friday", type_="fact")
    commit_all(vault)
    for question, path in (("데이터베이스", "mind/facts/db.md"), ("PostgreSQL", "mind/facts/db.md"),
                           ("데이터베이스를 바꿨다", "mind/facts/db.md"), ("월요일 회의", "mind/facts/meeting.md")):
        found = cortex("--vault", str(vault), "query", question, "--json")
        assert found.returncode == 0, (question, found.stderr)
        assert [r["path"] for r in json.loads(found.stdout)["results"]] == [path], question
    assert cortex("--vault", str(vault), "query", "고양이").returncode == 1  # a word no note holds


def test_a_question_the_model_reads_only_as_letters_brings_no_note_by_meaning(vault):
    """In a small vault a note close enough in meaning is returned with the answer (step 5
    of docs/query.md). The model reads any Korean text as a few of its letters (jamo), so
    every two Korean notes were "close" (a cosine of 0.96): each Korean question brought
    every Korean note of the vault along. English questions still bring theirs."""
    write_note(vault, "mind/facts/db.md", "우리는 지난주에 데이터베이스를 PostgreSQL로 바꿨다", type_="fact")
    write_note(vault, "mind/facts/meeting.md", "회의는 매주 월요일 아침에 있습니다", type_="fact")
    write_note(vault, "mind/facts/lunch.md", "점심은 보통 열두 시에 먹어요", type_="fact")
    write_note(vault, "mind/facts/pets.md", "Maya has two cats and a dog", type_="fact")
    write_note(vault, "mind/facts/kitten.md", "The new kitten sleeps on the sofa all afternoon", type_="fact")
    commit_all(vault)
    found = json.loads(cortex("--vault", str(vault), "query", "데이터베이스", "--json").stdout)["results"]
    assert [r["path"] for r in found] == ["mind/facts/db.md"]
    close = json.loads(cortex("--vault", str(vault), "query", "Maya cats", "--json").stdout)["results"]
    assert "mind/facts/pets.md" == close[0]["path"]


def test_a_single_chinese_or_japanese_character_finds_the_notes_holding_it(vault):
    """Many Chinese and Japanese words are one character (猫, a cat). Indexed by pairs of
    characters alone, "我的猫叫小白" held no term "猫": `cortex query 猫` found nothing
    while "小白" found the note. Each character is a term of the note too; a query of two
    characters or more is still asked by its pairs, so "猫叫" finds only the note that
    says it. In a vault past the small-vault rule, so the whole answer gate applies."""
    cat = write_note(vault, "mind/facts/cat.md", "我的猫叫小白", type_="fact")
    neko = write_note(vault, "mind/facts/neko.md", "猫が大好きです", type_="fact")
    write_note(vault, "mind/facts/db.md", "数据库服务器每天晚上两点重启", type_="fact")
    for i, word in enumerate("harbour crane ledger invoice garden violin kettle bicycle lantern meadow".split()):
        for j in range(6):
            write_note(vault, f"mind/facts/{word}{j}.md", f"The {word} list, entry {j}: checked on day {i * 6 + j}",
                       type_="fact")
    commit_all(vault)
    for question, expected in (("猫", {cat, neko}), ("小白", {cat}), ("猫叫", {cat}), ("好", {neko})):
        found = cortex("--vault", str(vault), "query", question, "--json")
        assert found.returncode == 0, (question, found.stderr)
        assert {r["path"] for r in json.loads(found.stdout)["results"]} == expected, question
    assert cortex("--vault", str(vault), "query", "狗").returncode == 1  # a character no note holds


def test_search_commands_close_what_they_open(vault):
    """Under Python's development mode (PYTHONDEVMODE=1, `-X dev`) or `-W error`, every
    `cortex query` printed sixteen ResourceWarnings about the index's files, and `cortex
    index --rebuild` left git's status running unread: the command closed neither and left
    them to the collector. Each now closes the index and waits for git before it returns."""
    write_note(vault, "vault/decisions/db.md", "Use Postgres 16 for the ledger service.", type_="decision")
    commit_all(vault)
    env = {**ENV, "PYTHONDEVMODE": "1"}
    for args in (["query", "ledger database"],  # no index yet: built
                 ["index", "--rebuild"],
                 ["query", "ledger database", "--type", "decision"],  # loaded and freshened
                 ["index"]):
        done = cortex("--vault", str(vault), *args, env=env)
        assert done.returncode == 0, done.stderr
        assert "ResourceWarning" not in done.stderr, (args, done.stderr)
