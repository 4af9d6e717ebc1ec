"""What makes a directory a vault, the vault files read on the fast paths (the git
hook, `cortex query`), and the derived caches that keep them fast (in the git directory,
where no other machine can hand a forged copy over: `cache_dir`).
Standard library only: importing this costs next to nothing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

VAULT_MARKERS = ("observer/config.yml", "observer/taxonomy.yml", "schemas/observation.schema.json")

# Where cortex's own notes live: a note there must carry the cortex fields. Every other
# markdown file of the repository is a person's note (a daily note at the top, a folder
# they invented): indexed, searched and scanned, never asked for cortex fields.
PARTITIONS = ("vault", "mind")
# Top-level folders that hold no notes; any folder or file whose name starts with a dot
# (.obsidian, .trash, .cortex, .git, .github) holds none either, as Obsidian sees it.
NOT_NOTES = frozenset({"observer"})


def is_note_path(path: str) -> bool:
    """Whether a repository path (relative, posix) is a note: any markdown file except
    under ``observer/`` or a dot folder, a drawing (`is_drawing`), or one whose name holds
    a control character or is not UTF-8 (`unprintable_name`). What ``.gitignore`` excludes
    is left out by the callers, which list files through git; Obsidian's templates, by
    those that read the vault's settings (`template_folders`)."""
    return is_markdown(path) and not is_drawing(path) and not unprintable_name(path)


# Obsidian's Excalidraw plugin saves each drawing as markdown (`Drawing 2026-11-29
# 10.02.31.excalidraw.md`): the scene as compressed JSON, the words drawn listed above it.
DRAWING_SUFFIX = ".excalidraw.md"


def is_drawing(path: str) -> bool:
    """Whether a markdown file is an Excalidraw drawing: no note (never completed, asked
    for fields, searched or counted), only checked for credentials by the hook."""
    return path.endswith(DRAWING_SUFFIX)


def is_markdown(path: str) -> bool:
    """A markdown file where notes live (not under ``observer/`` nor a dot folder),
    whatever its name holds: what the hook looks at, to refuse what is no note."""
    if not path.endswith(".md"):
        return False
    parts = path.split("/")
    return parts[0] not in NOT_NOTES and not any(p.startswith(".") or not p for p in parts)


def unprintable_name(path: str) -> bool:
    """A line break, tab or other control character in the path, or bytes that are not
    UTF-8 (a name from a system using another encoding, `caf\\xe9.md` in Latin-1): no
    note may be named so (Windows cannot hold the file, cortex lists notes one name per
    line, and writes every name as UTF-8). Every name cortex lists (git's ``-z`` output,
    pygit2's tree entries, a folder's listing) is decoded with ``surrogateescape``, so a
    byte that is not UTF-8 is a lone surrogate here, whichever listing the name came from."""
    return _UNPRINTABLE.search(path) is not None


def not_utf8(path: str) -> bool:
    """Whether a name decoded with ``surrogateescape`` held bytes that are not UTF-8."""
    return _NOT_UTF8.search(path) is not None


# One scan in C per name, not a Python step per character: every listing of the vault
# (the HEAD cache's, the search index's rebuild) asks it of every path.
_NOT_UTF8 = re.compile("[\ud800-\udfff]")
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def escaped_name(path: str) -> str:
    """``path`` as it can be printed: bytes that are not UTF-8 as ``\\xe9``, control
    characters as ``\\n``, ``\\t`` (a raw one cannot be printed, nor read by a reader of UTF-8)."""
    text = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(repr(c)[1:-1] if ord(c) < 32 or ord(c) == 127 else c for c in text)


def misnamed_reason(path: str) -> tuple[str, str]:
    """Why ``path`` (`unprintable_name`) is no note, and what to do about it."""
    if not_utf8(path):
        return ("not a UTF-8 file name (saved by a system using another encoding)",
                "rename it: cortex reads and writes UTF-8 names only")
    return ("a control character (line break, tab) in the file name",
            "rename it: Windows cannot hold such a name, and no note may carry one")


def misnamed_warning(path: str) -> str:
    """The one line every command that lists notes says of a file no note may be named as."""
    what, hint = misnamed_reason(path)
    return f"skipped {escaped_name(path)}: {what}, not read as a note — {hint}"


