"""`cortex watch`: cortex's freshness probe asks the watcher which files changed
instead of letting git stat every tracked note.

The contract is that the probe with the watcher says exactly what git without it says.
Every test checks that against git itself, through real file operations of the kinds
people and editors make, with the watcher killed, or paused until the kernel's queue
overflows. And the person's git never uses the watcher: before git 2.44 a commit through
pre-commit under an fsmonitor could delete their files (cortex/watcher.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cortex.layout import search_dir
from tests.conftest import VENV_BIN, cortex, git, watching

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def git_dirty(root: Path) -> set[str]:
    """What git itself calls changed (tracked: edited, deleted, staged), no watcher."""
    out = subprocess.run(["git", "--no-optional-locks", "-c", "core.quotepath=off", "status", "--porcelain=v1", "-z",
                          "-uno", "--no-renames", "--", ".", ":(exclude)observer"],
                         cwd=root, capture_output=True, check=True).stdout.decode()
    return {entry[3:] for entry in out.split("\0") if entry}


def probe_dirty(root: Path) -> set[str]:
    from cortex.search.freshness import GitProbe

    probe = GitProbe.start(root).result()
    assert probe.ok
    return probe.dirty


def agree(root: Path) -> set[str]:
    """The probe's word, asserted equal to git's own."""
    seen = probe_dirty(root)
    assert seen == git_dirty(root)
    return seen


def daemon(root: Path) -> dict:
    done = cortex("--vault", str(root), "watch", "--status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def answered_with_paths(root: Path) -> int:
    return daemon(root)["daemon"]["answered"]["paths"]


@pytest.fixture
def watched(vault):
    root = vault.root
    git(root, "add", "-A")
    git(root, "commit", "-qm", "vault", "--no-verify", check=False)
    with watching(root):
        yield root


def test_journal_answers_since_a_change_and_everything_before_what_it_keeps():
    from cortex.watcher import Journal

    journal = Journal(limit=4)
    assert journal.since(0) == []
    for name in (b"a", b"b", b"a", b"c"):
        journal.add(name)
    assert journal.since(0) == [b"b", b"a", b"c"]  # each once, in the order last changed
    assert journal.since(2) == [b"a", b"c"]
    assert journal.since(4) == []
    assert journal.since(5) is None  # a change not made yet: not a token this journal gave
    journal.add(b"d")  # over the limit: the older half dropped
    assert journal.since(1) is None and journal.since(2) == [b"a", b"c", b"d"]
    journal.everything()
    assert journal.since(5) is None and journal.since(journal.seq) == []


@pytest.mark.parametrize("seed", [7, 3, 99])
def test_the_probe_with_the_watcher_says_what_git_says_through_random_edits(watched, seed):
    root = watched
    rng = random.Random(seed)
    notes = root / "vault" / "projects"
    notes.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(40):
        path = notes / f"note-{i}.md"
        path.write_text(f"note {i}\n")
        files.append(path)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "notes", "--no-verify")
    agree(root)
    folders = [notes]
    before = answered_with_paths(root)
    for step in range(300):
        action = rng.choice(["edit", "same-size", "append", "new", "mkdir", "rename", "rename-dir", "delete",
                             "rmdir", "chmod", "touch", "stage", "commit"])
        folders = [f for f in folders if f.is_dir()]
        live = [f for f in files if f.is_file()]
        target = rng.choice(live) if live else None
        if action in ("edit", "same-size", "append", "chmod", "touch", "delete", "rename", "stage") and target is None:
            action = "new"
        if action == "edit":
            target.write_text(f"rewritten at step {step}\n")
        elif action == "same-size":  # the same length in place: only the content differs
            text = target.read_bytes()
            target.write_bytes(bytes(reversed(text[:-1])) + b"\n")
        elif action == "append":
            with open(target, "a") as fh:
                fh.write("more\n")
        elif action == "new":
            path = rng.choice(folders) / f"new-{step}.md"
            path.write_text(f"new at {step}\n")
            files.append(path)
        elif action == "mkdir":
            folder = rng.choice(folders) / f"dir-{step}" / "inner"
            folder.mkdir(parents=True)
            for k in range(3):  # written at once: before the watcher can watch the new folder
                (folder / f"f{k}.md").write_text(f"{step} {k}\n")
                files.append(folder / f"f{k}.md")
            folders.append(folder)
        elif action == "rename":
            moved = target.with_name(f"moved-{step}.md")
            target.rename(moved)
            files.append(moved)
        elif action == "rename-dir" and len(folders) > 1:
            folder = rng.choice(folders[1:])
            moved = folder.with_name(f"{folder.name}-r{step}")
            folder.rename(moved)
            files += [moved / f.name for f in files if f.parent == folder]
            folders.append(moved)
        elif action == "delete":
            target.unlink()
        elif action == "rmdir" and len(folders) > 1:
            shutil.rmtree(rng.choice(folders[1:]))
        elif action == "chmod":
            target.chmod(0o755 if not os.access(target, os.X_OK) else 0o644)
        elif action == "touch":
            os.utime(target)
        elif action == "stage":  # the index changes, the working tree does not
            git(root, "add", "--", str(target.relative_to(root)))
        elif action == "commit":
            git(root, "add", "-A")
            git(root, "commit", "-qm", f"step {step}", "--no-verify", check=False)
        if action in ("stage", "commit") and rng.random() < 0.2:
            wait_seeded(root)  # else the probes ask git the usual way until the index is quiet
        if step % 3 == 0:
            agree(root)
    agree(root)
    view = daemon(root)["daemon"]
    assert view["changes"] > 100 and view["overflows"] == 0 and not view["blind"]
    assert view["answered"]["paths"] - before > 10  # git asked the watcher, and was told what changed


def test_a_note_edited_in_place_is_found_by_the_next_query(watched):
    root = watched
    note = root / "Projects" / "Harbour" / "cranes.md"  # a person's note, as Obsidian writes it
    note.parent.mkdir(parents=True)
    note.write_text("The harbour cranes are serviced in March. #ops\n")
    git(root, "add", "-A")
    done = subprocess.run(["git", "commit", "-m", "cranes"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr  # through the real pre-commit hook
    assert cortex("--vault", str(root), "index").returncode == 0
    assert cortex("--vault", str(root), "query", "Okonkwo").returncode == 1
    wait_seeded(root)  # once the vault is quiet after the commit
    before = answered_with_paths(root)
    note.write_text("The harbour cranes are serviced by Okonkwo in May. #ops\n")  # in place: no folder moved
    found = cortex("--vault", str(root), "query", "who services the harbour cranes Okonkwo", "--json")
    assert found.returncode == 0, found.stderr
    assert "Okonkwo" in found.stdout
    assert answered_with_paths(root) > before


def test_the_persons_git_never_uses_the_watcher_and_their_work_survives_a_commit(watched):
    root = watched
    (root / "Projects").mkdir()
    for i in range(20):
        (root / "Projects" / f"{i}.md").write_text(f"Plan {i}.\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "plans", "--no-verify")
    assert cortex("--vault", str(root), "index").returncode == 0  # the probe, with the watcher
    (root / "Projects" / "3.md").write_text("Plan 3, half written")  # unstaged: pre-commit stashes it
    (root / "Projects" / "4.md").write_text("Plan 4, done.\n")
    git(root, "add", "Projects/4.md")
    done = subprocess.run(["git", "commit", "-m", "plan 4"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(root, "config", "--get", "core.fsmonitor", check=False) == ""
    assert b"FSMN" not in (root / ".git" / "index").read_bytes()  # no watcher token in the person's index
    assert all((root / "Projects" / f"{i}.md").exists() for i in range(20))
    assert (root / "Projects" / "3.md").read_text() == "Plan 3, half written"
    assert git_dirty(root) == {"Projects/3.md"} == probe_dirty(root)


def committed_note(root: Path, text: str) -> Path:
    note = root / "vault" / "plan.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "plan", "--no-verify")
    return note


def test_a_killed_watcher_leaves_the_probe_right_and_the_next_one_starts(watched):
    root = watched
    note = committed_note(root, "one\n")
    agree(root)
    pid = daemon(root)["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while daemon(root)["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (root / ".git" / "cortex-watch" / "sock").exists()  # left behind by the kill
    note.write_text("two\n")  # no watcher saw this: the hook must answer "everything"
    assert agree(root) == {"vault/plan.md"}
    done = cortex("--vault", str(root), "watch", "--background")
    assert done.returncode == 0, done.stderr
    assert daemon(root)["pid"] not in (None, pid)
    git(root, "commit", "-qam", "two", "--no-verify")
    agree(root)
    note.write_text("three, longer\n")
    assert agree(root) == {"vault/plan.md"}
    done = cortex("--vault", str(root), "watch", "--stop")
    assert done.returncode == 0 and "stopped the watcher" in done.stderr
    assert not daemon(root)["running"] and not (root / ".git" / "cortex-watch" / "sock").exists()
    note.write_text("four\n")
    assert agree(root) == {"vault/plan.md"}  # no watcher: git's own way


def test_a_paused_watcher_whose_queue_overflows_answers_everything(watched):
    root = watched
    note = committed_note(root, "before\n")
    bulk = root / "vault" / "bulk"
    bulk.mkdir()
    agree(root)  # the watcher has seen the folder, and watches it
    pid = daemon(root)["pid"]
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        for i in range(limit // 2 + 100):  # each file: create, modify, close-write
            (bulk / f"{i}.md").write_text("x\n")
        note.write_text("after, in place\n")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert agree(root) == {"vault/plan.md"}
    assert daemon(root)["daemon"]["overflows"] >= 1


def test_a_question_asked_as_the_queue_overflows_is_answered(watched):
    """The daemon makes a cookie for each question and answers once it reads the cookie's
    event; made while the kernel's queue was full (a big checkout, a sync), that event was
    dropped with the rest, and the question was never answered: git's hook and every
    query waited out their timeout, the cookie file stayed."""
    import socket

    root = watched
    bulk = root / "vault" / "bulk"
    bulk.mkdir()
    files = [bulk / "a.md", bulk / "b.md"]
    for f in files:
        f.write_text("x\n")
    agree(root)  # the watcher has seen the folder, and watches it
    state = root / ".git" / "cortex-watch"
    pid = daemon(root)["pid"]
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    asker = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    asker.settimeout(60)
    cwd = os.getcwd()
    os.chdir(state)  # a relative name: the socket's path may be longer than the limit
    try:
        asker.connect("sock")
    finally:
        os.chdir(cwd)
    with asker:
        asker.sendall(b"2 cortex:none:0")  # the question, all but its end
        daemon(root)  # answered on the daemon's loop after it read that
        os.kill(pid, signal.SIGSTOP)
        try:
            asker.sendall(b"\n")  # its end: ready before the kernel's queue
            for _ in range(limit // 2 + 100):  # two files in turn: the kernel merges no event
                for f in files:
                    os.utime(f)
        finally:
            os.kill(pid, signal.SIGCONT)
        reply = asker.recv(1 << 16)  # before the fix: no answer, the timeout
    assert reply.endswith(b"\0/\0")  # everything
    assert daemon(root)["daemon"]["overflows"] >= 1
    assert not [p.name for p in state.iterdir() if p.name.startswith("cookie-")]


def test_one_watcher_per_vault_and_a_clear_word_when_none_runs(watched):
    root = watched
    again = cortex("--vault", str(root), "watch")  # a second one, in the foreground
    assert again.returncode == 1 and "already runs" in again.stderr
    started = cortex("--vault", str(root), "watch", "--background")
    assert started.returncode == 0 and "already watching" in started.stderr
    status = json.loads(cortex("--vault", str(root), "status", "--json").stdout)
    assert status["watch"] == {"running": True, "pid": daemon(root)["pid"], "other_cortex": None}
    assert cortex("--vault", str(root), "watch", "--stop").returncode == 0
    assert json.loads(cortex("--vault", str(root), "status", "--json").stdout)["watch"]["running"] is False
    done = cortex("--vault", str(root), "watch", "--status")
    assert done.returncode == 0 and "not watching" in done.stderr
    stopped = cortex("--vault", str(root), "watch", "--stop")
    assert stopped.returncode == 0 and "no watcher was running" in stopped.stderr


def test_watchers_started_at_once_each_name_the_one_that_runs(vault):
    """A login script and a systemd unit start `cortex watch --background` at the same
    moment: one daemon takes the lock, the others end at once; each start said the pid
    of its own daemon, ended, so a `kill` of the pid it printed stopped nothing."""
    import subprocess

    from tests.conftest import VENV_BIN

    root = vault.root
    starts = [subprocess.Popen([str(VENV_BIN / "cortex"), "--vault", str(root), "watch", "--background"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    said = [start.communicate(timeout=120) for start in starts]
    try:
        running = daemon(root)["pid"]
        assert [start.returncode for start in starts] == [0] * 6, said
        assert all(f"(pid {running})" in err for _, err in said), said
    finally:
        cortex("--vault", str(root), "watch", "--stop")


def ended(pid: int, timeout: float = 10.0) -> bool:
    """Whether process ``pid`` ends within ``timeout`` seconds (a zombie not yet reaped counts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:  # ended, not yet reaped by init
                if fh.read().rpartition(")")[2].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_the_watcher_ends_when_its_vault_is_moved_away(watched, tmp_path):
    pid = daemon(watched)["pid"]
    watched.rename(tmp_path / "elsewhere")
    assert ended(pid), "the watcher still runs for a vault that is gone"


def test_the_watcher_ends_when_its_vault_is_deleted_and_leaves_the_new_clones_watcher_alone(watched, tmp_path):
    """`rm -rf vault && git clone URL vault`: the files the daemon holds open (its lock,
    its log) keep the deleted folders alive in the kernel, so no event says the working
    tree is gone; the old daemon ran on for ever, one more with each re-clone, unreachable
    (`cortex watch --status` at that path says nothing of it)."""
    from cortex.search.freshness import watched_index

    deadline = time.monotonic() + 30
    while not watched_index(watched)[2]:  # the daemon's first seed of git's index is done
        assert time.monotonic() < deadline, "the watcher never seeded its copy of git's index"
        time.sleep(0.05)
    old = daemon(watched)["pid"]
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(watched), str(origin))
    shutil.rmtree(watched)
    git(tmp_path, "clone", "-q", str(origin), str(watched))
    with watching(watched):
        new = daemon(watched)["pid"]
        assert ended(old), "the watcher of the deleted vault still runs"
        assert new != old and daemon(watched)["pid"] == new  # the new clone's watcher kept its socket
        assert cortex("--vault", str(watched), "watch", "--stop").returncode == 0
        assert ended(new)


