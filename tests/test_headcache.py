"""The HEAD-following caches: brought up to date by diffing HEADs after commits by people,
by `cortex run`, by maintenance and by a pull from another machine; rebuilt from git when
deleted or damaged; and git asked to pack when cortex leaves too many loose objects."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import cortex, git, observation
from cortex.headcache import HeadCache, fields
from cortex.layout import is_note_path
from cortex.maintenance.due import run_job
from cortex.packing import loose_sample, pack_if_due, too_many_loose
from maint_helpers import MONTH, T0, make_note

EMAIL = ("-c", "user.name=Test Person", "-c", "user.email=person@example.com")


def from_git(root) -> dict[str, tuple]:
    """path → (blob, id, type, hash, declared) of every note at HEAD, read from git alone
    (declared: the note carries its source hash, as cortex writes it)."""
    listing = git(root, "ls-tree", "-r", "HEAD")
    out = {}
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        blob = meta.split()[2]
        if is_note_path(path):
            data = subprocess.run(["git", "cat-file", "blob", blob], cwd=root, capture_output=True, check=True).stdout
            out[path] = (blob, *fields(data), int(b"\nsource_hash: " in data.split(b"\n---", 1)[0]))
    return out


def cached(root) -> tuple[HeadCache, dict[str, tuple]]:
    cache = HeadCache(root).sync()
    rows = cache._connect().execute("SELECT path, blob, id, type, hash, declared FROM notes").fetchall()
    return cache, {r[0]: tuple(r[1:]) for r in rows}


def assert_follows(root, *, rebuilt: bool = False) -> HeadCache:
    cache, rows = cached(root)
    assert cache.rebuilt is rebuilt
    assert rows == from_git(root)
    assert cache.head == git(root, "rev-parse", "HEAD").strip()
    counts = {}
    for path, (_, _, type_, _, _) in rows.items():
        parts = path.split("/")  # counted by their first two folders; a top-level note under ""
        key = ("/".join(parts[:2]) if len(parts) > 2 else parts[0] if len(parts) == 2 else "", type_ or "")
        counts[key] = counts.get(key, 0) + 1
    assert {(f, t): n for f, t, n in cache.counts()} == counts and cache.notes() == len(rows)
    cache.close()
    return cache


def test_follows_people_cortex_run_and_maintenance(vault):
    make_note(vault, "lesson", "Small pull requests get reviewed faster.")
    assert_follows(vault.root, rebuilt=True)  # the first use builds it
    # a person's commit, through the real pre-commit hook
    (vault.root / "daily.md").write_text("# Monday\n\nStand-up moved to ten.\n", encoding="utf-8")
    git(vault.root, "add", "daily.md")
    git(vault.root, *EMAIL, "commit", "-q", "-m", "person: a daily note")
    assert_follows(vault.root)
    # cortex run
    vault.write(observation(body="The ledger runs on Postgres 16.", type="fact"))
    vault.write(observation(body="Prefers squash merges for feature branches.", type="preference"))
    assert vault.run(now=T0).memorized == 2
    assert_follows(vault.root)
    # maintenance: dedup moves a note into the archive
    make_note(vault, "lesson", "Pull requests that are small get reviewed more quickly.", created=T0 + MONTH)
    assert run_job(vault, "dedup", now=T0 + 2 * MONTH).commit
    assert_follows(vault.root)
    assert any(folder == "mind/archive" for folder, _, _ in HeadCache(vault.root).sync().counts())
    # a person deletes a note
    git(vault.root, "rm", "-q", "daily.md")
    git(vault.root, *EMAIL, "commit", "-q", "-m", "person: drop it")
    assert_follows(vault.root)
    assert "daily.md" not in cached(vault.root)[1]


def test_follows_a_pull_from_another_machine(vault, tmp_path):
    make_note(vault, "fact", "The ledger runs on Postgres 16.")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(vault.root, "remote", "add", "origin", str(remote))
    git(vault.root, "push", "-q", "origin", "HEAD:main")
    git(vault.root, "branch", "-q", "--set-upstream-to=origin/main")
    assert_follows(vault.root, rebuilt=True)
    other = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(other))
    note = other / "vault" / "decisions" / "ledger.md"  # written on the laptop, committed there
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("---\nid: 0190c7a2-1111-7000-8000-000000000001\ntype: decision\n---\n\nUse Postgres.\n")
    git(other, "add", "-A")
    git(other, *EMAIL, "commit", "-q", "--no-verify", "-m", "laptop: a decision")
    git(other, "push", "-q", "origin", "HEAD:main")
    git(vault.root, *EMAIL, "pull", "-q", "--ff-only")
    assert_follows(vault.root)
    assert cached(vault.root)[1]["vault/decisions/ledger.md"][1:3] == ("0190c7a2-1111-7000-8000-000000000001", "decision")


def test_rebuilt_when_deleted_or_damaged(vault):
    make_note(vault, "fact", "The ledger runs on Postgres 16.")
    assert_follows(vault.root, rebuilt=True)
    path = HeadCache(vault.root).path
    path.unlink()
    assert_follows(vault.root, rebuilt=True)
    for suffix in ("-wal", "-shm"):
        path.with_name(f"head.sqlite{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"not a database at all" * 100)
    assert_follows(vault.root, rebuilt=True)
    # the HEAD it remembers no longer exists (a history rewritten and pruned): rebuilt too
    cache = HeadCache(vault.root).sync()
    cache._connect().execute("UPDATE meta SET value = ? WHERE key = 'head'", ("0" * 40,))
    cache.close()
    make_note(vault, "fact", "The ledger's backups run nightly.", created=T0 + MONTH)
    assert_follows(vault.root, rebuilt=True)
    # one an older cortex wrote, of another format
    cache = HeadCache(vault.root).sync()
    cache._connect().execute("UPDATE meta SET value = '3' WHERE key = 'format'")
    cache.close()
    assert_follows(vault.root, rebuilt=True)


def test_hook_finds_a_copied_id_through_the_cache(vault):
    path = make_note(vault, "fact", "The ledger runs on Postgres 16.")
    assert_follows(vault.root, rebuilt=True)
    copy = (vault.root / path).with_name("copy.md")
    copy.write_text((vault.root / path).read_text(encoding="utf-8"), encoding="utf-8")
    git(vault.root, "add", str(copy))
    # the validator alone (the fixer would give the copy an id of its own: test_hooks.py)
    done = subprocess.run(["git", *EMAIL, "commit", "-q", "-m", "copy"], cwd=vault.root, capture_output=True, text=True,
                          env={**os.environ, "SKIP": "cortex-fix"})
    assert done.returncode != 0 and "is also the id of" in done.stdout + done.stderr
    # a rename staged whole (old path removed) is no copy
    git(vault.root, "rm", "-q", "--cached", path)
    (vault.root / path).unlink()
    done = subprocess.run(["git", *EMAIL, "commit", "-q", "-m", "rename"], cwd=vault.root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_follows(vault.root)


def test_a_memory_a_person_moved_out_of_mind_is_found_by_its_source_hash(vault):
    """A note elsewhere counts as its observation's note when it carries cortex's
    ``source_hash``, followed commit by commit; a person's note that only says the same
    words does not, and a memory in mind/ wins over a copy a person keeps elsewhere."""
    from cortex.layout import PARTITIONS
    from cortex.notes import source_hash

    body = "Deploys are frozen on Fridays after noon."
    path = make_note(vault, "fact", body)
    cache = assert_follows(vault.root, rebuilt=True)
    ident, hash_hex = cache.sync().by_hash(source_hash(body), PARTITIONS)[0], source_hash(body)
    cache.close()
    (vault.root / "projects").mkdir()
    git(vault.root, "mv", path, "projects/deploy-freeze.md")
    git(vault.root, *EMAIL, "commit", "-q", "-m", "person: into my projects folder")
    cache = assert_follows(vault.root)  # followed, not rebuilt
    assert cache.sync().by_hash(hash_hex, PARTITIONS) == (ident, "projects/deploy-freeze.md")
    assert cache.deleted([hash_hex]) == {}  # moved, not deleted
    cache.close()
    # a copy back in mind/ is the note a repeat reinforces
    (vault.root / path).write_text((vault.root / "projects/deploy-freeze.md").read_text(), encoding="utf-8")
    git(vault.root, "add", path)
    git(vault.root, *EMAIL, "commit", "-q", "--no-verify", "-m", "person: a copy")
    assert HeadCache(vault.root).sync().by_hash(hash_hex, PARTITIONS) == (ident, path)
    # the same words without cortex's fields are a person's own note
    git(vault.root, "rm", "-q", path, "projects/deploy-freeze.md")
    (vault.root / "daily.md").write_text(body + "\n", encoding="utf-8")
    git(vault.root, "add", "daily.md")
    git(vault.root, *EMAIL, "commit", "-q", "-m", "person: only my own words")
    cache = assert_follows(vault.root)
    assert cached(vault.root)[1]["daily.md"][3:] == (hash_hex, 0)
    assert cache.sync().by_hash(hash_hex, PARTITIONS) is None
    cache.close()


def test_git_is_asked_to_pack_when_loose_objects_pile_up(vault):
    git(vault.root, "config", "gc.autoDetach", "false")
    objects = vault.root / ".git" / "objects"
    assert not pack_if_due(vault.root)  # a new vault: nothing to pack
    import hashlib

    from cortex.gitrepo import GitRepo

    repo = GitRepo(vault.root)
    changes, n = {}, 0
    while len(changes) <= 27:  # git's default gc.auto 6,700 / 256, in git's sample folder objects/17
        data = f"attachment {n}\n".encode()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest().startswith("17"):
            changes[f"files/{n}.txt"] = repo.write_blob(data)
        n += 1
    repo.commit(changes, "person: attachments\n", ("Test Person", "person@example.com"))  # reachable
    assert too_many_loose(objects)
    git(vault.root, "config", "gc.auto", "20")  # git's own test must agree with cortex's
    assert pack_if_due(vault.root, 20)
    assert loose_sample(objects) == 0 and list((objects / "pack").glob("*.pack"))
    git(vault.root, "config", "gc.auto", "0")  # turned off: never asked
    assert not pack_if_due(vault.root, 0)


def test_a_forked_child_reads_through_its_own_connection(vault):
    """`cortex run` assesses lines in forked children that look hashes up in the cache: a
    SQLite connection must not cross fork(), so a child opens its own (same answers) and
    the parent's stays open and usable."""
    import os

    from conftest import append_lines

    append_lines(vault, observation(body="The export job compresses monthly exports."))
    vault.run()
    cache, rows = cached(vault.root)
    path, (_, _, _, hash_hex, _) = next(iter(rows.items()))
    parent = cache._connect()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            child = cache._connect()
            found = cache.by_hash(hash_hex, ("mind", "vault"))
            os.write(write, b"own" if child is not parent and found and found[1] == path else b"shared")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 16)
    os.waitpid(pid, 0)
    assert answer == b"own"
    assert cache._connect() is parent and cache.by_hash(hash_hex, ("mind", "vault"))[1] == path
    cache.close()


