"""What people's own git does to memories beside cortex — Obsidian's git plugin committing
every minute and pulling with `git pull` (merge) or `git pull --rebase`, a person renaming
or moving a memory — merged by the notes' merge driver and `cortex sync` between real
clones of a bare remote."""

from __future__ import annotations

import json

import pytest

from sync_helpers import active, cx, field, fsck, git, head_tree, make_fleet, notes, person_commit, sh, sync, write

BODY = "The staging database is rebuilt every night"


def converge(*machines) -> None:
    for _ in range(2):
        for m in machines:
            sync(m)
    assert len({head_tree(m) for m in machines}) == 1


def shared_memory(tmp_path, body=BODY):
    """Two machines that both have one memory (a's, synced): (a, b, its path)."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, body)
    cx(a, "run")
    converge(a, b)
    (rel,) = [p for p, t in active(a).items() if body in t]
    return a, b, rel


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
    a, b, rel = shared_memory(tmp_path)
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
    a, b, rel = shared_memory(tmp_path)
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
    a, b, rel = shared_memory(tmp_path)
    for m, title in ((a, "Staging rebuilds"), (b, "Nightly rebuild of staging")):
        text = (m / rel).read_text()
        person_commit(m, rel, text.replace(f'title: "{field(text, "title")}"', f'title: "{title}"'), "title")
    sync(a)
    done = pull(b, "merge")
    assert done.returncode != 0 and "<<<<<<<" in (b / rel).read_text()
