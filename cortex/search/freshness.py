"""Which notes may have changed since the index last looked: a cheap check, no full scan.

Three signals, each cheap, together complete:

* directory mtimes: creating, deleting or renaming a note (and an editor's atomic save)
  changes its folder's mtime, so only changed folders are listed;
* `git status -uno` (one subprocess, started before the query's heavy imports so that it
  runs on the other core meanwhile): lists tracked notes edited in place or staged. Not
  the untracked ones: finding those walks every folder (0.3 s in a 200,000-note vault).
  Untracked notes are asked of git only in the folders whose mtime moved
  (`git ls-files --others` limited to their own entries), and the ones known from the
  last check are carried over: a note created in a folder changes that folder's mtime;
* HEAD: when it moved since the last check, `git diff --name-only old new` lists what
  the commits touched (an edit made and committed between two queries).

While ``cortex watch`` runs, a caller that kept the watcher's token from its last check
(the search index does) asks the watcher instead: every path changed since that token,
and no git at all (``GitProbe.start(root, since=token)``; ``watcher_changes``). Its
answer does not depend on git's index, so it holds right after a commit too, where a
``git status`` — even the watched one, on a new index version — stats every file.

Where the vault is not a git repository, every note is stat'ed instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from cortex.layout import NOT_NOTES, cache_dir, git_ignored, is_markdown, is_note_path, search_dir, unprintable_name

TOP = "."  # the repository's top folder, where Obsidian puts new notes and daily notes
# git pathspecs: the whole repository but observer/ (its runtime files are no notes)
PATHSPEC = (".", ":(exclude)observer")


def _glob_escape(path: str) -> str:
    """`path` as a literal inside a git glob pathspec."""
    return "".join("\\" + c if c in "\\*?[" else c for c in path)


def join(rel_dir: str, name: str) -> str:
    return name if rel_dir == TOP else f"{rel_dir}/{name}"


def subfolders(root: Path, rel_dir: str, entries) -> list[str]:
    """The folders in ``rel_dir`` that may hold notes: not dot folders, not observer/."""
    return [join(rel_dir, e.name) for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
            and not (rel_dir == TOP and e.name in NOT_NOTES)]


def new_subfolders(root: Path, rel_dir: str, known: dict[str, int] | set[str], entries=None) -> list[str]:
    """The folders in ``rel_dir`` that may hold notes and are not in ``known``, less those
    ``.gitignore`` excludes. On the usual file systems a folder's link count is two plus
    its subfolders: when that matches the known subfolders still there, the folder is not
    listed (one stat, not 40,000 entries read, for a type folder that gained a note).
    Where the count means nothing (btrfs says 1) the folder is listed."""
    if entries is None:
        try:
            links = os.stat(root / rel_dir).st_nlink
        except OSError:
            return []
        prefix = "" if rel_dir == TOP else rel_dir + "/"
        there = sum(1 for k in known if k.startswith(prefix) and "/" not in k[len(prefix):] and k != TOP
                    and os.path.isdir(root / k))
        if links == 2 + there:
            return []
        try:
            entries = list(os.scandir(root / rel_dir))
        except OSError:
            return []
    new = [sub for sub in subfolders(root, rel_dir, entries) if sub not in known]
    ignored = git_ignored(root, [f"{sub}/" for sub in new])
    return [sub for sub in new if f"{sub}/" not in ignored]


def note_dirs(root: Path, top: str = TOP) -> dict[str, int]:
    """Every folder that may hold notes (the top included) with its mtime_ns; folders
    ``.gitignore`` excludes are left out (asked of git once per level). ``top``: from
    that folder down only."""
    out: dict[str, int] = {}
    level = [top]
    while level:
        found: list[str] = []
        for rel in level:
            try:
                st = (root / rel).stat()
                entries = list(os.scandir(root / rel))
            except OSError:
                continue
            if rel != TOP and any(e.name == ".git" for e in entries):
                continue  # a submodule or nested clone: not the vault's notes
            out[rel] = st.st_mtime_ns
            found += subfolders(root, rel, entries)
        ignored = git_ignored(root, [f"{d}/" for d in found])
        level = [d for d in found if f"{d}/" not in ignored]
    return out


def scan_dir(root: Path, rel_dir: str, misnamed: list[str] | None = None) -> dict[str, tuple[int, int]]:
    """{path: (mtime_ns, size)} of the notes directly in one folder; markdown files no
    note may be named as (`unprintable_name`) added to ``misnamed``, if given."""
    out = {}
    try:
        entries = list(os.scandir(root / rel_dir))
    except OSError:
        return out
    for e in entries:
        path = join(rel_dir, e.name)
        # A link is listed too, so that reading it is refused with a warning, not unseen.
        if is_note_path(path) and (e.is_file(follow_symlinks=False) or e.is_symlink()):
            st = e.stat(follow_symlinks=False)
            out[path] = (st.st_mtime_ns, st.st_size)
        elif misnamed is not None and is_markdown(path) and unprintable_name(path):
            misnamed.append(path)
    return out


def untracked_now(root: Path, probe: "GitProbe", dirs: dict[str, int], dirty: Iterable[str]) -> set[str] | None:
    """The untracked files now, from an earlier record: `dirs` (each note folder's mtime
    then) and `dirty` (what git then called changed or untracked). Creating, deleting or
    renaming a file moves its folder's mtime, so a folder that did not move holds the
    same untracked files as then; git is asked about the folders that moved and the new
    folders below them only (it reads those alone), never walks the vault. None: git
    could not say."""
    moved = [TOP] if TOP not in dirs else []
    for rel, mtime in dirs.items():
        try:
            if os.stat(root / rel).st_mtime_ns != mtime:
                moved.append(rel)
        except OSError:
            moved.append(rel)  # gone: nothing untracked is left in it
    asked: list[str] = []
    top_notes: list[str] = []
    relisted: set[str] = set()
    while moved:
        rel = moved.pop()
        if rel in relisted or not (root / rel).is_dir():
            continue
        relisted.add(rel)
        entries = None
        if rel == TOP:  # a pattern for the top folder would make git walk every folder below it
            entries = list(os.scandir(root))
            top_notes = [e.name for e in entries if is_note_path(e.name) and not e.is_dir(follow_symlinks=False)]
        else:
            asked.append(rel)
        moved += new_subfolders(root, rel, dirs, entries)
    found = probe.untracked(asked, top_notes)
    if found is None:
        return None
    return found | {p for p in dirty if (p.rpartition("/")[0] or TOP) not in relisted and os.path.lexists(root / p)}


def left_out(root: Path, paths: list[str]) -> set[str]:
    """Those of ``paths`` git would not list as the vault's (``.gitignore`` excludes them and
    HEAD does not hold them, or they lie in a nested repository), as ``note_dirs`` leaves
    their folders out."""
    out = set(git_ignored(root, paths)) if paths else set()
    files = [p for p in out if not p.endswith("/")]
    from cortex.gitlock import head_oid

    if files and (head := head_oid(root)):
        out -= {p for p, blob in (blobs_at(root, head, files) or {}).items() if blob}  # tracked all the same
    nested: dict[str, bool] = {}
    for path in paths:
        folder = path.rstrip("/").rpartition("/")[0]
        while folder:
            if folder not in nested:
                nested[folder] = os.path.lexists(root / folder / ".git")
            if nested[folder]:
                out.add(path)
                break
            folder = folder.rpartition("/")[0]
    return out


def blobs_at(root: Path, commit: str, paths: Iterable[str]) -> dict[str, str | None] | None:
    """Each path's blob id in ``commit`` (None where it holds none there), from one ``git
    cat-file --batch-check``, which reads only the trees on each path — not the index,
    which grows with the vault. None: git could not say."""
    asked = [p for p in paths if "\n" not in p]
    if not asked:
        return {}
    from cortex import gitcli

    done = gitcli.run_bytes(root, "cat-file", "--batch-check=%(objectname)",
                            input="".join(f"{commit}:{p}\n" for p in asked).encode("utf-8", "surrogateescape"))
    if done is None or done.code != 0:
        return None
    lines = done.out.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) != len(asked):
        return None
    # a missing path answers "<commit>:<path> missing"
    return {p: line if len(line) == len(commit) and " " not in line else None for p, line in zip(asked, lines)}


def uncommitted(root: Path, head: str, paths: Iterable[str]) -> set[str] | None:
    """Those of ``paths`` whose file differs from commit ``head`` (changed, new, or
    deleted): git's object id of the file's bytes against the blob ``head`` holds there
    (``blobs_at``). A clean filter (``core.autocrlf``) makes a file look changed: too
    many, never too few. None: git could not say."""
    import hashlib

    paths = set(paths)
    blobs = blobs_at(root, head, paths)
    if blobs is None:
        return None
    algorithm = hashlib.sha256 if len(head) == 64 else hashlib.sha1
    out = paths - set(blobs)  # a path git cannot be asked about
    for path, blob in blobs.items():
        try:
            if os.path.islink(root / path):
                data = os.readlink(root / path).encode("utf-8", "surrogateescape")
            else:
                data = (root / path).read_bytes()
        except FileNotFoundError:
            if blob is not None:
                out.add(path)
            continue
        except OSError:  # a folder now, unreadable: not what HEAD holds
            out.add(path)
            continue
        if blob != algorithm(b"blob %d\0" % len(data) + data).hexdigest():
            out.add(path)
    return out


def stat_note(root: Path, path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(root / path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


STATUS = ("-c", "core.quotepath=off", "status", "--porcelain=v2", "--branch", "-z", "-uno", "--no-renames",
          "--ignored=no", "--", *PATHSPEC)
WATCH_SOCKET = Path(".git") / "cortex-watch" / "sock"  # `cortex watch` runs (cortex/watcher.py)
PROBE_INDEX = "probe-index"  # in `layout.cache_dir`: a forged copy would hide what changed
PROBE_INDEX_KEEP = 5.0  # seconds an outdated copy stays, for a probe about to open it (git reads it whole at once)


def watching(root: Path) -> bool:
    """Whether a watcher of this account's runs for the vault (its socket is there): one
    of another account's (a vault a group shares) keeps its folder to itself, and this
    process goes on without it, as without a watcher (Path.exists raised PermissionError)."""
    return os.path.exists(root / WATCH_SOCKET)


def watched_index(root: Path) -> tuple[dict[str, str], list[str], bool] | None:
    """When ``cortex watch`` runs: the environment and git options for a ``git status``
    that asks the watcher what changed instead of stat-ing every tracked file, and
    whether that index copy is there yet (else the watcher makes it: ``seed_probe_copy``).

    git keeps the watcher's token in the index, and cortex must not write the person's
    index (nor name the watcher in their config: ``cortex/watcher.py`` says why), so the
    probe runs on cortex's own copy of it, one per version of ``.git/index`` (named by the
    index's checksum). A commit, a ``git add``, a checkout makes a new version, whose
    copy holds no token yet: its first status stats every file and records one."""
    if not watching(root):
        return None
    from cortex.fsmonitor import command

    version = index_version(root / ".git" / "index")
    if version is None:
        return None  # no index yet, or one without a checksum (index.skipHash): git's own way
    copy = cache_dir(root) / PROBE_INDEX / version
    return ({"GIT_INDEX_FILE": str(copy)},
            ["-c", f"core.fsmonitor={command()}", "-c", "core.fsmonitorHookVersion=2"], copy.exists())


def seed_probe_copy(root: Path) -> bool:
    """Make and seed the copy of the index there now, detached, unless it exists or is
    being made: the watcher calls this once the index stops changing
    (``Watcher._seed_when_quiet``), so that the first query after a commit finds it.
    False (ask again later) while a probe that found no copy runs, and for
    ``SEED_GRACE`` after one answered (the rest of its command runs): the seed stats
    every file, reads and writes the whole index, and beside a command it slows it
    (at 200,000 notes, a `cortex index` right after a commit took 0.57–0.83 s with a
    seed starting once its probe answered, 0.43–0.45 s with none). So a command is
    never slower with the watcher than without it."""
    watched = watched_index(root)
    if not watched or watched[2]:
        return True
    fd = _probes_lock(Path(watched[0]["GIT_INDEX_FILE"]).parent)
    if fd is None:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if 0 <= time.time() - os.fstat(fd).st_mtime < SEED_GRACE:  # a probe answered just now
            return False  # (dated ahead: the clock was set back since, not "just now")
        from cortex import gitcli

        gitcli.start_script(_SEED, *_seed_args(root, *watched[:2]), root=root)
        return True
    finally:
        os.close(fd)


def index_version(path: Path) -> str | None:
    """Which version of git's index this is: its trailing checksum (of all its content),
    so that two versions never share a name — an inode, an mtime and a size can (inode
    numbers are reused, mtimes are coarse, and a `git add` may keep the size)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(-20, os.SEEK_END)
            tail = fh.read(20)
    except OSError:
        return None
    return tail.hex() if len(tail) == 20 and any(tail) else None


