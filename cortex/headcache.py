"""What HEAD's notes are, kept in a derived cache that follows HEAD.

``head.sqlite`` (in the git directory, where no pull writes: ``layout.cache_dir``) holds one row per note at HEAD (path, blob, id, declared type,
source hash, whether the note declares it) and a count per folder and type, with the commit it describes; and the
source hashes of the notes a commit in HEAD's history deleted, which no note at HEAD
carries any more (a person's "not this": ``cortex run`` holds a repeat of one, see
``deleted``). Whoever needs
it first after HEAD moved — a person's commit, ``cortex run``, a maintenance job, a
``git pull`` — brings it up to date by diffing the old HEAD's tree against the new one
(``git diff`` of the two trees, which skips unchanged folders) and reading only the blobs that
changed (``git cat-file --batch``): a one-note commit costs the same in a vault of
200,000 notes as in one of 10,000. A missing, unreadable or foreign cache, or an old
HEAD that no longer exists, is rebuilt from ``git ls-tree`` of HEAD; a HEAD that does not
descend from the old one (a reset, another branch, a rebase) has its deletions read anew
from its own history: the cache is never the truth, git is.

Standard library only (the git hook reads it), and the git CLI rather than pygit2.
SQLite makes an update atomic: a kill -9 mid-update leaves the previous HEAD's rows.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import weakref
from pathlib import Path
from typing import Iterator

from cortex.errors import RepositoryDamaged
from cortex.fsutil import make_dirs, own
from cortex.layout import cache_dir, is_note_path
from cortex.taxonomy import ARCHIVE

FORMAT = 5  # 4: ``declared``, whether the note carries its source hash; 5: no Excalidraw drawings (layout.is_drawing)
FILE = "head.sqlite"
_HASH_RE = re.compile(rb"^source_hash:\s*[\"']?([0-9a-f]{64})", re.M)
_ID_RE = re.compile(rb"^id:\s*[\"']?([0-9a-f-]{36})", re.M)
_TYPE_RE = re.compile(r"^type:[ \t]*[\"']?([a-z][a-z0-9_]*)", re.M)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS notes (path TEXT PRIMARY KEY, blob TEXT NOT NULL, id TEXT, type TEXT, hash TEXT, folder TEXT NOT NULL,
  folded TEXT NOT NULL, declared INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS notes_folded ON notes (folded);
CREATE INDEX IF NOT EXISTS notes_id ON notes (id);
CREATE INDEX IF NOT EXISTS notes_hash ON notes (hash);
CREATE TABLE IF NOT EXISTS counts (folder TEXT NOT NULL, type TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (folder, type));
CREATE TABLE IF NOT EXISTS deleted (hash TEXT PRIMARY KEY, path TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS notes_in AFTER INSERT ON notes BEGIN
  INSERT INTO counts VALUES (new.folder, coalesce(new.type, ''), 1)
  ON CONFLICT (folder, type) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS notes_out AFTER DELETE ON notes BEGIN
  UPDATE counts SET n = n - 1 WHERE folder = old.folder AND type = coalesce(old.type, '');
END;
"""
ZERO_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree


def identify(data: bytes) -> tuple[str, str | None]:
    """(source hash, uuid id) of a note blob; hashes the body when the field is missing."""
    head = data[:4096]
    m = _HASH_RE.search(head)
    if m:
        hash_hex = m.group(1).decode()
    else:
        from cortex.notes import note_body, source_hash

        hash_hex = source_hash(note_body(data.decode("utf-8", errors="replace")))
    i = _ID_RE.search(head)
    return hash_hex, (i.group(1).decode() if i else None)


def fields(data: bytes) -> tuple[str | None, str | None, str]:
    """(id, declared type, source hash) of a note blob, without YAML: the id as the git
    hook reads it, the hash as ``cortex run`` dedups by (the body's when the field is
    missing)."""
    from cortex.validate import read_id

    text = data[:4096].decode("utf-8", "replace")
    found = read_id(text)
    end = text.find("\n---", 3) if text.startswith("---") else -1
    kind = _TYPE_RE.search(text, 0, max(end, 0))
    return (found[0] if found else None), (kind.group(1) if kind else None), identify(data)[0]