def test_no_watcher_on_a_file_system_whose_changes_come_from_elsewhere():
    from cortex.watcher import _remote_file_system

    mounts = "\n".join([
        "27 1 253:0 / / rw,relatime - ext4 /dev/vda rw",
        "40 27 0:41 / /mnt/team rw,relatime - nfs4 server:/export/team rw,vers=4.2",
        "41 40 253:1 / /mnt/team/local rw,relatime - xfs /dev/vdb rw",
        "42 27 0:50 / /home/ada/remote\\040notes rw - fuse.sshfs ada@host:/notes rw",
        "43 27 0:51 / /media/share rw - 9p hostshare rw",
    ])
    assert _remote_file_system(Path("/home/ada/vault"), mounts) is None
    assert _remote_file_system(Path("/mnt/team/vault"), mounts) == "nfs4"
    assert _remote_file_system(Path("/mnt/team/local/vault"), mounts) is None  # the nearer mount decides
    assert _remote_file_system(Path("/mnt/teamwork/vault"), mounts) is None  # a prefix of a name is no parent
    assert _remote_file_system(Path("/home/ada/remote notes/vault"), mounts) == "fuse.sshfs"
    assert _remote_file_system(Path("/media/share"), mounts) == "9p"


def wait_seeded(root: Path) -> Path:
    """Until the watcher has seeded the probe's copy of the index there now (detached,
    once the index stops changing and no probe stats every file)."""
    from cortex.search.freshness import watched_index

    deadline = time.monotonic() + 20
    while not watched_index(root)[2] and time.monotonic() < deadline:
        time.sleep(0.02)
    copy = Path(watched_index(root)[0]["GIT_INDEX_FILE"])
    assert copy.exists() and b"FSMN" in copy.read_bytes()  # named only once seeded
    return copy