# Where Obsidian's core Templates plugin and the Templater plugin are told to take their
# templates from: (settings file, its key).
TEMPLATE_SETTINGS = ((".obsidian/templates.json", "folder"),
                     (".obsidian/plugins/templater-obsidian/data.json", "templates_folder"))


def template_folders(root: Path) -> tuple[str, ...]:
    """The folders (relative, posix) Obsidian's Templates and Templater plugins take their
    templates from, as the vault's ``.obsidian`` settings name them: what is there is a
    template, placeholders and all (``<% tp.date.now() %>``, ``{{date}}``), not a note.
    None where a setting is missing, unreadable, or names the whole vault."""
    from cortex.fsutil import NotRegularFile, open_regular

    found = []
    for rel, key in TEMPLATE_SETTINGS:
        try:
            with os.fdopen(open_regular(root / rel), "rb") as fh:  # a named pipe would block the read
                value = json.loads(fh.read(MAX_SETTINGS_BYTES)).get(key)
        except (OSError, ValueError, AttributeError, NotRegularFile):
            continue
        if isinstance(value, str):
            folder = "/".join(p for p in value.strip().replace("\\", "/").split("/") if p not in ("", "."))
            if folder and folder not in found:
                found.append(folder)
    return tuple(found)


def in_folders(path: str, folders: tuple[str, ...]) -> bool:
    """Whether a repository path (relative, posix) lies in one of ``folders``."""
    return any(path.startswith(folder + "/") for folder in folders)


def in_partition(path: str) -> bool:
    """Whether a note lies under ``vault/`` or ``mind/`` (and must carry cortex fields)."""
    top, sep, _ = path.partition("/")
    return bool(sep) and top in PARTITIONS


def git_ignored(root: Path, paths: list[str]) -> set[str]:
    """Which of ``paths`` (relative, posix; folders too) ``.gitignore`` excludes; none
    where git cannot say (no git, not a repository). By the patterns alone: git's index is
    not read (at 200,000 notes that is 20 ms a call), so a file git tracks despite a
    pattern is named too — a caller asking about files keeps the tracked ones itself."""
    if not paths or not (root / ".git").exists():
        return set()
    from cortex import gitcli

    done = gitcli.run_bytes(root, "check-ignore", "--no-index", "-z", "--stdin",
                            input="\0".join(paths).encode("utf-8", "surrogateescape") + b"\0")
    if done is None or done.code not in (0, 1):
        return set()
    return {p for p in done.out.decode("utf-8", "surrogateescape").split("\0") if p}


def is_vault(root: Path) -> bool:
    """Whether ``cortex init`` set this directory up. Any git repository is not a vault:
    writing notes into a person's code repository by accident must not be possible."""
    return any((root / marker).is_file() for marker in VAULT_MARKERS)


