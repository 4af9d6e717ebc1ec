"""What people's own git does to memories beside cortex — Obsidian's git plugin committing
every minute and pulling with `git pull` (merge) or `git pull --rebase`, a person renaming
or moving a memory — merged by the notes' merge driver and `cortex sync` between real
clones of a bare remote."""

from __future__ import annotations

import json
import re

import pytest

from sync_helpers import converge, cx, field, fsck, git, make_fleet, notes, person_commit, sh, shared_memory, sync, write

BODY = "The staging database is rebuilt every night"


def edit_body(machine, rel, edit, message):
    """A person's edit of the body, committed as the plugin commits: `git add -A`, the hook."""
    text = (machine / rel).read_text()
    head, sep, body = text.partition("\n---\n")
    person_commit(machine, rel, head + sep + edit(body), message)


def pull(machine, how):
    """The plugin's pull: `git pull` (a merge) or `git pull --rebase`."""
    git(machine, "fetch", "-q", "origin")
    if how == "rebase":
        return sh(machine, "git", "rebase", "origin/main", check=False)
    if how == "merge":
        return sh(machine, "git", "merge", "--no-edit", "origin/main", check=False)
    return sync(machine, check=False)


# --- the title and aliases the hook derives from the body ----------------------------------


@pytest.mark.parametrize("how", ["merge", "rebase", "sync"])
def test_edits_to_different_lines_of_one_body_merge_with_the_title_derived_from_the_merged_body(tmp_path, how):
    """Each laptop's hook re-derived the title and aliases from its own edit: those lines
    are not merged as text (they conflicted) but derived again from the merged body."""
    a, b, rel = shared_memory(tmp_path, BODY)
    edit_body(a, rel, lambda body: "\nMaya says:\n" + body, "vault backup: a")
    edit_body(b, rel, lambda body: body + "\nIt takes about forty minutes.\n", "vault backup: b")
    titles = {field((m / rel).read_text(), "title") for m in (a, b)}
    assert len(titles) == 2  # each hook derived its own
    sync(a)
    done = pull(b, how)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(b, "status", "--porcelain") == ""
    text = (b / rel).read_text()
    assert "<<<<<<<" not in text
    assert "Maya says:" in text and "forty minutes" in text
    body = text.split("\n---\n", 1)[1]
    from cortex.fixer import title_for

    assert field(text, "title") == title_for(body) not in titles
    assert f'aliases: ["{title_for(body)}"]' in text
    assert field(text, "source_hash") == field(git(a, "show", f"HEAD~1:{rel}"), "source_hash")
    cx(b, "validate", "--all")
    # the hook leaves the merged title alone: it is the merged body's
    assert cx(b, "hook", "fix", str(b / rel)).returncode == 0
    assert (b / rel).read_text() == text
    converge(a, b)
    fsck(b)


def test_a_title_a_person_wrote_on_one_laptop_wins_over_the_one_derived_on_the_other(tmp_path):
    a, b, rel = shared_memory(tmp_path, BODY)
    text = (a / rel).read_text()
    old_title = field(text, "title")
    person_commit(a, rel, text.replace(f'title: "{old_title}"', 'title: "Nightly staging rebuild"')
                  .replace("\n---\n", "\n---\n\nMaya says:\n", 1),
                  "vault backup: a")
    assert field((a / rel).read_text(), "title") == "Nightly staging rebuild"  # the hook keeps it
    edit_body(b, rel, lambda body: body + "\nIt takes about forty minutes.\n", "vault backup: b")
    assert field((b / rel).read_text(), "title") != old_title  # b's hook derived a new one
    sync(a)
    done = pull(b, "merge")
    assert done.returncode == 0, done.stdout + done.stderr
    merged = (b / rel).read_text()
    assert field(merged, "title") == "Nightly staging rebuild"
    assert "Maya says:" in merged and "forty minutes" in merged and "<<<<<<<" not in merged
    cx(b, "validate", "--all")


def test_titles_people_wrote_differently_on_both_laptops_are_left_to_a_person(tmp_path):
    a, b, rel = shared_memory(tmp_path, BODY)
    for m, title in ((a, "Staging rebuilds"), (b, "Nightly rebuild of staging")):
        text = (m / rel).read_text()
        person_commit(m, rel, text.replace(f'title: "{field(text, "title")}"', f'title: "{title}"'), "title")
    sync(a)
    done = pull(b, "merge")
    assert done.returncode != 0 and "<<<<<<<" in (b / rel).read_text()