def seeded_then_asked(root: Path) -> set[str]:
    """The watcher seeds the probe's copy of the index there now (detached, once the
    index stops changing); then the next probe asks it and is told paths."""
    wait_seeded(root)
    before = daemon(root)["daemon"]["answered"]
    seen = agree(root)
    after = daemon(root)["daemon"]["answered"]
    assert after["paths"] > before["paths"] and after["everything"] == before["everything"]
    return seen


def test_a_probe_that_finds_no_copy_holds_the_seed_off_until_it_is_answered(vault):
    """A probe that finds no copy of the index's version asks git the usual way; while
    it runs (every file stat'ed), and a moment after, the watcher's seed of that copy
    waits — beside a command it slows that command — and then starts. The seed names the copy
    only once seeded, and never writes the person's index. A socket that answers
    nothing stands in for the daemon (its hook then says "everything")."""
    from cortex.search.freshness import SEED_GRACE, GitProbe, seed_probe_copy, watched_index

    root = vault.root
    git(root, "add", "-A")
    git(root, "commit", "-qm", "vault", "--no-verify", check=False)
    (root / "Tide gauge.md").write_text("The tide gauge is calibrated every April.\n")
    git(root, "add", "Tide gauge.md")
    git(root, "commit", "-qm", "gauge", "--no-verify")
    (root / ".git" / "cortex-watch").mkdir()
    (root / ".git" / "cortex-watch" / "sock").write_text("")
    (root / "Tide gauge.md").write_text("The tide gauge is calibrated by Ilse.\n")
    person_index = (root / ".git" / "index").read_bytes()
    copy = Path(watched_index(root)[0]["GIT_INDEX_FILE"])
    probe = GitProbe.start(root)
    assert seed_probe_copy(root) is False and not copy.exists()  # held off
    assert probe.result().dirty == git_dirty(root) == {"Tide gauge.md"}
    assert seed_probe_copy(root) is False  # the rest of the probe's command runs first
    time.sleep(SEED_GRACE)
    assert seed_probe_copy(root) is True  # started, detached
    deadline = time.monotonic() + 20
    while not copy.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert b"FSMN" in copy.read_bytes()  # under its name only once seeded
    assert not [p.name for p in copy.parent.iterdir() if p.name.endswith(".tmp")]
    assert (root / ".git" / "index").read_bytes() == person_index
    assert agree(root) == {"Tide gauge.md"}  # asked on the copy now


