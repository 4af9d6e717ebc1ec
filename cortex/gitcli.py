"""The git command line, for what must behave exactly as the person's own git does:
talking to remotes (their credentials, ssh config, proxies) and moving the working tree
and index (git's own locks and its refusal to overwrite uncommitted work).

Standard library only (the git hook and the HEAD cache use it). ``cortex.gitrepo``
(pygit2) stays the way cortex reads objects and makes its own commits; this module is
the one place cortex runs ``git`` — save the commit hook's own spawn of
``git diff --cached`` (``cortex/hooks.py``), kept there for its start-up time, and the
example's visible ``git`` commands (``cortex/demo.py``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator, NamedTuple

from cortex.errors import ConfigError, CortexError

# git never stops to ask for a password: a sync in cron or CI fails with a message instead.
_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C"}
MOVE_JOURNAL = "cortex-move"  # in .git: the move `GitRepo.move_tree` is making, "<old> <new>"
NETWORK_TIMEOUT = 300.0  # seconds a fetch or push may take before it counts as unreachable


def environment(root: Path | None) -> dict[str, str]:
    """The environment of a git cortex runs on ``root`` (``gitlock.caller_env``)."""
    from cortex.gitlock import caller_env

    return {**caller_env(root), **_ENV}


def not_owned(root: Path | None) -> CortexError:
    """git's refusal of a repository another user owns (``safe.directory``), said once
    for every command: each git cortex runs there fails alike, and read as an empty
    answer it made ``cortex status`` count no notes."""
    where = root if root is not None else Path.cwd()
    return CortexError(f"git refuses to work in {where}: it belongs to another user (git's \"dubious ownership\")",
                       f"run cortex as the vault's owner, or trust it: `git config --global --add safe.directory {where}`")


def _refused(err: str | bytes) -> bool:
    return "detected dubious ownership" in (err if isinstance(err, str) else err.decode("utf-8", "replace"))


class Result(NamedTuple):  # a NamedTuple, not a dataclass: created at import for a fifth of the time
    code: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0


def run(root: Path, *args: str, input: str | None = None, timeout: float | None = None,
        env: dict[str, str] | None = None) -> Result:
    """``git -C root args``; never raises for git's own failures (the caller reads them),
    save its refusal of a repository another user owns (``not_owned``)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), *args],
            input=input,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env={**environment(root), **(env or {})},
            timeout=timeout,
        )
    except FileNotFoundError:
        raise CortexError("git is not installed (or not on PATH)", "install git, then run again") from None
    except subprocess.TimeoutExpired:
        return Result(124, "", f"git {args[0]} timed out after {timeout:.0f}s")
    if proc.returncode != 0 and _refused(proc.stderr):
        raise not_owned(root)
    return Result(proc.returncode, proc.stdout, proc.stderr)


class Raw(NamedTuple):
    code: int
    out: bytes
    err: bytes

    @property
    def ok(self) -> bool:
        return self.code == 0


def run_bytes(root: Path | None, *args: str, input: bytes | None = None, timeout: float | None = None) -> Raw | None:
    """``git [-C root] args`` with bytes in and out (paths as git wrote them); None when
    git cannot be started. Never raises for git's own failures, save ``not_owned``."""
    argv = ["git", *(("-C", str(root)) if root is not None else ()), *args]
    try:
        proc = subprocess.run(argv, input=input, capture_output=True, env=environment(root), timeout=timeout,
                              stdin=None if input is not None else subprocess.DEVNULL)
    except OSError:
        return None
    except subprocess.TimeoutExpired:
        return Raw(124, b"", f"git {args[0]} timed out after {timeout:.0f}s".encode())
    if proc.returncode != 0 and _refused(proc.stderr):
        raise not_owned(root)
    return Raw(proc.returncode, proc.stdout, proc.stderr)


def stdout_bytes(root: Path | None, *args: str, input: bytes | None = None) -> bytes | None:
    """``run_bytes``'s output when git ran and succeeded; None otherwise."""
    done = run_bytes(root, *args, input=input)
    return done.out if done is not None and done.ok else None


STAGED_MEMO = "staged-diff"  # in cortex's private cache folder: the last ``staged_diff`` and what it answered