def folder_of(path: str) -> str:
    """The counting key: the first two folders (``mind/lessons``), or the top one."""
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else (parts[0] if len(parts) > 1 else "")


def _git(root: Path, *args: str, data: bytes | None = None) -> bytes | None:
    from cortex import gitcli

    return gitcli.stdout_bytes(root, *args, input=data)


def head_commit(root: Path) -> str | None:
    out = _git(root, "rev-parse", "-q", "--verify", "HEAD^{commit}")
    return out.decode().strip() if out else None


def read_blobs(root: Path, oids: list[str], max_bytes: int | None = None) -> dict[str, bytes | None]:
    """Blob contents by id, in one ``git cat-file --batch``. With ``max_bytes``, a blob
    larger is never read (None): its size is asked first (``--batch-check``, headers only)."""
    if max_bytes is not None and oids:
        over = {oid for oid, size in blob_sizes(root, oids).items() if size > max_bytes}
        return {**dict.fromkeys(over), **read_blobs(root, [o for o in oids if o not in over])}
    if not oids:
        return {}
    out = _git(root, "cat-file", "--batch", data=("\n".join(oids) + "\n").encode())
    if out is None:
        raise OSError("git cat-file failed")
    blobs, pos = {}, 0
    for oid in oids:
        eol = out.index(b"\n", pos)
        header = out[pos:eol].split()
        if len(header) < 3:  # "<oid> missing"
            raise RepositoryDamaged(oid)
        size = int(header[2])
        blobs[oid] = out[eol + 1: eol + 1 + size]
        pos = eol + 1 + size + 1
    return blobs


def blob_sizes(root: Path, oids: list[str]) -> dict[str, int]:
    """Blob sizes by id, from their headers alone (one ``git cat-file --batch-check``)."""
    out = _git(root, "cat-file", "--batch-check", data=("\n".join(oids) + "\n").encode())
    if out is None:
        raise OSError("git cat-file failed")
    sizes = {}
    for line in out.decode("ascii", "replace").splitlines():
        oid, _, size = line.partition(" blob ")
        if size:
            sizes[oid] = int(size)
    missing = set(oids) - set(sizes)
    if missing:
        raise RepositoryDamaged(min(missing))
    return sizes


def note_blobs(root: Path, oids: list[str], max_bytes: int | None = None) -> dict[str, bytes | None]:
    """Notes' blobs by id, each at most the vault's note limit (``max_bytes``, or
    ``limits.max_note_bytes``): one over it is not read (None), as every command skips it."""
    if max_bytes is None:
        from cortex.config import settings_or_defaults

        max_bytes = settings_or_defaults(root).limits.max_note_bytes
    return read_blobs(root, oids, max_bytes)


