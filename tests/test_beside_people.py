"""cortex beside a person: real `git commit` processes (a commit editor left open,
`git commit -a`, pre-commit stashing unstaged edits) while the real `cortex run` runs.

Each case failed before cortex kept git's lock protocol (cortex/gitlock.py): cortex
removed a person's index.lock as stale, moved HEAD while the index was locked, or wrote
notes while pre-commit had a person's unstaged edits stashed.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import VENV_BIN, git, observation
from soak import STRACE  # whether strace can hold a process here

pytestmark = pytest.mark.slow


def cortex(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(root), *args], capture_output=True, text=True)


def write_obs(root: Path, body: str) -> None:
    with open(root / "observer" / "observations.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(observation(body=body)) + "\n")


def short_lock_wait(root: Path, seconds: float = 0.5) -> None:
    config = root / "observer" / "config.yml"
    config.write_text(config.read_text() + f"\nlock_timeout: {seconds}\n")
    git(root, "add", "observer/config.yml")
    git(root, "commit", "-qm", "shorter lock wait")


def editor(seconds: float, gate: Path) -> str:
    """A GIT_EDITOR that stays open until ``gate`` exists (at most ``seconds``)."""
    return (f"f() {{ i=0; while [ ! -e '{gate}' ] && [ $i -lt {int(seconds * 10)} ]; do sleep 0.1; i=$((i+1)); done; "
            "echo 'person: edit the runbook' > \"$1\"; }; f")


def run_waits_for_the_person(root: Path, person: subprocess.Popen, gate: Path) -> None:
    """`cortex run` while the person's commit waits in its editor: busy (exit 75), HEAD
    untouched; then the editor closes and the person's commit lands."""
    head = git(root, "rev-parse", "HEAD")
    busy = cortex(root, "run")
    assert busy.returncode == 75, busy.stderr
    assert "git commit" in busy.stderr
    assert git(root, "rev-parse", "HEAD") == head
    gate.touch()
    assert person.wait(30) == 0, person.stderr.read()


