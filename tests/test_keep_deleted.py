"""A memory a person deleted on one machine and cortex only reinforced on another stays
deleted when a person's own `git pull` (the Obsidian Git plugin's: merge or rebase) stops
on the modify/delete conflict and they conclude it the natural way (`git add -A` and a
commit, or `git rebase --continue`): real clones of a bare remote, real git, the real hook."""

from __future__ import annotations

import os
import subprocess

from sync_helpers import cx, git, make_fleet, person_commit, sh, sync, write

BODY = "The deploy key rotates every ninety days"


def _deleted_here(tmp_path):
    """A (m0) and B (m1) share a memory; A deletes it in a commit of its own. Returns
    (A, B, path)."""
    _, (a, b) = make_fleet(tmp_path, 2)
    write(a, BODY, timestamp="2026-02-16T10:00:00Z")
    cx(a, "run")
    sync(a)
    sync(b)
    path = next(p for p in git(a, "ls-files", "mind").split() if "/20" in p)
    git(a, "rm", "-q", path)
    git(a, "commit", "-q", "-m", "vault backup: delete")
    return a, b, path


def _deleted_here_reinforced_there(tmp_path):
    """A deletes the memory; B repeats it, reinforces it and pushes. Returns (A, B, path)."""
    a, b, path = _deleted_here(tmp_path)
    write(b, BODY, timestamp="2026-02-17T10:00:00Z")
    cx(b, "run")
    cx(b, "maintain", "--force")
    assert "reinforced:" in (b / path).read_text(encoding="utf-8")
    sync(b)
    return a, b, path


def _said(done) -> str:
    return done.stdout + done.stderr


def _tracked(machine, path) -> bool:
    return bool(git(machine, "ls-files", "--", path).strip())


def test_a_merge_concluded_by_add_all_and_commit_keeps_the_memory_deleted(tmp_path):
    a, b, path = _deleted_here_reinforced_there(tmp_path)
    pulled = sh(a, "git", "pull", "--no-rebase", "origin", "main", check=False)
    assert pulled.returncode != 0 and "CONFLICT (modify/delete)" in pulled.stdout + pulled.stderr
    assert (a / path).exists()  # git left B's reinforced copy in the working tree
    git(a, "add", "-A")
    done = sh(a, "git", "commit", "-m", "vault backup: resolve", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"kept deleted: {path} was deleted by a person; the other side only reinforced it" in _said(done)
    assert not (a / path).exists() and not _tracked(a, path)
    assert len(git(a, "rev-parse", "HEAD^@").split()) == 2  # the person's merge commit, nothing of cortex's
    assert git(a, "status", "--porcelain").strip() == ""
    sync(a)
    sync(b)
    assert not (b / path).exists() and not _tracked(b, path)
    _restore_as_told(a, _said(done), path)


def _restore_as_told(machine, said: str, path: str) -> None:
    """The command the message gives brings the memory back for good: no later sync
    deletes what a person restored on purpose."""
    command = said.split("to keep it after all: `", 1)[1].split("`", 1)[0].split()
    git(machine, *command[1:])
    git(machine, "commit", "-q", "-m", "keep it after all")
    assert _tracked(machine, path)
    assert "kept deleted" not in _said(sync(machine))
    assert _tracked(machine, path)


def test_a_person_edit_on_the_other_side_keeps_the_file_as_before(tmp_path):
    a, b, path = _deleted_here(tmp_path)
    text = (b / path).read_text(encoding="utf-8")
    person_commit(b, path, text.replace(BODY, BODY + ", and the old one is revoked the same day"), "edit")
    sync(b)
    assert sh(a, "git", "pull", "--no-rebase", "origin", "main", check=False).returncode != 0
    git(a, "add", "-A")
    done = sh(a, "git", "commit", "-m", "vault backup: resolve", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kept deleted" not in _said(done)
    assert _tracked(a, path) and "revoked the same day" in (a / path).read_text(encoding="utf-8")
    sync(a)
    assert _tracked(a, path)  # the settle leaves a person's words alone too


def test_a_rebase_continued_without_the_hook_is_settled_by_the_next_sync(tmp_path):
    a, b, path = _deleted_here_reinforced_there(tmp_path)
    assert sh(a, "git", "pull", "--rebase", "origin", "main", check=False).returncode != 0
    assert cx(a, "sync", check=False).returncode == 75  # a person's rebase: cortex commits nothing meanwhile
    git(a, "add", "-A")
    subprocess.run(["git", "rebase", "--continue"], cwd=a, capture_output=True, text=True,
                   env={**os.environ, "GIT_EDITOR": "true"}, check=True)
    assert _tracked(a, path)  # git's rebase ran no hook: the memory is back, for now
    done = sync(a)
    assert f"{path} kept deleted: it was deleted by a person; the other side only reinforced it" in _said(done)
    assert not (a / path).exists() and not _tracked(a, path)
    sync(b)
    assert not (b / path).exists() and not _tracked(b, path)
    assert "kept deleted" not in _said(sync(a))  # said once
    _restore_as_told(a, _said(done), path)


def test_a_merge_committed_without_the_hook_is_settled_by_the_next_sync(tmp_path):
    a, b, path = _deleted_here_reinforced_there(tmp_path)
    assert sh(a, "git", "pull", "--no-rebase", "origin", "main", check=False).returncode != 0
    git(a, "add", "-A")
    git(a, "commit", "-q", "--no-verify", "-m", "vault backup: resolve")  # Obsidian Git on a phone runs no hooks
    assert _tracked(a, path)
    assert "kept deleted" in _said(sync(a))
    assert not _tracked(a, path)
    sync(b)
    assert not _tracked(b, path)
