"""The search index of a vault: Whoosh + embedding rows in `layout.search_dir` (the git
directory's `cortex/search/`, where no pull writes: Whoosh unpickles its table of
contents, so a copy a teammate pushed would run their code), kept current incrementally
by content hash.

    search/state.json        format, model, HEAD and folder mtimes at the last check
    search/whoosh/           lexical index and stored fields (backend.py, lexical.py)
    search/vectors.npy, vector_keys.txt                        (vectors.py)

Only notes that were added, changed, moved or deleted are re-read: a candidate whose
(mtime, size) matches what the index stored is skipped (unless git or the watcher names it
changed: then its bytes are hashed); one whose bytes hash the same is only re-stamped; a note that moved keeps its embedding (found by its content hash).
Everything here is rebuildable from the note files, so a missing, foreign or corrupt
index is simply rebuilt (`IndexUnavailable` says why).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from cortex import gitcli
from cortex.fsutil import version
from cortex.layout import (UnreadableNote, cache_dir, in_folders, link_on_path, misnamed_warning, read_note_bytes,
                           search_dir, template_folders)
from cortex.search import freshness
from cortex.search.backend import IndexDamaged, LexicalBackend
from cortex.search.records import FORMAT, TS_PER_SECOND, NoteRecord, content_hash, record_from_file

BATCH = 1024
Progress = Callable[[int, int], None]


class IndexUnavailable(Exception):
    """The index is missing, from another format or model, or unreadable."""


def damaged_index(exc: BaseException) -> bool:
    """Whether ``exc`` says the index must be rebuilt: missing or foreign
    (`IndexUnavailable`), or files the engine could not read (`IndexDamaged`, which the
    backend raises for whatever its reader tripped on). The index is a cache: a damaged
    one is rebuilt, never a traceback."""
    return isinstance(exc, (IndexUnavailable, IndexDamaged))


def lexical_backend() -> type[LexicalBackend]:
    """The lexical engine: the one place that names it."""
    from cortex.search.lexical import LexicalIndex

    return LexicalIndex


@dataclass
class UpdateReport:
    added: int = 0
    changed: int = 0
    moved: int = 0
    deleted: int = 0
    restamped: int = 0
    notes: int = 0
    rebuilt: bool = False
    reason: str = ""
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)  # notes not read, with the reason (a link, too large)

    @property
    def touched(self) -> int:
        return self.added + self.changed + self.moved + self.deleted

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("added", "changed", "moved", "deleted", "notes", "rebuilt", "reason")}
        return {**out, "seconds": round(self.seconds, 3)}

    def summary(self) -> str:
        """"2 added, 1 deleted", or "no changes"."""
        parts = [f"{n} {what}" for what, n in (("added", self.added), ("changed", self.changed),
                                               ("moved", self.moved), ("deleted", self.deleted)) if n]
        return ", ".join(parts) or "no changes"


@dataclass
class State:
    model: str
    dim: int
    head: str | None = None
    dirs: dict[str, int] = field(default_factory=dict)
    format: int = FORMAT
    head_dims: int = 0  # vectors.py: prefilter on the leading PCA dimensions
    # notes git called modified or untracked at the last update; None (a fresh build, an
    # older state file): unknown, so changed folders are listed once more
    dirty: list[str] | None = None
    # the watcher's token as the last update began (freshness.watcher_changes); None: none ran
    watch: str | None = None
    # the folders Obsidian takes templates from (`layout.template_folders`) at the last
    # update: none of their files is indexed, and a folder set apart or let go since is
    # followed (its notes dropped, or read) without a rebuild
    templates: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> "State":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            state = cls(model=data["model"], dim=int(data["dim"]), head=data.get("head"),
                        dirs={str(k): int(v) for k, v in data.get("dirs", {}).items()}, format=int(data["format"]),
                        head_dims=int(data.get("head_dims", 0)), dirty=None if data.get("dirty") is None else [str(p) for p in data["dirty"]],
                        watch=data.get("watch") if isinstance(data.get("watch"), str) else None,
                        templates=[str(f) for f in data.get("templates") or ()])
        except FileNotFoundError:
            raise IndexUnavailable("no search index yet") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexUnavailable(f"search index state is unreadable ({exc})") from None
        if state.format != FORMAT:
            raise IndexUnavailable(f"search index has format {state.format}, this cortex writes {FORMAT}")
        return state

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"format": self.format, "model": self.model, "dim": self.dim,
                                   "head": self.head, "dirs": self.dirs, "head_dims": self.head_dims,
                                   "dirty": self.dirty, "watch": self.watch, "templates": self.templates}),
                       encoding="utf-8")
        os.replace(tmp, path)


def _stale(stored: dict | None, now: tuple[int, int] | None) -> bool:
    """Whether a note's (mtime, size) now, None if gone, differs from what the index
    stored of it (None: not indexed)."""
    if stored is None:
        return now is not None
    return now != (stored.get("mtime"), stored.get("size"))


@dataclass
class _Walk:
    """What `SearchIndex._walk` found: notes that differ, folders seen, folders whose
    untracked files git is asked for, the top folder's notes, and the folders whose
    untracked notes are known afresh (not carried over)."""

    found: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    asked: list[str] = field(default_factory=list)
    top_notes: list[str] = field(default_factory=list)
    relisted: set[str] = field(default_factory=set)


@dataclass
class Candidates:
    """What an update looks at: {path: (mtime_ns, size), or None if gone}, and what to
    record once it is applied (folder mtimes, HEAD, the notes git calls dirty)."""

    found: dict[str, tuple[int, int] | None]
    dirs: dict[str, int]
    head: str | None
    dirty: list[str] | None
    watch: str | None = None  # the watcher's token as the check began
    templates: list[str] = field(default_factory=list)  # State.templates, as the check began


def walk_notes(root: Path, misnamed: list[str] | None = None) -> Iterator[str]:
    """Every note path (vault-relative, posix): vault/ and mind/, archive included, and a
    person's notes anywhere else. ``misnamed``: gets the markdown files no note may be
    named as (`layout.unprintable_name`)."""
    for rel_dir in sorted(freshness.note_dirs(root)):
        yield from sorted(freshness.scan_dir(root, rel_dir, misnamed))


def _drop_working_tree_index(root: Path, directory: Path) -> None:
    """The index an earlier cortex kept in the working tree, ``.cortex/search/``, is never
    opened (a pull can write there): once one is built in its place, it is removed, as
    large as the index is. Not when a link is on its way (what it leads to is no cortex's),
    nor when git tracks a file in it (a teammate's force-added copy: theirs to remove)."""
    old = root / ".cortex" / "search"
    if old == directory or not old.is_dir() or link_on_path(root, ".cortex/search"):
        return
    from cortex import gitcli

    tracked = gitcli.run_bytes(root, "ls-files", "-z", "--", ".cortex/search")
    if tracked is None or tracked.code != 0 or tracked.out:
        return
    import shutil

    shutil.rmtree(old, ignore_errors=True)


class SearchIndex:
    def __init__(self, root: Path | str, *, model: str | os.PathLike | None = None, taxonomy=None):
        self.root = Path(root)
        self.directory = search_dir(self.root)
        self.model_spec = model
        self._taxonomy = taxonomy
        self._taxonomy_given = taxonomy is not None
        self._taxonomy_stamp: list[int] | None = None  # taxonomy.yml as last read (a long-lived process re-reads an edit)
        self._settings = None  # the vault's, read once (`settings`)
        self._embedder = None
        self.state: State | None = None
        self.lexical = None
        self._loaded_stamp: tuple[int, int, int] | None = None  # state.json as this process last read or wrote it
        self.vectors = None
        self._holding_lock = False  # inside _locked: what is read is no writer's half-done work

    # --- parts --------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return "shipped" if self.model_spec is None else str(self.model_spec)

    @property
    def embedder(self):
        if self._embedder is None:
            from cortex.embed import get_model

            self._embedder = get_model(self.model_spec)
        return self._embedder

    @property
    def taxonomy(self):
        """The vault's taxonomy, read again once taxonomy.yml changed (types, folders and
        decay rates filter and rank a query; the watcher's index lives for days)."""
        if self._taxonomy_given:
            return self._taxonomy
        from cortex.taxonomy import file_stamp, load_taxonomy

        path = self.root / "observer" / "taxonomy.yml"
        stamp = file_stamp(path)
        if self._taxonomy is None or stamp != self._taxonomy_stamp:

            self._taxonomy = load_taxonomy(path, cache=cache_dir(self.root) / "taxonomy.json")
            self._taxonomy_stamp = stamp
        return self._taxonomy

    def state_version(self) -> tuple[int, int, int] | None:
        """Which version of the index on disk this is (every writer replaces state.json)."""
        return version(self.directory / "state.json")

    def rewritten(self) -> bool:
        """Whether the index on disk is no longer the one this process holds: another
        process replaced it since this one loaded or wrote it, or a vector file it reads
        memory-mapped was changed in place under it (`VectorStore.intact`)."""
        return self.state_version() != self._loaded_stamp or (self.vectors is not None and not self.vectors.intact())

    def load(self, *, vectors: bool = True) -> "SearchIndex":
        """Open the stored index; IndexUnavailable when it must be rebuilt.

        Read without the lock, the files may be a writer's between its steps (the vectors
        saved, the lexical index not yet): what looks damaged is looked at again under the
        lock, once the writer is done, before it is taken for damage."""
        try:
            return self._load(vectors)
        except IndexUnavailable:
            if self._holding_lock:
                raise
        with self._locked():
            return self._load(vectors)

    def _load(self, vectors: bool) -> "SearchIndex":
        self._loaded_stamp = self.state_version()
        state = State.read(self.directory / "state.json")
        if state.model != self.model_name:
            raise IndexUnavailable(f"search index was built with model {state.model}, not {self.model_name}")
        backend = lexical_backend()
        try:
            lexical = backend.open(self.directory / backend.FOLDER)
            count = lexical.doc_count()
        except IndexDamaged as exc:
            raise IndexUnavailable(f"lexical index is unreadable ({exc})") from None
        if self.lexical is not None and self.lexical is not lexical:
            self.lexical.close()
        self.state, self.lexical = state, lexical
        self.vectors = None  # (re)read with the state it belongs to
        if vectors:
            self._load_vectors(count)
        return self

    def _load_vectors(self, expected: int | None = None) -> None:
        from cortex.search.vectors import VectorStore

        try:
            store = VectorStore.load(self.directory, head_dims=self.state.head_dims)
        except (OSError, ValueError) as exc:
            raise IndexUnavailable(f"vector store is unreadable ({exc})") from None
        if store.dim != self.state.dim or (expected is not None and len(store) != expected):
            raise IndexUnavailable(f"vector store holds {len(store)} rows for {expected} notes")
        self.vectors = store

    def ensure_vectors(self) -> None:
        if self.vectors is None:
            try:
                self._load_vectors(self.lexical.doc_count())
            except IndexUnavailable:
                if self._holding_lock:
                    raise
                with self._locked():  # a writer updated the index since it was loaded: read it whole again
                    self._load(vectors=True)

    def close(self) -> None:
        if self.lexical is not None:
            self.lexical.close()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time; a second waits (updates take well under a second), up to
        the vault's lock_timeout: a writer stopped while holding the lock must not hang
        every query (LockBusy, exit 75, after that)."""
        from cortex.fsutil import file_lock

        with file_lock(self.directory / ".lock", self.settings.lock_timeout, "the search index"):
            self._holding_lock = True
            try:
                yield
            finally:
                self._holding_lock = False

    @property
    def settings(self):
        """The vault's settings (``config.settings_or_defaults``), read once: the note limit
        and how long to wait for the index's lock."""
        if self._settings is None:
            from cortex.config import settings_or_defaults

            self._settings = settings_or_defaults(self.root)
        return self._settings

    # --- full builds ----------------------------------------------------------------------

    def build(self, records: Iterable[NoteRecord], *, total: int | None = None, progress: Progress | None = None,
              head: str | None = None, dirs: dict[str, int] | None = None) -> UpdateReport:
        """Index `records` from scratch (the benchmark's entry point; `rebuild` reads files)."""
        with self._locked():
            return self._build(records, total=total, progress=progress, head=head, dirs=dirs)

    def _build(self, records: Iterable[NoteRecord], *, total: int | None, progress: Progress | None,
               head: str | None, dirs: dict[str, int] | None, templates: tuple[str, ...] = ()) -> UpdateReport:
        from cortex.search.vectors import VectorStore

        import shutil  # here, not at the top: it imports lzma and bz2 (~7 ms a query)

        start = time.perf_counter()
        embedder = self.embedder  # first: a model that cannot load must not cost the old index
        backend = lexical_backend()
        for name in ("state.json", backend.FOLDER, "vectors.npy", "vector_keys.txt", "vector_keys.order.npy",
                     "vectors_head.npy"):
            target = self.directory / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        lexical = backend.create(self.directory / backend.FOLDER)
        import numpy as np

        chunks, keys, done = [], [], 0
        with lexical.writer(bulk=True) as add:
            for batch in _batches(records, BATCH):
                chunks.append(embedder.encode([r.text for r in batch]))
                for r in batch:
                    add(r)
                keys.extend(r.path for r in batch)
                done += len(batch)
                if progress:
                    progress(done, total or done)
        if progress and total and done != total:
            # notes skipped (a link, over the note limit) or gone since the listing: the count
            # ends at what was indexed, so the progress line is ended before any warning
            progress(done, done)
        matrix = np.concatenate(chunks) if chunks else np.zeros((0, embedder.dim), dtype=np.float32)
        # model2vec's distillation ends in PCA: leading dimensions carry the most variance
        head_dims = embedder.dim * 3 // 8 if embedder.config.get("apply_pca") else 0
        VectorStore(self.directory, matrix, keys, head_dims).save()
        self.state = State(model=self.model_name, dim=embedder.dim, head=head, dirs=dirs or {}, head_dims=head_dims,
                           templates=list(templates))
        self.state.write(self.directory / "state.json")
        self._loaded_stamp = self.state_version()
        self.lexical, self.vectors = lexical, VectorStore.load(self.directory, head_dims=head_dims)
        return UpdateReport(added=len(keys), notes=len(keys), rebuilt=True, seconds=time.perf_counter() - start)

    def rebuild(self, *, progress: Progress | None = None, reason: str = "", force: bool = True) -> UpdateReport:
        """Rebuild from the note files. Not forced, it first re-checks under the lock, so
        that processes which all found the index missing do not each rebuild it."""
        with self._locked():
            if not force:
                try:
                    self.load()
                    return UpdateReport(notes=self.lexical.doc_count())
                except IndexUnavailable:
                    pass
            probe = freshness.GitProbe.start(self.root)
            dirs = freshness.note_dirs(self.root)  # before reading: a change during the build is seen next time
            misnamed: list[str] = []
            templates = template_folders(self.root)
            paths = [p for p in walk_notes(self.root, misnamed) if not in_folders(p, templates)]
            head = probe.result().head
            taxonomy = self.taxonomy
            skipped = [misnamed_warning(path) for path in misnamed]
            report = self._build(self._dated_all(self._readable(paths, taxonomy, skipped)), total=len(paths),
                                 progress=progress, head=head, dirs=dirs, templates=templates)
            report.skipped = skipped
        _drop_working_tree_index(self.root, self.directory)
        report.reason = reason
        return report

    def _read(self, path: str, taxonomy) -> NoteRecord:
        """Raises ``UnreadableNote`` for a link or an over-size note: never read."""
        data = read_note_bytes(self.root, path, self.settings.limits.max_note_bytes)
        mtime = os.stat(self.root / path, follow_symlinks=False).st_mtime_ns
        return record_from_file(path, data, taxonomy, mtime_ns=mtime)

    def _dates_kept(self, records: list[NoteRecord], stored: dict[str, dict], moved: dict,
                    left: list[str] | None = None) -> list[NoteRecord]:
        """`records` with a date for each note without `created` (`_dated`): the one the
        index gave it before, at this path or (moved whole) the one it left; for a note
        new to the index, its first commit's, git asked once for all of them and only
        of those at HEAD (a note not committed yet has no history to walk), and of the
        paths notes `left` (a note moved and edited is a rename of one of them); else
        the file's modification time."""
        undated = [r for r in records if not r.created_ts]
        if not undated:
            return records
        from dataclasses import replace

        known: dict[str, NoteRecord] = {}
        for r in undated:
            before = stored.get(r.path) if r.path in stored else stored.get(moved.get(r.content_hash, ""))
            if before and before.get("ts"):
                known[r.path] = replace(r, created=before.get("created", ""), created_ts=before["ts"] / TS_PER_SECOND)
        new = [r.path for r in undated if r.path not in known]
        added: dict[str, float] = {}
        if len(new) > gitcli.FIRST_ADDED_PATHS:
            added = gitcli.first_added(self.root)  # so many: one walk of every addition
        elif new:
            listed = gitcli.stdout_bytes(self.root, "--literal-pathspecs", "ls-tree", "-z", "--name-only", "HEAD",
                                         "--", *new) or b""
            committed = [p.decode("utf-8", "surrogateescape") for p in listed.split(b"\0") if p]
            added = gitcli.first_added(self.root, committed + (left or []) if committed else [])
        return [known.get(r.path) or _dated(r, added) for r in records]

    def _dated_all(self, records: Iterable[NoteRecord]) -> Iterator[NoteRecord]:
        """`records` as a rebuild reads them, each dated (`_dated`): git's additions are
        read in one walk of the history, when the first note without `created` comes."""
        added: dict[str, float] | None = None
        for r in records:
            if not r.created_ts and added is None:
                added = gitcli.first_added(self.root)
            yield _dated(r, added or {})

    def _readable(self, paths: Iterable[str], taxonomy, skipped: list[str]) -> Iterator[NoteRecord]:
        for path in paths:
            try:
                yield self._read(path, taxonomy)
            except UnreadableNote as exc:
                skipped.append(f"skipped {path}: {exc}")
            except FileNotFoundError:  # vanished between the listing and the read
                continue

    # --- incremental updates --------------------------------------------------------------

    def candidates(self, probe: freshness.GitProbe | None) -> Candidates:
        """Notes that may differ from the index, with what to record once they are applied
        (`_changes`), less Obsidian's templates (`_templates_followed`)."""
        return self._templates_followed(self._changes(probe))

    def _templates_followed(self, c: Candidates) -> Candidates:
        """``c`` with no file of the folders Obsidian takes templates from (as its settings
        say now, `layout.template_folders`): a template is no note, so an indexed one is
        dropped and a new or changed one left out; where the setting changed since the last
        update, the notes of a folder newly set apart are dropped and those of a folder let
        go are read, without a rebuild. Two small settings files read, no walk."""
        now = template_folders(self.root)
        c.templates = list(now)
        before = tuple(self.state.templates)
        for folder in now:
            if folder not in before:
                c.found.update((path, None) for path in self.lexical.paths_below(folder))
        for folder in before:
            if folder not in now and not in_folders(folder + "/", now):
                self._compare_below(folder, c.found)
        if now:
            for path in [p for p in c.found if in_folders(p, now)]:
                if self.lexical.stored(path) is None:
                    del c.found[path]
                else:
                    c.found[path] = None
        return c

    def _changes(self, probe: freshness.GitProbe | None) -> Candidates:
        """Notes that may differ from the index, with what to record once they are applied.

        With git's word (`probe`) and the last check's list of dirty notes, a folder whose
        mtime moved is not read note by note: git lists its untracked files (its own
        entries only) and `git status` names the tracked notes that changed, so a new note
        in a 40,000-note folder costs neither 40,000 stored-field reads nor a walk of the
        vault for untracked files. Without them, changed folders are listed and compared
        with the index."""
        if probe is not None and probe.changes is not None:
            return self._watched(probe)
        state, root = self.state, self.root
        dirs_now, changed_dirs = self._folders_moved()
        full_sweep, head, committed = probe is None, None, set()
        if probe is not None:
            probe.result()
            head = probe.head
            if head == state.head:
                since: set[str] | None = set()
            else:  # what the commits since touched; None: unknown (no old HEAD, or history rewritten)
                since = probe.committed_since(state.head) if probe.ok and state.head else None
            full_sweep = not probe.ok or since is None
            committed = since or set()
        if full_sweep:
            dirs_now = freshness.note_dirs(root)
            changed_dirs = sorted(set(dirs_now) | set(state.dirs))
        trusted = not full_sweep and state.dirty is not None
        walk = self._walk(changed_dirs, dirs_now, trusted)
        if probe is None or not probe.ok:
            return Candidates(walk.found, dirs_now, head, None)  # no token: git's word is needed next time
        untracked = probe.untracked(walk.asked, walk.top_notes) if trusted else probe.untracked(everywhere=True)
        dirty_now = set(probe.dirty) | (untracked or set())
        if untracked is None:
            # git could not say: these folders are compared note by note, and nothing is
            # recorded as dirty, so that the next update asks git everywhere
            for rel_dir in walk.asked:
                self._compare_folder(rel_dir, walk.found)
        elif trusted:
            # untracked notes of folders nobody touched since: git was not asked again
            dirty_now |= {p for p in state.dirty or () if p not in committed and os.path.lexists(root / p)
                          and (p.rpartition("/")[0] or freshness.TOP) not in walk.relisted}
        if not full_sweep:
            # notes dirty now or last time (an edit undone, an untracked note deleted),
            # committed since, or untracked in a changed folder: looked at one by one
            extra = dirty_now | set(state.dirty or ()) | committed
            for folder in {p.rpartition("/")[0] or freshness.TOP for p in extra} - set(dirs_now) - walk.seen:
                with contextlib.suppress(OSError):  # a new folder, by git's word
                    dirs_now[folder] = os.stat(root / folder).st_mtime_ns
            changed = set(probe.dirty) | committed  # by git's word: their bytes are compared too
            for path in extra:
                if freshness.is_note_path(path) and path not in walk.found:  # git leaves ignored files out
                    now = freshness.stat_note(root, path)
                    if self._differs(path, self.lexical.stored(path), now, read=path in changed):
                        walk.found[path] = now
        dirty = None if untracked is None else sorted(p for p in dirty_now if freshness.is_note_path(p))
        return Candidates(walk.found, dirs_now, head, dirty, probe.token)

    def _watched(self, probe: freshness.GitProbe) -> Candidates:
        """The watcher named every path changed since the last update (its token then):
        those alone are looked at, and a folder it names whole (made, moved in or out,
        removed) is compared note by note. No git status, so no stat of every note, and
        the same right after a commit as at any other time.

        What git would be asked next time, when no watcher runs, stays answerable: every
        note looked at here joins the dirty list (one of them may differ from git's index
        now); the folder mtimes stay as recorded, so the folders that moved are listed."""
        state, root = self.state, self.root
        found: dict[str, tuple[int, int] | None] = {}
        touched: set[str] = set()
        new: list[str] = []
        for path in probe.changes or ():
            if path.endswith("/"):
                touched |= self._compare_below(path[:-1], found)
            elif freshness.is_note_path(path):
                touched.add(path)
                stored, now = self.lexical.stored(path), freshness.stat_note(root, path)
                if self._differs(path, stored, now, read=True):
                    found[path] = now
                    if stored is None:
                        new.append(path)
        for path in freshness.left_out(root, new):  # what git would not list either
            found.pop(path, None)
            touched.discard(path)
        head = probe.head or state.head
        dirty = self._uncommitted(probe, head, touched)
        # a new token where no note changed is not worth a write (the last one still answers,
        # with paths that are no notes — an editor's settings — which cost nothing to pass over)
        token = probe.token if touched or head != state.head else state.watch
        return Candidates(found, state.dirs, head, dirty, token)

    def _differs(self, path: str, stored: dict | None, now: tuple[int, int] | None, *, read: bool) -> bool:
        """Whether the note at `path` (its (mtime, size) `now`) differs from what the index
        stored of it. `read`: git or the watcher names it changed, so when its size and
        mtime are the ones stored, its bytes are hashed and compared: an edit restored
        with its old mtime (`cp -p`, `rsync -a`, `touch -r`) keeps both. Only the notes
        named are read, so this costs what they weigh."""
        if _stale(stored, now):
            return True
        if not read or stored is None:
            return False
        try:
            data = read_note_bytes(self.root, path, self.settings.limits.max_note_bytes)
        except (OSError, UnreadableNote):
            return True  # `apply` reads it again and says why
        return content_hash(data) != stored.get("hash")

    def _uncommitted(self, probe: freshness.GitProbe, head: str | None, touched: set[str]) -> list[str] | None:
        """The notes that differ from HEAD now, kept without a git status: of those that
        could — last time's, the ones the watcher named, and what commits since changed —
        the ones whose content is not HEAD's. Git's next check reads them again when no
        watcher runs, and ``cortex status`` counts them. None: unknown (git's way next)."""
        state = self.state
        if state.dirty is None or head is None:
            return None
        asked = touched.union(state.dirty)
        if head != state.head:
            since = probe.committed_since(state.head) if state.head else None
            if since is None:
                return None
            asked |= {p for p in since if freshness.is_note_path(p)}
        differ = freshness.uncommitted(self.root, head, asked)
        return None if differ is None else sorted(differ)

    def _compare_below(self, rel_dir: str, found: dict[str, tuple[int, int] | None]) -> set[str]:
        """A folder and everything below it compared with the index (what differs added to
        `found`); the notes seen, on either side."""
        listing: dict[str, tuple[int, int]] = {}
        if (self.root / rel_dir).is_dir() and not freshness.left_out(self.root, [rel_dir + "/"]):
            for folder in freshness.note_dirs(self.root, rel_dir):
                listing.update(freshness.scan_dir(self.root, folder))
        indexed = self.lexical.paths_below(rel_dir)
        seen = set(indexed) | set(listing)
        for path, stored in indexed.items():
            now = listing.pop(path, None)
            if _stale(stored, now):
                found[path] = now
        found.update(listing)
        return seen

    def _folders_moved(self) -> tuple[dict[str, int], list[str]]:
        """The known folders' mtimes now, and those that moved or went (the top folder
        too when it was never seen)."""
        dirs_now: dict[str, int] = {}
        changed: list[str] = []
        for rel_dir, old in self.state.dirs.items():
            try:
                dirs_now[rel_dir] = mtime = os.stat(self.root / rel_dir).st_mtime_ns
            except OSError:
                changed.append(rel_dir)  # gone: its notes are deleted
                continue
            if mtime != old:
                changed.append(rel_dir)
        if freshness.TOP not in self.state.dirs:
            changed.append(freshness.TOP)
        return dirs_now, changed

    def _walk(self, changed_dirs: list[str], dirs_now: dict[str, int], trusted: bool) -> "_Walk":
        """Each changed folder, and any new folder below one: compared note by note with
        the index, or (`trusted`, a known folder other than the top) left for git to name
        its untracked files. Records the folders' mtimes in `dirs_now`."""
        root, known = self.root, self.state.dirs
        walk = _Walk()
        while changed_dirs:
            rel_dir = changed_dirs.pop()
            if rel_dir in walk.seen:
                continue
            walk.seen.add(rel_dir)
            if not (root / rel_dir).is_dir():
                dirs_now.pop(rel_dir, None)  # gone: its tracked notes are in git's status, the rest in `dirty`
                if not trusted:
                    walk.found.update((path, None) for path in self.lexical.paths_in(rel_dir))
                continue
            dirs_now[rel_dir] = os.stat(root / rel_dir).st_mtime_ns
            if trusted and rel_dir in known and rel_dir != freshness.TOP:
                walk.asked.append(rel_dir)
            else:
                listing = self._compare_folder(rel_dir, walk.found)
                if rel_dir == freshness.TOP:
                    walk.top_notes = list(listing)
                    walk.relisted.add(rel_dir)
                elif trusted:
                    walk.asked.append(rel_dir)  # a new folder: listed, and git says which of its notes are untracked
            changed_dirs += freshness.new_subfolders(root, rel_dir, known.keys() | dirs_now.keys())
        walk.relisted.update(walk.asked)
        return walk

    def _compare_folder(self, rel_dir: str, found: dict[str, tuple[int, int] | None]) -> dict[str, tuple[int, int]]:
        """List one folder's notes and add to `found` those that differ from the index
        (new, changed, gone); the listing."""
        listing = freshness.scan_dir(self.root, rel_dir)
        pending = dict(listing)
        for path, stored in self.lexical.paths_in(rel_dir).items():
            now = pending.pop(path, None)
            if _stale(stored, now):
                found[path] = now
        found.update(pending)  # new notes in this folder
        return listing

    def refresh(self, probe: freshness.GitProbe | None = None) -> UpdateReport:
        """Bring a loaded index up to date with the vault, cheaply when nothing changed."""
        start = time.perf_counter()
        c = self.candidates(probe)
        report = UpdateReport()
        if c.found or c.dirs != self.state.dirs or c.head != self.state.head or c.dirty != self.state.dirty \
                or c.watch != self.state.watch or c.templates != self.state.templates:
            with self._locked():
                if self.state_version() != self._loaded_stamp:
                    self.load(vectors=False)  # another process updated meanwhile: its files, not ours
                report = self.apply(c.found)
                self.state.dirs, self.state.head, self.state.dirty = c.dirs, c.head, c.dirty
                self.state.watch, self.state.templates = c.watch, c.templates
                self.state.write(self.directory / "state.json")
                self._loaded_stamp = self.state_version()
        report.notes = self.lexical.doc_count()
        report.seconds = time.perf_counter() - start
        return report

    def apply(self, found: dict[str, tuple[int, int] | None]) -> UpdateReport:
        """Re-read the candidate notes and write what really changed."""
        report = UpdateReport()
        if not found:
            return report
        lexical, taxonomy = self.lexical, self.taxonomy
        stored: dict[str, dict] = {}
        for path in found:
            fields = lexical.stored(path)
            if fields is not None:
                stored[path] = fields
        deletes = [p for p, st in found.items() if st is None and p in stored]
        records: list[NoteRecord] = []
        for path, st in found.items():
            if st is None:
                continue
            try:
                records.append(self._read(path, taxonomy))
            except (OSError, UnreadableNote) as exc:  # vanished since the listing, or became a link
                if isinstance(exc, UnreadableNote):
                    report.skipped.append(f"skipped {path}: {exc}")
                if path in stored:
                    deletes.append(path)
        fresh, restamped = [], []
        for r in records:
            old = stored.get(r.path)
            if old is not None and old.get("hash") == r.content_hash:
                restamped.append(r)
            else:
                fresh.append(r)
        self.ensure_vectors()
        gone_by_hash = {stored[p].get("hash"): p for p in deletes}
        fresh, restamped = self._dates_kept(fresh, stored, gone_by_hash, deletes), self._dates_kept(restamped, stored, {})
        vectors, to_embed = [], []
        for r in fresh:
            origin = gone_by_hash.get(r.content_hash) if r.path not in stored else None
            reused = self.vectors.vector(origin) if origin else None
            if reused is not None:
                vectors.append((r.path, reused))
                report.moved += 1
            else:
                to_embed.append(r)
                if r.path in stored:
                    report.changed += 1
                else:
                    report.added += 1
        if to_embed:
            encoded = self.embedder.encode([r.text for r in to_embed])
            vectors.extend((r.path, encoded[i]) for i, r in enumerate(to_embed))
        report.deleted = len(deletes) - report.moved
        report.restamped = len(restamped)
        self.vectors.apply(vectors, deletes)
        self.vectors.save()
        lexical.write(fresh + restamped, deletes)
        report.notes = lexical.doc_count()
        return report


def _dated(record: NoteRecord, added: dict[str, float]) -> NoteRecord:
    """`record`, or for a note without a `created` (none, or none that reads as a time),
    the same dated by the commit that first added it (`added`: `gitcli.first_added`'s
    answer), else by the file's modification time; that date is what the index stores,
    filters on and shows as the note's `created`."""
    if record.created_ts:
        return record
    from dataclasses import replace
    from datetime import datetime, timezone

    from cortex.timefmt import format_time

    ts = added.get(record.path) or record.mtime_ns / 1e9
    if not ts:
        return record
    return replace(record, created=format_time(datetime.fromtimestamp(ts, timezone.utc)), created_ts=ts)


def _batches(items: Iterable, size: int) -> Iterator[list]:
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def stderr_progress(label: str = "indexed") -> Progress:
    """A progress callback that prints at most twice a second, on one line rewritten in
    place and ended when `done` reaches `total` (a build's last report always does)."""
    last = [time.monotonic()]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.5 or done == total:
            last[0] = now
            print(f"\r{label} {done}/{total} notes", end="\n" if done == total else "", file=sys.stderr, flush=True)

    return report
