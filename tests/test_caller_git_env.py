"""cortex called from another repository's git: that repository's hook (a linked
worktree's hooks get GIT_DIR and GIT_INDEX_FILE) or a `git rebase -x` script. cortex
works on the vault it was given, never on the repository that called it."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

from sync_helpers import CORTEX, cx, git, make_fleet, sh


def _project(tmp: Path) -> tuple[Path, Path, Path]:
    """A project with a remote, one commit not pushed yet, and a linked worktree."""
    project, remote, linked = tmp / "project", tmp / "project.git", tmp / "project-wt"
    sh(tmp, "git", "init", "--quiet", "-b", "trunk", str(project))
    (project / "a.txt").write_text("a\n")
    git(project, "add", "a.txt")
    git(project, "commit", "--quiet", "-m", "a")
    sh(tmp, "git", "clone", "--quiet", "--bare", str(project), str(remote))
    git(project, "remote", "add", "origin", str(remote))
    git(project, "fetch", "--quiet", "origin")
    git(project, "branch", "--quiet", "-u", "origin/trunk")
    (project / "a.txt").write_text("a\nnot pushed yet\n")
    git(project, "commit", "--quiet", "-am", "project: local work, not pushed")
    git(project, "worktree", "add", "--quiet", str(linked), "-b", "feature")
    return project, remote, linked


def _hook_runs(project: Path, *commands: str) -> None:
    hook = project / ".git" / "hooks" / "post-commit"
    hook.write_text("#!/bin/sh\n" + "".join(f"{c}\n" for c in commands))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)


def test_sync_from_a_linked_worktrees_hook_syncs_the_vault_not_the_project(tmp_path):
    remote, (vault, teammate) = make_fleet(tmp_path, 2)
    cx(teammate, "write", "--type", "fact", "--body", "The ledger runs on Postgres 16")
    cx(teammate, "run")
    cx(teammate, "sync")
    project, project_remote, linked = _project(tmp_path)
    said = tmp_path / "sync.out"
    _hook_runs(project, f"'{CORTEX}' --vault '{vault}' sync > '{said}' 2>&1; echo $? >> '{said}'")

    (linked / "f.txt").write_text("f\n")
    git(linked, "add", "f.txt")
    git(linked, "commit", "--quiet", "-m", "feature work")

    out = said.read_text()
    assert "origin/main" in out and re.search(r"brought +notes: 1 added", out), out
    assert out.split()[-1] == "0"
    assert git(vault, "rev-parse", "HEAD") == git(teammate, "rev-parse", "HEAD")
    # the project's remote got nothing: neither the unpushed commit nor the feature branch
    assert git(project_remote, "branch", "--list").split() == ["*", "trunk"]
    assert "not pushed" not in git(project_remote, "log", "--format=%s", "--all")
    assert "ahead 1" in git(project, "status", "-sb")


def test_status_and_validate_under_another_repositorys_git_dir(tmp_path):
    """A script run by `git rebase -x` (or any caller exporting git's variables) that
    asks about the vault hears about the vault."""
    _, (vault, _) = make_fleet(tmp_path, 2)
    cx(vault, "write", "--type", "fact", "--body", "The cache TTL is five minutes")
    cx(vault, "run")
    project, _, _ = _project(tmp_path)
    env = {**os.environ, "GIT_DIR": str(project / ".git"), "GIT_WORK_TREE": str(project),
           "GIT_INDEX_FILE": str(project / ".git" / "index")}

    def ask(*args: str) -> str:
        done = subprocess.run([CORTEX, "--vault", str(vault), *args], cwd=project, env=env,
                              capture_output=True, text=True)
        return done.stdout + done.stderr

    assert re.search(r"^1 notes? checked", ask("validate", "--all"), re.M)
    assert re.search(r"^notes +1 ", ask("status"), re.M)