# The seed, as one shell command: copy the index (`cp -p`: the copy keeps the index's
# mtime, by which git tells racily clean entries — a file changed in the same clock tick
# as the index was written, at the same size — from clean ones); if the copy is the
# version it is named after (the index may have been replaced since its name was read),
# run the watched status on it, which stats every file once and writes the watcher's
# token into it, and only then give it its name: a copy under its name is always seeded.
_SEED = """
index="$1"; copy="$2"; version="$3"; root="$4"; shift 4
tmp="$copy.$$.tmp"
if cp -p -- "$index" "$tmp" && [ "$(tail -c 20 "$tmp" | od -An -v -tx1 | tr -d ' \n')" = "$version" ] \
        && GIT_INDEX_FILE="$tmp" git -C "$root" "$@"; then
    exec mv -f -- "$tmp" "$copy"
fi
rm -f -- "$tmp"
"""
UNSEEDED_PROBES = ".unseeded-probes"  # flock'ed shared by each probe that found no copy, exclusive by the seed
SEED_GRACE = 0.5  # seconds the seed waits after such a probe answered (its mtime then), for the rest of its command


def _seed_args(root: Path, env: dict[str, str], args: list[str]) -> list[str]:
    """The arguments of ``_SEED`` for the copy named in ``env``: the index, the copy, its
    version, the vault, then git's arguments (the watched options, the status)."""
    copy = Path(env["GIT_INDEX_FILE"])
    with contextlib.suppress(OSError):
        copy.parent.mkdir(parents=True, exist_ok=True)
        _forget_old_copies(copy.parent, copy.name)
    # background work: one thread (git's preload spreads the stat sweep over every core)
    return [str(root / ".git" / "index"), str(copy), copy.name, str(root), "-c", "core.preloadIndex=false", *args,
            *STATUS]