def staged_diff(root: Path) -> bytes | None:
    """git's raw diff of its index against HEAD (``diff-index --cached -z --no-renames``),
    every path; None when git cannot say (no HEAD yet, not a repository).

    git reads its whole index for it (21 MB, ~40 ms at 200,000 notes), and a commit asks
    twice, its guard (``gitlock.misnamed_staged``) and then its hook, with the index
    unchanged between them unless something was staged meanwhile. So the answer is kept
    in the git directory (``STAGED_MEMO``), under HEAD's commit and the index file's own
    checksum (its last bytes, git's hash of all the others: the same checksum, the same
    entries), both looked at before and after git read the index; a caller finding them
    the same reads it there. An index git writes without a checksum (``index.skipHash``),
    or a HEAD cortex cannot read from git's files, is asked of git every time."""
    from cortex.gitlock import head_oid
    from cortex.layout import private_cache_dir

    head = head_oid(root)
    key = _staged_key(root, head)
    where = private_cache_dir(root) if key is not None else None
    memo = where / STAGED_MEMO if where is not None else None
    if memo is not None:
        try:
            said, _, raw = memo.read_bytes().partition(b"\n")
            if said == key:
                return raw
        except OSError:
            pass
    out = stdout_bytes(root, "diff-index", "--cached", "-z", "--no-renames", head or "HEAD", "--")
    if out is not None and memo is not None and _staged_key(root, head) == key:
        tmp = memo.with_name(f".{STAGED_MEMO}.{os.getpid()}.tmp")
        try:
            memo.parent.mkdir(exist_ok=True)
            tmp.write_bytes(key + b"\n" + out)
            os.replace(tmp, memo)
        except OSError:  # not kept: the next caller asks git
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
    return out