def repository_root(start: Path) -> Path | None:
    """The top of the git repository holding ``start`` (resolved), or None."""
    here = start.resolve()
    for candidate in (here, *here.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    return None


def find_vault(path: str | os.PathLike | None = None) -> Path:
    """The vault a command works on — the one way every entry point (CLI, git hook,
    MCP server, ``Memory``) finds it: ``path`` (``--vault``), else ``$CORTEX_VAULT``,
    else the git repository around the working directory. Raises ``VaultNotFound``."""
    from cortex.errors import VaultNotFound

    if path is None:
        path = os.environ.get("CORTEX_VAULT") or None
    if path is not None:
        root = Path(path)
        if not root.is_dir():
            raise VaultNotFound(f"vault {root} does not exist", f"create it with `cortex init {root}`")
    else:
        found = repository_root(Path.cwd())
        if found is None:
            raise VaultNotFound(
                "not inside a cortex vault (no git repository here or above)",
                "pass --vault PATH, set CORTEX_VAULT, or create one with `cortex init PATH`",
            )
        root = found
    require_git_link(root)
    require_own_git_dir(root)
    if not is_vault(root):
        if settings_outside_checkout(root):
            raise VaultNotFound(*settings_outside_checkout_message(root))
        elsewhere = vault_branches(root)
        if elsewhere:
            import shlex

            raise VaultNotFound(
                f"{root} is a cortex vault, but the branch checked out holds none of its files (they are on "
                f"{', '.join(elsewhere)}): nothing was changed, and observations are not taken here",
                f"switch back to it (`git -C {shlex.quote(str(root))} switch {shlex.quote(elsewhere[0])}`); "
                "`cortex init` would add cortex's files to this branch too")
        raise VaultNotFound(
            f"{root} is not a cortex vault (none of {', '.join(VAULT_MARKERS)})",
            f"make it one with `cortex init {root}`, or pass --vault PATH",
        )
    from cortex.fsutil import share_as

    share_as(root.resolve())  # what the command makes, it makes as the repository is shared
    return root


def require_git_link(root: Path) -> None:
    """Refuse a ``.git`` file (a linked worktree's, a submodule's) whose ``gitdir:`` names
    a git directory that is gone: the repository moved, or the worktree was removed or
    pruned. git then says "not a git repository", which cortex took for a vault without
    git (0 notes), for an empty `git config` value, or for a folder `cortex init` should
    make a repository (init said the same) — and its caches went into the missing folder."""
    dot = root / ".git"
    if not dot.is_file():
        return
    try:
        text = dot.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return  # git says what is wrong with it
    if not text.startswith("gitdir:"):
        return
    target = root / text[len("gitdir:"):].strip()
    if (target / "HEAD").is_file():
        return
    from cortex.errors import CortexError

    raise CortexError(
        f"{dot} points to {target}, which is not there (its repository moved, or this worktree was removed "
        "or pruned): git reads no repository here",
        f"if the repository moved, run `git worktree repair {root}` in it; if the worktree was pruned, "
        "add it again (`git worktree add`) or clone the vault anew; nothing was changed")


def require_own_git_dir(root: Path) -> None:
    """Refuse a folder the environment makes the work tree of another git directory
    (``GIT_DIR`` and ``GIT_WORK_TREE`` set by a wrapper or a dotfiles-style alias): git
    then reads and commits there, while cortex made and used the folder's own ``.git``,
    two repositories that never met: the person's `git log` showed none of cortex's
    commits. A ``GIT_DIR`` of another folder's repository (cortex called from its hook)
    is no such case: cortex leaves it to that repository (``gitlock.caller_env``)."""
    named, tree = os.environ.get("GIT_DIR"), os.environ.get("GIT_WORK_TREE")
    if not named or not tree or os.path.realpath(tree) != os.path.realpath(root):
        return
    from cortex.gitlock import git_dir_of

    own = git_dir_of(root)
    if os.path.realpath(named) == os.path.realpath(own):
        return
    from cortex.errors import UsageError

    raise UsageError(
        f"GIT_DIR and GIT_WORK_TREE make {root} the work tree of {named}, but cortex keeps a vault in the "
        f"folder's own git directory ({own}): git and cortex would each commit to a repository of their own",
        "keep the vault in a repository of its own (`git clone` that one into a folder) and run cortex there "
        "without them (`env -u GIT_DIR -u GIT_WORK_TREE cortex …`); nothing was changed")


def vault_branches(root: Path) -> list[str]:
    """The local branches whose tree holds the vault's settings, when the one checked out
    does not (a branch made before `cortex init`): asked only where no vault is found."""
    if not os.path.lexists(root / ".git"):
        return []
    from cortex import gitcli

    listed = gitcli.run(root, "for-each-ref", "--format=%(refname:short)", "refs/heads")
    if listed is None or not listed.ok or not listed.out.split():
        return []
    branches = listed.out.split()
    asked = "".join(f"{b}:{VAULT_MARKERS[0]}\n" for b in branches)
    found = gitcli.run(root, "cat-file", "--batch-check=%(objecttype)", input=asked)
    if found is None or not found.ok:
        return []
    return [b for b, kind in zip(branches, found.out.splitlines()) if kind == "blob"]


def settings_outside_checkout(root: Path) -> bool:
    """Whether ``root`` is a vault whose sparse checkout leaves out ``observer/`` (git
    holds its settings, the working tree does not): cortex reads them there. Asked only
    where no settings file is found, so it costs a process only then."""
    from cortex import gitcli

    done = gitcli.run(root, "ls-files", "-t", "--", *VAULT_MARKERS)
    return done is not None and done.ok and any(line.startswith("S ") for line in done.out.splitlines())


def settings_outside_checkout_message(root: Path) -> tuple[str, str]:
    import shlex

    return (f"{root} is a cortex vault, but its sparse checkout leaves out observer/, where cortex reads the "
            "vault's settings", f"add it to the checkout: `git -C {shlex.quote(str(root))} sparse-checkout add observer`")


def load_tag_allow(root: Path) -> frozenset[str] | None:
    """The optional tag allow-list, ``observer/tags.yml`` (a list, or ``tags:`` holding one);
    None when the vault has none, so every well-formed tag is accepted."""
    path = root / "observer" / "tags.yml"
    if not path.exists():
        return None
    import yaml

    from cortex.errors import ConfigError

    try:
        data = yaml.safe_load(read_settings_text(path)) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}", "fix it, or delete it to allow every well-formed tag") from None
    tags = data.get("tags") if isinstance(data, dict) else data
    if not isinstance(tags, list):
        raise ConfigError(f"{path}: expected a list of tags (or `tags:` holding one)", "e.g. `tags: [ops, billing/invoices]`")
    return frozenset(str(t).lower() for t in tags)  # notes' tags are lowercase