# --- a memory moved into a person's folder; a person's own notes ----------------------------


def _reinforce(machine, body, timestamp):
    write(machine, body, timestamp=timestamp)
    assert json.loads(cx(machine, "run", "--json").stdout)["reinforced"] == 1
    cx(machine, "reinforce")


@pytest.mark.parametrize("how", ["sync", "merge", "rebase"])
def test_a_memory_a_person_moved_into_their_own_folder_merges_as_in_mind(tmp_path, how):
    """Both laptops' agents repeat the memory the person moved to Projects/: the two
    reinforcements add up there as in mind/, by `cortex sync` and by the plugin's pull."""
    a, b, rel = shared_memory(tmp_path, BODY)
    moved = "Projects/Staging.md"
    (a / "Projects").mkdir()
    git(a, "mv", rel, moved)
    sh(a, "git", "commit", "-q", "-m", "vault backup: move")
    converge(a, b)
    _reinforce(a, BODY, "2026-12-01T10:00:00Z")
    _reinforce(b, BODY, "2026-12-02T10:00:00Z")
    sync(a)
    done = pull(b, how)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (b / moved).read_text()
    assert "<<<<<<<" not in text and field(text, "reinforced") == "2"
    assert git(b, "status", "--porcelain") == ""
    cx(b, "validate", "--all")


@pytest.mark.parametrize("how", ["sync", "merge"])
def test_a_merged_tally_of_digits_alone_reads_as_a_string(tmp_path, how):
    """Both laptops count a repeat: the merge writes a tally of its own from the two, a
    hash's first hex digits, digits alone here. Written quoted, it reads as the token,
    not a number; and a tally an older cortex wrote plain (read as a number) counts as
    the same string as its quoted form, so every machine merges the pair alike."""
    import yaml

    from cortex.notes import parse_note, split_frontmatter

    a, b, rel = shared_memory(tmp_path, BODY)
    for machine, at, tally in ((a, "2026-12-01T10:00:00Z", '"001fbeef"'), (b, "2026-12-02T10:00:00Z", "12345678")):
        _reinforce(machine, BODY, at)
        text = re.sub(r"(?m)^reinforced_tally: .*$", f"reinforced_tally: {tally}", (machine / rel).read_text())
        person_commit(machine, rel, text, "vault backup: tally")
    sync(a)
    done = pull(b, how)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (b / rel).read_text()
    assert field(text, "reinforced") == "2"
    # sha256("001fbeef+12345678")[:8], the pair taken as strings, whichever way each was written
    assert parse_note(text).meta["reinforced_tally"] == "79004717"
    assert yaml.safe_load(split_frontmatter(text)[0])["reinforced_tally"] == "79004717"
    cx(b, "validate", "--all")


PERSONAL = """---
tags: [garden]
status: draft
due: 2026-05-01
---
# Garden

Plant the tomatoes after the last frost.
Water them every evening.
"""


@pytest.mark.parametrize("how", ["pull", "pull-rebase"])
@pytest.mark.parametrize("clash", [True, False])
def test_a_persons_own_note_merges_byte_for_byte_as_git_merges_it(tmp_path, how, clash, monkeypatch):
    """A note with no cortex fields gets git's own text merge from the driver now named for
    every markdown file: the same bytes, conflict markers and their names included, as on
    a clone whose attributes give the note git's text merge."""
    _, (a, b, c) = make_fleet(tmp_path, 3)
    rel = "Garden/Tomatoes.md"
    (a / "Garden").mkdir()
    person_commit(a, rel, PERSONAL, "vault backup: garden")
    converge(a, b, c)
    git(c, "config", "pull.rebase", "false")
    (c / ".git" / "info").mkdir(exist_ok=True)
    (c / ".git" / "info" / "attributes").write_text("*.md merge=text\n")  # git's own merge, over .gitattributes
    ours = PERSONAL.replace("status: draft", "status: done")
    theirs = PERSONAL.replace("due: 2026-05-01", "due: 2026-05-15") if clash else PERSONAL.replace(
        "Water them", "Water them well")
    person_commit(a, rel, theirs, "vault backup: a")
    sync(a)
    results = {}
    for m in (b, c):
        for when in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):  # one commit id: a rebase's markers name it
            monkeypatch.setenv(when, "2026-04-01T10:00:00Z")
        person_commit(m, rel, ours, "vault backup")
        args = ["pull", "--no-edit", *(["--rebase"] if how == "pull-rebase" else ["--no-rebase"]), "origin", "main"]
        done = sh(m, "git", *args, check=False)
        results[m.name] = (done.returncode != 0, (m / rel).read_bytes())
    assert results["m1"] == results["m2"]
    assert results["m1"][0] is clash
    if clash:
        assert b"<<<<<<< " in results["m1"][1]