def _probes_lock(folder: Path) -> int | None:
    """The lock file by which probes hold the seed off (``UNSEEDED_PROBES``), open."""
    try:
        from cortex.fsutil import make_dirs, own

        make_dirs(folder)
        return os.open(folder / UNSEEDED_PROBES, os.O_RDWR | os.O_CREAT, own(0o600))
    except OSError:
        return None


def _hold_off_seeds(folder: Path) -> int | None:
    """A shared lock that keeps the watcher from seeding while this probe stats every
    file (``seed_probe_copy``); released by closing it, or by the kernel however the
    process ends."""
    fd = _probes_lock(folder)
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a seed starts (the exclusive lock is held that briefly)
        except OSError:
            os.close(fd)
            fd = None
    return fd


def _forget_old_copies(folder: Path, keep: str) -> None:
    """Copies of other versions, after PROBE_INDEX_KEEP; a seed's temporary copy once the
    seed that writes it is gone (its name holds its process id; its mtime is the index's,
    which says nothing of the seed's age)."""
    now = time.time()
    for entry in os.scandir(folder):
        name = entry.name
        if name == keep or name == UNSEEDED_PROBES or name.endswith(".lock"):
            continue
        with contextlib.suppress(OSError, ValueError):
            if name.endswith(".tmp"):
                from cortex.gitlock import alive

                if not alive(int(name[:-len(".tmp")].rpartition(".")[2]), None):
                    os.unlink(entry.path)
            elif not 0 <= now - entry.stat().st_mtime < PROBE_INDEX_KEEP:  # old, or dated ahead (the clock set back)
                os.unlink(entry.path)