def private_cache_dir(root: Path) -> Path | None:
    """Where cortex keeps a cache another machine must never hand over (the words of the
    injection patterns, the notes at HEAD with the memories people deleted): ``cortex/``
    in the worktree's git directory, where no pull, clone or checkout writes. Under
    ``.cortex/`` a teammate could force-add a forged copy, and a pull would overwrite the
    ignored file with it. Found without starting git (the hook runs on every commit);
    None when ``root`` holds no repository of its own (the caller keeps no such cache)."""
    if not os.path.lexists(root / ".git"):
        return None
    from cortex.gitlock import git_dir_of

    try:
        return git_dir_of(root) / "cortex"
    except (OSError, UnicodeDecodeError):  # an unreadable `.git` file
        return None


def cache_dir(root: Path) -> Path:
    """Where cortex keeps the derived caches of the vault at ``root`` (the search index,
    the HEAD cache, maintenance's caches, the graph): `private_cache_dir`, where no pull
    writes, since each decides what a check or an answer sees (and Whoosh unpickles its
    index's table of contents: a forged one would run a teammate's code); ``.cortex/``
    only where ``root`` holds no repository of its own."""
    return private_cache_dir(root) or root / ".cortex"


def search_dir(root: Path) -> Path:
    """The folder of the vault's search index (``cortex/search/index.py``)."""
    return cache_dir(root) / "search"


def write_cache(path: Path, obj: Any) -> None:
    """Replace a derived JSON cache whole, without fsync: lost or unwritable (a read-only
    checkout), it is simply worked out again next time."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        tmp.write_text(json.dumps(obj, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):  # unwritable (a full disk: no half copy kept), or not JSON (a YAML date)
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


# --- what cortex may read and write -----------------------------------------------------
# A vault is a git repository a person and other tools also write: a note or folder may
# be a symbolic link (to ``.git/config``, to a folder outside) or another repository (a
# submodule). cortex reads and writes neither, so nothing leaves the repository or
# enters ``.git/`` through it.

MAX_NOTE_BYTES = 4 << 20  # as config.Limits.max_note_bytes, for callers without settings


def link_on_path(root: Path, rel: str, safe: set[str] | None = None) -> str | None:
    """Why ``rel`` (vault-relative, posix) must not be followed: the first symbolic link
    on the way from ``root`` to it, itself included, or a ``.git`` part; None when safe.
    Parts that do not exist yet are safe (they will be created as folders). ``safe``:
    the parts already found safe by earlier calls (and added to), so that many notes in a
    few folders look at each folder once."""
    done = ""
    for part in rel.split("/"):
        if part.lower() == ".git":
            return f"{rel} lies inside .git/"
        done = f"{done}/{part}" if done else part
        if safe is not None:
            if done in safe:
                continue
            safe.add(done)  # taken back below when it is a link
        # A plain string join: a run's 1,000 notes made 4,000 Paths here (~25 ms of a run)
        here = os.path.join(root, done)
        try:
            if os.path.islink(here):
                if safe is not None:
                    safe.discard(done)
                return f"{done} is a symbolic link (to {os.readlink(here)}): cortex reads and writes nothing through a link"
        except OSError:
            return None
    return None


MAX_SETTINGS_BYTES = 1 << 20


def read_settings_text(path: Path) -> str:
    """A settings file of ``observer/`` (config, taxonomy, calibration, tags), read only
    if it is the repository's own file (no link on its way) and at most 1 MiB. Raises
    ``ConfigError`` with the reason, or ``FileNotFoundError``."""
    from cortex.errors import ConfigError

    root = path.parent.parent
    why = link_on_path(root, path.relative_to(root).as_posix())
    if why:
        raise ConfigError(f"{path}: {why}", "put the file itself in observer/")
    from cortex.fsutil import open_regular

    with os.fdopen(open_regular(path), "rb") as fh:  # a named pipe would block the read for ever
        data = fh.read(MAX_SETTINGS_BYTES + 1)
    if len(data) > MAX_SETTINGS_BYTES:
        raise ConfigError(f"{path}: over {MAX_SETTINGS_BYTES:,} bytes, too large for a settings file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def is_other_repository(directory: Path) -> bool:
    """A folder holding its own repository (a submodule or a nested clone): not the vault's."""
    return os.path.lexists(directory / ".git")