def test_many_lookups_at_once_answer_as_one_at_a_time(vault):
    """`by_hashes` and `present` (a run asks a chunk's hashes and names at once) answer
    as git does, and as `by_hash` and `has_path` one by one, a note in both partitions
    included."""
    from conftest import append_lines

    body = "The release script tags every build."
    append_lines(vault, *(observation(body=f"Item {k}: the export job batches {k} files.") for k in range(30)),
                 observation(body=body))
    vault.run()
    fact = next(p for p in git(vault.root, "ls-files", "mind").split() if p.endswith(".md"))
    twin = vault.root / "vault" / "projects" / "twin.md"  # the same source hash under vault/: mind/ wins
    twin.parent.mkdir(parents=True, exist_ok=True)
    twin.write_text((vault.root / fact).read_text())
    git(vault.root, *EMAIL, "add", str(twin))
    git(vault.root, *EMAIL, "commit", "-q", "--no-verify", "-m", "a copy")
    cache, rows = cached(vault.root)
    hashes = [h for _, _, _, h, _ in rows.values()] + ["0" * 64]
    assert twin.relative_to(vault.root).as_posix() in rows and rows[fact][3] == rows["vault/projects/twin.md"][3]
    for partitions in (("mind", "vault"), ("vault", "mind"), ("vault",)):
        expected = {}  # read from git alone: the first partition's first path, else the first note declaring it
        for path in sorted(rows, key=lambda p: (partitions.index(p.split("/")[0]) if p.split("/")[0] in partitions
                                                 else len(partitions), p)):
            blob, ident, _, hash_hex, declared = rows[path]
            if path.split("/")[0] in partitions or declared:
                expected.setdefault(hash_hex, (ident, path))
        assert cache.by_hashes(hashes, partitions) == expected
        assert {h: cache.by_hash(h, partitions) for h in hashes} == {h: expected.get(h) for h in hashes}
    paths = list(rows) + ["mind/facts/none.md"]
    assert cache.present(paths) == {p for p in paths if cache.has_path(p)} == set(rows)
    cache.close()