def watcher_changes(root: Path, since: str) -> tuple[str, list[str] | None] | None:
    """The running watcher's word: its token now, and every path changed after ``since``
    (a folder ends in ``/``: anything below it may have changed), or None for the paths
    when it cannot say (another watcher's token, a journal that no longer reaches back
    so far, events the kernel dropped). None when no watcher answers. A token asked for
    before a check covers what changes during it: the watcher journals every event
    before it answers (``cortex/watcher.py``)."""
    from cortex.fsmonitor import NO_WATCHER, ask
    from cortex.gitlock import git_dir_of

    try:
        body = ask(since, str(git_dir_of(root)))
    except OSError:  # an unreadable .git file
        return None
    if body == NO_WATCHER:
        return None
    token, _, rest = body.partition(b"\0")
    entries = rest.split(b"\0")[:-1]  # each path ends in a NUL
    if entries == [b"/"]:
        return token.decode(), None
    return token.decode(), [e.decode("utf-8", errors="surrogateescape") for e in entries]


def search_state(root: Path) -> Path:
    """The search index's state.json (cortex/search/index.py State)."""
    return search_dir(root) / "state.json"


def search_token(root: Path) -> str:
    """The watcher's token the search index recorded at its last update ("" if none), read
    before the index loads, so that its probe starts first: ``GitProbe.start(root,
    since=search_token(root))``."""
    if not watching(root):
        return ""
    try:
        token = json.loads(search_state(root).read_text(encoding="utf-8")).get("watch")
    except (OSError, ValueError, AttributeError):
        return ""
    return token if isinstance(token, str) else ""