def _staged_key(root: Path, head: str | None) -> bytes | None:
    """What ``staged_diff``'s answer holds for: HEAD's commit, the index file git reads
    here and its checksum; None when there is none to name it by."""
    if head is None:
        return None
    from cortex.gitlock import caller_env, git_dir_of

    try:
        index = Path(root, caller_env(root).get("GIT_INDEX_FILE") or git_dir_of(root) / "index")
        with open(index, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            width = len(head) // 2  # SHA-1 or SHA-256, as the repository's objects
            if size < 12 + width:
                return None
            fh.seek(size - width)
            checksum = fh.read(width)
    except (OSError, UnicodeDecodeError):
        return None
    if len(checksum) != width or not checksum.strip(b"\0"):
        return None  # no checksum written (index.skipHash)
    return f"{head} {size} {checksum.hex()} {os.path.realpath(index)}".encode("utf-8", "surrogateescape")


Entry = tuple[str, str]  # (mode, blob) as git prints them; ("000000", zeros) for none


def raw_entries(out: bytes) -> Iterator[tuple[str, Entry, Entry]]:
    """(path, entry before, entry after) of git's ``--raw -z`` output (``--no-renames``;
    ``git log`` with an empty ``--format=`` gives the same pairs), in git's order, a path
    that is not there on one side with the zero entry on that side."""
    items = out.split(b"\0")
    for meta, path in zip(items[0::2], items[1::2]):
        parts = meta.lstrip(b":").decode("ascii", "replace").split()
        if len(parts) >= 5:
            yield path.decode("utf-8", "surrogateescape"), (parts[0], parts[2]), (parts[1], parts[3])


def raw_diff(out: bytes) -> dict[str, tuple[Entry, Entry]]:
    """``raw_entries`` of one diff as {path: (entry before, entry after)}."""
    return {path: (before, after) for path, before, after in raw_entries(out)}


def tree_diff_args(old: str, new: str) -> tuple[str, ...]:
    """The arguments of a raw diff of two trees that reads no index: ``git diff``, not the
    plumbing ``git diff-tree``, which reads the whole index first (for attributes a raw
    diff never uses: 21 ms at 200,000 notes)."""
    return ("diff", "--raw", "-z", "--no-renames", "--no-abbrev", "--no-ext-diff", "--no-textconv", old, new)


def start(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen | None:
    """``git -C root args`` started, its stdout a pipe, for the caller to read later (the
    search index's freshness probe runs beside the index load); None without git."""
    try:
        return subprocess.Popen(["git", "-C", str(root), *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, env={**environment(root), **(env or {})})
    except OSError:
        return None


def start_script(script: str, *args: str, root: Path | None = None) -> None:
    """``sh -c script`` with ``args`` as $1…, detached: a few git commands that must run
    as one (the watched probe's seed: ``cortex/search/freshness.py``), with git's
    environment, at the lowest priority (background work yields the cores to the
    commands people wait for), in a session of its own that may outlive this process;
    ``root`` the vault they run on. Nothing happens where it cannot start."""
    try:
        subprocess.Popen(["sh", "-c", script, "cortex", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=environment(root), start_new_session=True,
                         preexec_fn=lambda: os.nice(19))
    except OSError:
        pass


def out(root: Path, *args: str) -> str:
    """Output of a local git command that must succeed."""
    res = run(root, *args)
    if not res.ok:
        raise CortexError(f"git {' '.join(args)} failed: {res.err.strip() or res.code}")
    return res.out.strip()


def rev(root: Path, ref: str) -> str | None:
    res = run(root, "rev-parse", "--verify", "--quiet", ref + "^{commit}")
    return res.out.strip() if res.ok and res.out.strip() else None


def is_ancestor(root: Path, older: str, newer: str) -> bool:
    return run(root, "merge-base", "--is-ancestor", older, newer).code == 0


def config(root: Path, key: str) -> str | None:
    res = run(root, "config", "--get", key)
    return res.out.strip() if res.ok else None


def config_bool(root: Path, key: str) -> bool | None:
    """A boolean of the repository's git config, read as git reads one (yes, on, 1...);
    None when unset. A value git cannot read as one is a problem to fix, not a default."""
    res = run(root, "config", "--type=bool", "--get", key)
    if res.ok:
        return res.out.strip() == "true"
    if res.code == 1:  # unset
        return None
    raw = run(root, "config", "--get", key).out.strip()
    raise ConfigError(f"git config {key} is {raw!r}, not true or false", f"`git config {key} true` (or false)")


def committer_ident(root: Path) -> bytes | None:
    """Who moves a ref of ``root`` and when, as git writes it in a reflog: "Name <email>
    <seconds> <zone>" from ``GIT_COMMITTER_NAME``, ``_EMAIL`` and ``_DATE``, else the
    config's ``user.name`` and ``user.email`` and the time now, else git's own guess (the
    account's name, user@host). `git var -l` lists it as `git update-ref` takes it
    (`git var GIT_COMMITTER_IDENT` refuses a guessed one). None when git gives none
    (a ``GIT_COMMITTER_DATE`` it cannot read, which git's own move refuses too)."""
    listed = stdout_bytes(root, "var", "-l")
    key = b"GIT_COMMITTER_IDENT="
    found = [line[len(key):] for line in (listed or b"").splitlines() if line.startswith(key)]
    return found[-1] if found else None  # the last: the config's listed before, a value may span lines


def git_dir(root: Path) -> Path:
    return Path(out(root, "rev-parse", "--absolute-git-dir"))


def ahead_behind(root: Path, ref: str, upstream: str) -> tuple[int, int] | None:
    res = run(root, "rev-list", "--left-right", "--count", f"{ref}...{upstream}")
    if not res.ok:
        return None
    ahead, behind = res.out.split()
    return int(ahead), int(behind)


# Above this many paths, `first_added` reads every addition of the history instead of
# naming them (a command line of pathspecs has a length limit; one walk reads them all).
FIRST_ADDED_PATHS = 200


def first_added(root: Path, paths: list[str] | None = None) -> dict[str, float]:
    """{path: author time of the commit that first added it, seconds since the epoch} for
    ``paths`` (None: every path) that HEAD's history added, paths relative to ``root``.
    A note renamed since keeps the time its first name was added: one ``git log`` of the
    additions and renames (``-M``: a move, edited or not, is one renamed path, not a path
    deleted and another added), read oldest first, each rename carrying the time of the
    path it left. Merges are not diffed: a change is seen in the commit that made it.
    With ``paths`` named, only renames among them are seen (name the path a note left
    too). {} where git cannot say (no commit yet, no repository)."""
    args = ["--literal-pathspecs", "log", "-z", "--relative", "-M", "--diff-filter=AR", "--name-status",
            "--format=%x01%at", "HEAD", "--"]
    if paths is not None:
        if not paths:
            return {}
        if len(paths) <= FIRST_ADDED_PATHS:
            args += paths
    done = run_bytes(root, *args)
    if done is None or not done.ok:
        return {}
    found: dict[str, float] = {}
    for when, left, path in reversed(list(_additions(done.out))):
        if left is None:
            found.setdefault(path, when)  # a path added again later keeps its first time
        else:
            found[path] = found.get(left, when)
    wanted = None if paths is None else set(paths)
    return found if wanted is None else {p: t for p, t in found.items() if p in wanted}


def _additions(out: bytes) -> Iterator[tuple[float, str | None, str]]:
    """(author time, path left or None, path added) of ``first_added``'s log, newest first."""
    items = iter(out.split(b"\0"))
    when = 0.0
    for item in items:
        if item.startswith(b"\x01"):
            when = float(item[1:] or 0)
            continue
        status = item.lstrip(b"\n")[:1]
        if status not in (b"A", b"R"):
            continue
        left = _path(next(items, b"")) if status == b"R" else None
        yield when, left, _path(next(items, b""))


def _path(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


# --- what a failed fetch or push means ---------------------------------------------------

AUTH_SIGNS = ("authentication failed", "permission denied", "could not read username", "could not read password",
              "terminal prompts disabled", "http 401", "http 403", "returned error: 401", "returned error: 403",
              "invalid username or password", "host key verification failed")
# No repository at the address: deleted, moved, never made, or a folder that is not one
# (GitHub and Bitbucket answer "not found" for a private repository you may not read too)
MISSING_SIGNS = ("does not appear to be a git repository", "not a git repository", "repository not found",
                 "' not found", "returned error: 404", "could not be found", "does not exist", "no such repository")
NETWORK_SIGNS = ("could not resolve", "connection refused", "connection timed out", "timed out", "network is unreachable",
                 "unable to access", "could not read from remote", "no route to host", "connection reset", "early eof",
                 "the remote end hung up", "unable to connect", "failed to connect", "couldn't connect",
                 "no such file or directory")
# Held for a moment by another git (a background fetch, the remote's own upkeep)
BUSY_SIGNS = ("cannot lock ref", "unable to create", ".lock': file exists", "is locked", "temporarily unavailable",
              "try again later")


def failure_kind(err: str) -> str:
    """What a fetch or push that failed with ``err`` met: ``missing`` (no repository at
    the address) and ``auth`` (credentials refused) last until a person acts; ``network``
    and ``busy`` pass; ``other`` is anything else. Read from the lines that say why (git's
    reason line, the remote's own lines): git's boilerplate after any ssh or local
    failure ("could not read from remote repository") says nothing of the cause."""
    said = " ".join([failure_reason(err) or "", *remote_said(err)]).lower()
    for kind, signs in (("busy", BUSY_SIGNS), ("auth", AUTH_SIGNS), ("missing", MISSING_SIGNS),
                        ("network", NETWORK_SIGNS)):
        if any(sign in said for sign in signs):
            return kind
    low = err.lower()
    if any(sign in low for sign in AUTH_SIGNS):
        return "auth"
    if any(sign in low for sign in NETWORK_SIGNS):
        return "network"
    return "other"


# What git adds after an ssh or local remote failed, and after any refused push, whatever
# the cause: the tail of it once stood in for the cause ("the remote is unreachable (and
# the repository exists.)" when the repository did not exist).
_BOILERPLATE = ("could not read from remote repository", "please make sure you have the correct access rights",
                "and the repository exists", "failed to push some refs")


def failure_reason(err: str) -> str | None:
    """The line of a failed fetch's or push's stderr that says why: git's first ``fatal:``
    or ``error:`` line that is not boilerplate, else the first line another program (ssh,
    a proxy) wrote, else git's first ``fatal:`` line; without the ``fatal:`` prefix."""
    lines = [line.strip() for line in err.splitlines()]
    told = [line for line in lines if line and not line.lower().startswith(("hint:", "warning:", "remote:"))
            and not any(text in line.lower() for text in _BOILERPLATE)]
    said = next((line for line in told if line.lower().startswith(("fatal:", "error:"))), None)
    said = said or (told[0] if told else next((line for line in lines if line.lower().startswith("fatal:")), None))
    return _unprefixed(said) if said else None


def remote_said(err: str, limit: int = 3) -> list[str]:
    """What the remote's own programs wrote (a hook, branch protection: git's ``remote:``
    lines), without the prefix and the padding git adds; at most ``limit``, the last one
    ``…`` when there were more."""
    said = [line[len("remote:"):].replace("\x1b[K", "").strip() for line in err.splitlines()
            if line.startswith("remote:")]
    said = [line for line in said if line]
    return said[:limit - 1] + ["…"] if len(said) > limit else said


def _unprefixed(line: str) -> str:
    for prefix in ("fatal:", "error:"):
        if line.lower().startswith(prefix):
            return line[len(prefix):].strip()
    return line