class UnreadableNote(Exception):
    """A note cortex will not read: a link (``link`` set), or too large (``size``, its
    bytes; ``head``, the first of them, as many as the limit). ``str()`` is the message."""

    def __init__(self, message: str, *, link: bool = False, size: int = 0, head: bytes = b"") -> None:
        super().__init__(message)
        self.link, self.size, self.head = link, size, head


def read_note_bytes(root: Path, rel: str, max_bytes: int = MAX_NOTE_BYTES) -> bytes:
    """A note's bytes, read only if no link is on its way and it is at most ``max_bytes``
    (never more is read). Raises ``UnreadableNote`` with the reason, or ``OSError``."""
    why = link_on_path(root, rel)
    if why:
        raise UnreadableNote(why, link=True)
    from cortex.fsutil import NotRegularFile, open_regular

    try:
        fd = open_regular(root / rel)  # a link swapped in since, a named pipe: refused, never waited on
    except NotRegularFile as exc:
        raise UnreadableNote(f"{rel} is {exc.what}, not a file: cortex reads only regular files", link=True) from None
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes or size > max_bytes:
        size = max(size, len(data))
        raise UnreadableNote(f"{rel} is {size:,} bytes, over the note limit of {max_bytes:,} "
                             "(limits.max_note_bytes in observer/config.yml): split it or move it out of the vault",
                             size=size, head=data[:max_bytes])
    return data


# Names Windows will not create (any case, with any extension: `nul.md` too). A vault
# cloned there would lose the note or fail to check out.
WINDOWS_RESERVED = frozenset({"con", "prn", "aux", "nul", *(f"com{n}" for n in range(10)), *(f"lpt{n}" for n in range(10))})


# Characters Windows allows in no name, and a name ending in a space or a dot (Windows
# drops them). A tool on macOS or Linux lets a person name a file `Deploy: how?.md`; Git
# for Windows then refuses the path ("invalid path"), and a clone there stops at it, its
# pulls too. Such names are common in vaults no Windows machine shares, so they are
# said, never refused: a refused timed commit (Obsidian Git's) would leave the person's
# work uncommitted without a word they would see.
WINDOWS_FORBIDDEN = frozenset('<>:"|?*')


def unportable_part(rel: str) -> tuple[str, str, bool] | None:
    """The first part of ``rel`` a clone on Windows cannot hold, why, and whether that
    refuses the commit (a reserved name: Windows cannot create the file at all); or None."""
    for part in rel.split("/"):
        if part.split(".", 1)[0].lower() in WINDOWS_RESERVED:
            return part, "is a name Windows reserves (con, prn, aux, nul, com0–9, lpt0–9)", True
        bad = sorted(set(part) & WINDOWS_FORBIDDEN)
        if bad:
            return part, f"holds {' '.join(bad)}, which Windows allows in no name", False
        if part.endswith((" ", ".")):
            return part, "ends with a space or a dot, which Windows drops from a name", False
    return None


def case_twins(paths, of) -> dict[str, list[str]]:
    """For each path of ``of``, the other paths of ``paths`` that differ from it only in
    case (on macOS and Windows the two are one file: one note would overwrite the other)."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(path.lower(), []).append(path)
    return {p: [o for o in groups.get(p.lower(), ()) if o != p] for p in of if len(groups.get(p.lower(), ())) > 1}
