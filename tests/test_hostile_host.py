"""The machine cortex runs on is a server, a container or CI: its disk fills, its
limits bite. A command refused by the file system says so (exit 1, no bug report) and
loses nothing: what it did not memorize stays in the buffer for the next run."""

from __future__ import annotations

import json
import os
import resource
import subprocess

import pytest

from conftest import VENV_BIN, append_lines, git, observation


def _with_file_size_limit(kib: int):
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (kib * 1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return limit


def test_a_run_refused_by_a_file_size_limit_says_so_and_keeps_the_buffer(vault):
    append_lines(vault, *(observation(body=f"The cache TTL of service {i} is {i} minutes.") for i in range(3)))
    for name in ("head.sqlite", "head.sqlite-wal", "head.sqlite-shm"):  # its first write is the cache's
        (vault.root / ".git" / "cortex" / name).unlink(missing_ok=True)
    buffered = vault.buffer_path.read_bytes()

    done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "run"], capture_output=True,
                          text=True, preexec_fn=_with_file_size_limit(8))

    assert done.returncode == 1, done.stderr
    assert "bug" not in done.stderr and "file size limit" in done.stderr and "head.sqlite" in done.stderr
    assert vault.buffer_path.read_bytes() == buffered
    again = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "run"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    memorized = git(vault.root, "grep", "-l", "The cache TTL of service", "HEAD", "--", "mind").split()
    assert len(memorized) == 3


def test_a_commit_whose_hook_meets_a_file_size_limit_is_refused_in_words(vault):
    note = vault.root / "mind" / "facts" / "backups.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("---\ntype: fact\n---\nBackups run at 03:00 and are kept for 30 days.\n")
    git(vault.root, "add", "mind/facts/backups.md")
    for name in ("head.sqlite", "head.sqlite-wal", "head.sqlite-shm"):
        (vault.root / ".git" / "cortex" / name).unlink(missing_ok=True)
    head = git(vault.root, "rev-parse", "HEAD")

    # room for git's and pre-commit's own files, not for the HEAD cache's (its WAL index is 32 KiB)
    done = subprocess.run(["git", "commit", "-m", "backups"], cwd=vault.root, capture_output=True, text=True,
                          preexec_fn=_with_file_size_limit(24))

    said = done.stdout + done.stderr
    assert done.returncode != 0 and git(vault.root, "rev-parse", "HEAD") == head
    assert "Traceback" not in said, said
    assert "file size limit" in said and "the commit is refused" in said
    assert "Backups run at 03:00" in git(vault.root, "diff", "--cached")


def test_a_query_the_file_system_refuses_exits_2_not_nothing_found(vault):
    """Scripts read exit 1 as "nothing found": a query that could not build its index
    (a full disk, a file size limit, a read-only checkout) is an error, exit 2."""
    append_lines(vault, observation(body="The staging database is rebuilt every night at 02:00."))
    vault.run()

    done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "query", "staging database"],
                          capture_output=True, text=True, preexec_fn=_with_file_size_limit(4))

    assert done.returncode == 2, done.stderr
    assert "File too large" in done.stderr and "bug" not in done.stderr


def _closed(redirections: str, *args: str) -> subprocess.CompletedProcess:
    """The CLI run with some of its standard streams closed by the shell (`2>&-`)."""
    return subprocess.run(["sh", "-c", f'exec "$@" {redirections}', "sh", str(VENV_BIN / "cortex"), *args],
                          capture_output=True, text=True)


def test_a_write_with_its_output_closed_appends_once_and_exits_0(vault):
    """An agent retries a write that exits non-zero: one that appended must say 0."""
    done = _closed(">&- 2>&-", "--vault", str(vault.root), "write", "--type", "fact",
                   "--body", "The deploy window is Tuesday 14:00.")

    assert done.returncode == 0
    assert vault.buffer_path.read_text().count("The deploy window is Tuesday 14:00.") == 1


def test_a_batch_from_a_closed_stdin_is_refused_in_words(vault):
    done = _closed("<&-", "--vault", str(vault.root), "write", "-")

    assert done.returncode == 1 and "no observations on stdin" in done.stderr