class HeadCache:
    """The notes at HEAD. ``sync()`` first; then ``ids``, ``by_hash``, ``counts``."""

    def __init__(self, root: Path, max_note_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.max_note_bytes = max_note_bytes  # None: the vault's, read when a note is
        # in the git directory: a copy under `.cortex/` that a teammate force-added would
        # come with every pull, its deleted-memory records holding back any memory they name
        self.path = cache_dir(self.root) / FILE
        self.head: str | None = None
        self.rebuilt = False
        self._db: sqlite3.Connection | None = None
        self._pid = 0  # the process that opened ``_db``

    # --- bringing it up to date ---------------------------------------------------------

    def sync(self) -> "HeadCache":
        head = head_commit(self.root)
        self.head = head
        try:
            self._sync(head)
        except (sqlite3.DatabaseError, OSError, ValueError):
            self.close()
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            try:
                self._sync(head)  # damaged: rebuilt from git
            except sqlite3.OperationalError as exc:
                raise _said_by_the_disk(exc, self.path) from exc
        return self

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None and self._pid != os.getpid():
            # A child forked to assess a run's lines (cortex.parallel): SQLite connections
            # must not cross fork() (its locks are the parent's), so the child opens its
            # own and leaves the parent's untouched (never closed here).
            self._db = None
        if self._db is None:
            make_dirs(self.path.parent)
            if own(0o644) != 0o644 and not os.path.lexists(self.path):
                # SQLite makes it 0o644 whatever the vault's sharing (its WAL files then
                # take the database's mode): made first as the group shares the vault
                try:
                    os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, own(0o644)))
                except OSError:
                    pass  # made meanwhile, or not makeable: SQLite says why
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").fetchone()[0] == 0:
                db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} INSERT OR IGNORE INTO meta VALUES ('format', '{FORMAT}'); COMMIT;")
            self._db, self._pid = db, os.getpid()
            # closed with the cache, not by the collector (Python 3.13 then warns of each
            # unclosed database: `cortex run` under -X dev); a forked child's copy is not its own
            weakref.finalize(self, _close_in, db, self._pid)
        return self._db

    def _meta(self, db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _sync(self, head: str | None) -> None:
        db = self._connect()
        if self._meta(db, "format") != str(FORMAT):
            raise ValueError("another format")
        if self._meta(db, "head") == (head or ""):
            return
        db.execute("BEGIN IMMEDIATE")  # one updater at a time; the others find it done
        try:
            old = self._meta(db, "head")
            if old != (head or ""):
                changes = self._diff(old, head) if old else None
                if changes is None:
                    db.execute("DELETE FROM notes")
                    db.execute("DELETE FROM counts")
                    self._apply(db, self._listing(head))
                    self.rebuilt = True
                else:
                    self._apply(db, changes)
                self._follow_deletions(db, old, head, changes)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('head', ?)", (head or "",))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _listing(self, head: str | None) -> list[tuple[str, str | None]]:
        if head is None:
            return []
        out = _git(self.root, "ls-tree", "-r", "-z", "--full-tree", head)
        if out is None:
            raise OSError("git ls-tree failed")
        changes = []
        for entry in out.split(b"\0"):
            meta, _, path = entry.partition(b"\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == b"blob":
                name = path.decode("utf-8", "surrogateescape")
                if is_note_path(name):
                    changes.append((name, parts[2].decode()))
        return changes

    def _diff(self, old: str, new: str | None) -> list[tuple[str, str | None]] | None:
        """(path, new blob or None) between two commits; None when the old one is gone.
        (``gitcli.tree_diff_args``: no index read, most of a one-note catch-up otherwise.)"""
        from cortex import gitcli

        out = _git(self.root, *gitcli.tree_diff_args(old, new or ZERO_TREE))
        return None if out is None else list(_raw_changes(out))

    def _apply(self, db: sqlite3.Connection, changes: list[tuple[str, str | None]]) -> None:
        contents = note_blobs(self.root, sorted({b for _, b in changes if b}), self.max_note_bytes)
        for path, blob in changes:
            db.execute("DELETE FROM notes WHERE path = ?", (path,))
            if blob is not None:
                data = contents[blob]
                if data is None:  # over the note limit: listed (a path at HEAD), never read
                    ident = type_ = hash_hex = None
                    declared = False
                else:
                    ident, type_, hash_hex = fields(data)
                    declared = _HASH_RE.search(data[:4096]) is not None
                db.execute("INSERT INTO notes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (path, blob, ident, type_, hash_hex, folder_of(path), path.lower(), declared))

    def _follow_deletions(self, db: sqlite3.Connection, old: str | None, head: str | None,
                          changes: list[tuple[str, str | None]] | None) -> None:
        """The notes HEAD's history deleted: those of the commits since ``old`` when HEAD
        moved forward from it (``changes``: the notes that differ); else read anew from
        all of HEAD's history — a rebuild, or a reset, a checkout of another branch, a
        rebase: a deletion the cache saw on the way that history no longer holds must not
        hold a repeat, as a cache rebuilt from git would not."""
        from cortex import gitcli

        if changes is None or old is None or head is None or not gitcli.is_ancestor(self.root, old, head):
            db.execute("DELETE FROM deleted")
            self._record_deleted(db, _known_deletions(self.root, head, self.max_note_bytes))
            return
        back = [path for path, blob in changes if blob is not None]  # a revert, a re-add
        for part in _slices(back):
            db.execute("DELETE FROM deleted WHERE hash IN (SELECT hash FROM notes WHERE path IN "
                       f"({','.join('?' * len(part))}))", part)
        # the commits', not the two trees': a note cortex wrote and a person
        # deleted since the cache last looked is in neither tree
        self._record_deleted(db, _known_deletions(self.root, f"{old}..{head}", self.max_note_bytes))

    @staticmethod
    def _record_deleted(db: sqlite3.Connection, removed: dict[str, str]) -> None:
        """Of the notes removed ({hash: path}), those no note at HEAD still carries: a
        move or an archive keeps its hash at another path, a deletion does not."""
        db.executemany("INSERT OR REPLACE INTO deleted VALUES (?, ?)",
                       [(h, path) for h, path in removed.items()
                        if db.execute("SELECT 1 FROM notes WHERE hash = ?", (h,)).fetchone() is None])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # --- reading ------------------------------------------------------------------------

    def paths_with_id(self, ident: str) -> list[str]:
        rows = self._connect().execute("SELECT path FROM notes WHERE id = ? ORDER BY path", (ident,))
        return [r[0] for r in rows]

    def paths_folded(self, path: str) -> list[str]:
        """Notes whose path equals ``path`` but for case (``str.lower``, as ``layout.case_twins``)."""
        rows = self._connect().execute("SELECT path FROM notes WHERE folded = ? ORDER BY path", (path.lower(),))
        return [r[0] for r in rows]

    def by_hash(self, hash_hex: str, partitions: tuple[str, ...]) -> tuple[str | None, str] | None:
        """(id, path) of a note under ``partitions`` with this source hash: of several,
        one whose body is still that observation's first (a note claiming the hash with
        other words never takes its repeats); in the first partition that has one, the
        oldest id when several share it (the original: a copy
        a person made beside it was given its id later, and UUIDv7 ids sort by the time
        they were given; settle and dedup keep the older too), then the first path; else the
        first of the notes elsewhere that carry it in their ``source_hash`` field — a
        memory a person moved into a folder of their own is still that observation's note
        (a person's note that merely says the same words is not)."""
        return self.by_hashes([hash_hex], partitions).get(hash_hex)

    def by_hashes(self, hashes: list[str], partitions: tuple[str, ...]) -> dict[str, tuple[str | None, str]]:
        """``by_hash`` of many hashes in a few queries (a run asks a chunk's at once):
        {hash: (id, path)} of those found."""
        rows: list[tuple[str, str | None, str, int, str]] = []
        for part in _slices(sorted(set(hashes))):
            rows += self._connect().execute(
                f"SELECT hash, id, path, declared, blob FROM notes WHERE hash IN ({','.join('?' * len(part))}) "
                "ORDER BY id IS NULL, id, path", part)
        order = {p: i for i, p in enumerate(partitions)}
        elsewhere = len(partitions)
        found: dict[str, list[tuple[int, str | None, str, str]]] = {}
        for hash_hex, ident, path, declared, blob in rows:  # oldest id first
            top, sep, _ = path.partition("/")
            rank = order.get(top) if sep else None
            rank = elsewhere if rank is None and declared else rank
            if rank is not None:
                found.setdefault(hash_hex, []).append((rank, ident, path, blob))
        # Several notes claim one hash (rare: twins before a sync settles them, a copy, a
        # note pushed to claim another's memory, a correction that said an archived
        # memory's words again): the note whose words are the observation is its note,
        # whatever id is older; then lower ranks first, an active memory before an archived
        # one (the correction's note takes the repeats), the oldest id of a rank.
        shared = self._as_memorized([c[3] for cands in found.values() if len(cands) > 1 for c in cands])
        best = {hash_hex: min(cands, key=lambda c: (c[3] not in shared, c[0], c[2].startswith(f"mind/{ARCHIVE}/")))
                if len(cands) > 1 else cands[0] for hash_hex, cands in found.items()}
        return {hash_hex: (ident, path) for hash_hex, (_, ident, path, _) in best.items()}

    def _as_memorized(self, blobs: list[str]) -> set[str]:
        """Those of ``blobs`` whose body is the observation their ``source_hash`` names."""
        if not blobs:
            return set()
        from cortex.notes import note_body, source_hash

        texts = note_blobs(self.root, sorted(set(blobs)), self.max_note_bytes)
        return {blob for blob, data in texts.items()
                if data is not None and identify(data)[0] == source_hash(note_body(data.decode("utf-8", "replace")))}

    def present(self, paths: list[str]) -> set[str]:
        """Those of ``paths`` that are notes at HEAD, in a few queries."""
        found: set[str] = set()
        for part in _slices(sorted(set(paths))):
            found.update(r[0] for r in self._connect().execute(
                f"SELECT path FROM notes WHERE path IN ({','.join('?' * len(part))})", part))
        return found

    def blobs(self, paths: list[str]) -> dict[str, str]:
        """{path: its blob at HEAD} of those of ``paths`` that are notes at HEAD."""
        found: dict[str, str] = {}
        for part in _slices(sorted(set(paths))):
            found.update(self._connect().execute(
                f"SELECT path, blob FROM notes WHERE path IN ({','.join('?' * len(part))})", part))
        return found

    def declared_type(self, path: str) -> str | None:
        """The declared type of the note at ``path`` in HEAD ("" for none), None if absent."""
        row = self._connect().execute("SELECT coalesce(type, '') FROM notes WHERE path = ?", (path,)).fetchone()
        return row[0] if row else None

    def paths_below(self, folder: str) -> list[str]:
        """HEAD's notes in ``folder`` or below it (a range of the path key, not a scan)."""
        rows = self._connect().execute("SELECT path FROM notes WHERE path >= ? AND path < ?",
                                       (folder + "/", folder + "0"))  # "0" follows "/"
        return [r[0] for r in rows]

    def deleted(self, hashes: list[str]) -> dict[str, str]:
        """{source hash: the path it was deleted from} of those of ``hashes`` whose note
        a commit deleted, no note at HEAD carrying them since."""
        found: dict[str, str] = {}
        for part in _slices(sorted(set(hashes))):
            found.update(self._connect().execute(
                f"SELECT hash, path FROM deleted WHERE hash IN ({','.join('?' * len(part))})", part))
        return found

    def has_path(self, path: str) -> bool:
        return self._connect().execute("SELECT 1 FROM notes WHERE path = ?", (path,)).fetchone() is not None

    def counts(self) -> Iterator[tuple[str, str, int]]:
        """(folder, declared type or "", notes) with at least one note."""
        yield from self._connect().execute("SELECT folder, type, n FROM counts WHERE n > 0 ORDER BY folder, type")

    def notes(self) -> int:
        return self._connect().execute("SELECT coalesce(sum(n), 0) FROM counts").fetchone()[0]


def _close_in(db: sqlite3.Connection, pid: int) -> None:
    if os.getpid() == pid:
        db.close()


def _said_by_the_disk(exc: sqlite3.OperationalError, path: Path) -> Exception:
    """SQLite's words for a full disk or a file this account may not write, as the
    ``OSError`` the file system would have raised (the CLI says it and exits 1, where an
    unknown exception is a bug); any other failure as it was."""
    said = str(exc)
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" or "disk is full" in said:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    if "disk I/O error" in said:  # a write refused: EFBIG under a file size limit (`ulimit -f`), EIO
        return OSError(errno.EIO, f"{said} (a full disk, a file size limit or a failing disk)", str(path))
    if "readonly database" in said or "unable to open database file" in said:
        return OSError(errno.EACCES, f"{os.strerror(errno.EACCES)} ({said})", str(path))
    return exc


def deletions(root: Path, commits: str | None, max_bytes: int | None = None) -> dict[str, str]:
    """{source hash: path} of the notes deleted by ``commits`` (a revision range, or a
    commit and its history), the latest deletion of a hash first. One ``git log`` of the
    deletions (merges are not diffed: a deletion is seen in the commit that made it; a
    checkout or a reset brings no commit that deleted anything), then their blobs in one
    batch. A move or an archive shows here too: whether the hash lives on elsewhere is
    the caller's question."""
    if commits is None:
        return {}
    from cortex.gitcli import raw_entries

    # no commit lines (an empty format): only "meta NUL path NUL" pairs, whatever a path holds
    out = _git(root, "log", "-z", "--no-renames", "--diff-filter=D", "--raw", "--no-abbrev", "--format=", commits, "--")
    if out is None:
        raise OSError("git log failed")
    # (path, blob), newest commit first
    deleted = [(path, blob) for path, (_, blob), _ in raw_entries(out) if is_note_path(path)]
    contents = note_blobs(root, sorted({b for _, b in deleted}), max_bytes)
    found: dict[str, str] = {}
    for path, blob in deleted:
        if contents[blob] is not None:  # one over the note limit was never a memory
            found.setdefault(identify(contents[blob])[0], path)
    return found


def _known_deletions(root: Path, commits: str | None, max_bytes: int | None = None) -> dict[str, str]:
    """``deletions``, or none when git cannot read the deleted notes: a partial clone
    (``--filter=blob:none``) away from its remote has not fetched them. Repeats of those
    memories are then memorized again, as before the cache knew deletions; nothing fails."""
    try:
        return deletions(root, commits, max_bytes)
    except OSError:
        return {}


def added(root: Path, old: str, new: str) -> dict[str, str]:
    """{source hash: path} of the notes at ``new`` that were not at ``old`` (a tree diff)."""
    from cortex import gitcli

    out = _git(root, *gitcli.tree_diff_args(old, new), "--diff-filter=A")
    if out is None:
        raise OSError("git diff failed")
    paths = {name: blob for name, blob in _raw_changes(out) if blob is not None}
    contents = note_blobs(root, sorted(set(paths.values())))
    return {identify(contents[blob])[0]: path for path, blob in sorted(paths.items()) if contents[blob] is not None}


def _slices(items: list[str], size: int = 500) -> Iterator[list[str]]:
    """``items`` in slices that stay under SQLite's oldest limit on bound parameters (999)."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def sync(root: Path) -> HeadCache:
    return HeadCache(root).sync()


def staged_changes(root: Path) -> dict[str, str | None] | None:
    """Notes staged differently from HEAD: path → staged blob (None: removed); None when
    git cannot say (no HEAD yet, not a repository)."""
    from cortex import gitcli

    out = gitcli.staged_diff(root)
    return None if out is None else dict(_raw_changes(out))


def notes_in(raw: bytes) -> dict[str, str | None]:
    """``staged_changes``'s answer from ``gitcli.staged_diff``'s output."""
    return dict(_raw_changes(raw))


def _raw_changes(out: bytes) -> Iterator[tuple[str, str | None]]:
    """(note path, new blob or None when removed) from git's ``--raw -z`` diff output."""
    from cortex.gitcli import raw_diff

    for name, (_, (_, blob)) in raw_diff(out).items():
        if is_note_path(name):
            yield name, None if set(blob) == {"0"} else blob