def test_a_partial_clone_away_from_its_remote_still_works_without_knowing_old_deletions(vault, tmp_path):
    """A clone made with --filter=blob:none has not fetched the notes its history deleted;
    with the remote out of reach, the rebuilt cache goes without them instead of failing
    every command."""
    make_note(vault, "fact", "The ledger runs on Postgres 16.")
    gone = make_note(vault, "fact", "The ledger runs on MySQL.", created=T0 + MONTH)
    git(vault.root, "rm", "-q", gone)
    git(vault.root, *EMAIL, "commit", "-q", "--no-verify", "-m", "wrong")
    assert HeadCache(vault.root).sync()._connect().execute("SELECT path FROM deleted").fetchall() == [(gone,)]
    served = tmp_path / "served.git"
    git(tmp_path, "clone", "-q", "--bare", str(vault.root), str(served))
    git(served, "config", "uploadpack.allowFilter", "true")
    laptop = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", "--filter=blob:none", f"file://{served}", str(laptop))
    served.rename(tmp_path / "away.git")  # out of reach
    cache = HeadCache(laptop).sync()
    assert cache.rebuilt and cache.notes() == 1
    assert cache._connect().execute("SELECT count(*) FROM deleted").fetchone()[0] == 0
    done = subprocess.run(["cortex", "--vault", str(laptop), "status", "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # with the remote back, a rebuild reads them (git fetches the blobs it lacks)
    (tmp_path / "away.git").rename(served)
    HeadCache(laptop).path.unlink()
    assert HeadCache(laptop).sync()._connect().execute("SELECT path FROM deleted").fetchall() == [(gone,)]


def _memorize(root, body: str) -> str:
    """``cortex write`` and ``cortex run`` through the real CLI; the run's report."""
    assert cortex("write", "--type", "fact", "--body", body, cwd=root).returncode == 0
    done = cortex("run", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _made_then_deleted(root, body: str) -> str:
    """A memory made (its own commit) and deleted by a person (another); the cache has
    seen the deletion. Returns its path."""
    _memorize(root, "The coffee machine on floor two takes only coins.")
    _memorize(root, body)
    path = git(root, "show", "--name-only", "--format=", "HEAD").strip()
    git(root, "rm", "-q", path)
    git(root, *EMAIL, "commit", "-q", "-m", "person: not this")
    assert cortex("status", cwd=root).returncode == 0  # the cache follows HEAD past the deletion
    return path


def test_a_reset_or_another_branch_without_the_deletion_memorizes_a_repeat(vault):
    """What a repeat meets depends on HEAD's history, not on what the cache saw on the
    way: once a reset or a checkout leaves neither the memory nor its deletion in history,
    the repeat is memorized, as with a cache rebuilt from git."""
    body = "The print server in room 4 jams on duplex jobs."
    root = vault.root
    branch = git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(root, "branch", "before")
    path = _made_then_deleted(root, body)
    assert "(deleted 1)" in _memorize(root, body)  # held: the person deleted it
    assert cortex("quarantine", "purge", "--reason", "deleted", cwd=root).returncode == 0
    git(root, "reset", "-q", "--hard", "HEAD~2")  # before the memory and its deletion
    assert git(root, "log", "--oneline", "--", path) == ""
    said = _memorize(root, body)
    listed = cortex("quarantine", "list", cwd=root).stdout
    assert re.search(r"memorized +1 ", said) and "deleted" not in listed, said + listed
    assert_follows(root)
    # a branch where the deletion happened, then back to one that never had the memory
    badge = "The badge reader at the side door fails in the rain."
    git(root, "checkout", "-q", "-b", "elsewhere", "before")
    _made_then_deleted(root, badge)
    git(root, "checkout", "-q", branch)
    said = _memorize(root, badge)
    assert re.search(r"memorized +1 ", said), said
    # ... and back on the branch whose history holds the deletion, a repeat is held again
    git(root, "checkout", "-q", "elsewhere")
    assert "(deleted 1)" in _memorize(root, badge)
    assert_follows(root)


def test_a_repeat_reinforces_the_memory_not_a_copy_a_person_keeps_elsewhere(vault):
    """A person copies a memory into a folder of their own (twice): the copies keep its id
    and source hash, as the hook leaves notes outside vault/ and mind/ alone. The agent's
    repeat reinforces the memory in mind/; the copies stay as the person made them."""
    root = vault.root
    body = "Service gamma1 listens on port 7011 for tracing."
    _memorize(root, body)
    [memory] = [p for p in git(root, "ls-files", "mind/facts").split() if p.endswith(".md")]
    (root / "notes/ops").mkdir(parents=True)
    for name in ("tracing.md", "tracing-2.md"):
        (root / "notes/ops" / name).write_text((root / memory).read_text(encoding="utf-8"), encoding="utf-8")
        git(root, "add", "-A")
        git(root, *EMAIL, "commit", "-q", "-m", f"person: my copy {name}")
    copies = {p: (root / p).read_text(encoding="utf-8") for p in ("notes/ops/tracing.md", "notes/ops/tracing-2.md")}
    said = _memorize(root, body)
    assert re.search(r"reinforced +1\b", said), said
    done = cortex("maintain", "--force", "--only", "reinforce", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == [memory]
    assert "reinforced: 1" in (root / memory).read_text(encoding="utf-8")
    assert {p: (root / p).read_text(encoding="utf-8") for p in copies} == copies


def test_what_is_staged_is_git_own_answer_whatever_was_kept_before(vault, tmp_path):
    """A commit's guard and hook ask what is staged once (`gitcli.staged_diff` keeps git's
    answer for the same HEAD and index bytes): every change to the index or HEAD since,
    staged additions, edits, removals and moves, another index file (`git commit -a`'s),
    and a kept answer for another index, still gets git's own answer."""
    from cortex import gitcli

    root = vault.root

    def own(env=None) -> bytes:
        return subprocess.run(["git", "diff-index", "--cached", "-z", "--no-renames", "HEAD", "--"], cwd=root,
                              capture_output=True, check=True, env=env).stdout

    def asked(env=None) -> bytes:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(root)  # as a hook runs: git's variables then name this vault's index
            for k, v in (env or {}).items():
                mp.setenv(k, v)
            return gitcli.staged_diff(root)

    a = make_note(vault, "fact", "The ledger runs on Postgres 16.")
    kept = root / ".git" / "cortex" / gitcli.STAGED_MEMO
    assert asked() == own() and kept.exists()  # asked of git, kept
    assert asked() == own()  # read where it was kept
    b = root / "mind" / "facts" / "b.md"
    b.write_text((root / a).read_text(encoding="utf-8").replace("Postgres 16", "Postgres 17"), encoding="utf-8")
    git(root, "add", str(b))
    assert b"mind/facts/b.md" in asked() and asked() == own()
    b.write_text(b.read_text(encoding="utf-8") + "\nMore.\n", encoding="utf-8")
    git(root, "add", str(b))  # the same path staged again, another blob
    assert asked() == own()
    git(root, "rm", "-q", "--cached", a)  # a removal
    assert asked() == own() and b" D\0" + a.encode() in asked()
    git(root, "add", a)
    git(root, "mv", a, "mind/facts/moved.md")  # a move: a removal and an addition
    assert asked() == own()
    git(root, *EMAIL, "commit", "-q", "--no-verify", "-m", "moved")  # HEAD moved, the index too
    assert asked() == own() == b""
    other = tmp_path / "other-index"  # another index file, as `git commit -a` gives its hooks
    env = {"GIT_INDEX_FILE": str(other)}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=root, env={**os.environ, **env}, check=True)
    subprocess.run(["git", "rm", "-q", "--cached", "mind/facts/moved.md"], cwd=root, env={**os.environ, **env}, check=True)
    assert asked(env) == own({**os.environ, **env}) != own()
    assert asked() == own() == b""
    # an answer kept under another index's name is not this one's
    said, _, _ = kept.read_bytes().partition(b"\n")
    kept.write_bytes(b"x" + said + b"\n:100644 100644 x y M\0forged.md\0")
    assert asked() == own() == b""


def test_the_cache_closes_its_database_when_it_goes(vault):
    """A HeadCache left to the collector (each `cortex run`'s, `cortex sync`'s) left its
    SQLite connection open for the collector too, and Python 3.13 warns of every unclosed
    database: `cortex run` under -X dev or -W error printed "ResourceWarning: unclosed
    database". The connection is now closed with the cache."""
    import gc
    import sqlite3
    import warnings

    cache = HeadCache(vault.root).sync()
    db = cache._db
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        del cache
        gc.collect()
    assert not [w for w in seen if issubclass(w.category, ResourceWarning)]
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")  # closed