@dataclass
class GitProbe:
    """`git status` of the note folders, running in the background once started; or,
    while ``cortex watch`` runs and the caller knows its token, the watcher's word."""

    root: Path
    proc: subprocess.Popen | None = None
    head: str | None = None
    dirty: set[str] = field(default_factory=set)
    ok: bool = False
    unseeded: int | None = None  # the shared lock held while a probe that found no index copy runs
    token: str | None = None  # the watcher's token as this probe started (None: no watcher asked)
    changes: list[str] | None = None  # every path changed since the caller's token, by the watcher's word (no git run)

    @classmethod
    def start(cls, root: Path, since: str | None = None) -> "GitProbe":
        """Start the check. ``since``: the watcher's token of the caller's last check ("" if
        it has none yet), so that a running watcher is asked first; None: git alone."""
        probe = cls(root)
        if not (root / ".git").exists():
            return probe
        if since is not None and watching(root):
            word = watcher_changes(root, since or "cortex:none:0")
            if word is not None:
                probe.token, probe.changes = word
                if probe.changes is not None:
                    from cortex.gitlock import head_oid

                    probe.head, probe.ok = head_oid(root), True
                    return probe
        from cortex import gitcli

        watched = watched_index(root)
        if watched and not watched[2]:  # no copy of this index yet: asked the usual way,
            probe.unseeded = _hold_off_seeds(Path(watched[0]["GIT_INDEX_FILE"]).parent)  # the seed after
            watched = None
        # --no-optional-locks: `git status` would otherwise refresh and rewrite the index
        # under index.lock, and a person's `git commit` at that moment would fail. With
        # the watcher, git writes cortex's own copy instead (the watcher's token in it).
        args = watched[1] if watched else ["--no-optional-locks"]
        # None without git on PATH: a full stat sweep instead
        probe.proc = gitcli.start(root, *args, *STATUS, env=watched[0] if watched else None)
        return probe

    @property
    def answered(self) -> bool:
        """Whether the answer is in without waiting (the watcher's word; no git running)."""
        return self.proc is None and self.changes is not None

    def result(self) -> "GitProbe":
        if self.proc is None or self.ok:
            self._let_seed()
            return self
        out, _ = self.proc.communicate()
        self._let_seed()
        if self.proc.returncode != 0:
            return self
        for entry in out.decode("utf-8", errors="surrogateescape").split("\0"):
            if entry.startswith("# branch.oid "):
                oid = entry[len("# branch.oid "):].strip()
                self.head = None if oid == "(initial)" else oid
            elif entry.startswith("1 "):
                self.dirty.add(entry.split(" ", 8)[8])
            elif entry.startswith("u "):
                self.dirty.add(entry.split(" ", 10)[10])
            elif entry.startswith("? "):
                self.dirty.add(entry[2:])
        self.ok = True
        return self

    def close(self) -> None:
        """Done with, answer read or not (the index was rebuilt instead): git waited for, not
        killed (it may be writing the watcher's copy of the index), its pipes closed, the
        seed let go."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.communicate()
        self._let_seed()

    def _let_seed(self) -> None:
        """Release the hold on the watcher's seed: it may start once the rest of this
        command is done (``SEED_GRACE``)."""
        if self.unseeded is not None:
            with contextlib.suppress(OSError):
                os.utime(self.unseeded)
            os.close(self.unseeded)
            self.unseeded = None

    def untracked(self, folders: Iterable[str] = (), files: Iterable[str] = (), *,
                  everywhere: bool = False) -> set[str] | None:
        """Untracked files directly in `folders` (git reads those folders alone), among
        `files`, or `everywhere`. None: git could not say. (Not for the top folder as a
        folder: a pattern there makes git walk every folder below it; pass its files.)"""
        specs = [f":(glob){_glob_escape(f)}/*" for f in folders] + [f":(literal){f}" for f in files]
        if everywhere:
            specs = list(PATHSPEC)
        if not specs:
            return set()
        from cortex import gitcli

        proc = gitcli.run_bytes(self.root, "--no-optional-locks", "-c", "core.quotepath=off", "ls-files", "--others",
                                "--exclude-standard", "-z", "--", *specs)
        if proc is None or proc.code != 0:
            return None
        return {p for p in proc.out.decode("utf-8", errors="surrogateescape").split("\0") if p}

    def committed_since(self, old_head: str) -> set[str] | None:
        """Note paths that commits between `old_head` and HEAD touched (None: unknown)."""
        if not self.ok or self.head is None:
            return None
        return changed_between(self.root, old_head, self.head)


def changed_between(root: Path, old: str, new: str) -> set[str] | None:
    """Paths (not under observer/) that differ between commits ``old`` and ``new``: a diff
    of their trees, which skips the folders they share. None: unknown (``old`` gone, as
    after a history rewrite)."""
    if old == new:
        return set()
    from cortex import gitcli

    proc = gitcli.run_bytes(root, "-c", "core.quotepath=off", "diff", "--name-only", "-z", "--no-renames", old, new,
                            "--", *PATHSPEC)
    if proc is None or proc.code != 0:
        return None
    return {p for p in proc.out.decode("utf-8", errors="surrogateescape").split("\0") if p}