def test_cortex_init_gives_an_existing_vault_the_merge_driver_for_every_note(tmp_path):
    """A vault made before: its .gitattributes named the driver for vault/ and mind/ only.
    `cortex init` run in it again adds the line, in a commit that travels with the sync."""
    _, (a, b) = make_fleet(tmp_path, 2)
    old = ("# cortex: notes merge with cortex's driver (`cortex sync`, `git pull`), so what two\n"
           "vault/**/*.md merge=cortex-note\nmind/**/*.md merge=cortex-note\n")
    person_commit(a, ".gitattributes", old, "a vault from before")
    sync(a)
    sync(b)
    assert git(b, "check-attr", "merge", "--", "Projects/x.md").strip().endswith("unspecified")
    cx(a, "init", str(a))  # PATH, else the current directory
    text = (a / ".gitattributes").read_text()
    assert text.startswith(old) and "*.md merge=cortex-note" in text
    assert git(a, "status", "--porcelain") == ""
    converge(a, b)
    assert git(b, "check-attr", "merge", "--", "Projects/x.md").strip().endswith("cortex-note")


# --- a memory renamed by a person on one laptop, forgotten on the other -----------------------


def _rename_and_forget(tmp_path, renamed):
    a, b, rel = shared_memory(tmp_path, BODY)
    (a / renamed).parent.mkdir(parents=True, exist_ok=True)
    (a / rel).rename(a / renamed)  # Obsidian's rename, then the plugin's `git add -A` and commit
    git(a, "add", "-A")
    sh(a, "git", "commit", "-q", "-m", "vault backup: rename")
    forgot = json.loads(cx(b, "forget", rel, "--reason", "rebuilt weekly now", "--json").stdout)
    return a, b, rel, forgot["archived_to"]


def _files_with_id(machine, ident):
    return sorted(p for p, t in notes(machine).items() if field(t, "id") == ident) + sorted(
        str(p.relative_to(machine)) for p in machine.glob("Projects/*.md") if field(p.read_text(), "id") == ident)