def test_a_query_whose_reader_left_does_not_say_nothing_found(vault):
    """`cortex query x | head -1` under `set -o pipefail`: the reader took what it wanted
    and closed the pipe; exit 1 would tell the script nothing was found."""
    append_lines(vault, *(observation(body=f"The espresso machine {i} is descaled on Mondays.") for i in range(3)))
    vault.run()
    reader_gone = subprocess.Popen([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "query", "espresso",
                                    "--jsonl"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader_gone.stdout.close()

    _, err = reader_gone.communicate()

    assert reader_gone.returncode == 0, err
    assert b"Error" not in err and b"Exception ignored" not in err


def test_a_vault_git_refuses_as_another_users_is_said_not_counted_empty(vault):
    """git refuses a repository another user owns (a shared server, a container's volume;
    git's own test switch stands in for the other owner here)."""
    append_lines(vault, observation(body="The staging database is rebuilt every night at 02:00."))
    vault.run()
    env = {**os.environ, "GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"}

    for command in ("status", "run"):
        done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(vault.root), command],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "belongs to another user" in done.stderr and "safe.directory" in done.stderr
        assert "notes        0" not in done.stdout + done.stderr


def test_a_sync_whose_checkout_fails_midway_takes_back_what_it_wrote(tmp_path):
    """A full disk (a file size limit here) met while the remote's notes were written:
    git wrote some files, then failed. Left behind, they were untracked files that made
    every later sync refuse ("your uncommitted changes are in files the remote changed
    too"); now they are taken back, the failure is said, and the next sync brings all."""
    from sync_helpers import cx, make_fleet

    _, (here, teammate) = make_fleet(tmp_path, 2)
    notes = teammate / "notes"
    notes.mkdir()
    (notes / "a-small.md").write_text("Small note A.\n")
    (notes / "b-small.md").write_text("Small note B.\n")
    (notes / "z-big.md").write_text("A long page.\n" + "words of a long page\n" * 2000)
    with open(teammate / ".gitignore", "a") as fh:  # a tracked file, written before the big note
        fh.write("scratch/\n")
    git(teammate, "add", "notes", ".gitignore")
    git(teammate, "commit", "-qm", "notes")
    cx(teammate, "sync")
    git(here, "fetch", "-q", "origin")
    head = git(here, "rev-parse", "HEAD")
    ignored = (here / ".gitignore").read_text()

    done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(here), "sync"], capture_output=True, text=True,
                          preexec_fn=_with_file_size_limit(24))

    assert done.returncode == 1, done.stderr
    assert "could not write" in done.stderr and "SIGXFSZ" in done.stderr
    assert "uncommitted changes" not in done.stderr
    assert git(here, "rev-parse", "HEAD") == head
    assert git(here, "status", "--porcelain") == "" and (here / ".gitignore").read_text() == ignored
    assert not [p for p in (here / "notes").rglob("*") if p.is_file()]
    again = cx(here, "sync")
    assert "notes: 3 added" in again.stdout + again.stderr and "scratch/" in (here / ".gitignore").read_text()


def test_a_cache_write_refused_by_the_file_system_leaves_no_half_copy(vault):
    """A full disk (here, a file size limit) refuses a cache's replacement: its temp file,
    named after the process, went nowhere, and one more stayed at each attempt, holding
    the space a person then freed."""
    append_lines(vault, *(observation(body=f"The cache TTL of service {i} is {i} minutes.") for i in range(6)))
    vault.run()
    for name in ("maintain", "search", "taxonomy.json"):
        subprocess.run(["rm", "-rf", str(vault.root / ".git" / "cortex" / name)], check=True)

    for _ in range(2):
        done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "maintain", "--force"],
                              capture_output=True, text=True, preexec_fn=_with_file_size_limit(1))
        assert done.returncode == 1 and "File too large" in done.stderr, done.stderr

    left = [str(p.relative_to(vault.root)) for p in (vault.root / ".git" / "cortex").rglob(".*.tmp")]
    assert left == []


def test_a_folder_where_a_cache_file_was_is_named_with_what_to_do(vault):
    """`.git/cortex/head.sqlite` or a search index file made a folder: the command names
    it and says to remove it, where it said only "Is a directory" (of a temp file, for
    the index); once removed, the next run memorizes what waited."""
    append_lines(vault, observation(body="The staging database is rebuilt every night at 02:00."))
    cortex_dir = vault.root / ".git" / "cortex"
    (cortex_dir / "head.sqlite").unlink(missing_ok=True)
    (cortex_dir / "head.sqlite").mkdir(parents=True)
    cli = [str(VENV_BIN / "cortex"), "--vault", str(vault.root)]

    done = subprocess.run([*cli, "run"], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert f"{cortex_dir / 'head.sqlite'} is a folder, not a file" in done.stderr and "hint: remove it" in done.stderr

    (cortex_dir / "head.sqlite").rmdir()
    assert subprocess.run([*cli, "run"], capture_output=True, text=True).returncode == 0
    assert subprocess.run([*cli, "index"], capture_output=True, text=True).returncode == 0
    order = next((cortex_dir / "search").glob("*.order.npy"))
    order.unlink()
    order.mkdir()
    append_lines(vault, observation(body="The staging database keeps seven days of backups."))
    assert subprocess.run([*cli, "run"], capture_output=True, text=True).returncode == 0  # the query updates the index
    done = subprocess.run([*cli, "query", "staging database"], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert f"{order} is a folder, not a file" in done.stderr and "hint: remove it" in done.stderr


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_json_is_utf8_whatever_the_locale_encodes(vault, encoding):
    """A script in a Latin-1 locale (or with PYTHONIOENCODING set) reads `--json` as UTF-8,
    as JSON must be: the query found the note, where it failed on its first "ü" (ascii:
    exit 1, "nothing found") or printed Latin-1 bytes no JSON reader takes."""
    append_lines(vault, observation(body="The deploy to Zürich runs every Friday — from the release branch."))
    vault.run()

    done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "query", "deploy Zürich", "--json"],
                          capture_output=True, env={**os.environ, "PYTHONIOENCODING": encoding})

    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.decode("utf-8"))
    assert answer["results"][0]["title"].startswith("The deploy to Zürich runs every Friday — ")