def wait_for(predicate, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def tree_paths(root: Path, rev: str = "HEAD") -> set[str]:
    return set(git(root, "ls-tree", "-r", "--name-only", rev).split())


def facts(root: Path) -> list[str]:
    return [p for p in tree_paths(root) if p.startswith("mind/facts/") and p.endswith(".md")]


def index_agrees_with_head(root: Path) -> bool:
    return git(root, "diff", "--cached", "--name-only") == ""


@pytest.fixture
def person_vault(vault):
    root = vault.root
    (root / "runbook.md").write_text("# Runbook\n\nRestart the worker.\n")
    git(root, "add", "runbook.md")
    git(root, "commit", "-qm", "person: runbook")
    short_lock_wait(root)
    return root


def test_commit_a_with_an_open_editor_keeps_everything(person_vault):
    """`git commit -a` holds index.lock while its editor is open: cortex waits and exits
    75 with nothing changed; the person's commit records their edit and deletes nothing."""
    root = person_vault
    before = tree_paths(root)
    (root / "runbook.md").write_text("# Runbook\n\nRestart the worker, then the queue.\n")
    write_obs(root, "The worker restarts take about forty seconds.")
    gate = root.parent / "editor-done"
    env = {**os.environ, "GIT_EDITOR": editor(20, gate)}
    person = subprocess.Popen(["git", "commit", "-a"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: (root / ".git" / "index.lock").exists())

    busy = cortex(root, "run")
    assert busy.returncode == 75, busy.stderr
    assert (root / ".git" / "index.lock").exists()  # the person's lock, untouched

    gate.touch()
    assert person.wait(30) == 0, person.stderr.read()
    assert tree_paths(root) >= before  # the person's commit deleted nothing
    assert "then the queue" in git(root, "show", "HEAD:runbook.md")

    done = cortex(root, "run", "--json")
    assert done.returncode == 0, done.stderr  # completes what the busy run decided
    assert len(facts(root)) == 1
    assert index_agrees_with_head(root) and git(root, "status", "--porcelain") == ""


def test_maintenance_that_finds_git_busy_exits_75_and_stays_due(person_vault):
    """`cortex maintain` whose job must commit while a person's `git commit -a` holds the
    index (its editor open) exits 75 — busy, nothing changed, as `cortex run` does — not 1
    (seen in a soak), and the job stays due: the next call, once the person is done,
    commits its work instead of putting it off to the job's next hour."""
    from datetime import datetime, timedelta, timezone

    root = person_vault
    write_obs(root, "The worker restarts take about forty seconds.")
    assert cortex(root, "run").returncode == 0
    assert cortex(root, "maintain", "--only", "reinforce").returncode == 0  # ran: due again in an hour
    write_obs(root, "The worker restarts take about forty seconds.")
    assert cortex(root, "run").returncode == 0  # a reinforcement for the job
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    head = git(root, "rev-parse", "HEAD")
    (root / "runbook.md").write_text("# Runbook\n\nRestart the worker, then the queue.\n")
    gate = root.parent / "editor-done"
    env = {**os.environ, "GIT_EDITOR": editor(20, gate)}
    person = subprocess.Popen(["git", "commit", "-a"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: (root / ".git" / "index.lock").exists())

    busy = cortex(root, "maintain", "--only", "reinforce", "--json", "--now", later.isoformat())
    assert busy.returncode == 75, busy.stdout + busy.stderr
    assert json.loads(busy.stdout)["busy"] == ["reinforce"]
    assert git(root, "rev-parse", "HEAD") == head

    gate.touch()
    assert person.wait(30) == 0, person.stderr.read()
    done = cortex(root, "maintain", "--only", "reinforce", "--now", (later + timedelta(minutes=1)).isoformat())
    assert done.returncode == 0, done.stderr
    assert git(root, "log", "-1", "--format=%s").startswith("reinforce:"), done.stderr
    assert git(root, "status", "--porcelain") == ""


def test_a_plain_commit_is_guarded_through_its_editor(person_vault):
    """A plain `git commit` does not hold index.lock while its hooks and editor run; the
    guard hook records it, so cortex leaves HEAD and the index alone until it ends."""
    root = person_vault
    assert (root / ".git" / "hooks" / "pre-commit.legacy").exists()
    (root / "runbook.md").write_text("# Runbook\n\nRestart the worker twice.\n")
    git(root, "add", "runbook.md")
    write_obs(root, "The queue drains in under a minute after a restart.")
    gate = root.parent / "editor-done"
    env = {**os.environ, "GIT_EDITOR": editor(20, gate)}
    person = subprocess.Popen(["git", "commit"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: (root / ".git" / "COMMIT_EDITMSG").exists() and (root / ".git" / "cortex-commit.json").exists())
    run_waits_for_the_person(root, person, gate)
    assert "twice" in git(root, "show", "HEAD:runbook.md")
    done = cortex(root, "run", "--json")
    assert done.returncode == 0, done.stderr
    assert len(facts(root)) == 1
    assert index_agrees_with_head(root)


def test_a_commit_recorded_earlier_does_not_hide_a_persons_commit_on_its_way(person_vault):
    """The guard's record of a commit that has ended stays until it is read. A person's
    next `git commit`, started but not yet at its guard (pre-commit starting, or hooks
    bypassed), was then unseen: cortex moved HEAD under it and git refused the person's
    commit ("cannot lock ref 'HEAD'")."""
    root = person_vault
    (root / "runbook.md").write_text("# Runbook\n\nRestart the worker twice.\n")
    git(root, "add", "runbook.md")
    git(root, "commit", "-qm", "person: runbook")  # through the hooks: the guard records it
    assert (root / ".git" / "cortex-commit.json").exists()  # and its record outlives it
    (root / "runbook.md").write_text("# Runbook\n\nRestart the worker three times.\n")
    git(root, "add", "runbook.md")
    write_obs(root, "The queue drains in under a minute after a restart.")
    gate = root.parent / "editor-done"
    env = {**os.environ, "GIT_EDITOR": editor(20, gate)}
    person = subprocess.Popen(["git", "commit", "--no-verify"], cwd=root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: (root / ".git" / "COMMIT_EDITMSG").exists())
    run_waits_for_the_person(root, person, gate)
    assert "three times" in git(root, "show", "HEAD:runbook.md")
    assert cortex(root, "run").returncode == 0
    assert len(facts(root)) == 1


def test_unstaged_edits_survive_pre_commit_stash_while_cortex_runs(person_vault):
    """pre-commit stashes unstaged edits while its hooks run; a note cortex wrote in that
    window made its `git apply` fail, and the edit survived only in pre-commit's cache."""
    root = person_vault
    config = root / ".pre-commit-config.yaml"
    slow = ("  - repo: local\n    hooks:\n      - id: slow\n        name: slow\n        entry: sleep 2\n"
            "        language: system\n        pass_filenames: false\n")
    config.write_text(config.read_text() + slow)
    assert cortex(root, "hook", "install").returncode == 0  # a changed config runs once accepted here
    git(root, "add", ".pre-commit-config.yaml")
    git(root, "commit", "-qm", "slow hook")
    (root / "notes.md").write_text("# Notes\n\nfirst\n")
    git(root, "add", "notes.md")
    (root / "runbook.md").write_text("# Runbook\n\nAn unstaged thought.\n")  # not staged
    write_obs(root, "Deploys pause the queue for ten seconds.")
    person = subprocess.Popen(["git", "commit", "-m", "person: notes"], cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: (root / ".git" / "cortex-commit.json").exists())
    cortex(root, "run")  # exits 75 or waits: either way it must not disturb the stash
    assert person.wait(60) == 0, person.stderr.read()
    assert (root / "runbook.md").read_text() == "# Runbook\n\nAn unstaged thought.\n"
    assert "notes.md" in tree_paths(root)
    done = cortex(root, "run", "--json")
    assert done.returncode == 0, done.stderr
    assert (root / "runbook.md").read_text() == "# Runbook\n\nAn unstaged thought.\n"
    assert len(facts(root)) == 1
    assert index_agrees_with_head(root)


def test_head_never_moves_without_the_index(person_vault):
    """cortex used to commit, then fail to update a locked index ("git is busy"), and the
    person's next `git commit -a` deleted the new memory."""
    root = person_vault
    write_obs(root, "The nightly export finishes by 04:00.")
    lock = root / ".git" / "index.lock"
    lock.write_text("")  # a person's git holds the index for the whole run
    head = git(root, "rev-parse", "HEAD")
    busy = cortex(root, "run")
    assert busy.returncode == 75 and git(root, "rev-parse", "HEAD") == head
    lock.unlink()
    assert cortex(root, "run").returncode == 0
    (root / "runbook.md").write_text("# Runbook\n\nA person's change.\n")
    git(root, "commit", "-qam", "person: change")
    assert len(facts(root)) == 1  # not deleted


def test_run_waits_while_another_git_holds_head_lock(person_vault):
    """git's own commit refuses while HEAD.lock is there (a checkout or switch between
    writing the index and HEAD, `git update-ref HEAD`): cortex used to move the branch
    through it, exit 0; now it waits, then says who is busy (exit 75), HEAD.lock left."""
    root = person_vault
    short_lock_wait(root)
    write_obs(root, "The nightly export finishes by 04:00.")
    lock = root / ".git" / "HEAD.lock"
    lock.write_text("")  # another git's, moving HEAD
    head = git(root, "rev-parse", "HEAD")
    busy = cortex(root, "run")
    assert busy.returncode == 75, busy.stdout + busy.stderr
    assert "HEAD.lock" in busy.stderr and lock.exists()
    assert git(root, "rev-parse", "HEAD") == head and index_agrees_with_head(root)
    assert not (root / ".git" / "index.lock").exists()  # cortex's own, let go
    lock.unlink()
    assert cortex(root, "run").returncode == 0
    assert len(facts(root)) == 1


APPENDER = r"""
import json, os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
with open(path, "a", encoding="utf-8") as fh:  # opened once, like a logger
    for i in range(n):
        fh.write(json.dumps({"timestamp": "2026-02-16T15:23:14.527Z", "bucket": "explicit", "type": "fact",
                             "body": f"Logger line {i}: the cache warmed shard {i} in {i + 3} seconds.",
                             "attribution": "logger", "session_id": "cli"}) + "\n")
        fh.flush()
        time.sleep(0.03)
        if i == n // 2:  # half written: go on only once the buffer was rotated under this handle
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if os.stat(path).st_ino != os.fstat(fh.fileno()).st_ino:
                        break
                except FileNotFoundError:
                    break
                time.sleep(0.02)
"""


def test_a_writer_that_keeps_its_handle_open_across_rotation_loses_nothing(vault, tmp_path):
    """A logger opens the buffer once and appends for minutes; `cortex run` rotates the
    buffer under it. Lines written to the rotated file are still read (56 of 60 were
    lost before: in no note, quarantine, archive or buffer). The logger writes its second
    half only once a run has rotated the buffer under it, however slow the machine."""
    root = vault.root
    buffer_path = root / "observer" / "observations.jsonl"
    buffer_path.parent.mkdir(parents=True, exist_ok=True)
    buffer_path.touch()
    n = 60
    logger = subprocess.Popen([str(VENV_BIN / "python"), "-c", APPENDER, str(buffer_path), str(n)])
    rotations = 0
    while logger.poll() is None:
        done = cortex(root, "run", "--json")
        assert done.returncode == 0, done.stderr
        rotations += json.loads(done.stdout).get("rotated", False)
    assert logger.wait() == 0
    for _ in range(2):
        assert cortex(root, "run").returncode == 0
    bodies = {git(root, "show", f"HEAD:{p}").split("\n---\n", 1)[-1].strip() for p in facts(root)}
    assert rotations >= 1
    assert {f"Logger line {i}: the cache warmed shard {i} in {i + 3} seconds." for i in range(n)} <= bodies
    assert not list((root / "observer" / "archive").glob(".*.raw"))  # no writer left: scrubbed
    assert json.loads((root / "observer" / "state.json").read_text())["retired"] == {}


def test_lines_written_to_a_rotated_buffer_advance_that_buffer_only(vault):
    """A run that reads a rotated buffer's late lines moves that buffer's offset, not the
    new buffer's: the late lines are read once (no reinforcement loop) and lines already
    waiting in the new buffer are not skipped."""
    root = vault.root
    buffer_path = root / "observer" / "observations.jsonl"
    write_obs(root, "The deploy window opens at 09:00 on Tuesdays.")
    handle = open(buffer_path, "a", encoding="utf-8")  # a logger's handle, opened before the rotation
    first = json.loads(cortex(root, "run", "--json").stdout)
    assert first["rotated"] is True
    handle.write(json.dumps(observation(body="Late line: the queue drains in 40 seconds.")) + "\n")
    handle.flush()
    write_obs(root, "New buffer: the staging database is rebuilt nightly.")
    write_obs(root, "New buffer: the cache keeps entries for six hours.")
    done = cortex(root, "run", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["memorized"] == 3
    state = json.loads((root / "observer" / "state.json").read_text())
    assert state["reinforcements"] == {}
    again = json.loads(cortex(root, "run", "--json").stdout)  # the handle is still open
    assert again["memorized"] == 0 and again["reinforced"] == 0
    handle.close()
    assert cortex(root, "run").returncode == 0
    bodies = {git(root, "show", f"HEAD:{p}").split("\n---\n", 1)[-1].strip() for p in facts(root)}
    assert {"Late line: the queue drains in 40 seconds.", "New buffer: the staging database is rebuilt nightly.",
            "New buffer: the cache keeps entries for six hours."} <= bodies
    assert json.loads((root / "observer" / "state.json").read_text())["retired"] == {}


def test_a_config_set_aside_by_a_persons_commit_is_waited_for_not_replaced_by_defaults(person_vault):
    """pre-commit's stash rewrites the working files while a person's commit runs: a
    tracked `observer/config.yml` can be missing for that instant. `cortex run` started
    then waits for it (the guard has recorded the commit) instead of running on the
    defaults, which trust everyone: here the vault quarantines what `web-scraper` says."""
    from cortex.gitlock import COMMIT_MARK, _start_time

    root = person_vault
    config = root / "observer" / "config.yml"
    config.write_text(config.read_text() + "\ntrust:\n  default: quarantine\n  trusted_attributions: [owner]\n")
    git(root, "add", "observer/config.yml")
    git(root, "commit", "-qm", "quarantine what others say", "--no-verify")
    with open(root / "observer" / "observations.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(observation(attribution="web-scraper", body="The docs moved to docs.example.org.")) + "\n")
    committer = subprocess.Popen(["sleep", "30"])  # the person's `git commit`, as the guard records it
    mark = root / ".git" / COMMIT_MARK
    try:
        record = json.dumps({"pid": committer.pid, "start": _start_time(committer.pid), "command": "git commit"})
        # The guard's record, first as a pipe: the run opens it only once it has met the
        # missing config (waiting on the commit, or later at its commit's lock had it taken
        # the defaults), however loaded the machine; the test then hands it the record.
        mark.unlink(missing_ok=True)  # the record of the commit above, which ended
        os.mkfifo(mark)
        (root / ".git" / "mark.tmp").write_text(record)
        kept = config.read_bytes()
        config.unlink()  # pre-commit's stash, mid-rewrite
        run = subprocess.Popen([str(VENV_BIN / "cortex"), "--vault", str(root), "run", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        asked = None
        while asked is None and run.poll() is None:
            try:
                asked = os.open(mark, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as error:  # ENXIO: the run has not opened it yet
                assert error.errno == errno.ENXIO, error
                time.sleep(0.01)
        assert asked is not None, run.communicate()  # the run looked for the commit, not ended on the defaults
        os.replace(root / ".git" / "mark.tmp", mark)
        os.write(asked, record.encode())
        os.close(asked)
        assert run.poll() is None  # waiting, not running on the defaults
        config.write_bytes(kept)
    finally:
        committer.kill()
        committer.wait()
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    report = json.loads(out)
    assert report["quarantined"] == {"untrusted": 1} and report["memorized"] == 0


def test_a_file_monitor_that_would_delete_files_under_pre_commit_is_turned_off(tmp_path):
    """Before git 2.44, pre-commit's stash under `core.fsmonitor` can apply "deletions" of
    every file the monitor called unchanged (a git bug that depends on stack contents:
    seen here in about one commit in six). cortex installs pre-commit, so it turns the
    person's monitor off in the vault where git is that old, and says why."""
    git(tmp_path, "config", "--global", "core.fsmonitor", "true")  # as a person sets it for big repositories
    root = tmp_path / "vault"
    done = subprocess.run([str(VENV_BIN / "cortex"), "init", str(root)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    major, minor = (int(x) for x in git(tmp_path, "version").split()[2].split(".")[:2])
    local = git(root, "config", "--local", "--get", "core.fsmonitor", check=False).strip()
    if (major, minor) < (2, 44):
        assert local == "false"
        assert "core.fsmonitor turned off in this vault" in done.stderr and "2.44" in done.stderr
    else:
        assert local == ""  # a git that has the fix keeps the person's monitor
    again = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(root), "hook", "install"], capture_output=True,
                           text=True)
    assert again.returncode == 0, again.stderr  # said once, then nothing more to do
    assert "turned off" not in again.stderr
    (root / "plans").mkdir()
    for i in range(10):
        (root / "plans" / f"{i}.md").write_text(f"Plan {i}.\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "plans")
    (root / "plans" / "3.md").write_text("Plan 3, half written")  # unstaged: pre-commit stashes it
    (root / "plans" / "4.md").write_text("Plan 4, done.\n")
    git(root, "add", "plans/4.md")
    git(root, "commit", "-qm", "plan 4")
    assert sorted(p.name for p in (root / "plans").iterdir()) == sorted(f"{i}.md" for i in range(10))
    assert (root / "plans" / "3.md").read_text() == "Plan 3, half written"
    assert (root / ".gitignore").exists()


# --- HEAD and the index, as a person's git reads them ---------------------------------------


def test_whenever_cortex_has_moved_head_the_index_already_holds_its_notes(vault, monkeypatch):
    """`git commit -a` reads HEAD, then the index, and only then takes index.lock: had it
    read HEAD after cortex's commit and the index before cortex's new one, its commit on
    top of cortex's would drop cortex's notes (seen in the soak). So at the moment each of
    cortex's commits moves HEAD — a run's several, a maintenance job's — the index git
    reads there already holds what HEAD holds."""
    from cortex.gitrepo import GitRepo

    real = GitRepo.commit
    seen: list[tuple[set, set]] = []

    def commit_then_look(self, changes, message, author):
        oid = real(self, changes, message, author)
        at_head = set(git(vault.root, "ls-tree", "-r", "--name-only", "HEAD").split())
        indexed = set(git(vault.root, "ls-files").split())  # what any git reads now, lock or not
        seen.append((at_head, indexed))
        return oid

    monkeypatch.setattr(GitRepo, "commit", commit_then_look)
    for body in ("The ferry leaves at nine.", "The gauge reads every ten minutes.", "Priya leads the kiosk."):
        vault.write(observation(body=body))
    vault.run(commit_per="note")  # three commits in one run
    done = cortex(vault.root, "forget", next(p for p in git(vault.root, "ls-files", "mind").split()
                                              if "ferry" in (vault.root / p).read_text()), "--reason", "sold")
    assert done.returncode == 0, done.stderr
    assert len(seen) >= 3
    for at_head, indexed in seen:
        assert at_head <= indexed, sorted(at_head - indexed)
    assert git(vault.root, "status", "--porcelain") == ""


def test_a_job_killed_between_its_index_and_its_commit_leaves_nothing_staged(vault):
    """A real kill -9 of `cortex forget` right where its commit would move HEAD: the index
    holds the job's change (the note moved to the archive), HEAD does not. The next job
    takes the change back out of the index; the note is where it was, the tree clean, and
    forgetting it again works once."""
    for body in ("The ferry leaves at nine.", "The gauge reads every ten minutes."):
        vault.write(observation(body=body))
    vault.run()
    target = next(p for p in git(vault.root, "ls-files", "mind").split() if "ferry" in (vault.root / p).read_text())
    kill_at_commit = ("import os, sys\nimport cortex.gitrepo as g\n"
                      "g.GitRepo.commit = lambda self, *a, **k: os.kill(os.getpid(), 9)\n"
                      "from cortex.cli import main\nsys.argv[0] = 'cortex'\nmain()\n")
    killed = subprocess.run([str(VENV_BIN / "python"), "-c", kill_at_commit, "--vault", str(vault.root), "forget",
                             target, "--reason", "sold"], capture_output=True, text=True)
    assert killed.returncode == -9
    assert target not in git(vault.root, "ls-files").split()  # staged: the archive move, ahead of HEAD
    assert target in git(vault.root, "ls-tree", "-r", "--name-only", "HEAD").split()
    again = cortex(vault.root, "forget", target, "--reason", "sold")  # recovers, then forgets once
    assert again.returncode == 0, again.stderr
    assert git(vault.root, "status", "--porcelain") == ""
    archived = [p for p in git(vault.root, "ls-files", "mind/archive").split()]
    assert len(archived) == 1 and "ferry" in (vault.root / archived[0]).read_text()


# A real cortex process killed (-9) once its commit is made and its files written, before it
# closes its record (the run's pending decision, a job's journal): the next one finishes it.
KILLED_AFTER_ITS_COMMIT = {
    "run": "import cortex.gitrepo as m\nm.GitRepo.release_packs = lambda self: os.kill(os.getpid(), 9)\n",
    "reinforce": "import cortex.maintenance.base as m\nm._close_journal = lambda state, job: os.kill(os.getpid(), 9)\n",
}


@pytest.mark.parametrize("killed", ["run", "reinforce"])
@pytest.mark.parametrize("since", ["the person commits an edit of the note", "cortex forget archives the note"])
def test_a_commit_finished_after_a_kill_leaves_what_came_since_as_it_is(vault, killed, since):
    """The finish of a killed run's (or job's) commit wrote the commit's notes into the
    index and the working tree again, whatever happened since: a person's committed edit
    of the new note was staged back to cortex's version (said as "edited while cortex
    committed it"), so their next commit reverted it; a note forgotten since was written
    and staged again, so their next commit stored the memory twice (active and archived).
    Now what the index no longer holds as the commit left it stays as it is."""
    body = "The staging database is rebuilt every night at 02:00."
    vault.write(observation(body=body))
    if killed == "reinforce":  # the memory, then said again: a reinforcement for the job
        vault.run()
        vault.write(observation(body=body))
        vault.run()
    program = "import os, sys\n" + KILLED_AFTER_ITS_COMMIT[killed] + \
        "from cortex.cli import main\nsys.argv[0] = 'cortex'\nmain()\n"
    died = subprocess.run([str(VENV_BIN / "python"), "-c", program, "--vault", str(vault.root), killed],
                          capture_output=True, text=True)
    assert died.returncode == -9, died.stderr
    (rel,) = [p for p in tree_paths(vault.root) if p.startswith("mind/facts/") and p.endswith(".md")]
    assert git(vault.root, "status", "--porcelain") == ""  # the commit made and written: only the record is left

    if since.startswith("the person"):
        with open(vault.root / rel, "a", encoding="utf-8") as fh:
            fh.write("Since March it is rebuilt at 03:00.\n")
        git(vault.root, "commit", "-qam", "person: the new hour")
    else:
        forgot = cortex(vault.root, "forget", rel, "--reason", "rebuilt weekly now")
        assert forgot.returncode == 0, forgot.stderr
    after = git(vault.root, "rev-parse", "HEAD")

    done = cortex(vault.root, killed)  # finishes the killed one first
    assert done.returncode == 0, done.stderr
    assert "while cortex committed it" not in done.stderr
    assert git(vault.root, "rev-parse", "HEAD") == after
    assert git(vault.root, "status", "--porcelain", "--untracked-files=all") == ""  # nothing staged back
    if since.startswith("the person"):
        assert "Since March it is rebuilt at 03:00." in (vault.root / rel).read_text()
    else:
        assert not (vault.root / rel).exists() and rel not in git(vault.root, "ls-files").split()
        assert len([p for p in tree_paths(vault.root) if p.startswith("mind/archive/")]) == 1


def test_an_edit_made_in_the_second_git_wrote_the_index_is_still_committed(person_vault):
    """git trusts an index entry whose stat data matches the file, except when the file
    changed in the same second the index was written: it reads such an entry as racy and
    compares contents. cortex rewrites the index from a copy; the copy must keep the
    index's time, or git's racy check is lost and the person's edit — same size, same
    second — looks unchanged: their next `git commit -a` leaves it out (seen in the soak:
    a person's edits missing from their commits)."""
    root = person_vault
    note = root / "people" / "plan.md"
    note.parent.mkdir()
    for _ in range(5):  # the person's add and edit must fall in one second
        time.sleep(1 - time.time() % 1 + 0.02)
        second = int(time.time())
        note.write_text("# Plan\n\nDraft 1 of the plan.\n")
        git(root, "add", "people/plan.md")
        note.write_text("# Plan\n\nDraft 2 of the plan.\n")  # the same size: only the content differs
        if int(time.time()) == second and int((root / ".git" / "index").stat().st_mtime) == second:
            break
    else:
        raise AssertionError("the add and the edit never fell in one second")
    time.sleep(1.1)
    write_obs(root, "The plan is reviewed on Fridays.")
    done = cortex(root, "run")  # commits a note: rewrites the index
    assert done.returncode == 0, done.stderr
    assert "people/plan.md" in git(root, "diff", "--name-only")  # git still sees the edit
    git(root, "commit", "-aqm", "person: the plan")
    assert git(root, "show", "HEAD:people/plan.md") == "# Plan\n\nDraft 2 of the plan.\n"
    assert git(root, "status", "--porcelain") == ""


# --- an index a person's git read before cortex's commit and wrote after it ----------------


def write_index_as_read_before(root: Path, saved: bytes) -> None:
    """What a person's plain `git commit` leaves when it read the index (``saved``) before
    cortex replaced it and took index.lock after cortex let go: the index it read, written
    back through index.lock (its commit is then refused, HEAD having moved)."""
    lock = root / ".git" / "index.lock"
    with open(lock, "xb") as fh:
        fh.write(saved)
    os.replace(lock, root / ".git" / "index")


@pytest.mark.parametrize("how", ["plain", "-a"])
def test_a_commit_after_an_index_read_before_cortexs_commit_keeps_cortexs_notes(person_vault, how):
    """The person's next commit — plain, or `git commit -a`, through the hooks — would
    delete cortex's new notes and undo its reinforcement, which that index no longer
    holds (the soak's three notes deleted by "person: add people/note-16.md"). The guard
    hook stages them again as committed before pre-commit runs; the person's own staged
    note and edit go in with them."""
    root = person_vault
    write_obs(root, "The ferry leaves at nine.")
    assert cortex(root, "run").returncode == 0
    (root / "people").mkdir()
    (root / "people" / "note.md").write_text("# Note\n\nThe person's own words.\n")
    git(root, "add", "people/note.md")
    read_before = (root / ".git" / "index").read_bytes()
    before, head = tree_paths(root), git(root, "rev-parse", "HEAD").strip()
    for body in ("The ferry leaves at nine.", "The gauge reads every ten minutes.", "Priya leads the kiosk."):
        write_obs(root, body)  # one repeat (a reinforcement), two new notes
    done = cortex(root, "run")
    assert done.returncode == 0, done.stderr
    done = cortex(root, "maintain", "--force")  # several commits: the reinforcement applied to its note
    assert done.returncode == 0, done.stderr
    cortexs = tree_paths(root) - before
    changed = git(root, "diff", "--name-status", head, "HEAD").splitlines()
    assert len(cortexs) == 2 and any(line.startswith("M\tmind/") for line in changed), changed
    (root / "runbook.md").write_text("# Runbook\n\nRestart the worker, then check the queue.\n")

    write_index_as_read_before(root, read_before)
    danger = git(root, "diff", "--cached", "--name-status").splitlines()
    assert sorted(line.split("\t")[1] for line in danger if line.startswith("D\t")) == sorted(cortexs)
    assert any(line.startswith("M\tmind/") for line in danger)  # the reinforced note as it was before

    args = ["commit", "-m", "person: add a note"] + (["-a"] if how == "-a" else [])
    person = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    assert person.returncode == 0, person.stdout + person.stderr
    assert "staged again as committed" in person.stdout + person.stderr
    assert tree_paths(root) == before | cortexs | {"people/note.md"}
    assert git(root, "diff", "--name-only", "HEAD~1", "HEAD").split() == (
        ["people/note.md", "runbook.md"] if how == "-a" else ["people/note.md"])  # nothing of cortex's undone
    assert git(root, "status", "--porcelain") == ("" if how == "-a" else " M runbook.md\n")


def test_a_note_a_person_untracks_stays_untracked(person_vault):
    """`git rm --cached` of one of cortex's new notes is the person's own staged change,
    not an index read before cortex's commit (which holds none of that commit): their
    commit untracks it and keeps the file."""
    root = person_vault
    for body in ("The ferry leaves at nine.", "The gauge reads every ten minutes."):
        write_obs(root, body)
    assert cortex(root, "run").returncode == 0
    untracked, kept = sorted(facts(root))
    git(root, "rm", "-q", "--cached", untracked)
    person = subprocess.run(["git", "commit", "-m", "person: untrack one"], cwd=root, capture_output=True, text=True)
    assert person.returncode == 0, person.stdout + person.stderr
    assert "staged again" not in person.stdout + person.stderr
    assert facts(root) == [kept]
    assert (root / untracked).exists()




@pytest.mark.skipif(not STRACE, reason="needs strace (and ptrace) to hold git between its read and its lock")
def test_the_race_itself_with_real_processes(person_vault):
    """The race as it happens, each process held at its instant: `cortex run` holds
    index.lock, its new index about to go in place (held there 2 s); the person's plain
    `git commit` starts, reads the old index and waits (strace) before taking the lock;
    cortex commits and lets go; git writes the old index back, runs the hooks, and is
    refused (HEAD moved). The guard in that commit's hooks has already staged cortex's
    notes again, so the person's next commit keeps them."""
    root = person_vault
    (root / "people").mkdir()
    (root / "people" / "note.md").write_text("# Note\n\nThe person's own words.\n")
    git(root, "add", "people/note.md")
    os.utime(root / "runbook.md")  # the person's refresh then changes the index, so git writes it
    for body in ("The ferry leaves at nine.", "The gauge reads every ten minutes.", "Priya leads the kiosk."):
        write_obs(root, body)
    held_before_its_index = (
        "import os, sys, time\n"
        "replace = os.replace\n"
        "def slow(src, dst, *a, **k):\n"
        "    if os.fspath(dst).endswith('/.git/index') and not getattr(slow, 'done', False):\n"
        "        slow.done = True\n"
        "        time.sleep(2)\n"
        "    return replace(src, dst, *a, **k)\n"
        "os.replace = slow\n"
        "from cortex.cli import main\nsys.argv[0] = 'cortex'\nmain()\n")
    run = subprocess.Popen([str(VENV_BIN / "python"), "-c", held_before_its_index, "--vault", str(root), "run"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: any(p.name.startswith("cortex-scratch.") for p in (root / ".git").iterdir()))
    person = subprocess.Popen(["strace", "-o", os.devnull, "-e", "trace=close",  # git alone, not its hooks
                               "-P", str(root / ".git" / "index"), "-e", "inject=close:delay_exit=4000000:when=1",
                               "git", "commit", "-m", "person: add a note"],
                              cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    notes = facts(root)
    assert len(notes) == 3
    out, err = person.communicate(timeout=60)
    assert person.returncode != 0 and "cannot lock ref 'HEAD'" in err, out + err  # refused: HEAD moved
    assert "staged again as committed" in out + err  # the old index was written back, and mended
    assert git(root, "diff", "--cached", "--name-only", "--diff-filter=D") == ""

    again = subprocess.run(["git", "commit", "-m", "person: add a note"], cwd=root, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert facts(root) == notes
    assert "people/note.md" in tree_paths(root)
    assert git(root, "status", "--porcelain") == ""


def test_notes_a_later_commit_of_cortexs_changed_again_are_kept_too(person_vault):
    """The index was read before a run whose note a later commit of cortex's changed
    again (`cortex forget` moves it to the archive): the archived note is kept, the note
    left in place is kept, and the forgotten one stays forgotten."""
    root = person_vault
    read_before = (root / ".git" / "index").read_bytes()
    for body in ("The ferry leaves at nine.", "The gauge reads every ten minutes."):
        write_obs(root, body)
    assert cortex(root, "run").returncode == 0
    ferry = next(p for p in facts(root) if "ferry" in (root / p).read_text())
    done = cortex(root, "forget", ferry, "--reason", "sold")
    assert done.returncode == 0, done.stderr
    expected = tree_paths(root)
    write_index_as_read_before(root, read_before)
    (root / "people").mkdir()
    (root / "people" / "note.md").write_text("# Note\n\nThe person's own words.\n")
    git(root, "add", "people/note.md")
    person = subprocess.run(["git", "commit", "-m", "person: add a note"], cwd=root, capture_output=True, text=True)
    assert person.returncode == 0, person.stdout + person.stderr
    assert tree_paths(root) == expected | {"people/note.md"}
    assert ferry not in tree_paths(root) and not (root / ferry).exists()
    assert git(root, "status", "--porcelain") == ""


def test_notes_a_sync_brought_are_kept_too(tmp_path):
    """The index read before `cortex sync` fast-forwarded to another machine's notes,
    written back after: the person's next commit keeps what the sync brought."""
    from sync_helpers import cx, make_fleet, sync
    from sync_helpers import write as write_on

    _, (there, here) = make_fleet(tmp_path, 2)
    for body in ("The ferry leaves at nine.", "The gauge reads every ten minutes."):
        write_on(there, body)
    cx(there, "run")
    sync(there)
    (here / "people").mkdir()
    (here / "people" / "note.md").write_text("# Note\n\nThe person's own words.\n")
    git(here, "add", "people/note.md")
    read_before = (here / ".git" / "index").read_bytes()
    sync(here)  # a fast-forward: the index, the files and HEAD move to the other machine's commit
    brought = facts(here)
    assert len(brought) == 2
    write_index_as_read_before(here, read_before)
    person = subprocess.run(["git", "commit", "-m", "person: add a note"], cwd=here, capture_output=True, text=True)
    assert person.returncode == 0, person.stdout + person.stderr
    assert "staged again as committed" in person.stdout + person.stderr
    assert facts(here) == brought and "people/note.md" in tree_paths(here)
    assert git(here, "status", "--porcelain") == ""


# --- a person's edit landing while a maintenance job commits --------------------------------

def _reinforced_note(vault) -> str:
    """A memory with a reinforcement pending (an agent said it twice); its path."""
    vault.write(observation(body="The ferry timetable changes on the first of May."))
    vault.run()
    vault.write(observation(body="The ferry timetable changes on the first of May.", timestamp="2026-02-17T09:00:00.000Z"))
    vault.run()
    [path] = [p for p in facts(vault.root)]
    assert vault.load_state().reinforcements
    return path


SAVE = "printf 'Saved by the editor.\\n' >> \"$NOTE\""


def editor_saving_while_cortex_holds_the_lock(note: Path, tmp_path: Path, action: str = SAVE) -> dict[str, str]:
    """An environment whose `git` runs ``action`` on ``note`` (once, a shell command
    with ``$NOTE``) as cortex's first `git update-index` starts: an editor saving while
    cortex holds index.lock, after it checked the note, before it writes the files."""
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "git").write_text(
        "#!/bin/sh\n"
        f"case \" $* \" in *' update-index '*) [ -e '{tmp_path}/saved' ] || "
        f"{{ NOTE='{note}'; {action}; touch '{tmp_path}/saved'; }};; esac\n"
        f"exec '{real_git}' \"$@\"\n")
    (shim / "git").chmod(0o755)
    return {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}


def test_an_edit_staged_after_the_job_looked_is_left_alone_and_the_count_waits(vault):
    """The job looks for notes being edited, then plans; a person's `git stash pop` (a
    staged and an unstaged edit of the same note) lands before it takes the lock. The
    commit must not carry cortex's version of that note, nor its index entry or working
    file replace the person's: the job plans again without it, and the count waits."""
    from cortex.maintenance import reinforce
    from cortex.maintenance.base import JobContext
    from cortex.maintenance.due import run_job
    from cortex.timefmt import utcnow

    root = vault.root
    path = _reinforced_note(vault)
    head = git(root, "rev-parse", "HEAD")
    with vault.lock():
        ctx = JobContext(vault, utcnow())
        assert not ctx.editing(path)  # the job's look: nothing being edited yet
        note = root / path
        note.write_text(note.read_text() + "\nStaged by the person.\n")
        git(root, "add", path)
        note.write_text(note.read_text() + "Not staged yet.\n")
        staged = git(root, "show", f":{path}")
        result = ctx.replanned(lambda: reinforce.run(ctx))  # as `cortex maintain` runs a job
    assert result.commit is None and [s["path"] for s in result.skipped] == [path]
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "show", f":{path}") == staged
    assert note.read_text().endswith("Staged by the person.\nNot staged yet.\n")
    assert vault.load_state().reinforcements  # kept for the next run

    git(root, "commit", "-qam", "person: notes on the ferry")
    assert run_job(vault, "reinforce").commit is not None
    assert "Not staged yet." in note.read_text() and "reinforced: 1" in note.read_text()
    assert git(root, "status", "--porcelain") == ""


def test_an_editor_saving_while_the_job_writes_keeps_the_persons_file(vault, tmp_path):
    """An editor saves the note while `cortex reinforce` holds the index lock (no git
    lock can stop an editor): the working file is written only if it is still the one
    the commit replaced, so the person's save stays, as an unstaged change."""
    root = vault.root
    path = _reinforced_note(vault)
    env = editor_saving_while_cortex_holds_the_lock(root / path, tmp_path)
    done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(root), "reinforce"], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "saved").exists()
    text = (root / path).read_text()
    assert text.endswith("Saved by the editor.\n")
    assert "reinforced: 1" in git(root, "show", f"HEAD:{path}")  # committed all the same
    assert git(root, "status", "--porcelain").rstrip("\n") == f" M {path}"  # the person's save, unstaged
    assert path in done.stdout + done.stderr  # and said


@pytest.mark.parametrize("job", ["reinforce", "forget"])
def test_a_checkout_with_crlf_line_endings_is_no_persons_edit(vault, job):
    """A teammate on Windows (`core.autocrlf=true`, Git for Windows' default) has every
    note checked out with CRLF while git holds LF. That is no edit of theirs: a job's
    commit replaces (or, archiving, removes) the file, says nothing of an edit, and
    leaves the tree clean, so the Obsidian Git plugin's next commit does not undo it."""
    root = vault.root
    path = _reinforced_note(vault)
    git(root, "config", "core.autocrlf", "true")
    (root / path).unlink()
    git(root, "checkout", "--", path)  # as a clone on Windows has it
    assert b"\r\n" in (root / path).read_bytes()
    args = ["reinforce"] if job == "reinforce" else ["forget", path, "--reason", "moved"]
    done = cortex(root, *args)
    assert done.returncode == 0, done.stderr
    assert "edited" not in done.stdout + done.stderr
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    if job == "reinforce":
        assert "reinforced: 1" in (root / path).read_text()
    else:
        assert not (root / path).exists()
    git(root, "add", "-A")
    assert git(root, "diff", "--cached", "--name-only") == ""  # the plugin's commit has nothing to undo


def test_an_editor_saving_a_note_cortex_archives_keeps_the_persons_file(vault, tmp_path):
    """The same for a removal: `cortex forget` moves the note to the archive; an editor
    saves it while cortex holds the lock. The person's file is not deleted: it stays
    where it was, untracked beside the archived note."""
    root = vault.root
    vault.write(observation(body="The ferry timetable changes on the first of May."))
    vault.run()
    [path] = facts(root)
    env = editor_saving_while_cortex_holds_the_lock(root / path, tmp_path)
    done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(root), "forget", path, "--reason", "moved"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert (root / path).read_text().endswith("Saved by the editor.\n")
    assert path not in tree_paths(root)  # archived in the commit all the same
    assert git(root, "status", "--porcelain", "--untracked-files=all").rstrip("\n") == f"?? {path}"
    assert path in done.stdout + done.stderr  # and said


def test_a_sparse_checkout_is_neither_a_persons_edit_nor_filled_in(vault):
    """A person checks out only part of the vault (`git sparse-checkout set vault
    observer schemas`): the memories outside it are absent, not being edited. cortex
    reinforces and forgets them as any other, and leaves them absent, still marked."""
    from cortex.maintenance.due import run_job

    root = vault.root
    _reinforced_note(vault)
    vault.write(observation(body="The lighthouse lamp is replaced every spring."))
    vault.run()
    ferry, lamp = sorted(facts(root), key=lambda p: "lamp" in (root / p).read_text())
    git(root, "sparse-checkout", "set", "vault", "observer", "schemas")
    assert not (root / ferry).exists() and git(root, "status", "--porcelain") == ""

    result = run_job(vault, "reinforce")
    assert result.commit is not None and not result.skipped
    assert "reinforced: 1" in git(root, "show", f"HEAD:{ferry}")
    done = cortex(root, "forget", lamp, "--reason", "the lamp is LED now")
    assert done.returncode == 0, done.stderr
    assert lamp not in tree_paths(root)
    assert not (root / "mind").exists()  # nothing written outside the checkout
    assert git(root, "status", "--porcelain") == ""
    assert f"S {ferry}" in git(root, "ls-files", "-t", "mind").splitlines()
    git(root, "sparse-checkout", "disable")
    assert "reinforced: 1" in (root / ferry).read_text()


def test_the_cone_of_a_sparse_checkout():
    from cortex.gitrepo import in_cone

    cone = ["vault", "mind/facts"]
    assert in_cone("README.md", cone) and in_cone("vault/decisions/a.md", cone)
    assert in_cone("mind/facts/2026-02/a.md", cone) and in_cone("mind/index.md", cone)  # a file above a cone folder
    assert not in_cone("mind/archive/facts/a.md", cone) and not in_cone("observer/x.jsonl", cone)
    assert not in_cone("vaults/a.md", cone)


def test_a_non_cone_sparse_checkout_keeps_new_notes_out_of_the_folders_it_leaves_out(vault):
    """`git sparse-checkout set --no-cone '/*' '!/mind/lessons/'`: a person wants every
    folder but the lessons. A new lesson is committed, its index entry marked as git
    marks one (skip-worktree), and no file appears in the folder; a new fact is written
    as usual. (Before, only cone mode was honoured: the lesson's file was written.)"""
    root = vault.root
    vault.write(observation(type="lesson", body="max()+1 invoice numbers duplicated under concurrent checkout."))
    vault.run()
    git(root, "sparse-checkout", "set", "--no-cone", "/*", "!/mind/lessons/")
    assert not (root / "mind" / "lessons").exists()
    vault.write(observation(type="lesson", body="Run migrations before the deploy, never after it."))
    vault.write(observation(body="The staging database is rebuilt every night at 02:00."))
    done = cortex(root, "run")
    assert done.returncode == 0, done.stderr
    lessons = [p for p in tree_paths(root) if p.startswith("mind/lessons/") and p.endswith(".md")]
    assert len(lessons) == 2 and len(facts(root)) == 1
    assert not (root / "mind" / "lessons").exists()  # nothing written where the person excluded it
    assert (root / facts(root)[0]).is_file()
    assert {f"S {p}" for p in lessons} <= set(git(root, "ls-files", "-t", "mind/lessons").splitlines())
    assert git(root, "status", "--porcelain") == ""
    git(root, "sparse-checkout", "disable")
    assert all((root / p).is_file() for p in lessons)


SPARSE_PATHS = ["README.md", "daily.md", "notes.txt", "mind/facts/2026-11/a.md", "mind/lessons/2026-11/b.md",
                "mind/lessons/keep.md", "mind/archive/lessons/2026-10/c.md", "vault/decisions/2026-11/d.md",
                "people/maya.md", "People/Ann.md", "deep/er/still/x.md", "a b/c d.md", "mind/x[1].md"]


@pytest.mark.parametrize("patterns", [
    ["/*", "!/mind/lessons/"],
    ["/*", "!/mind/lessons/", "/mind/lessons/keep.md"],  # a file let back in: its own match decides
    ["*.md", "!lessons/"],  # no slash: any depth, by name
    ["/vault/", "/mind/**/2026-11/", "!**/lessons/**"],
    ["/*", "!/*/", "/mind/f[a-z]cts/", "/p?ople/", "!/mind/x\\[1].md"],
    ["/*", "!/mind/", "mind/facts", "deep/**/x.md", "# a comment", "", "/a b/  "],
    ["/**/2026-1[!1]/", "/*.md", "!/d*.md", "/[[:upper:]]*/"],
    ["/[v-a]*/", "/[l-m-o]*/", "!/[]x]*/", "/[]D]*/"],  # git's brackets: a range's first character, ']' first
])
def test_non_cone_patterns_are_matched_as_git_matches_them(tmp_path, patterns):
    """cortex decides where a new note goes from the patterns (git marks only paths its
    index has): for every path, the same decision as git's own skip-worktree bit."""
    from cortex import sparse

    root = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel in SPARSE_PATHS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "all")
    git(root, "sparse-checkout", "set", "--no-cone", *patterns)
    gits = {line[2:]: line[0] == "H" for line in git(root, "ls-files", "-t").splitlines()}
    ours = sparse.read_patterns(root / ".git")
    assert ours is not None
    assert {p: sparse.included(p, ours) for p in SPARSE_PATHS} == {p: gits[p] for p in SPARSE_PATHS}


@pytest.mark.parametrize("action, status, said", [
    ('rm "$NOTE"', " D", "stays deleted"),  # deleted in Obsidian: "not this"
    (': > "$NOTE"', " M", "edited"),  # an editor that saves in place, between its truncate and its write
])
def test_a_note_deleted_or_emptied_while_the_job_writes_it_stays_so(vault, tmp_path, action, status, said):
    root = vault.root
    path = _reinforced_note(vault)
    env = editor_saving_while_cortex_holds_the_lock(root / path, tmp_path, action)
    done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(root), "reinforce"], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "reinforced: 1" in git(root, "show", f"HEAD:{path}")
    assert git(root, "status", "--porcelain").rstrip("\n") == f"{status} {path}"
    assert said in done.stdout + done.stderr and path in done.stdout + done.stderr


def test_a_note_cortex_cannot_write_is_left_with_a_warning_and_the_others_are_written(vault, tmp_path):
    """A note made immutable (as a read-only file is to anyone but root): the commit is
    made, the other notes are written, the note says why it is stale, exit 0."""
    root = vault.root
    for body in ("The ferry timetable changes on the first of May.", "The harbour crane is serviced on Mondays."):
        vault.write(observation(body=body))
        vault.run()
        vault.write(observation(body=body, timestamp="2026-02-17T09:00:00.000Z"))
        vault.run()
    stuck, other = sorted(facts(root))
    if subprocess.run(["chattr", "+i", str(root / stuck)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        done = cortex(root, "reinforce")
    finally:
        subprocess.run(["chattr", "-i", str(root / stuck)], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert "could not be written" in done.stdout + done.stderr
    assert "reinforced: 1" in (root / other).read_text()
    assert "reinforced: 1" in git(root, "show", f"HEAD:{stuck}") and "reinforced: 1" not in (root / stuck).read_text()