@pytest.mark.parametrize("first", ["renamed", "forgotten"])
def test_a_memory_renamed_by_a_person_and_forgotten_on_the_other_laptop_stays_archived_under_the_new_name(
        tmp_path, first):
    renamed = "mind/facts/Staging rebuild.md"
    a, b, rel, archived_to = _rename_and_forget(tmp_path, renamed)
    ident = field((a / renamed).read_text(), "id")
    first_machine, second = (a, b) if first == "renamed" else (b, a)
    sync(first_machine)
    done = sync(second, "--json", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    settled = json.loads(done.stdout)["settled"]
    assert settled == [{"archived_as": "mind/archive/facts/Staging rebuild.md", "from": rel, "renamed_to": renamed,
                        "archived_at": archived_to, "archive_reason": "forgotten"}]
    converge(a, b)
    for m in (a, b):
        assert _files_with_id(m, ident) == ["mind/archive/facts/Staging rebuild.md"]
        text = (m / "mind/archive/facts/Staging rebuild.md").read_text()
        assert field(text, "archive_reason") == "forgotten" and field(text, "forgotten_reason") == "rebuilt weekly now"
        assert git(m, "status", "--porcelain") == ""
        fsck(m)
    cx(a, "validate", "--all")
    assert cx(a, "query", "staging database rebuilt", check=False).returncode == 1  # forgotten: not found


def test_a_memory_renamed_by_a_person_while_the_nightly_decay_let_it_fade_does_not_stop_the_sync(tmp_path):
    """A person renames a memory in Obsidian the day the nightly job's decay archives it:
    git's rename/rename stopped the job's sync for a person every night until one merged
    by hand. It settles as a forget does: archived under the person's name, as decay
    would archive the renamed note the next night on one machine."""
    a, b, rel = shared_memory(tmp_path, BODY)
    renamed = "mind/facts/Staging rebuild.md"
    (a / rel).rename(a / renamed)
    git(a, "add", "-A")
    sh(a, "git", "commit", "-q", "-m", "vault backup: rename")
    assert json.loads(cx(b, "decay", "--now", "2031-01-01T03:00:00Z", "--json").stdout)["changed"] == 1
    sync(a)
    done = sync(b, check=False)
    assert done.returncode == 0, done.stderr
    assert "faded: it stays archived, under the new name" in done.stderr
    converge(a, b)
    ident = field((a / "mind/archive/facts/Staging rebuild.md").read_text(), "id")
    assert _files_with_id(a, ident) == ["mind/archive/facts/Staging rebuild.md"]
    assert field((a / "mind/archive/facts/Staging rebuild.md").read_text(), "archive_reason") == "faded"
    cx(a, "validate", "--all")


def test_a_memory_moved_out_of_mind_and_forgotten_on_the_other_laptop_is_left_to_a_person_with_what_to_do(tmp_path):
    """cortex forgets nothing outside mind/: whether the person's move or the forget is
    right is theirs to say. The hint says what git did (the note at both paths, no
    conflict markers) and the commands that settle it; they work as said."""
    renamed = "Projects/Staging rebuild.md"
    a, b, rel, archived_to = _rename_and_forget(tmp_path, renamed)
    sync(a)
    done = sync(b, "--json", check=False)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    hint = report["hint"]
    assert "renamed two ways" in hint and "drop the <<<<<<<" not in hint, hint
    assert f"git rm '{archived_to}'".replace("'", "") in hint.replace("'", "")
    # the hint, step by step: the person's move kept
    sh(b, "git", "merge", "origin/main", check=False)
    git(b, "rm", "-q", archived_to)
    git(b, "rm", "-q", "--ignore-unmatch", rel)
    git(b, "add", renamed)
    sh(b, "git", "commit", "-q", "--no-edit")
    assert sync(b).returncode == 0
    converge(a, b)
    ident = field((a / renamed).read_text(), "id")
    assert _files_with_id(a, ident) == [renamed]


def test_a_plugins_pull_stopped_on_a_memory_renamed_and_forgotten_is_told_by_the_hook_which_file_to_drop(tmp_path):
    """git's own pull stops at the rename on both sides (no merge driver sees it): the
    person who adds everything is refused — two files, one id — and told to keep one."""
    renamed = "mind/facts/Staging rebuild.md"
    a, b, rel, archived_to = _rename_and_forget(tmp_path, renamed)
    sync(a)
    assert pull(b, "merge").returncode != 0
    git(b, "add", "-A")
    refused = sh(b, "git", "commit", "-q", "--no-edit", check=False)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "keep one, `git rm -f` the other" in said, said
    git(b, "rm", "-q", "-f", renamed)  # keeps it forgotten
    sh(b, "git", "commit", "-q", "--no-edit")
    assert sync(b).returncode == 0
    converge(a, b)
    ident = field((a / archived_to).read_text(), "id")
    assert _files_with_id(a, ident) == [archived_to]


# --- a month folder decay empties while another machine memorizes into it ------------------


@pytest.mark.parametrize("how", ["sync", "merge", "rebase"])
def test_a_memory_added_to_a_month_folder_decay_emptied_elsewhere_stays_where_it_was_memorized(tmp_path, how):
    """Decay archives every memory of mind/facts/2024-01/; another machine memorizes a new
    one into that folder meanwhile. A folder of the vault is not renamed as a unit: the new
    memory merges in where it was memorized, current, with nothing for a person to settle
    (git's directory-rename detection would move it into mind/archive/ and stop)."""
    _, (a, b) = make_fleet(tmp_path, 2)
    for body in ("The old build farm ran on Jenkins", "The old wiki lived on Confluence"):
        write(a, body, timestamp="2024-01-10T10:00:00Z")
    cx(a, "run")
    converge(a, b)
    write(b, BODY, timestamp="2024-01-20T10:00:00Z")
    cx(b, "run")
    (new,) = [p for p, t in notes(b).items() if BODY in t]
    assert new.startswith("mind/facts/2024-01/")
    sync(b)
    assert json.loads(cx(a, "decay", "--json").stdout)["changed"] == 2
    assert not list((a / "mind/facts/2024-01").glob("*.md"))  # the folder's every memory moved away
    done = pull(a, how)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(a, "status", "--porcelain") == ""
    assert [p for p, t in notes(a).items() if BODY in t] == [new]
    assert field((a / new).read_text(), "archived") is None
    converge(a, b)
    cx(a, "validate", "--all")