def test_after_any_commit_the_next_probe_already_asks_the_watcher(watched):
    root = watched
    agree(root)
    obs = {"timestamp": "2026-02-16T15:23:14.527Z", "bucket": "explicit", "type": "fact", "attribution": "owner",
           "body": "The harbour cranes are serviced every March.", "session_id": "cli"}
    with open(root / "observer" / "observations.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(obs) + "\n")
    done = cortex("--vault", str(root), "run")  # cortex's own commit
    assert done.returncode == 0, done.stderr
    assert seeded_then_asked(root) == set()
    (root / "Tide gauge.md").write_text("The tide gauge is calibrated every April.\n")
    git(root, "add", "Tide gauge.md")
    git(root, "commit", "-qm", "gauge")  # a person's, through the hook
    (root / "Tide gauge.md").write_text("The tide gauge is calibrated by Ilse.\n")
    assert seeded_then_asked(root) == {"Tide gauge.md"}


def test_a_clock_set_back_holds_off_no_seed_and_keeps_no_copy(watched):
    """The clock set back an hour (NTP after a VM resumed, a wrong hardware clock): the
    probes' lock file, touched by the last probe, is then dated an hour ahead, and the
    watcher took it for "a probe answered just now" for that hour: no copy of git's index
    seeded (each first query after a commit stat'ed every note), the seed retried fifty
    times a second; copies of old versions dated ahead were kept as new."""
    root = watched
    folder = wait_seeded(root).parent
    ahead = time.time() + 3600
    stale = folder / ("0" * 40)  # a copy of an index version long gone, written before the clock went back
    stale.write_bytes(b"DIRC")
    for f in (folder / ".unseeded-probes", stale):
        os.utime(f, (ahead, ahead))
    (root / "Tide gauge.md").write_text("The tide gauge is calibrated every April.\n")
    git(root, "add", "Tide gauge.md")
    git(root, "commit", "-qm", "gauge", "--no-verify")  # a new version of git's index to seed
    (root / "Tide gauge.md").write_text("The tide gauge is calibrated by Ilse.\n")
    assert seeded_then_asked(root) == {"Tide gauge.md"}
    assert not stale.exists()


def test_a_seeds_temporary_copy_is_removed_only_once_its_seed_is_gone(tmp_path):
    """A temporary copy keeps the index's mtime (`cp -p`), which says nothing of the
    seed's age: it goes when the process named in it is gone, never while it runs (a
    seed whose copy vanished under it would name an empty index as seeded)."""
    from cortex.search.freshness import _forget_old_copies

    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid is free now
    running = tmp_path / f"aaaa.{os.getpid()}.tmp"
    dead = tmp_path / f"bbbb.{gone.pid}.tmp"
    old_copy, kept = tmp_path / "cccc", tmp_path / "dddd"
    for path in (running, dead, old_copy, kept):
        path.write_bytes(b"index")
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    _forget_old_copies(tmp_path, "dddd")
    assert running.exists() and kept.exists() and not dead.exists() and not old_copy.exists()


# --- the search index asks the watcher itself -------------------------------------------


def indexed(root: Path) -> dict[str, str]:
    """Each indexed note's content hash."""
    from cortex.search.index import SearchIndex

    index = SearchIndex(root)
    index.load(vectors=False)
    try:
        return {f["path"]: f["hash"] for f in index.lexical.searcher.all_stored_fields()}
    finally:
        index.close()


def on_disk(root: Path) -> dict[str, str]:
    """Each note's content hash, as a rebuild would index it. (Not its mtime: git, when no
    watcher runs, says nothing of a file touched with its content unchanged.)"""
    from cortex.search.index import walk_notes
    from cortex.search.records import content_hash

    return {path: content_hash((root / path).read_bytes()) for path in walk_notes(root)}


def differing_from_head(root: Path) -> list[str]:
    """The notes git itself finds different from HEAD: changed, staged, deleted, untracked."""
    from cortex.layout import is_note_path

    tracked = git(root, "-c", "core.quotepath=off", "diff", "--name-only", "-z", "--no-renames", "HEAD", "--",
                  ".", ":(exclude)observer").split("\0")
    untracked = git(root, "-c", "core.quotepath=off", "ls-files", "--others", "--exclude-standard", "-z", "--",
                    ".", ":(exclude)observer").split("\0")
    return sorted(p for p in tracked + untracked if p and is_note_path(p))


def counted(root: Path) -> tuple[bool, list]:
    """`cortex status`'s note counts, and whether the watcher's word gave them (no git)."""
    from cortex.status import _index_state, _note_counts, _watched_changes
    from cortex.vault import Vault

    state = _index_state(root)
    return _watched_changes(root, state) is not None, _note_counts(Vault(root), state)


def counted_on_disk(root: Path) -> list:
    """The same counts, from every note file there is."""
    from collections import Counter

    from cortex.headcache import fields, folder_of
    from cortex.layout import PARTITIONS
    from cortex.search.index import walk_notes

    counts = Counter((folder_of(p), fields((root / p).read_bytes()[:4096])[1] or "")
                     for p in walk_notes(root) if p.partition("/")[0] in PARTITIONS)
    return sorted((f, t, n) for (f, t), n in counts.items())


def update(root: Path) -> bool:
    """One incremental update as `cortex index` makes it; whether the watcher answered
    (no git status ran)."""
    from cortex.search.freshness import GitProbe, search_token
    from cortex.search.index import SearchIndex

    probe = GitProbe.start(root, since=search_token(root))
    index = SearchIndex(root)
    index.load(vectors=False)
    try:
        index.refresh(probe)
    finally:
        index.close()
    return probe.changes is not None and probe.proc is None


@pytest.mark.parametrize("seed", [5, 41])
def test_the_search_index_asks_the_watcher_and_follows_every_change_even_right_after_commits(watched, seed):
    """With the watcher's token recorded, an update asks the watcher what changed and runs
    no git status, so a commit's new index costs nothing; through random edits, commits,
    resets, a stop and a restart of the watcher, the index always holds exactly the notes
    on disk, each at its size and mtime."""
    root = watched
    rng = random.Random(seed)
    notes = root / "vault" / "projects"
    notes.mkdir(parents=True, exist_ok=True)
    for i in range(30):
        (notes / f"note-{i}.md").write_text(f"note {i}\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "notes", "--no-verify")
    assert cortex("--vault", str(root), "index").returncode == 0  # built: no token yet
    assert not update(root)  # the first update takes a token, with git's word
    assert indexed(root) == on_disk(root)
    asked, watched_counts, stopped_at = 0, 0, rng.randrange(60, 90)
    for step in range(150):
        files = [p for p in root.rglob("*.md") if ".git" not in p.parts and "observer" not in p.parts]
        folders = sorted({p.parent for p in files if p.parent != root} | {notes})
        action = rng.choice(["edit", "same-size", "new", "new", "mkdir", "rename", "rename-dir", "delete", "rmdir",
                             "touch", "commit", "commit", "revert", "reset"])
        target = rng.choice(files) if files else None
        if target is None or action == "new":
            (rng.choice(folders) / f"new-{step}.md").write_text(f"new at {step}\n")
        elif action == "edit":
            target.write_text(f"rewritten at step {step}\n")
        elif action == "same-size":  # the same length in place: only the content and mtime move
            text = target.read_bytes()
            target.write_bytes(bytes(reversed(text[:-1])) + b"\n")
        elif action == "mkdir":
            folder = rng.choice(folders) / f"dir-{step}" / "inner"
            folder.mkdir(parents=True)
            for k in range(3):  # written at once, before the watcher can watch the new folder
                (folder / f"f{k}.md").write_text(f"{step} {k}\n")
        elif action == "rename":
            target.rename(target.with_name(f"moved-{step}.md"))
        elif action == "rename-dir" and len(folders) > 1:
            folder = rng.choice(folders[1:])
            folder.rename(folder.with_name(f"{folder.name}-r{step}"))
        elif action == "delete":
            target.unlink()
        elif action == "rmdir" and len(folders) > 1:
            shutil.rmtree(rng.choice(folders[1:]))
        elif action == "touch":
            os.utime(target)
        elif action == "commit":
            git(root, "add", "-A")
            git(root, "commit", "-qm", f"step {step}", "--no-verify", check=False)
        elif action == "revert":  # git rewrites files to what the index holds
            git(root, "checkout", "--", ".", check=False)
        elif action == "reset":
            git(root, "reset", "-q", "--hard", "HEAD", check=False)
        if step == stopped_at:
            assert cortex("--vault", str(root), "watch", "--stop").returncode == 0
        if step == stopped_at + 25:
            assert cortex("--vault", str(root), "watch", "--background").returncode == 0
        if rng.random() < 0.4:
            by_watcher, counts = counted(root)  # before the update: the watcher's word since the last one
            watched_counts += by_watcher
            assert counts == counted_on_disk(root), f"step {step} ({action}): status"
            if update(root):
                asked += 1
                dirty = json.loads((search_dir(root) / "state.json").read_text())["dirty"]
                assert dirty == differing_from_head(root), f"step {step} ({action}): dirty"
            assert indexed(root) == on_disk(root), f"step {step} ({action})"
    update(root)
    assert indexed(root) == on_disk(root)
    assert asked >= 20  # most updates while the watcher ran asked it alone
    assert watched_counts >= 10  # and so did `cortex status`


def test_what_the_watcher_names_that_git_would_not_list_stays_out_of_the_index(watched):
    root = watched
    (root / ".gitignore").write_text("drafts/\n*.private.md\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "ignore", "--no-verify")
    assert cortex("--vault", str(root), "index").returncode == 0
    update(root)
    assert update(root)  # the watcher answers from here on
    (root / "drafts").mkdir()
    (root / "drafts" / "idea.md").write_text("An idea.\n")
    (root / "diary.private.md").write_text("Private.\n")
    nested = root / "Projects" / "tool"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "README.md").write_text("Another repository's readme.\n")
    (root / "Projects" / "kiosk.md").write_text("The kiosk runs Debian.\n")
    (root / "team.private.md").write_text("Shared on purpose.\n")  # matches a pattern, but git tracks it:
    git(root, "add", "-f", "team.private.md")
    git(root, "commit", "-qm", "forced", "--no-verify")
    assert update(root)
    paths = set(indexed(root))
    assert {"Projects/kiosk.md", "team.private.md"} <= paths
    assert not {"drafts/idea.md", "diary.private.md", "Projects/tool/README.md"} & paths


def test_a_pull_from_another_machine_reaches_the_index_through_the_watcher(watched, tmp_path):
    root = watched
    remote, other = tmp_path / "remote.git", tmp_path / "other"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(root, "remote", "add", "origin", str(remote))
    git(root, "push", "-q", "origin", "HEAD:refs/heads/main")
    git(root, "branch", "-q", "--set-upstream-to", "origin/main")
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(other))
    assert cortex("--vault", str(root), "index").returncode == 0
    update(root)
    assert update(root)
    (other / "vault" / "kiosk.md").write_text("The lobby kiosk runs Debian 12.\n")
    git(other, "add", "-A")
    git(other, "-c", "user.name=B", "-c", "user.email=b@example.org", "commit", "-qm", "kiosk", "--no-verify")
    git(other, "push", "-q", "origin", "HEAD:main")
    git(root, "pull", "-q", "--no-rebase", "--no-edit")
    assert (root / "vault" / "kiosk.md").exists()
    assert update(root)  # the watcher's word alone
    assert indexed(root) == on_disk(root) and "vault/kiosk.md" in indexed(root)


def test_cortex_own_commits_and_a_deleted_index_are_followed_through_the_watcher(watched):
    """`cortex run` and `cortex forget` write and move notes and commit them with pygit2;
    maintenance moves them to the archive; the index, asked through the watcher alone,
    follows each, and is rebuilt when deleted."""
    root = watched
    assert cortex("--vault", str(root), "index").returncode == 0
    update(root)
    observations = [{"timestamp": "2026-02-16T15:23:14.527Z", "bucket": "explicit", "type": "fact",
                     "attribution": "owner", "session_id": "cli", "body": body}
                    for body in ("The harbour cranes are serviced every March.",
                                 "The tide gauge is calibrated by Ilse every April.",
                                 "The ferry timetable changes on the first of May.")]
    with open(root / "observer" / "observations.jsonl", "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(obs) + "\n" for obs in observations)
    assert cortex("--vault", str(root), "run").returncode == 0
    assert update(root)
    assert indexed(root) == on_disk(root) and len(on_disk(root)) >= 3
    cranes = next(p for p in on_disk(root) if "cranes" in (root / p).read_text())
    done = cortex("--vault", str(root), "forget", cranes, "--reason", "the cranes were sold")
    assert done.returncode == 0, done.stderr
    assert cortex("--vault", str(root), "maintain", "--force").returncode == 0
    assert update(root)
    state = json.loads((search_dir(root) / "state.json").read_text())
    assert indexed(root) == on_disk(root) and cranes not in indexed(root)
    assert state["dirty"] == differing_from_head(root) == []
    shutil.rmtree(search_dir(root))
    assert cortex("--vault", str(root), "index").returncode == 0  # rebuilt: no token yet
    assert not update(root)  # the first update takes one, with git's word
    (root / "vault" / "kiosk.md").write_text("The lobby kiosk runs Debian 12.\n")
    assert update(root)
    assert indexed(root) == on_disk(root)


# -- started by itself (`watch: auto`) ------------------------------------------------------

def auto_daemons(root: Path) -> list[int]:
    """The live `cortex watch --auto` processes of ``root`` (a zombie not yet reaped is not one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if b"--auto" in argv and os.fsencode(str(root)) in argv and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture
def large(vault):
    """A vault that counts as large: `watch.notes` set below its few files (a test vault
    need not hold 20,000 notes), committed; every watcher started in it killed at the end."""
    root = vault.root

    def configure(setting: str) -> Path:
        (root / "observer" / "config.yml").write_text(
            (root / "observer" / "config.yml").read_text(encoding="utf-8") + f"\nwatch: {setting}\n", encoding="utf-8")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "watch setting", "--no-verify")
        return root

    try:
        yield configure
    finally:
        for pid in auto_daemons(root):
            os.kill(pid, signal.SIGKILL)
        pid_file = root / ".git" / "cortex-watch" / "pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def auto_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CORTEX_WATCH"}
    return {**env, **extra}


def until(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_query_in_a_large_vault_starts_a_watcher_that_answers_the_next_one(large):
    """As git's fsmonitor daemon on `core.fsmonitor=true`: in a large vault the first query
    answers as ever and leaves a watcher running, which answers the next ones; it says it
    was started automatically and when it ends."""
    root = large("{notes: 5}")
    first = cortex("--vault", str(root), "query", "staging database", "--json", env=auto_env())
    assert first.returncode in (0, 1), first.stderr
    assert json.loads(first.stdout)["mode"] == "hybrid"
    assert until(lambda: daemon(root)["running"]), (root / ".git" / "cortex-watch" / "log").read_text()
    assert until(lambda: (daemon(root)["daemon"] or {}).get("queries", {}).get("state") == "ready")
    view = daemon(root)
    assert view["daemon"]["auto"]["idle"] == 3600 and view["daemon"]["auto"]["ends_at"] > time.time()
    served = view["daemon"]["queries"]["served"]
    second = cortex("--vault", str(root), "query", "staging database", "--json", env=auto_env())
    assert second.returncode in (0, 1), second.stderr
    assert daemon(root)["daemon"]["queries"]["served"] == served + 1  # answered by the watcher
    said = cortex("--vault", str(root), "watch", "--status").stderr
    assert "started automatically: ends by itself at" in said, said
    assert len(auto_daemons(root)) == 1


@pytest.mark.parametrize("how", ["small", "off", "env"])
def test_no_watcher_starts_below_its_size_or_when_set_off(large, how):
    setting = {"small": "{notes: 100000}", "off": "off", "env": "{notes: 5}"}[how]
    root = large(setting)
    env = auto_env(CORTEX_WATCH="off") if how == "env" else auto_env()
    for argv in (("query", "staging database"), ("index",), ("status",)):
        done = cortex("--vault", str(root), *argv, env=env)
        assert done.returncode in (0, 1), done.stderr
    # the start is made before the command exits: no log, no daemon, nothing started
    assert not (root / ".git" / "cortex-watch" / "log").exists()
    assert auto_daemons(root) == [] and not daemon(root)["running"]


def test_git_hooks_cortex_run_and_maintain_never_start_one(large):
    """A person's post-commit hook running `cortex index` and `cortex status`, the vault's
    own pre-commit hooks, `cortex run` and `cortex maintain`: none starts a watcher."""
    root = large("{notes: 5}")
    hook = root / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\n{VENV_BIN / 'cortex'} --vault '{root}' index\n"
                    f"{VENV_BIN / 'cortex'} --vault '{root}' status >/dev/null\n", encoding="utf-8")
    hook.chmod(0o755)
    note = root / "vault" / "notes" / "by-hand.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("# By hand\n\nWritten in Obsidian.\n", encoding="utf-8")
    git(root, "add", "-A")
    committed = subprocess.run(["git", "commit", "-qm", "a note by hand"], cwd=root, capture_output=True, text=True,
                               env=auto_env())
    assert committed.returncode == 0, committed.stderr
    assert "search index" in committed.stderr  # the post-commit hook's `cortex index` ran
    for argv in (("run",), ("maintain", "--force")):
        done = cortex("--vault", str(root), *argv, env=auto_env())
        assert done.returncode == 0, done.stderr
    assert not (root / ".git" / "cortex-watch" / "log").exists()
    assert auto_daemons(root) == [] and not daemon(root)["running"]


def test_an_automatically_started_watcher_ends_when_idle_and_a_person_started_one_does_not(large):
    root = large("{notes: 5, idle: 1}")
    cortex("--vault", str(root), "status", env=auto_env())
    assert until(lambda: daemon(root)["running"])
    pid = daemon(root)["pid"]
    assert ended(pid, timeout=60), "the watcher started automatically ran on with no question"
    log = (root / ".git" / "cortex-watch" / "log").read_text()
    assert "ended: no question for 1s (started automatically)" in log
    with watching(root):  # `cortex watch --background`: the person's, never ends by itself
        pid = daemon(root)["pid"]
        assert daemon(root)["daemon"]["auto"] is None
        assert not ended(pid, timeout=3)
        assert daemon(root)["running"]


def test_a_watcher_a_person_starts_takes_the_place_of_one_started_automatically(large):
    """A systemd unit's `cortex watch` (in the foreground) while a watcher a query started
    runs: it failed with "a watcher already runs" until that one ended by itself (an hour
    without a question). The automatic one ends now and the person's watches, answers and stays;
    a second person's start still meets the first's "already runs"."""
    root = large("{notes: 5}")
    cortex("--vault", str(root), "status", env=auto_env())
    assert until(lambda: (daemon(root)["daemon"] or {}).get("auto")), (root / ".git" / "cortex-watch" / "log").read_text()
    automatic = daemon(root)["pid"]
    unit = subprocess.Popen([str(VENV_BIN / "cortex"), "--vault", str(root), "watch"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=auto_env())
    try:
        assert until(lambda: unit.poll() is not None or (daemon(root)["pid"] == unit.pid and daemon(root)["daemon"]))
        assert unit.poll() is None, unit.communicate()
        assert ended(automatic) and daemon(root)["daemon"]["auto"] is None
        again = cortex("--vault", str(root), "watch", env=auto_env())
        assert again.returncode == 1 and f"a watcher already runs for {root} (pid {unit.pid})" in again.stderr
        assert unit.poll() is None and daemon(root)["pid"] == unit.pid
    finally:
        unit.terminate()
        _, err = unit.communicate(timeout=60)
    assert f"the watcher started automatically (pid {automatic}) ended: this one takes its place" in err
    assert unit.returncode == 0, err


def test_two_queries_at_once_start_one_watcher(large):
    root = large("{notes: 5}")
    queries = [subprocess.Popen([str(VENV_BIN / "cortex"), "--vault", str(root), "query", "staging"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=auto_env())
               for _ in range(4)]
    said = [query.communicate(timeout=120) for query in queries]
    assert [query.returncode for query in queries] in ([1] * 4, [0] * 4), said
    assert until(lambda: daemon(root)["running"])
    assert until(lambda: len(auto_daemons(root)) == 1), auto_daemons(root)  # the others ended on the lock
    assert not any("watcher" in err for _, err in said), said  # nothing said: no start failed
    assert not (root / ".git" / "cortex-watch" / "auto-failed").exists()


def test_a_start_that_fails_is_said_once_and_is_never_an_error(large):
    root = large("{notes: 5}")
    (root / ".git" / "cortex-watch" / "sock" / "in-the-way").mkdir(parents=True)  # the daemon cannot bind its socket
    first = cortex("--vault", str(root), "status", env=auto_env())
    assert first.returncode == 0 and "watcher" not in first.stderr, first.stderr  # not waited for
    assert until(lambda: (root / ".git" / "cortex-watch" / "auto-failed").exists())
    said = [cortex("--vault", str(root), "status", env=auto_env()) for _ in range(3)]
    assert [done.returncode for done in said] == [0, 0, 0]
    lines = [line for done in said for line in done.stderr.splitlines() if "watcher" in line]
    assert len(lines) == 1 and lines[0].startswith("cortex: the watcher did not start by itself ("), lines
    assert "the last automatic start failed" in cortex("--vault", str(root), "watch", "--status").stderr


@pytest.mark.parametrize(("text", "expected"), [
    ("", ("auto", 20_000, 3600.0)),
    ("watch: off\n", ("off", 20_000, 3600.0)),  # YAML reads a bare off as false
    ("watch: auto\n", ("auto", 20_000, 3600.0)),
    ("watch: {start: off, notes: 5, idle: 2.5}\n", ("off", 5, 2.5)),
])
def test_the_watch_setting_reads_as_written(tmp_path, text, expected):
    from cortex.config import load_settings

    path = tmp_path / "config.yml"
    path.write_text(text, encoding="utf-8")
    settings = load_settings(path)
    assert (settings.watch, settings.watch_notes, settings.watch_idle) == expected


@pytest.mark.parametrize("text", ["watch: sometimes\n", "watch: {notes: -1}\n", "watch: {idle: 0}\n",
                                  "watch: {every: 1}\n", "watch: [auto]\n"])
def test_a_wrong_watch_setting_is_a_clear_error(tmp_path, text):
    from cortex.config import load_settings
    from cortex.errors import ConfigError

    path = tmp_path / "config.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="watch"):
        load_settings(path)


def test_queries_keep_a_started_watcher_and_a_crons_maintain_does_not(large):
    """The idle clock counts `cortex query` and `cortex index`; git's questions, which a
    cron's hourly `cortex maintain` index job brings, would keep it running for ever."""
    root = large("{notes: 5, idle: 10}")
    cortex("--vault", str(root), "index", env=auto_env())
    assert until(lambda: daemon(root)["running"])
    pid = daemon(root)["pid"]
    asked_until = time.monotonic() + 15  # queries more often than the idle time, for longer
    while time.monotonic() < asked_until:
        cortex("--vault", str(root), "query", "staging", env=auto_env())
        time.sleep(0.5)
    assert daemon(root)["pid"] == pid  # still the same watcher
    (root / "vault" / "notes").mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 60
    n = 0
    while not ended(pid, timeout=0.1) and time.monotonic() < deadline:
        n += 1
        (root / "vault" / "notes" / f"n{n}.md").write_text(f"# Note {n}\n\nWritten by hand.\n", encoding="utf-8")
        done = cortex("--vault", str(root), "maintain", "--force", "--only", "index", env=auto_env())
        assert done.returncode == 0, done.stderr
    assert ended(pid, timeout=0.1), "the hourly index job kept the started watcher running"
    assert n >= 2  # it was asked meanwhile
