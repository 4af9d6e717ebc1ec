"""How `cortex run` meets git: what it commits, what it leaves alone, how it recovers."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import VENV_BIN, append_lines, cortex, git, observation
from cortex.errors import CortexError, LockBusy
from test_run_rules import NOW, notes

SESSION_B = "7b1d0c52-2f0e-4a4b-9a51-3c1b2d4e5f60"


def lines(n, **kw):
    return [observation(body=f"Fact number {i} about the build cache.", **kw) for i in range(n)]


def commit_count(vault) -> int:
    return int(git(vault.root, "rev-list", "--count", "HEAD"))


def test_one_commit_per_run_with_the_documented_message(vault):
    append_lines(vault, *lines(3), lines(1)[0])
    before = commit_count(vault)
    report = vault.run(now=NOW)
    assert report.commits == 1 and commit_count(vault) == before + 1
    message = git(vault.root, "log", "-1", "--format=%B")
    assert message.startswith("observe: 3 memories (1 reinforced)\n\n")
    assert "mind/facts/2026-02/2026-02-16-" in message and "Fact number 0 about the build cache. (owner)" in message
    assert git(vault.root, "log", "-1", "--format=%an <%ae>").strip() == "cortex <cortex@localhost>"


def test_a_single_note_uses_the_walkthrough_message(vault):
    append_lines(vault, observation(body="Use local git only — no remote push in daemon.", type="decision"))
    vault.run(now=NOW)
    subject = git(vault.root, "log", "-1", "--format=%s").strip()
    assert subject == "observe: Use local git only — no remote push in daemon. (owner)"


@pytest.mark.parametrize("per, expected", [("note", 4), ("session", 2), ("run", 1)])
def test_commit_grouping(vault, per, expected):
    append_lines(vault, *lines(3), observation(body="Another session's fact.", session_id=SESSION_B))
    before = commit_count(vault)
    assert vault.run(now=NOW, commit_per=per).commits == expected
    assert commit_count(vault) == before + expected


def test_only_a_commit_for_the_whole_run_counts_its_reinforcements(vault):
    other = [observation(body=f"Session B's fact number {i}.", session_id=SESSION_B) for i in range(2)]
    append_lines(vault, *lines(2), lines(1)[0], *other)
    vault.run(now=NOW, commit_per="session")
    subjects = git(vault.root, "log", "-2", "--format=%s").splitlines()
    assert sorted(subjects) == ["observe: 2 memories", "observe: 2 memories"]


def test_commit_touches_only_cortex_paths_and_leaves_a_persons_work_alone(vault):
    root = vault.root
    (root / "README.md").write_text("mine\n")
    git(root, "add", "README.md")
    git(root, "commit", "-qm", "readme", "--no-verify")
    (root / "README.md").write_text("mine, edited and staged\n")
    git(root, "add", "README.md")
    (root / "README.md").write_text("mine, edited again, unstaged\n")
    (root / "scratch.txt").write_text("untracked\n")
    staged_before = git(root, "diff", "--cached")
    status_before = git(root, "status", "--porcelain")

    append_lines(vault, *lines(2))
    vault.run(now=NOW)

    changed = git(root, "show", "--name-only", "--format=", "HEAD").split()
    assert changed and all(p.startswith("mind/facts/") for p in changed)
    assert git(root, "diff", "--cached") == staged_before
    assert (root / "README.md").read_text() == "mine, edited again, unstaged\n"
    assert git(root, "status", "--porcelain") == status_before  # nothing of cortex's shows
    assert git(root, "show", "HEAD:README.md") == "mine\n"


def test_a_repeat_of_a_memory_a_person_moved_out_of_mind_reinforces_it_there(vault):
    """One observation, one note: a memory a person filed in a folder of their own (with
    `git mv`, through the real hook) is still the note a repeat reinforces, by the real CLI."""
    root = vault.root
    body = "Deploys are frozen on Fridays after noon."
    append_lines(vault, observation(body=body, timestamp="2026-03-01T12:00:00.000Z"))
    cortex("--vault", str(root), "run", check=True)
    (memory,) = [p for p in git(root, "ls-files", "mind").split() if p.endswith(".md") and "/20" in p]
    (root / "projects").mkdir()
    git(root, "mv", memory, "projects/deploy-freeze.md")
    git(root, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-qm", "person: into my projects folder")
    append_lines(vault, observation(body=body, timestamp="2026-03-02T12:00:00.000Z"))
    report = json.loads(cortex("--vault", str(root), "run", "--json", check=True).stdout)
    assert (report["memorized"], report["reinforced"]) == (0, 1)
    cortex("--vault", str(root), "maintain", "--force", check=True)
    hash_line = next(line for line in (root / "projects/deploy-freeze.md").read_text().splitlines()
                     if line.startswith("source_hash:"))
    assert git(root, "grep", "-l", "-F", hash_line, "HEAD", "--", "*.md").split() == ["HEAD:projects/deploy-freeze.md"]
    text = (root / "projects/deploy-freeze.md").read_text()
    assert "\nreinforced: 1\n" in text and "last_reinforced: 2026-03-02T12:00" in text


def test_a_repeat_reinforces_the_memory_not_the_copy_a_person_made_beside_it(vault):
    """Obsidian's "Make a copy" (`x 1.md` beside `x.md`, the same text): the commit gives
    the copy an id of its own, and the agent's repeat reinforces the memory, which keeps
    its id and its place through maintenance (the copy, not the memory, is the duplicate
    dedup merges)."""
    root = vault.root
    body = "The Mac mini in the lab runs the nightly backups."
    append_lines(vault, observation(body=body, timestamp="2026-03-01T12:00:00.000Z"))
    cortex("--vault", str(root), "run", check=True)
    (memory,) = [p for p in git(root, "ls-files", "mind").split() if p.endswith(".md") and "/20" in p]
    memory_id = json.loads(cortex("--vault", str(root), "show", memory, "--json", check=True).stdout)["id"]
    copy = memory.removesuffix(".md") + " 1.md"  # sorts before the memory's name
    (root / copy).write_text((root / memory).read_text())
    git(root, "add", "-A")
    git(root, "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-qm", "vault backup")  # through the hook
    assert memory_id not in (root / copy).read_text()  # the copy has an id of its own

    append_lines(vault, observation(body=body, timestamp="2026-03-02T12:00:00.000Z"))
    report = json.loads(cortex("--vault", str(root), "run", "--json", check=True).stdout)
    assert (report["memorized"], report["reinforced"]) == (0, 1)
    cortex("--vault", str(root), "maintain", "--force", "--only", "reinforce", check=True)
    assert "\nreinforced: 1\n" in (root / memory).read_text()
    assert "\nreinforced:" not in (root / copy).read_text()

    cortex("--vault", str(root), "maintain", "--force", check=True)
    shown = json.loads(cortex("--vault", str(root), "show", memory_id, "--json", check=True).stdout)
    assert shown["path"] == memory and not (root / copy).exists()  # the copy merged into the memory


def test_git_status_is_clean_after_a_run_and_fsck_passes(vault):
    append_lines(vault, *lines(5), "{bad", observation(type="nope"))
    vault.run(now=NOW)
    assert git(vault.root, "status", "--porcelain") == ""
    git(vault.root, "fsck", "--strict")


def test_offset_advances_and_a_second_run_does_nothing(vault):
    append_lines(vault, *lines(2))
    vault.run(now=NOW)
    head = git(vault.root, "rev-parse", "HEAD")
    report = vault.run(now=NOW)
    assert report.read == 0 and report.commits == 0
    assert git(vault.root, "rev-parse", "HEAD") == head


def test_consumed_buffer_is_rotated_and_writers_continue_in_a_new_one(vault):
    append_lines(vault, *lines(2))
    assert vault.run(now=NOW).rotated
    archived = list(vault.archive_dir.glob("observations-*.jsonl"))
    assert len(archived) == 1 and len(archived[0].read_text().splitlines()) == 2
    assert not vault.buffer_path.exists()
    vault.write(observation(body="Written after rotation."))
    assert vault.run(now=NOW).memorized == 1
    assert len(notes(vault)) == 3


def test_a_partial_line_prevents_rotation(vault):
    append_lines(vault, *lines(1))
    with open(vault.buffer_path, "a") as fh:
        fh.write('{"type": "fa')
    report = vault.run(now=NOW)
    assert report.memorized == 1 and not report.rotated and vault.buffer_path.exists()


def test_only_one_run_at_a_time(vault):
    (vault.root / "observer" / "config.yml").write_text("lock_timeout: 0.2\n")
    append_lines(vault, *lines(1))
    with vault.lock():
        with pytest.raises(LockBusy) as info:
            vault.run(now=NOW)
    assert "busy" in str(info.value) and "pid" in str(info.value)
    assert vault.run(now=NOW).memorized == 1


def test_a_waiting_run_proceeds_when_the_lock_frees(vault, monkeypatch):
    """A run that finds the vault's lock held waits for it, and runs once it frees: the
    lock is let go only after the run has found it held (its first wait between tries),
    so the test checks the wait however loaded the machine."""
    import time
    import types

    from cortex import fsutil

    append_lines(vault, *lines(1))
    waiting = threading.Event()

    def sleep(seconds):  # the lock's wait between tries: the real one, seen
        waiting.set()
        time.sleep(seconds)

    monkeypatch.setattr(fsutil, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
    ran = []
    with vault.lock():
        t = threading.Thread(target=lambda: ran.append(vault.run(now=NOW)))
        t.start()
        while not waiting.wait(0.05) and t.is_alive():
            pass
        found_held = waiting.is_set()
    t.join()
    assert found_held and len(ran) == 1 and ran[0].memorized == 1


# --- recovery at each crash point (the kill -9 test drives the real process too) -------------

class Crash(BaseException):
    pass


def crash_at(monkeypatch, target, attr, after_calls=0):
    original = getattr(target, attr)
    calls = {"n": 0}

    def boom(*a, **kw):
        if calls["n"] >= after_calls:
            raise Crash(attr)
        calls["n"] += 1
        return original(*a, **kw)

    monkeypatch.setattr(target, attr, boom)


@pytest.mark.parametrize(
    "module, attr, after",
    [
        ("cortex.quarantine.Quarantine", "add", 1),  # quarantine logged, skipped log not yet
        ("cortex.state.State", "save", 0),  # before the pending record is saved
        ("cortex.gitrepo.GitRepo", "commit", 1),  # pending saved, first of 4 commits made
        ("cortex.gitrepo.GitRepo", "commit", 0),  # new notes written and staged, nothing committed
        ("cortex.state.State", "save", 1),  # everything done but the final state save
    ],
)
def test_recovery_from_a_crash_at_each_step_is_exactly_once(vault, monkeypatch, module, attr, after):
    import importlib

    mod_name, cls_name = module.rsplit(".", 1)
    target = getattr(importlib.import_module(mod_name), cls_name)
    batch = lines(3) + [lines(1)[0], "{bad json", observation(bucket="ambient", body="Low value.")]
    append_lines(vault, *batch)
    with monkeypatch.context() as m:
        crash_at(m, target, attr, after)
        with pytest.raises(Crash):
            vault.run(now=NOW, commit_per="note")
    report = vault.run(now=NOW, commit_per="note")
    assert sorted(p.rsplit("-", 1)[0] for p in notes(vault)) == ["mind/facts/2026-02/2026-02-16"] * 3
    state = vault.load_state()
    assert sum(e["count"] for e in state.reinforcements.values()) == 1
    assert [e.reason for e in vault.quarantine.entries()] == ["parse"]
    assert [e.reason for e in vault.skipped.entries()] == ["below_threshold"]
    assert git(vault.root, "status", "--porcelain") == ""
    assert int(git(vault.root, "rev-list", "--count", "HEAD")) == 4  # init + 3 notes
    git(vault.root, "fsck", "--strict")
    assert state.pending is None and report.read + report.recovered >= 0


def test_a_torn_line_from_a_dead_writer_cannot_swallow_the_next_write(vault):
    with open(vault.buffer_path, "w") as fh:
        fh.write('{"type": "fact", "bo')  # an agent killed mid-line
    vault.write(observation(body="Written after the torn line."))
    report = vault.run(now=NOW)
    assert report.memorized == 1 and report.quarantined == {"parse": 1}
    assert vault.quarantine.entries()[0].line == '{"type": "fact", "bo'


def test_a_fresh_index_lock_of_another_git_process_is_respected(vault):
    (vault.root / ".git" / "index.lock").write_text("")  # e.g. a commit editor is open
    append_lines(vault, *lines(1))
    with pytest.raises(CortexError) as info:
        vault.run(now=NOW)
    assert "git is busy" in info.value.message and "index.lock" in info.value.message
    (vault.root / ".git" / "index.lock").unlink()
    report = vault.run(now=NOW)  # completes the decided run: one note, exactly once
    assert report.held_back and not report.recovered and len(notes(vault)) == 1
    assert git(vault.root, "status", "--porcelain") == ""


def test_notes_a_run_decided_while_git_was_busy_are_counted_by_the_run_that_commits_them(vault):
    """A person's git holds index.lock: the run saves its decision and exits 75. The next
    run commits those notes, and says it memorized them (it read no line itself) and that
    the last run was held back — not that it recovered an interrupted one: nothing was
    interrupted, and a script or person reading "interrupted" looks for a crash."""
    (vault.root / ".git" / "index.lock").write_text("")
    append_lines(vault, *lines(2))
    busy = cortex("--vault", str(vault.root), "run")
    assert busy.returncode == 75, busy.stderr
    (vault.root / ".git" / "index.lock").unlink()
    done = cortex("--vault", str(vault.root), "run")
    assert done.returncode == 0, done.stderr
    assert "memorized        2  (1 commit; 2 from the last run, held back while git was busy)" in done.stderr
    assert "finished first: the last run's commit, held back while git was busy (exit 75)" in done.stderr
    assert "interrupted" not in done.stderr
    append_lines(vault, *lines(1))  # a repeat: this run's own line
    report = json.loads(cortex("--vault", str(vault.root), "run", "--json").stdout)
    assert report["memorized"] == report["recovered_notes"] == 0 and report["reinforced"] == 1

    (vault.root / ".git" / "index.lock").write_text("")
    append_lines(vault, observation(body="A third fact about the build cache."))
    assert cortex("--vault", str(vault.root), "run").returncode == 75
    (vault.root / ".git" / "index.lock").unlink()
    report = json.loads(cortex("--vault", str(vault.root), "run", "--json").stdout)
    assert report["held_back"] and not report["recovered"] and report["memorized"] == report["recovered_notes"] == 1
    assert len(report["paths"]) == 1 and report["paths"][0].startswith("mind/facts/")


def test_a_lock_left_inside_an_interrupted_run_is_cleared(vault, monkeypatch):
    """A kill -9 inside the commit step leaves index.lock and the owner record naming it;
    the next run (another process: the killed one's pid is dead) clears it and finishes."""
    import cortex.gitlock
    import cortex.gitrepo

    def killed(self, changes, message, author):
        raise Crash("commit")

    append_lines(vault, *lines(2))
    with monkeypatch.context() as m:
        m.setattr(cortex.gitrepo.GitRepo, "commit", killed)
        m.setattr(cortex.gitlock.IndexLock, "release", lambda self: None)  # a kill skips it
        with pytest.raises(Crash):
            vault.run(now=NOW)
    owner = vault.root / ".git" / "cortex-lock.json"
    assert (vault.root / ".git" / "index.lock").exists() and owner.exists()
    proc = subprocess.Popen(["true"])
    proc.wait()
    record = json.loads(owner.read_text())
    owner.write_text(json.dumps({**record, "pid": proc.pid, "start": None}))  # its process is gone
    report = vault.run(now=NOW)
    assert report.recovered and any("index.lock" in w for w in report.warnings)
    assert len(notes(vault)) == 2 and git(vault.root, "status", "--porcelain") == ""


def test_a_long_buffer_is_taken_in_chunks_with_dedup_across_them(vault, monkeypatch):
    import cortex.cycle

    monkeypatch.setattr(cortex.cycle, "CHUNK_LINES", 4)
    append_lines(vault, *lines(6), *lines(3), "{bad")  # 6 new, 3 repeats in later chunks
    before = commit_count(vault)
    report = vault.run(now=NOW)
    assert (report.memorized, report.reinforced, report.quarantined) == (6, 3, {"parse": 1})
    assert report.commits == 2 and commit_count(vault) == before + 2  # chunk 3 holds only repeats
    assert report.rotated and len(notes(vault)) == 6
    limited = vault
    append_lines(limited, *[observation(body=f"Limited {i}.") for i in range(10)])
    assert vault.run(now=NOW, limit=7).read == 7


def test_a_detached_head_is_refused_and_the_buffer_waits(vault):
    vault.write(observation(body="The first memory lands on main."))
    vault.run(now=NOW)
    git(vault.root, "checkout", "-q", "HEAD~1")
    vault.write(observation(body="This one must not land on a detached HEAD."))
    with pytest.raises(CortexError, match="detached"):
        vault.run(now=NOW)
    assert vault.load_state().pending is None
    git(vault.root, "switch", "-q", "main")
    report = vault.run(now=NOW)
    assert report.memorized == 1
    assert "This one must not land" in git(vault.root, "log", "-1", "--format=%B", "main")


@pytest.mark.parametrize("step", ["rotated", "scrub"])
def test_a_crash_between_rotation_and_scrub_never_keeps_a_credential(vault, monkeypatch, step):
    """The consumed buffer is moved aside raw under the writers' lock, then scrubbed into
    observer/archive/; killed in between, the next run finishes the scrub."""
    from cortex import buffer

    secret = "postgres://app:" + "Sup3rS3cret9x" + "@db.internal/app"
    append_lines(vault, observation(body=f"The app connects with {secret} today."), *lines(2))
    with monkeypatch.context() as m:
        if step == "rotated":  # moved aside; the new buffer id not yet saved
            rotate = buffer.rotate_if_consumed

            def rotate_then_die(*args):
                if rotate(*args):
                    raise Crash("rotated")
                return False

            m.setattr(buffer, "rotate_if_consumed", rotate_then_die)
        else:  # the scrub half-written
            def half(raw, archive, transform, *bounds):  # the real one's arguments
                archive.with_name(f".{archive.name}.tmp").write_bytes(raw.read_bytes()[:20])
                raise Crash("scrub")

            m.setattr(buffer, "archive_scrubbed", half)
        with pytest.raises(Crash):
            vault.run(now=NOW)
    vault.write(observation(body="A line for the next buffer."))
    report = vault.run(now=NOW)
    assert report.memorized == 1 and vault.load_state().pending is None
    kept = sorted(p.name for p in vault.archive_dir.iterdir())
    assert len(kept) == 2 and all(k.startswith("observations-") for k in kept), kept  # no raw, no temp file
    texts = [(vault.archive_dir / k).read_text() for k in kept]
    assert not any("Sup3rS3cret9x" in text for text in texts)
    assert sorted(text.count("\n") for text in texts) == [1, 3] and any("[REDACTED]" in text for text in texts)


def big_batch(n):
    return [observation(body=f"Build host {i} caches artefacts under /srv/cache/{i} for {i % 7 + 1} days.") for i in range(n)]


def test_a_big_run_writes_its_notes_as_one_pack_git_accepts(vault):
    from cortex.packing import PACK_AT

    packs = vault.root / ".git" / "objects" / "pack"
    before, had = set(packs.glob("*.pack")), len(notes(vault))
    append_lines(vault, *big_batch(PACK_AT + 20))
    report = vault.run(now=NOW)
    assert report.memorized == PACK_AT + 20
    new = set(packs.glob("*.pack")) - before
    assert len(new) == 1
    pack = new.pop()
    assert pack.with_suffix(".idx").exists()
    verified = git(vault.root, "verify-pack", "-v", str(pack.with_suffix(".idx")))
    assert f"non delta: {PACK_AT + 20} objects" in verified
    # every note committed is a blob of that pack, with git's own id for its bytes
    for path in notes(vault)[:5]:
        assert git(vault.root, "rev-parse", f"HEAD:{path}").strip() == git(vault.root, "hash-object", path).strip()
    assert git(vault.root, "status", "--porcelain") == ""
    git(vault.root, "fsck", "--strict")
    git(vault.root, "gc", "--quiet")
    git(vault.root, "fsck", "--strict")
    assert len(notes(vault)) == had + PACK_AT + 20


def test_pack_ids_are_gits_ids_and_a_kill_before_the_index_leaves_no_pack(tmp_path, monkeypatch):
    import os

    from cortex import packing

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    objects = tmp_path / ".git" / "objects"
    blobs = [f"note {i}\n".encode() * (i % 5 + 1) for i in range(150)] + [b"", b"note 1\n" * 2]
    # around the size up to which a note is deflated with a small window, and far past it
    blobs += [os.urandom(n // 2).hex().encode() for n in (packing.SMALL_BLOB, packing.SMALL_BLOB + 2, 1 << 20)]
    ids = packing.write_pack(objects, blobs)
    theirs = subprocess.run(["git", "hash-object", "--stdin"], input=blobs[3], capture_output=True, check=True)
    assert ids[3] == theirs.stdout.decode().strip()
    assert ids[151] == ids[1]  # the same bytes twice: one object, the same id
    for i in (0, 3, 150, 151, 152, 153, 154):
        shown = subprocess.run(["git", "-C", str(tmp_path), "cat-file", "blob", ids[i]], capture_output=True, check=True)
        assert shown.stdout == blobs[i]
    import pygit2

    repo = pygit2.Repository(str(tmp_path))  # libgit2 reads them too (a recovery does)
    assert [repo[ids[i]].data for i in (3, 152, 153, 154)] == [blobs[i] for i in (3, 152, 153, 154)]

    real_replace = os.replace

    def killed_before_the_index(src, dst):
        if str(dst).endswith(".idx"):
            raise KeyboardInterrupt("killed")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_before_the_index)
    with pytest.raises(KeyboardInterrupt):
        packing.write_pack(objects, [b"never seen\n"] * 120)
    monkeypatch.undo()
    missing = subprocess.run(["git", "-C", str(tmp_path), "cat-file", "-e", packing.blob_id(b"never seen\n")])
    assert missing.returncode != 0  # a pack without its index is not used
    assert not [p for p in (objects / "pack").iterdir() if p.name.startswith("tmp_")]
    subprocess.run(["git", "-C", str(tmp_path), "fsck", "--strict"], check=True, capture_output=True)


def killed_at(step: str, work) -> None:
    """``work()`` in a child process that dies the moment it would call ``GitRepo.<step>``
    (``os._exit``, as under kill -9: no cleanup, no lock released): what it did before
    stays as a kill leaves it."""
    import os

    pid = os.fork()
    if pid == 0:
        try:
            import cortex.gitrepo

            setattr(cortex.gitrepo.GitRepo, step, lambda *a, **kw: os._exit(9))
            work()
        finally:
            os._exit(1)  # reached only when the step never came: the test fails below
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 9


@pytest.mark.parametrize("step", ["_changed_index", "commit"])
def test_a_kill_around_the_index_loses_and_doubles_nothing(vault, step):
    """The notes are staged from their blobs (the index before HEAD), committed, then
    written: killed before the index is changed, or before the commit (the notes
    staged, no file yet), HEAD has not moved, and the next run commits exactly them,
    once."""
    append_lines(vault, *lines(3))
    head = git(vault.root, "rev-parse", "HEAD").strip()
    killed_at(step, lambda: vault.run(now=NOW))
    assert git(vault.root, "rev-parse", "HEAD").strip() == head
    staged = sorted(git(vault.root, "diff", "--cached", "--name-only").split())
    assert len(staged) == (3 if step == "commit" else 0)
    assert not any((vault.root / p).exists() for p in staged)  # files come after the commit

    report = vault.run(now=NOW)
    # the lines were the killed run's: not planned again, counted as recovered
    assert report.recovered and report.memorized == report.recovered_notes == 3
    assert len(notes(vault)) == 3 and (step != "commit" or sorted(notes(vault)) == staged)
    assert commit_count(vault) == 2  # init + one run
    assert git(vault.root, "status", "--porcelain", "--untracked-files=all") == ""
    git(vault.root, "fsck", "--strict")


def test_an_index_copy_a_killed_cortexs_git_still_holds_does_not_wedge_the_next_run(vault):
    """A cortex killed while its `git update-index` ran leaves that git writing the copy
    of the index it was given, and holding the copy's lock. With one shared name for the
    copy, every later run failed ("Unable to create .../cortex-index.tmp.lock") until a
    person removed the file; now each process has its own copy, and copies left behind
    are removed once a minute old."""
    import os
    import time

    from conftest import cortex

    git_dir = vault.root / ".git"
    legacy = git_dir / "cortex-index.tmp.lock"  # the shared name's lock, as a killed run's git left it
    writing = git_dir / "cortex-scratch.999999.index.lock"  # another's git, perhaps still writing
    left = git_dir / "cortex-scratch.999998.index"  # a copy a killed run left long ago
    for path in (legacy, writing, left):
        path.write_bytes(b"")
    an_hour_ago = time.time() - 3600
    os.utime(left, (an_hour_ago, an_hour_ago))

    append_lines(vault, *lines(2))
    done = cortex("--vault", str(vault.root), "run", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["memorized"] == 2
    assert git(vault.root, "status", "--porcelain", "--untracked-files=all") == ""
    assert legacy.exists() and writing.exists()  # fresh: not removed while a git may hold them
    assert not left.exists()
    assert not list(git_dir.glob("cortex-scratch.*.index"))  # the run's own copy became the index


@pytest.mark.parametrize("n, git_cleanup", [
    (5, ("gc", "--quiet", "--prune=now")),  # loose blobs: nothing protects them from a prune "now"
    (130, ("repack", "-a", "-d", "-q")),  # one pack: its .keep protects it until the commit
    (130, ("gc", "--quiet", "--prune=now")),
])
def test_a_run_killed_before_its_commit_survives_a_git_gc_or_repack(vault, monkeypatch, n, git_cleanup):
    """The run had written its notes' blobs and saved its decision, then was killed;
    a person's `git gc --prune=now` or `git repack -a -d` came before the next run.
    Blobs in cortex's pack are kept (git honours the .keep); loose ones may be gone, and
    then the decision is dropped and its lines read again: every line a note, once."""
    from cortex.gitrepo import GitRepo

    append_lines(vault, *big_batch(n))
    with monkeypatch.context() as m:
        crash_at(m, GitRepo, "commit", 0)
        with pytest.raises(Crash):
            vault.run(now=NOW)
    git(vault.root, *git_cleanup)
    report = vault.run(now=NOW)
    assert report.recovered and len(notes(vault)) == n
    assert ("read again" in " ".join(report.warnings)) == (n < 100)  # only loose blobs can be lost
    assert git(vault.root, "status", "--porcelain") == "" and vault.load_state().pending is None
    git(vault.root, "fsck", "--strict")
    assert not list((vault.root / ".git" / "objects" / "pack").glob("*.keep"))  # released once committed


def test_a_git_gc_pruning_a_runs_blobs_just_before_its_commit_is_said_not_a_bug(vault, monkeypatch):
    """A person's `git gc --prune=now` that removed the run's loose blobs after the run
    found them there and before its commit: the commit failed on them inside libgit2
    ("invalid object specified") and the run exited 3, "an unexpected error (a bug)",
    with a bug log. Now it says what happened, as when the blobs were gone before the
    look, and its lines are read again: every line a note, once."""
    from cortex.errors import CortexError
    from cortex.gitrepo import GitRepo

    append_lines(vault, *big_batch(5))  # loose blobs: nothing protects them from a prune "now"
    looked = GitRepo.missing

    def then_pruned(self, oids):
        found = looked(self, oids)
        git(vault.root, "prune", "--expire=now")  # the person's gc, at that instant
        return found

    with monkeypatch.context() as m:
        m.setattr(GitRepo, "missing", then_pruned)
        with pytest.raises(CortexError, match="git removed this run's notes from its object store"):
            vault.run(now=NOW)
    assert git(vault.root, "status", "--porcelain") == "" and vault.load_state().pending is None
    report = vault.run(now=NOW)
    assert report.memorized == 5 and len(notes(vault)) == 5
    git(vault.root, "fsck", "--strict")


def test_the_pack_of_a_run_is_released_once_committed_and_git_may_repack_it(vault):
    append_lines(vault, *big_batch(130))
    vault.run(now=NOW)
    packs = vault.root / ".git" / "objects" / "pack"
    assert not list(packs.glob("*.keep"))
    git(vault.root, "repack", "-a", "-d", "-q")
    assert len(list(packs.glob("*.pack"))) == 1 and len(notes(vault)) == 130
    git(vault.root, "fsck", "--strict")


# --- a person's git operation in progress -----------------------------------------------------

def _commit(root, rel, text, message):
    (root / rel).write_text(text)
    git(root, "add", rel)
    git(root, "commit", "-q", "--no-verify", "-m", message)


def _stop_mid(root, op, rel, branch="main") -> tuple[list[str], str]:
    """Start the person's ``op`` and leave it stopped on a conflict in the note ``rel``
    (a bisect: at the commit it tests): (the git command that aborts it, HEAD before it)."""
    text = (root / rel).read_text()
    words = lambda who: text.replace("The first memory", f"{who}'s words for the first memory")  # noqa: E731
    if op == "cherry-pick":  # two commits: the first applies, the second stops
        git(root, "checkout", "-qb", "other")
        _commit(root, "person.txt", "a clean change\n", "o1")
        _commit(root, rel, words("Other"), "o2")
        git(root, "checkout", "-q", branch)
        _commit(root, rel, words("Main"), "main's edit")
        before = git(root, "rev-parse", "HEAD").strip()
        assert subprocess.run(["git", "cherry-pick", f"{branch}..other"], cwd=root,
                              capture_output=True).returncode != 0
    elif op == "revert":  # two commits: the newer reverts cleanly, the older stops
        _commit(root, rel, words("First"), "r1")
        _commit(root, "person.txt", "a clean change\n", "r2")
        _commit(root, rel, words("Later"), "r3")
        before = git(root, "rev-parse", "HEAD").strip()
        assert subprocess.run(["git", "revert", "--no-edit", "HEAD~3..HEAD~1"], cwd=root,
                              capture_output=True).returncode != 0
    elif op == "rebase":  # HEAD detached by the rebase, stopped on its conflict
        git(root, "checkout", "-qb", "topic")
        _commit(root, rel, words("Topic"), "topic's edit")
        git(root, "checkout", "-q", "main")
        _commit(root, rel, words("Main"), "main's edit")
        git(root, "checkout", "-q", "topic")
        before = git(root, "rev-parse", "HEAD").strip()
        assert subprocess.run(["git", "rebase", "main"], cwd=root, capture_output=True).returncode != 0
    elif op == "am":  # a patch that does not apply: on the branch, HEAD attached
        _commit(root, rel, words("Patch"), "the patch")
        git(root, "format-patch", "-q", "-1", "-o", str(root.parent / "patches"))
        git(root, "reset", "-q", "--hard", "HEAD~1")
        _commit(root, rel, words("Main"), "main's edit")
        (patch,) = (root.parent / "patches").iterdir()
        before = git(root, "rev-parse", "HEAD").strip()
        assert subprocess.run(["git", "am", str(patch)], cwd=root, capture_output=True).returncode != 0
    elif op == "bisect":  # HEAD detached at the commit it tests
        for n in range(3):
            _commit(root, "person.txt", f"version {n}\n", f"v{n}")
        before = git(root, "rev-parse", "HEAD").strip()
        git(root, "bisect", "start", "HEAD", "HEAD~3")
    return (["bisect", "reset"] if op == "bisect" else [op, "--abort"]), before


@pytest.mark.parametrize("op", ["cherry-pick", "revert", "rebase", "am", "bisect"])
def test_a_persons_git_operation_in_progress_is_left_to_end_and_the_buffer_waits(vault, monkeypatch, op):
    """While a person's cherry-pick, revert, rebase or am is stopped, git expects HEAD to
    move only by it: cortex committed on top, and the person's `--abort` refused ("You seem
    to have moved HEAD. Not rewinding"), leaving the conflict and the commits already
    replayed. A bisect (and a rebase) detaches HEAD, and the hint was to switch branch,
    which git refuses mid-rebase. Now cortex commits nothing, says what is in progress
    and how to end it (exit 75), and memorizes the lines once it is over."""
    from cortex.gitop import OperationInProgress

    monkeypatch.setenv("GIT_EDITOR", "true")
    root = vault.root
    vault.write(observation(body="The first memory lands on main."))
    vault.run(now=NOW)
    (rel,) = notes(vault)
    abort, before = _stop_mid(root, op, rel)
    branch = git(root, "symbolic-ref", "--quiet", "HEAD", check=False).strip()
    stopped = git(root, "rev-parse", "HEAD")
    assert vault.status()["git_operation"]["name"] == op

    vault.write(observation(body=f"Written while the person's {op} was stopped."))
    with pytest.raises(OperationInProgress, match=f"{op}`? is in progress") as refused:
        vault.run(now=NOW)
    assert refused.value.exit_code == 75 and f"`git {' '.join(abort)}`" in refused.value.hint
    assert git(root, "rev-parse", "HEAD") == stopped and branch == git(root, "symbolic-ref", "--quiet", "HEAD",
                                                                        check=False).strip()
    assert vault.load_state().pending is None

    git(root, *abort)  # the person's way out works: back where they started
    assert git(root, "rev-parse", "HEAD").strip() == before
    assert vault.status()["git_operation"] is None
    assert "U" not in {c for line in git(root, "status", "--porcelain").splitlines() for c in line[:2]}
    assert vault.run(now=NOW).memorized == 1
    assert f"Written while the person's {op} was stopped." in git(root, "log", "-1", "--format=%B")


def test_a_merge_stopped_on_a_conflict_lets_the_run_commit(vault):
    """A merge expects nothing of HEAD: `git merge --abort` resets to HEAD whatever it
    is, and the person's `git commit` makes the merge on top of cortex's commit."""
    root = vault.root
    vault.write(observation(body="The first memory lands on main."))
    vault.run(now=NOW)
    (rel,) = notes(vault)
    text = (root / rel).read_text()
    git(root, "checkout", "-qb", "topic")
    _commit(root, rel, text.replace("The first memory", "Topic's first memory"), "topic's edit")
    git(root, "checkout", "-q", "main")
    _commit(root, rel, text.replace("The first memory", "Main's first memory"), "main's edit")
    assert subprocess.run(["git", "merge", "topic"], cwd=root, capture_output=True).returncode != 0
    assert vault.status()["git_operation"] == {"name": "merge", "finish": vault.status()["git_operation"]["finish"],
                                               "commits_wait": False}
    vault.write(observation(body="Memorized during the person's merge."))
    assert vault.run(now=NOW).memorized == 1
    git(root, "merge", "--abort")
    assert "Memorized during the person's merge." in git(root, "log", "-1", "--format=%B")
    assert git(root, "status", "--porcelain") == ""


def test_during_a_cherry_pick_every_committing_command_waits_and_the_others_work(vault, monkeypatch):
    """The real CLI: run, reinforce, maintain and forget exit 75 with nothing committed
    (the lines and the reinforcements wait); write, query and status go on working; once
    the person aborts, everything lands."""
    from conftest import cortex

    monkeypatch.setenv("GIT_EDITOR", "true")
    root = vault.root
    kept = "The backup bucket is replicated to a second region."
    vault.write(observation(body="The first memory lands on main."))
    vault.write(observation(body=kept))
    vault.run(now=NOW)
    vault.write(observation(body=kept))
    assert vault.run(now=NOW).reinforced == 1
    first, other = sorted(notes(vault), key=lambda p: kept in (root / p).read_text())
    abort, before = _stop_mid(root, "cherry-pick", first)
    stopped = git(root, "rev-parse", "HEAD")

    vault.write(observation(body="Written while the person picks commits."))
    for args in (["run"], ["reinforce"], ["maintain", "--force"], ["forget", other, "--reason", "replaced"]):
        done = cortex(*args, cwd=root)
        assert done.returncode == 75, (args, done.stderr)
        assert "a cherry-pick is in progress" in done.stderr and "`git cherry-pick --abort`" in done.stderr
    assert git(root, "rev-parse", "HEAD") == stopped and vault.load_state().reinforcements
    assert cortex("write", "-", cwd=root, input=json.dumps(observation(body="Written by the CLI meanwhile.")))\
        .returncode == 0
    assert "cherry-pick in progress" in cortex("status", cwd=root).stdout
    assert cortex("query", "backup bucket", cwd=root).returncode == 0

    git(root, *abort)
    assert git(root, "rev-parse", "HEAD").strip() == before
    assert cortex("run", cwd=root).returncode == 0
    assert "2 memories" in git(root, "log", "-1", "--format=%s")
    assert cortex("reinforce", cwd=root).returncode == 0 and not vault.load_state().reinforcements
    assert cortex("forget", other, "--reason", "replaced", cwd=root).returncode == 0


def test_an_operation_in_a_linked_worktree_is_told_from_that_worktrees_own_git_dir(vault, monkeypatch):
    """git keeps CHERRY_PICK_HEAD, the sequencer and the rest in each worktree's own git
    directory (.git/worktrees/<name>): a cherry-pick stopped in one checkout stops
    cortex there, not in the other."""
    from cortex.gitop import OperationInProgress
    from cortex.vault import Vault

    monkeypatch.setenv("GIT_EDITOR", "true")
    vault.write(observation(body="The first memory lands on main."))
    vault.run(now=NOW)
    (rel,) = notes(vault)
    second = vault.root.parent / "second"
    git(vault.root, "worktree", "add", "-q", "-b", "second", str(second))
    linked = Vault(second)
    abort, before = _stop_mid(second, "cherry-pick", rel, branch="second")
    assert not (vault.root / ".git" / "CHERRY_PICK_HEAD").exists()
    linked.write(observation(body="Written in the linked checkout."))
    with pytest.raises(OperationInProgress, match="cherry-pick"):
        linked.run(now=NOW)
    vault.write(observation(body="Written in the main checkout."))
    assert vault.run(now=NOW).memorized == 1
    git(second, *abort)
    assert git(second, "rev-parse", "HEAD").strip() == before
    assert linked.run(now=NOW).memorized == 1


def test_a_worktree_whose_repository_is_gone_says_so_and_touches_nothing(vault, tmp_path):
    """A linked worktree whose `.git` file names a git directory that is gone (pruned, or
    the repository moved): each command says so and how to mend it, where `cortex run`
    blamed an empty `git config` value, `cortex status` counted 0 notes with exit 0,
    maintain and `cortex init` told the person to run `cortex init`, and a query made the
    missing folder again for its index."""
    vault.write(observation(body="The first memory lands on main."))
    vault.run(now=NOW)
    second = tmp_path / "second"
    git(vault.root, "worktree", "add", "-q", "-b", "second", str(second))
    (second / "observer" / "observations.jsonl").write_text(
        json.dumps(observation(body="Written in the linked checkout.")) + "\n")
    admin = vault.root / ".git" / "worktrees" / "second"
    subprocess.run(["rm", "-rf", str(admin)], check=True)

    for args in (["run"], ["status"], ["maintain"], ["query", "memory"], ["init", str(second)]):
        proc = cortex(*args, cwd=second)
        assert proc.returncode in (1, 2), (args, proc.stderr)  # query: 2 for any error
        assert f"{second / '.git'} points to {admin}, which is not there" in proc.stderr, (args, proc.stderr)
        assert "git worktree repair" in proc.stderr and "cortex init" not in proc.stderr
    assert not admin.exists()
    assert (second / "observer" / "observations.jsonl").read_text().count("linked checkout") == 1


def test_a_folder_git_is_told_belongs_to_another_git_directory_is_refused(vault, tmp_path):
    """A wrapper or dotfiles-style alias sets GIT_DIR to a bare repository and GIT_WORK_TREE
    to the folder: `cortex init` made the folder's own `.git` beside it, and from then on
    cortex committed there while the person's git read and committed the other one, two
    histories that never met. Another repository's GIT_DIR alone (cortex called from its
    hook) still reaches the vault named."""
    bare, folder = tmp_path / "notes.git", tmp_path / "notes"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    folder.mkdir()
    wrapped = {**os.environ, "GIT_DIR": str(bare), "GIT_WORK_TREE": str(folder)}
    made = cortex("init", str(folder), env=wrapped)
    assert made.returncode == 2 and "each commit to a repository of their own" in made.stderr, made.stderr
    assert not (folder / ".git").exists() and list(folder.iterdir()) == []

    for args in (["status"], ["run"], ["write", "--type", "fact", "--body", "The printer is on floor 3"]):
        proc = cortex(*args, cwd=vault.root, env={**os.environ, "GIT_DIR": str(bare), "GIT_WORK_TREE": str(vault.root)})
        assert proc.returncode == 2 and f"the work tree of {bare}" in proc.stderr, (args, proc.stderr)
    assert not (vault.root / "observer" / "observations.jsonl").exists() or \
        "floor 3" not in (vault.root / "observer" / "observations.jsonl").read_text()
    hooked = cortex("--vault", str(vault.root), "status", cwd=tmp_path, env={**os.environ, "GIT_DIR": str(bare)})
    assert hooked.returncode == 0, hooked.stderr


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_an_object_missing_from_the_repository_is_said_so_not_reported_as_a_bug(vault, damage):
    """A blob of a memory at HEAD gone from .git/objects, or its file overwritten (`git
    fsck`: missing blob, unable to unpack): every
    command that reads it says the repository is damaged and how to mend it (exit 1),
    where maintain, `brief --write` and forget wrote a bug report (exit 3) and run and
    status said only "git cannot read blob"; an agent's observation still waits."""
    vault.write(observation(body="The first memory lands on main."))
    vault.run(now=NOW)
    (rel,) = notes(vault)
    blob = git(vault.root, "rev-parse", f"HEAD:{rel}").strip()
    loose = vault.root / ".git" / "objects" / blob[:2] / blob[2:]
    loose.unlink()
    if damage == "corrupt":
        loose.write_bytes(b"\x00 not what zlib wrote \x00")
    subprocess.run(["rm", "-rf", str(vault.root / ".git" / "cortex")], check=True)

    assert cortex("write", "--type", "fact", "--body", "Said while the repository is damaged.",
                  cwd=vault.root).returncode == 0
    for args in (["run"], ["status"], ["maintain", "--force"], ["brief", "--write"], ["forget", rel, "--reason", "x"]):
        proc = cortex(*args, cwd=vault.root)
        assert proc.returncode == 1, (args, proc.stderr)
        assert f"the repository is damaged: git cannot read object {blob}" in proc.stderr, (args, proc.stderr)
        assert "git fetch" in proc.stderr and "a bug" not in proc.stderr
    assert "Said while the repository is damaged." in vault.buffer_path.read_text()


def test_a_repository_shared_with_a_group_stays_writable_by_the_group_after_a_run(tmp_path, ready_vault):
    """core.sharedRepository=group: git makes each folder it creates group-writable,
    whatever the umask; the object folders a run's commit made under umask 022 were the
    owner's alone, and a teammate's `git add` then failed for want of permission."""
    import os
    import stat

    root = ready_vault(tmp_path / "vault")
    git(root, "config", "core.sharedRepository", "group")
    objects = root / ".git" / "objects"
    for folder in [objects, *objects.rglob("*")]:  # shared from the start, as `git init --shared` makes it
        if folder.is_dir():
            folder.chmod(folder.stat().st_mode | stat.S_IWGRP | stat.S_IRGRP | stat.S_IXGRP)
    before = {p.name for p in objects.iterdir()}

    def person_umask():
        os.umask(0o022)

    batch = "".join(json.dumps(observation(body=f"Fact {i}: the build server is in rack {i}.")) + "\n" for i in range(40))
    for args, data in ((["write", "-"], batch), (["run"], None)):
        subprocess.run([str(VENV_BIN / "cortex"), *args], cwd=root, input=data, text=True, capture_output=True,
                       check=True, preexec_fn=person_umask)
    made = [p for p in objects.iterdir() if p.is_dir() and p.name not in before]
    assert made, "the run made no object folder: the test shows nothing"
    assert [p.name for p in made if not p.stat().st_mode & stat.S_IWGRP] == []


@pytest.mark.parametrize("value, umask, expected", [
    ("group", 0o022, 0o002), ("true", 0o077, 0o007), ("1", 0o022, 0o002), ("all", 0o077, 0o002),
    ("everybody", 0o027, 0o002), ("0660", 0o022, 0o007), ("0640", 0o002, 0o027), ("umask", 0o022, 0o022),
    ("false", 0o077, 0o077), ("nonsense", 0o022, 0o022),
])
def test_shared_umask_reads_core_shared_repository_as_git_does(value, umask, expected):
    from cortex.fsutil import shared_umask

    assert shared_umask(value, umask) == expected


# --- a vault a group shares: what cortex makes, the group can use -----------------------

def _as_person(umask: int = 0o022):
    def set_umask():
        os.umask(umask)
    return set_umask


def _cortex_as_person(root, *args, data=None, env=None):
    return subprocess.run([str(VENV_BIN / "cortex"), *args], cwd=root, input=data, text=True, capture_output=True,
                          env=env, preexec_fn=_as_person())


def _use_the_vault_as_a_person(root) -> None:
    """What a person does in a day, under the usual umask 022: an observation and a line
    that is no JSON (quarantined), a run, a query, maintenance, status, a commit of a
    note of their own through the hook."""
    assert _cortex_as_person(root, "write", "--type", "fact", "--body", "The build server is in Oslo.").returncode == 0
    with open(root / "observer" / "observations.jsonl", "a") as fh:
        fh.write("this line is no JSON\n")
    for args in (["run"], ["query", "build server"], ["maintain", "--force"], ["status"], ["index"]):
        done = _cortex_as_person(root, *args)
        assert done.returncode in (0, 1), (args, done.stderr)
    (root / "mind" / "facts" / "tea.md").write_text("---\ntype: fact\n---\nSam likes green tea.\n")
    git(root, "add", "mind/facts/tea.md")
    done = subprocess.run(["git", "commit", "-qm", "tea"], cwd=root, capture_output=True, text=True,
                          preexec_fn=_as_person(), env={**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr


def _made_by_cortex(root) -> dict[str, int]:
    """{path: mode} of what cortex made: its caches in the git directory, its guard lock,
    and observer/'s files git does not track (the runtime files: lock, state, buffer,
    quarantine, archive)."""
    tracked = {"observer", *git(root, "ls-files", "-z", "observer").split("\0")}  # observer/ itself: `cortex init`'s
    made = {}
    for top in (root / ".git" / "cortex", root / "observer"):
        for path in [top, *top.rglob("*")]:
            rel = path.relative_to(root).as_posix()
            if rel not in tracked and not path.is_symlink():
                made[rel] = path.stat().st_mode
    made[".git/cortex-guard.lock"] = (root / ".git" / "cortex-guard.lock").stat().st_mode
    return made


@pytest.mark.parametrize("shared", ["group", "all"])
def test_what_cortex_makes_in_a_vault_a_group_shares_the_group_can_use(tmp_path, ready_vault, shared):
    """core.sharedRepository (`git init --shared=group`): git makes what it creates in
    the repository the group's as much as the owner's; cortex made its caches
    (.git/cortex/: head.sqlite, search/, maintain/, graph.json...) and its runtime files
    (observer/cortex.lock, state.json...) under the person's umask 022, or 0o600, so a
    teammate's commit was refused by the hook ("Permission denied: .git/cortex/head.sqlite")
    and their query, run, status and maintain stopped on the same. What cortex keeps from
    others (the state, the quarantine, the observations) it still keeps from them."""
    import stat

    root = ready_vault(tmp_path / "vault")
    git(root, "init", "-q", f"--shared={shared}")
    for made_before in (root / ".git" / "cortex-guard.lock", root / ".git" / "cortex"):  # shared from the start
        subprocess.run(["rm", "-rf", str(made_before)], check=True)
    _use_the_vault_as_a_person(root)
    made = _made_by_cortex(root)
    for must in (".git/cortex/head.sqlite", ".git/cortex/search", ".git/cortex/graph.json", "observer/cortex.lock",
                 "observer/state.json", "observer/quarantine.jsonl", "observer/archive"):
        assert must in made, f"cortex made no {must}: the test shows nothing"
    assert {p: oct(m) for p, m in made.items() if m & 0o060 != 0o060} == {}, "not the group's to read and write"
    assert {p: oct(m) for p, m in made.items() if stat.S_ISDIR(m) and m & 0o2010 != 0o2010} == {}, \
        "a folder the group cannot enter, or not setgid (what is made in it would not stay the group's)"
    if shared == "all":
        assert made[".git/cortex/graph.json"] & 0o004
    for private in ("observer/state.json", "observer/quarantine.jsonl", "observer/cortex.lock"):
        assert made[private] & 0o007 == 0, f"{private} given to others: {oct(made[private])}"


def test_what_cortex_makes_in_a_vault_no_group_shares_keeps_its_modes(tmp_path, ready_vault):
    """Without core.sharedRepository nothing changes: the person's umask and cortex's
    own modes, the runtime files the owner's alone."""
    root = ready_vault(tmp_path / "vault")
    _use_the_vault_as_a_person(root)
    made = _made_by_cortex(root)
    assert {p: oct(m & 0o7777) for p, m in made.items()
            if p in (".git/cortex/head.sqlite", ".git/cortex/graph.json", "observer/state.json",
                     "observer/quarantine.jsonl", "observer/cortex.lock", ".git/cortex-guard.lock")} == {
        ".git/cortex/head.sqlite": "0o644", ".git/cortex/graph.json": "0o644", "observer/state.json": "0o600",
        "observer/quarantine.jsonl": "0o600", "observer/cortex.lock": "0o600", ".git/cortex-guard.lock": "0o600"}
    assert [p for p, m in made.items() if m & 0o020 or m & 0o2000] == []


def _python_for_another_account(uid: int, gid: int, env: dict) -> str | None:
    """An interpreter another account can run cortex with (this process's, or
    $CORTEX_SHARED_PYTHON's: a venv under /root is not theirs to read); None when none."""
    import shutil
    import sys

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    for python in (sys.executable, os.environ.get("CORTEX_SHARED_PYTHON")):
        probe = f"{python} -c 'import cortex.hooks, pygit2, yaml, whoosh, pre_commit'"  # as the test calls it
        if python and subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "sh", "-c", probe],
                                     env=env, capture_output=True, cwd="/").returncode == 0:
            return python
    return None


@contextlib.contextmanager
def _two_accounts():
    """A vault folder of two accounts of one group (setpriv, umask 022), as the owner and
    the teammate run cortex: yields (as_, cx, vault, owner, teammate); skips where it cannot."""
    import shutil
    import tempfile

    import cortex

    owner, teammate, group = 42461, 42462, 42460
    tree = os.environ.get("PYTHONPATH") or str(Path(cortex.__file__).resolve().parents[1])  # the CLI's, as `cortex()`
    place = Path(tempfile.mkdtemp(prefix="cortex-shared-"))  # pytest's own folder is root's alone
    try:
        place.chmod(0o777)
        home, vault = place / "home", place / "vault"
        home.mkdir(mode=0o777)
        home.chmod(0o777)
        vault.mkdir()
        os.chown(vault, owner, group)
        vault.chmod(0o2775)
        config = "[user]\n\tname = Someone\n\temail = someone@example.com\n[safe]\n\tdirectory = *\n[init]\n\tdefaultBranch = main\n"
        for name in ("gitconfig", ".gitconfig"):  # libgit2 reads ~/.gitconfig, git GIT_CONFIG_GLOBAL
            (home / name).write_text(config)
            (home / name).chmod(0o644)
        env = {"HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / "gitconfig"), "GIT_CONFIG_NOSYSTEM": "1",
               "PYTHONPATH": tree, "LANG": "C.UTF-8"}
        python = _python_for_another_account(teammate, group, env)
        if python is None:
            pytest.skip("needs root, setpriv and a python another account can run cortex with ($CORTEX_SHARED_PYTHON)")
        env["PATH"] = f"{Path(python).parent}:/usr/bin:/bin"

        def as_(uid: int, script: str) -> subprocess.CompletedProcess:
            return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={group}", "--clear-groups", "sh", "-c", script],
                                  cwd=vault, env={**env, "PRE_COMMIT_HOME": str(home / f"pc-{uid}")}, text=True,
                                  capture_output=True, preexec_fn=_as_person())

        cx = f"{python} -m cortex"
        done = as_(owner, f"git init -q --shared=group . && {cx} init . && {cx} write --type fact --body 'The build "
                          f"server is in Oslo.' && {cx} run && {cx} query 'build server' && {cx} maintain --force")
        assert done.returncode == 0, done.stderr
        yield as_, cx, vault, owner, teammate
    finally:
        if "as_" in locals():
            as_(owner, f"{cx} watch --stop")  # a watcher a test started, by its lock's pid
        shutil.rmtree(place, ignore_errors=True)


def test_a_teammate_commits_queries_and_runs_in_a_vault_the_owner_made_and_used():
    """Two accounts of one group, both under umask 022, in a vault made with `git init
    --shared=group`: after the owner's cortex ran, the teammate's `git commit` was refused
    by the hook ("Permission denied: .git/cortex/head.sqlite") and their query and run
    stopped on the owner's files. Needs root (setpriv) and an interpreter both can run."""
    with _two_accounts() as (as_, cx, vault, owner, teammate):
        assert (vault / ".git" / "cortex" / "head.sqlite").stat().st_uid == owner
        done = as_(teammate, "printf -- '---\\ntype: fact\\n---\\nSam likes green tea.\\n' > mind/facts/tea.md && "
                             "git add mind/facts/tea.md && git commit -qm tea")
        assert done.returncode == 0, done.stdout + done.stderr
        for args in ("query 'green tea'", "write --type fact --body 'The standup moved to 10:00.'", "run", "status",
                     "maintain --force"):
            done = as_(teammate, f"{cx} {args}")
            assert done.returncode == 0, (args, done.stderr)
        assert "standup" in as_(owner, f"{cx} query standup").stdout


def test_a_teammate_queries_while_the_owners_watcher_runs():
    """The watcher is its owner's alone (its folder 0700: its socket names the changed
    files): while the owner's ran, a teammate's query and status stopped on "Permission
    denied: .git/cortex-watch/sock"; they now go on without it, and a teammate's
    `cortex watch --background` says whose it is."""
    with _two_accounts() as (as_, cx, vault, owner, teammate):
        done = as_(owner, f"{cx} watch --background")
        assert done.returncode == 0, done.stderr
        for args in ("query 'build server'", "status", "index", "watch --status"):
            done = as_(teammate, f"{cx} {args}")
            assert done.returncode == 0, (args, done.stderr)
        assert "Oslo" in as_(teammate, f"{cx} query 'build server'").stdout
        done = as_(teammate, f"{cx} watch --background")
        assert done.returncode == 1 and "another account" in done.stderr, done.stderr
