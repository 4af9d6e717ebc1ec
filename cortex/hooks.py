"""The entry points pre-commit calls: ``validate`` and ``fix`` over the staged files.

pre-commit runs them from the repository's top with the staged paths as arguments
(unstaged changes stashed away). Every markdown note is checked, wherever it lies (only
those under ``vault/`` and ``mind/`` must carry cortex fields); other files, and files
that no longer exist (a deletion, the old side of a rename), are skipped. ``python -m
cortex.hooks validate|fix FILES`` is the fast door the installed hook uses: it imports
neither the CLI nor jsonschema nor pygit2 (start-up is a feature);
``cortex hook validate|fix`` and ``cortex validate`` run the same functions.

Outcomes are values: a ``Report`` counts what was checked, changed and found, and
computes the exit code (1 when an error was found, or a note was changed and not staged,
as pre-commit expects of fixers and checkers). ``fix --stage``, what the installed hook
runs, stages what it completed, so a person's edit commits on the first try
(docs/hooks.md says why that is safe).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable, Sequence

from cortex.fsutil import Before, atomic_write, share_as
from cortex.gitlock import caller_env, git_dir_of
from cortex.keepdeleted import merging
from cortex.layout import (
    UnreadableNote, case_twins, in_folders, in_partition, is_drawing, is_markdown, is_other_repository,
    link_on_path, escaped_name, misnamed_reason, private_cache_dir, read_note_bytes, unportable_part, unprintable_name, write_cache,
)
from cortex.validate import IdIndex, Problem, read_id, without_identity_lines

HASH_MISMATCH = "source_hash does not match"
CHANGED_MEANWHILE = "the note changed while the hook completed it (saved again meanwhile); it is left as saved, not completed"


@dataclass
class Report:
    checked: int = 0
    skipped: list[str] = field(default_factory=list)  # named but missing (deleted, renamed)
    changed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # path -> what the fixer did
    staged: list[str] = field(default_factory=list)  # changed paths also staged for the commit
    problems: list[Problem] = field(default_factory=list)
    # memories a commit concluding a merge or rebase keeps deleted (``cortex.keepdeleted``)
    kept_deleted: list = field(default_factory=list)
    written: dict[str, bytes] = field(default_factory=dict, repr=False)  # changed path -> the bytes written

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity != "error"]

    @property
    def exit_code(self) -> int:
        return 1 if self.errors or set(self.changed) - set(self.staged) else 0

    def as_dict(self) -> dict:
        return {
            "checked": self.checked,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "changed": [{"path": p, "changes": list(c), "staged": p in self.staged} for p, c in self.changed.items()],
            "skipped": self.skipped,
            **({"kept_deleted": [k.path for k in self.kept_deleted]} if self.kept_deleted else {}),
            "problems": [p.as_dict() for p in self.problems],
        }


class HookVault:
    """What the hooks need from a vault, loaded without ``cortex.vault`` (which brings
    the buffer, state and quarantine machinery the hook never uses)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).resolve()
        share_as(self.root)  # the caches the check makes, made as the repository is shared
        self.misnamed: list[str] = []  # set by note_blobs

    @classmethod
    def around(cls, start: str | os.PathLike | None = None) -> "HookVault":
        """The git repository around ``start`` (pre-commit runs hooks at its top)."""
        from cortex.layout import repository_root

        here = Path(start or os.getcwd())
        return cls(repository_root(here) or here.resolve())

    def _config(self) -> dict:
        path = self.root / "observer" / "config.yml"
        if "_config_data" not in self.__dict__:
            data = {}
            if path.exists():
                import yaml

                from cortex.errors import ConfigError

                from cortex.layout import read_settings_text

                try:
                    data = yaml.load(read_settings_text(path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                except yaml.YAMLError as exc:
                    raise ConfigError(f"{path}: not valid YAML: {exc}") from None
            self._config_data = data if isinstance(data, dict) else {}
        return self._config_data

    def committed_as_is(self, rel: str) -> bool:
        """Whether ``rel`` lies in the folder Obsidian's Templates or Templater plugin
        takes its templates from (``layout.template_folders``), or is an Excalidraw
        drawing (``layout.is_drawing``): committed as it is, not a note."""
        if is_drawing(rel):
            return True
        if "_templates" not in self.__dict__:
            from cortex.layout import template_folders

            self._templates = template_folders(self.root)
        return in_folders(rel, self._templates)

    def security_settings(self) -> tuple[tuple, bool]:
        """``(injection_patterns, strict_notes)`` from ``observer/config.yml``, read the
        way ``cortex.config.load_settings`` reads them (a test holds the two together).
        Only these and the note size limit: the rest of the file (trust, commits) is no
        business of a commit hook, and a mistake there must not block one."""
        security = self._config().get("security") or {}
        return tuple(security.get("injection_patterns") or ()), bool(security.get("strict_notes", False))

    def max_note_bytes(self) -> int:
        from cortex.layout import MAX_NOTE_BYTES

        value = (self._config().get("limits") or {}).get("max_note_bytes", MAX_NOTE_BYTES)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else MAX_NOTE_BYTES

    def forget_threshold(self) -> float:
        """Decay's ``maintenance.forget_threshold`` (a memory brought back from the archive
        is given an importance above it); a mistake in it must not block a commit."""
        from cortex.errors import ConfigError
        from cortex.maintenance.settings import DEFAULT_FORGET_THRESHOLD, forget_threshold

        maintenance = self._config().get("maintenance")
        try:
            return forget_threshold(maintenance if isinstance(maintenance, dict) else {})
        except ConfigError:
            return DEFAULT_FORGET_THRESHOLD

    def taxonomy(self):
        from cortex.taxonomy import load_taxonomy

        return load_taxonomy(self.root / "observer" / "taxonomy.yml")

    def schema(self) -> dict:
        from cortex.config import load_schema

        return load_schema(self.root, "note")

    def scanner(self):
        from cortex.config import vault_scanner

        # The pattern layer only: the learned classifier needs numpy and the embedding
        # model, too slow for a commit; `cortex run` applies it to agents' observations.
        return vault_scanner(self.root, self.security_settings()[0], use_classifier=False)

    def validator(self, fixing: bool = True):
        from cortex.layout import load_tag_allow
        from cortex.validate import NoteValidator

        strict = self.security_settings()[1]
        scanner = self.scanner()
        # Scanner.scan's pattern branch, without the redaction it also does (the
        # validator redacts the whole file once already), compiling only the patterns
        # that could match (cortex/security/gate.py).
        injection = scanner.gate.check

        return NoteValidator(
            self.taxonomy(),
            self.schema(),
            tag_allow=load_tag_allow(self.root),
            redact=scanner.redact,
            injection=injection,
            strict_injection=strict,
            fixing=fixing,
        )

    def relpath(self, name: str | os.PathLike) -> str | None:
        """``name`` relative to the vault (posix), or None when it lies outside. Links are
        not followed: a note that is a link is named as itself, to be refused."""
        path = Path(os.path.abspath(name))
        if not path.is_relative_to(self.root):  # reached through a linked folder above the vault
            path = path.parent.resolve() / path.name
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return None

    def note_blobs(self, untracked: bool = False) -> dict[str, str | None]:
        """Every note of the vault → its blob id in git's index (staged notes included),
        and every drawing (``layout.is_drawing``: no note, but checked for credentials);
        with ``untracked``, the working tree's notes not added yet too (→ None; not those
        git ignores); outside a git repository, every note found on disk → None."""
        others = ("--others", "--exclude-standard") if untracked else ()
        raw = _git_output(self.root, "ls-files", "-s", "-z", *others, "--", "*.md")
        if raw is None:
            paths: dict[str, str | None] = {}
            for dirpath, dirnames, filenames in os.walk(self.root):
                # os.walk follows no linked folder; a submodule or nested clone is not the vault's
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not is_other_repository(Path(dirpath) / d))
                rel = Path(dirpath).relative_to(self.root).as_posix()
                for name in sorted(filenames):
                    path = name if rel == "." else f"{rel}/{name}"
                    if is_markdown(path) and not unprintable_name(path) and not os.path.islink(Path(dirpath) / name):
                        paths[path] = None
            return paths
        blobs: dict[str, str | None] = {}
        self.misnamed = []  # markdown files no note may be named as (`unprintable_name`)
        for entry in raw.decode("utf-8", "surrogateescape").split("\0"):
            meta, tab, path = entry.partition("\t")
            if not tab:  # an untracked file: listed by its name alone
                meta, path = "", entry
            if is_markdown(path) and not unprintable_name(path) and not meta.startswith("160000"):  # a submodule is no note
                blobs.setdefault(path, meta.split(" ")[1] if " " in meta else None)
            elif is_markdown(path) and unprintable_name(path) and path not in self.misnamed:
                self.misnamed.append(path)
        return blobs

    def id_index(self, blobs: dict[str, str | None], known: dict[str, str]) -> IdIndex:
        """Which note has which id. ``known`` (path → id, the notes being checked) wins;
        the others' ids come from a cache keyed by blob id (``note-ids.json`` in the git
        directory, which no pull can overwrite: a forged copy would hide a duplicate id),
        so a commit reads only notes it has not seen before, not the whole vault."""
        index = IdIndex(known)
        where = private_cache_dir(self.root)
        cache_path = where / "note-ids.json" if where is not None else None
        try:
            cache = json.loads(cache_path.read_text(encoding="utf-8")).get("ids", {}) if cache_path else {}
        except (OSError, ValueError, AttributeError):
            cache = {}
        seen: dict[str, str] = {}
        for rel, blob in blobs.items():
            if rel in known or not in_partition(rel) or self.committed_as_is(rel):
                continue
            if blob is not None and blob in cache:
                ident = cache[blob]
            else:
                ident = self._read_id(rel, blob, seen)
            if blob is not None and blob in cache:
                seen[blob] = ident
            if ident:
                index.add(rel, ident)
        if cache_path is not None and set(seen) != set(cache):
            write_cache(cache_path, {"version": 1, "ids": seen})
        return index

    def staged_view(self, known: dict[str, str], paths: list[str]) -> tuple[IdIndex, list[str]] | None:
        """What the commit would leave, as far as ``paths`` are concerned: the notes that
        share an id with the checked ones (``known``), and the note paths that differ from
        a checked one only in case. HEAD's notes come from the HEAD-following cache
        (``cortex/headcache.py``), less the ones staged for removal or change, plus what is
        staged: the same cost in a vault of any size. None when there is no HEAD."""
        staged = self.staged_notes()
        if staged is None:
            return None
        cache = self.head_cache()
        index = IdIndex(known)
        names = set(paths) | {rel for rel, blob in staged.items() if blob is not None}
        for rel, blob in staged.items():
            if blob is not None and rel not in known and in_partition(rel):
                ident = self._read_id(rel, blob, {})
                if ident:
                    index.add(rel, ident)
        for ident in set(known.values()):
            for rel in cache.paths_with_id(ident):
                if rel not in known and rel not in staged and in_partition(rel):
                    index.add(rel, ident)
        for rel in paths:
            names.update(p for p in cache.paths_folded(rel) if p not in staged)
        return index, sorted(names)

    def _read_id(self, rel: str, blob: str | None, seen: dict[str, str]) -> str:
        try:
            data = read_note_bytes(self.root, rel, self.max_note_bytes())
        except (OSError, UnreadableNote):
            return ""
        found = read_id(data[:4096].decode("utf-8", "replace"))
        ident = found[0] if found else ""
        if blob is not None and _blob_id(data) == blob:  # the file is what git indexed
            seen[blob] = ident
        return ident

    def committed(self, rel: str) -> str | None:
        """The note's text at HEAD; None when HEAD has no such note (a new note). A note
        staged as moved (Obsidian renames the file when a person retitles a note) is the
        note it was: its text at the old path, so it keeps its ``source_hash``."""
        data = _git_output(self.root, "cat-file", "blob", f"HEAD:{rel}")
        if data is None and (old := self.renamed().get(rel)) is not None:
            data = _git_output(self.root, "cat-file", "blob", f"HEAD:{old}")
        return None if data is None else data.decode("utf-8", "replace")

    def renamed(self) -> dict[str, str]:
        """{new path: old path} of the notes the index holds as moved since HEAD (git's
        rename detection: the same or a similar text), asked of git once, and only when
        the index removes a path (a move removes its old one)."""
        if "_renamed" not in self.__dict__:
            raw = self.staged_raw()
            out = None if raw is not None and not _removes(raw) else _git_output(
                self.root, "diff", "--cached", "--find-renames", "--name-status", "-z", "--diff-filter=R", "HEAD", "--")
            fields = out.decode("utf-8", "surrogateescape").split("\0") if out else []
            self._renamed = {fields[i + 2]: fields[i + 1] for i in range(0, len(fields) - 2, 3)
                             if fields[i].startswith("R")}
        return self._renamed

    def staged_raw(self) -> bytes | None:
        """git's raw diff of its index against HEAD (``gitcli.staged_diff``), asked of
        git once per hook: every such call reads git's whole index (21 MB, ~40 ms at
        200,000 notes), where the rest of a hook's work is the same at any size.
        ``index_written`` forgets it."""
        if "_staged_raw" not in self.__dict__:
            from cortex import gitcli

            self._staged_raw = gitcli.staged_diff(self.root)
        return self._staged_raw

    def staged_notes(self) -> dict[str, str | None] | None:
        """``headcache.staged_changes``, from ``staged_raw``."""
        from cortex import headcache

        raw = self.staged_raw()
        return None if raw is None else headcache.notes_in(raw)

    def index_written(self) -> None:
        """The hook staged something: git's index is not what ``staged_raw`` and
        ``renamed`` read."""
        self.__dict__.pop("_staged_raw", None)
        self.__dict__.pop("_renamed", None)

    def head_cache(self):
        """The HEAD-following cache (``cortex/headcache.py``), brought up to date once per
        hook (nothing a hook does moves HEAD)."""
        if "_head_cache" not in self.__dict__:
            from cortex import headcache

            self._head_cache = headcache.HeadCache(self.root, self.max_note_bytes()).sync()
        return self._head_cache

    def read(self, rel: str) -> str | None:
        """The note's text, None when it is gone. Raises ``UnreadableNote`` for a link or
        an over-size note, ``UnicodeDecodeError`` for bytes that are not text."""
        try:
            return read_note_bytes(self.root, rel, self.max_note_bytes()).decode("utf-8")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None


# PyYAML compiles, when imported, a negated character class spanning all of Unicode
# (yaml.reader.Reader.NON_PRINTABLE): ~58 M instructions, about 12 ms, the largest single
# cost of a hook run, for a pattern only PyYAML's pure-Python reader uses (notes are
# parsed with the C loader). The class below holds exactly the same characters (a test
# checks every code point) and compiles in a fraction of that; seeded into `re`'s cache
# under PyYAML's pattern, the import finds it compiled. Where `re` keeps no such cache,
# nothing happens and PyYAML compiles its own.
_YAML_NON_PRINTABLE = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"
_SAME_CHARACTERS = "[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x84\x86-\x9F\uD800-\uDFFF\uFFFE\uFFFF]"


def _prime_yaml() -> None:
    if "yaml" in sys.modules:
        return
    import re

    cache = getattr(re, "_cache", None)
    if isinstance(cache, dict):
        cache.setdefault((str, _YAML_NON_PRINTABLE, 0), re.compile(_SAME_CHARACTERS))


def _select(vault: HookVault, files: Iterable[str], report: Report) -> list[str]:
    chosen = []
    for name in files:
        rel = vault.relpath(name)
        if rel is not None and is_markdown(rel) and unprintable_name(rel):
            report.problems.append(_misnamed(rel))
            continue
        if rel is None or not is_markdown(rel):
            continue  # not a note, nor a drawing (checked for credentials): other hooks' business
        link = link_on_path(vault.root, rel)
        if link:
            report.problems.append(Problem(rel, 1, link, "commit the note itself, not a link to it (git rm --cached the link)"))
            continue
        if not (vault.root / rel).is_file():
            report.skipped.append(rel)
            continue
        chosen.append(rel)
    return list(dict.fromkeys(chosen))


def _misnamed(rel: str) -> Problem:
    return Problem(escaped_name(rel), 1, *misnamed_reason(rel))


def _portable(paths: list[str], names: Iterable[str]) -> list[Problem]:
    """Names a checkout on Windows or macOS cannot hold as they are."""
    problems = []
    for rel in paths:
        unportable = unportable_part(rel)
        if unportable:
            part, why, refused = unportable
            problems.append(Problem(rel, 1, f"{part!r} {why}",
                                    "rename it (a clone on Windows could not hold it, and would stop there)",
                                    "error" if refused else "warning"))
    for rel, others in case_twins(list(names), paths).items():
        problems.append(Problem(rel, 1, f"differs from {', '.join(others)} only in case (on macOS and Windows the two are one file)",
                                "rename one of them"))
    return problems


def _existing(vault: HookVault, blobs: dict[str, str | None], report: Report) -> list[str]:
    """The indexed notes present as files; a link or a note in a linked folder is warned
    about and skipped (``validate --all`` reads through no link)."""
    paths = []
    for rel in blobs:
        link = link_on_path(vault.root, rel)
        if link:
            report.problems.append(Problem(rel, 1, f"skipped: {link}", "replace the link by the note itself", "warning"))
        elif (vault.root / rel).is_file():
            paths.append(rel)
    return paths


def validate(files: Sequence[str] = (), *, root: str | os.PathLike | None = None, all_notes: bool = False,
             fixing: bool = True, vault: HookVault | None = None) -> Report:
    """Check the named notes (or every note) against every rule, ids across the vault.
    ``fixing``: whether the commit completes notes (``fix_skipped``), for the hints.
    ``vault``: the fixer's, when one process runs both (what git said is asked once)."""
    _prime_yaml()
    vault = vault or (HookVault(root) if root is not None else HookVault.around())
    report = Report()
    blobs = vault.note_blobs(untracked=True) if all_notes else None  # the working tree's notes, committed or not
    report.problems += [_misnamed(rel) for rel in vault.misnamed]
    paths = _existing(vault, blobs, report) if blobs is not None else _select(vault, files, report)
    if not paths:
        return report
    validator = vault.validator(fixing)
    known: dict[str, str] = {}
    checked: list[tuple[str, str, int]] = []
    for rel in paths:
        try:
            text = vault.read(rel)
        except UnicodeDecodeError as exc:
            report.problems.append(Problem(rel, 1, f"not UTF-8 text ({exc.reason} at byte {exc.start})", "save the file as UTF-8"))
            continue
        except UnreadableNote as exc:
            report.problems += _unread(validator, rel, exc)
            continue
        if text is None:
            report.skipped.append(rel)
            continue
        report.checked += 1
        if vault.committed_as_is(rel):
            # A template (placeholders, YAML that parses once Templater ran) or a drawing:
            # committed as it is, never completed nor asked for fields; a credential in it is refused.
            report.problems += validator.credential_problems(rel, text)
            continue
        problems = validator.check(rel, text, new=True)
        mismatch = [p for p in problems if p.what.startswith(HASH_MISMATCH)]
        if mismatch and vault.committed(rel) is not None:  # in the vault already: the hash stays what it was
            problems = [p for p in problems if p not in mismatch]
        report.problems += problems
        found = read_id(text) if in_partition(rel) else None  # a person's own `id:` property is theirs
        if found:
            checked.append((rel, *found))
            known[rel] = found[0]
    staged = vault.staged_view(known, paths) if blobs is None else None
    if staged is None:
        blobs = vault.note_blobs() if blobs is None else blobs
        ids, names = vault.id_index(blobs, known), list(blobs)
    else:
        ids, names = staged
    report.problems += ids.problems(checked, lambda rel, others: _duplicate_hint(vault, rel, others))
    report.problems += _portable(paths, names)
    report.problems.sort(key=lambda p: (p.path, p.line))
    return report


def _unread(validator, rel: str, exc: UnreadableNote) -> list[Problem]:
    """A note cortex will not read. A memory is refused. A person's own note over the size
    limit (a long web clip) is theirs: refusing it would hold back every other note of the
    commit (git commits all or nothing), so it is committed as it is, with a warning, and
    no command of cortex's reads it (not searched, not in the graph or the brief); only its
    first bytes, as many as the limit, are checked for credentials, which refuse it as
    they refuse any note."""
    if exc.link or in_partition(rel):
        return [Problem(rel, 1, str(exc), "cortex keeps notes of ordinary size, as files")]
    limit = len(exc.head)
    warning = Problem(
        rel, 1, f"{exc.size:,} bytes, over the note limit of {limit:,} (limits.max_note_bytes in "
        "observer/config.yml): committed as it is, but cortex does not read it (not searched, tagged or linked; "
        f"only its first {limit:,} bytes were checked for credentials)",
        "split it into smaller notes to have it searched", "warning")
    return [warning, *validator.credential_problems(rel, exc.head.decode("utf-8", "replace"))]


def _duplicate_hint(vault: HookVault, rel: str, others: list[str]) -> str:
    """What to do about two files with one id, naming the file to act on: the fixer gives
    a copy of a committed note an id of its own, so what comes here is a rename with the
    old path's removal not staged, or a pair it could not tell apart."""
    stashed = _stashed_paths(vault.root)  # pre-commit put a file the person deleted back for the hooks
    gone = [q for q in others if stashed.get(q) or not (vault.root / q).is_file()]
    if gone:
        return (f"a renamed note: {gone[0]} is no longer in the folder, stage its removal too "
                f"(`git add -A`, or `git rm --cached {gone[0]}`)")
    pair = [rel, *others]
    if merging(vault.root, _git_output):
        return (f"one memory a merge left at two paths, {' and '.join(pair)} (renamed on one machine, renamed or "
                "archived on the other): keep one, `git rm -f` the other")
    new = [p for p in pair if vault.committed(p) is None]
    if len(new) == 1:
        copy, original = new[0], next(p for p in pair if p != new[0])
        return (f"{copy} is a copy of {original}: delete {copy}, or its `id:` line and commit again "
                "(the commit gives it an id of its own)")
    return (f"one of {' and '.join(pair)} is a copy: delete it, or its `id:` line and commit again "
            "(the commit gives it an id of its own)")


def _git_output(cwd: Path, *args: str) -> bytes | None:
    """A git command's stdout, or None when it fails (no git, not a repository).

    posix_spawn and a pipe rather than ``subprocess``, whose import (threading,
    selectors, signal) is a few milliseconds of the hook's budget."""
    argv = ["git", "-C", str(cwd), *args]
    if not hasattr(os, "posix_spawnp"):
        import subprocess

        done = subprocess.run(argv, capture_output=True, check=False, env=caller_env(cwd))
        return done.stdout if done.returncode == 0 else None
    r, w = os.pipe()
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        pid = os.posix_spawnp("git", argv, caller_env(cwd), file_actions=[
            (os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_DUP2, null, 2), (os.POSIX_SPAWN_CLOSE, r),
        ])
    except OSError:
        os.close(r)
        return None
    finally:
        os.close(w)
        os.close(null)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks) if os.waitstatus_to_exitcode(status) == 0 else None


def _blob_id(data: bytes) -> str:
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def fix(
    files: Sequence[str] = (),
    *,
    root: str | os.PathLike | None = None,
    now: datetime | None = None,
    new_id: Callable[[int], str] | None = None,
    stage: bool = False,
    vault: HookVault | None = None,
) -> Report:
    """Complete and normalise the named notes in place; with ``stage`` (inside a commit),
    also stage what changed, so the commit takes the completed note."""
    _prime_yaml()
    from cortex.fixer import UNKNOWN, fix_note
    from cortex.notes import uuid7
    from cortex.timefmt import utcnow

    vault = vault or (HookVault(root) if root is not None else HookVault.around())
    report = Report()
    paths = _select(vault, files, report)
    if not paths:
        return report
    taxonomy = vault.taxonomy()
    scanner = vault.scanner()

    def redact(text: str):
        return scanner.redact(without_identity_lines(text))

    now = now or utcnow()
    threshold = vault.forget_threshold()
    schema = vault.schema()
    properties = schema.get("properties") if isinstance(schema, dict) else None
    held = _stashed_paths(vault.root) if stage else {}
    if stage and _may_stage():
        # A commit concluding a person's merge or rebase: a memory a person deleted on one
        # side and cortex only counted on the other stays deleted (``cortex.keepdeleted``).
        from cortex.keepdeleted import remove, to_keep_deleted

        report.kept_deleted = remove(vault.root, to_keep_deleted(vault.root, [p for p in paths if p not in held],
                                                                 _git_output), _git_output)
        gone = {k.path for k in report.kept_deleted}
        paths = [p for p in paths if p not in gone]
    texts: dict[str, str] = {}
    for rel in paths:
        if vault.committed_as_is(rel):
            continue  # never completed: an id, a title written into a template would go into every note made from it
        try:
            text = vault.read(rel)
        except (UnicodeDecodeError, UnreadableNote):
            continue  # the validator reports it
        if text is None:
            report.skipped.append(rel)
            continue
        texts[rel] = text
    copies = _copies(vault, texts, held)
    carried = frozenset(found[0] for rel, text in texts.items() if in_partition(rel) and (found := read_id(text)))
    recounted = _counted_changed(vault, texts) if carried and not merging(vault.root, _git_output) else set()
    for rel, text in texts.items():
        report.checked += 1
        result = fix_note(rel, text, taxonomy, now=now, new_id=new_id or uuid7, redact=redact,
                          previous=vault.committed(rel) if rel in recounted else UNKNOWN,
                          forget_threshold=threshold, copy_of=copies.get(rel), properties=properties,
                          moved_from=vault.renamed().get(rel) if rel in recounted else None)
        if result.wants_previous:
            result = fix_note(rel, text, taxonomy, now=now, new_id=new_id or uuid7, redact=redact,
                              previous=vault.committed(rel), forget_threshold=threshold, copy_of=copies.get(rel),
                              properties=properties, taken_ids=carried, moved_from=vault.renamed().get(rel))
        if result.text != text and rel in held:
            # pre-commit set the person's unstaged edits of this note aside and puts them
            # back after the hooks: a completion staged now could clash with them.
            report.problems.append(Problem(rel, 1, "this note has changes that are not staged",
                                           f"stage them too (`git add {rel}`) and commit again: the hook completes the note then"))
        elif result.text != text:
            # Never in place: killed mid-write, a truncated note would pass the next commit.
            # And only over the text read: an editor saving meanwhile takes no lock, and
            # its save must not be replaced by the completion of the text before it.
            target = vault.root / rel
            if atomic_write(target, result.text.encode("utf-8"), os.stat(target).st_mode & 0o7777,
                            unless_changed=Before(True, text.encode("utf-8"))):
                report.changed[rel] = result.changes
                report.written[rel] = result.text.encode("utf-8")
            else:
                report.problems.append(Problem(rel, 1, CHANGED_MEANWHILE, "commit again: the hook completes the newer text then"))
        elif result.refused:  # the validator, which runs next, says what to change
            report.problems.append(Problem(rel, 1, f"not completed: {result.refused}", "complete the note by hand", "warning"))
    if stage and report.changed and _may_stage():
        if _stage(vault.root, list(report.changed)):
            report.staged = list(report.changed)
        vault.index_written()
    return report


STAGE_WAIT = 5.0  # seconds a completion waits for git's index lock held by another git


def _stage(root: Path, paths: list[str]) -> bool:
    """`git add` the completions; False when git refused. A vault whose
    ``.pre-commit-config.yaml`` predates ``require_serial`` (cortex init never rewrites
    that tracked file) has pre-commit run this hook in parallel batches, one per core,
    whose adds, and whatever git the other batch runs, take git's index lock at the same
    moment: the one that found it taken left its completions unstaged and the commit
    refused. So a refused add is tried again while an index lock is held, for a while."""
    import time

    deadline = time.monotonic() + STAGE_WAIT
    tried = 0
    while _git_output(root, "add", "--", *paths) is None:
        tried += 1
        # Again at once (the lock may be gone already), then only while a lock is held.
        if (tried > 1 and not _index_locked(root)) or time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _index_locked(root: Path) -> bool:
    """Whether another git holds the lock of the index this commit stages into (git
    commit -a's hooks stage into ``index.lock`` itself, whose lock is ``index.lock.lock``)."""
    try:
        index = Path(root, os.environ.get("GIT_INDEX_FILE") or git_dir_of(root) / "index")
    except (OSError, UnicodeDecodeError):  # an unreadable `.git` file: git said why already
        return False
    return index.with_name(index.name + ".lock").exists()


def _counted_changed(vault: HookVault, texts: dict[str, str]) -> set[str]:
    """The memories whose counted fields (``fixer.COUNTED``: a repeat, a twin folded in)
    differ from HEAD's: those `git diff -G<a counted field's line> HEAD` lists, so the
    fixer sees what HEAD has for those alone. git is asked only of the memories HEAD
    has in another version: its diff reads the whole index (~40 ms at 200,000 notes),
    and the others' answers are known without it — a memory as HEAD has it shows no
    line, and one HEAD lacks (new, staged) shows every line, so it is listed when a
    line names a counted field (git's -G searches a new file's whole text, not a
    binary one's)."""
    import re

    from cortex.fixer import COUNTED

    memories = [rel for rel in texts if in_partition(rel)]
    staged = vault.staged_notes() if memories else None
    if staged is None:
        return set()  # no HEAD (or no git): git's diff against HEAD lists nothing
    pattern = f"^({'|'.join(COUNTED)}):"
    at_head = vault.head_cache().blobs(memories)
    changed, ask = set(), []
    for rel in memories:
        data = texts[rel].encode("utf-8")
        if rel not in at_head:
            if staged.get(rel) and b"\0" not in data[:8000] and re.search(pattern, texts[rel], re.M):
                changed.add(rel)
        elif at_head[rel] != _blob_id(data):
            ask.append(rel)
    if ask:
        out = _git_output(vault.root, "--literal-pathspecs", "diff", "--name-only", "-z", "--no-renames",
                          "--no-ext-diff", f"-G{pattern}", "HEAD", "--", *ask)
        changed |= set(out.decode("utf-8", "surrogateescape").split("\0")) - {""} if out else set()
    return changed


def _removes(raw: bytes) -> bool:
    """Whether a raw diff of git's index against HEAD removes a path (or lists one
    unmerged, whose index side is empty too)."""
    from cortex.gitcli import raw_entries

    return any(set(after[1]) == {"0"} for _, _, after in raw_entries(raw))


def _copies(vault: HookVault, texts: dict[str, str], stashed: dict[str, bool]) -> dict[str, str]:
    """{new note: the note it is a copy of}: a note HEAD does not have (nor git's rename
    of one) carrying the id of a note HEAD has, that is still there: in the folder (not
    deleted, also not in the changes pre-commit set aside, ``stashed``) with that id,
    and not staged for removal. Obsidian's "Make a copy" makes such a file, and so does
    pre-commit's rollback when a note is renamed while the hook runs (the old path comes
    back beside the new one). Two files, one id, in one working tree: the new one is a
    memory of its own. Not during a merge (one id on two machines is the merge's and
    ``cortex sync``'s to settle), nor when neither file is committed (which one is the
    copy? the validator asks the person)."""
    from cortex.noteref import by_preference

    ids = {}
    for rel, text in texts.items():
        found = read_id(text) if in_partition(rel) else None
        if found:
            ids[rel] = found[0]
    if not ids:
        return {}
    cache = vault.head_cache()
    at_head = cache.present(list(ids))
    others = {rel: [q for q in cache.paths_with_id(ident) if q != rel]
              for rel, ident in ids.items() if rel not in at_head}
    others = {rel: qs for rel, qs in others.items() if qs}
    if not others or merging(vault.root, _git_output):
        return {}
    renamed = vault.renamed()
    staged = vault.staged_notes() or {}
    out: dict[str, str] = {}
    for rel, candidates in others.items():
        if rel in renamed:
            continue  # a note moved (its old path's removal staged): the same memory
        for q in by_preference(candidates):  # the memory its id names, not a person's copy elsewhere
            if stashed.get(q) or (q in staged and staged[q] is None) or q in renamed.values():
                continue  # deleted in the folder, or its removal staged: a move, not a copy
            try:
                text = vault.read(q)
            except (UnicodeDecodeError, UnreadableNote):
                continue
            if text is not None and (read_id(text) or ("",))[0] == ids[rel]:
                out[rel] = q
                break
    return out


def _may_stage() -> bool:
    """Whether staging a completion lands in the commit and stays in the index: not for
    ``git commit PATH`` (git commits a temporary index, then restores the real one)."""
    index = os.environ.get("GIT_INDEX_FILE", "")
    return not os.path.basename(index).startswith("next-index")


def pre_commit_home() -> str:
    """pre-commit's cache folder, as pre-commit finds it (its ``store.py``)."""
    return os.environ.get("PRE_COMMIT_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pre-commit")


def _patches() -> list[Path]:
    """The patches in which pre-commit set this run's unstaged changes aside: it saves
    them as ``patch<time>-<its pid>`` in its cache folder (the hook's parent process) and
    applies them again after the hooks."""
    home = pre_commit_home()
    suffix = f"-{os.getppid()}"
    try:
        names = [n for n in os.listdir(home) if n.startswith("patch") and n.endswith(suffix)]
    except OSError:
        return []
    # pre-commit keeps old patches: one of an earlier run whose pid was the same is not this run's.
    import time

    recent = time.time() - 3600
    names = [n for n in names if n[5:-len(suffix)].isdigit() and int(n[5:-len(suffix)]) >= recent]
    return [Path(home, n) for n in sorted(names, key=lambda n: int(n[5:-len(suffix)]))]  # the newest last


def _patch_entries(data: bytes) -> dict[str, tuple[bool, str]]:
    """{path: (whether the change is the file's deletion, the abbreviated blob id of the
    file as the patch leaves it)} of a patch git wrote."""
    out: dict[str, tuple[bool, str]] = {}
    path = None
    for line in data.split(b"\n"):
        if line.startswith(b"diff --git a/"):
            path = line[len(b"diff --git a/"):].split(b" b/", 1)[0].decode("utf-8", "surrogateescape")
            out[path] = (False, "")
        elif line.startswith(b'diff --git "a/'):  # a name git quotes (non-ASCII, quotes): C escapes
            import codecs

            quoted = line[len(b'diff --git "a/'):].split(b'" ', 1)[0]
            path = codecs.escape_decode(quoted)[0].decode("utf-8", "surrogateescape")
            out[path] = (False, "")
        elif path is not None and line.startswith(b"deleted file mode"):
            out[path] = (True, out[path][1])
        elif path is not None and line.startswith(b"index ") and b".." in line:
            post = line[len(b"index "):].split(b"..", 1)[1].split(b" ", 1)[0].decode("ascii", "replace")
            out[path] = (out[path][0], post)
    return out


def _stashed_paths(root: Path) -> dict[str, bool]:
    """Paths whose unstaged changes pre-commit set aside for this run (→ whether the
    change is the file's deletion)."""
    out: dict[str, bool] = {}
    for patch in _patches():
        try:
            data = patch.read_bytes()
        except OSError:
            continue
        out.update((path, deleted) for path, (deleted, _) in _patch_entries(data).items())
    return out


RESCUED_DIR = "cortex-rescued"  # in the git folder: never committed, never read as a note


def rescue_saves(root: str | os.PathLike | None, written: dict[str, bytes] | None = None) -> list[Problem]:
    """Keep a copy of every save pre-commit is about to throw away; the hook's last step.

    pre-commit checked the working tree out to the index and applies its patch of the
    unstaged changes again after the hooks. A file saved meanwhile (an editor takes no
    lock) can make that patch fail to apply; pre-commit's rollback then checks every
    tracked file out again (``git checkout -- .``) and applies the patch: what was saved
    during the hooks is in no file, patch or blob. When the patch is there (a commit that
    started with unstaged changes) and would not apply, each tracked file that differs
    from the index (cortex's own unstaged completions, ``written``, aside) and from what
    the rollback leaves is copied to ``<git dir>/cortex-rescued/<UTC time>/<path>``, and
    named in a problem that refuses the commit. Without a patch this costs nothing; with
    one, a ``git diff --name-only``."""
    patches = _patches()
    if not patches:
        return []
    root_path = (Path(root) if root is not None else HookVault.around().root).resolve()
    out = _git_output(root_path, "diff", "--name-only", "-z", "--no-ext-diff", "--no-textconv", "--ignore-submodules", "--")
    changed = [p for p in (out or b"").decode("utf-8", "surrogateescape").split("\0") if p]
    written = written or {}
    keep = []
    for rel in changed:
        path = root_path / rel
        if not os.path.lexists(path):
            continue  # deleted or moved away: the rollback brings the file back, no words are lost
        if rel in written:
            try:
                if path.read_bytes() == written[rel]:
                    continue  # cortex's completion, not staged (`git commit PATH`)
            except OSError:
                pass
        keep.append(rel)
    if not keep:
        return []
    patch = patches[-1]  # this run's (an older one of the same pid is a leftover)
    if any(_git_output(root_path, *config, "apply", "--check", "--whitespace=nowarn", str(patch)) is not None
           for config in ((), ("-c", "core.autocrlf=false"))):  # as pre-commit applies it
        return []  # pre-commit's patch applies: the saves stay as they are
    try:
        entries = _patch_entries(patch.read_bytes())
    except OSError:
        entries = {}
    # A save of the very text the patch puts back (an editor saving what it showed before
    # the commit) loses nothing.
    ids = (_git_output(root_path, "hash-object", "--", *keep) or b"").decode("ascii", "replace").split()
    if len(ids) == len(keep):
        keep = [rel for rel, blob in zip(keep, ids)
                if not (rel in entries and entries[rel][1] and blob.startswith(entries[rel][1]))]
    if not keep:
        return []
    import shutil
    from datetime import timezone

    common = (_git_output(root_path, "rev-parse", "--git-common-dir") or b".git").decode("utf-8", "surrogateescape").strip()
    base = (root_path / common).resolve() / RESCUED_DIR
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    folder, n = base / stamp, 1
    while folder.exists():
        n += 1
        folder = base / f"{stamp}-{n}"
    problems = []
    for rel in keep:
        target = folder / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root_path / rel, target, follow_symlinks=False)
        except OSError as exc:
            problems.append(Problem(rel, 1, f"saved while the commit ran; pre-commit puts the file back as it was when the "
                                            f"commit started (its rollback), and cortex could not keep a copy of the save ({exc})",
                                    "your editor's undo or file recovery may still hold it; then commit again"))
            continue
        shown = target.relative_to(root_path).as_posix() if target.is_relative_to(root_path) else str(target)
        problems.append(Problem(rel, 1, f"saved while the commit ran; pre-commit puts the file back as it was when the "
                                        f"commit started (its rollback), so your save is kept at {shown}",
                                f"copy {shown} back over {rel}, then commit again"))
    return problems


# --- output -------------------------------------------------------------------------------

def render(report: Report, action: str, out=None, *, hook: bool = True, refused: bool = False) -> None:
    """People's view of a report: one line per problem or fixed note. ``refused``: the
    commit does not go through (a problem below), so a staged completion
    waits for the next one rather than being part of this one."""
    out = out or sys.stdout
    for kept in report.kept_deleted:
        out.write(kept.line() + "\n")
    for path, changes in report.changed.items():
        if path in report.staged and refused:
            out.write(f"{path}: completed ({'; '.join(changes)}) and staged; it goes in with the commit, "
                      "once the problems below are solved\n")
        elif path in report.staged:
            out.write(f"{path}: completed ({'; '.join(changes)}), part of this commit\n")
        else:
            out.write(f"{path}: fixed ({'; '.join(changes)}) — review it, `git add` it and commit again\n")
    for problem in report.problems:
        out.write(f"{problem}\n")
    if not hook:
        return  # `cortex validate` says its own one-line summary
    errors, warnings = len(report.errors), len(report.warnings)
    if action == "validate" and errors:
        noun = "problem" if errors == 1 else "problems"
        notes = len({p.path for p in report.errors})
        sys.stderr.write(f"cortex: {errors} {noun} in {notes} note{'s' if notes != 1 else ''}; nothing was committed\n")
    elif warnings and not errors and action == "validate":
        sys.stderr.write(f"cortex: {warnings} warning{'s' if warnings != 1 else ''} (not blocking)\n")


# The ids of cortex's two halves in a pre-commit config: `SKIP=cortex-fix git commit` (pre-commit's
# own switch) commits without completing, also when one `cortex` hook runs both halves.
FIX_ID, VALIDATE_ID = "cortex-fix", "cortex-validate"


def skipped() -> set[str]:
    """The hook ids pre-commit's ``SKIP`` names."""
    return {part.strip() for part in os.environ.get("SKIP", "").split(",")}


def check(files: Sequence[str] = (), *, root: str | os.PathLike | None = None, stage: bool = False) -> dict[str, Report]:
    """What a commit runs: the fixer, then the validator over what it staged, in one
    process; either half is left out when `SKIP` names its id. pre-commit diffs the whole
    working tree around every hook it runs (0.14 s at 200,000 notes): one hook costs one
    diff and one Python start where two hooks cost two."""
    skip = skipped()
    reports: dict[str, Report] = {}
    vault = HookVault(root) if root is not None else HookVault.around()
    if FIX_ID not in skip:
        reports["fix"] = fix(files, stage=stage, vault=vault)
    if VALIDATE_ID not in skip:
        reports["validate"] = validate(files, fixing=FIX_ID not in skip, vault=vault)
    if stage:  # last: a save made during everything above
        rescued = rescue_saves(root, reports["fix"].written if "fix" in reports else None)
        if rescued:
            reports["rescued"] = Report(problems=rescued)
    if "fix" in reports and "validate" in reports:
        # Both halves refuse a file no note may be (a control character in its name, a
        # link): said once, by the validator, whose total counts it (it was printed twice).
        said = set(reports["validate"].problems)
        reports["fix"].problems = [p for p in reports["fix"].problems if p not in said]
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cortex.hooks check|fix|validate [--all] [--stage] [--json] FILES...``"""
    from cortex.errors import CortexError

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("check", "validate", "fix"):
        sys.stderr.write("usage: python -m cortex.hooks check|fix|validate [--all] [--stage] [--json] [FILES...]\n")
        return 2
    action, rest = args[0], args[1:]
    flags = {a for a in rest if a in ("--all", "--json", "--stage")}
    files = [a for a in rest if a not in flags]
    try:
        if action == "check":
            reports = check(files, stage="--stage" in flags)
        elif action == "validate":
            reports = {"validate": validate(files, all_notes="--all" in flags, fixing=FIX_ID not in skipped())}
        else:
            reports = {"fix": fix(files, stage="--stage" in flags)}
            if "--stage" in flags:  # the fixing half as a hook of its own
                reports["fix"].problems += rescue_saves(None, reports["fix"].written)
    except CortexError as exc:
        sys.stderr.write(f"cortex: {exc.message}\n" + (f"  hint: {exc.hint}\n" if exc.hint else ""))
        return exc.exit_code
    except OSError as exc:  # the file system said no (a full disk, a folder not writable): said, as the CLI says it
        from cortex.errors import os_said

        sys.stderr.write(f"cortex: {os_said(exc)}; the notes were not checked, so the commit is "
                         "refused: fix that, then commit again\n")
        return 1
    render_all(reports, as_json="--json" in flags, nested=action == "check")
    return max((r.exit_code for r in reports.values()), default=0)


def render_all(reports: dict[str, Report], *, as_json: bool, nested: bool) -> None:
    """Each half's report, people's view or JSON (`nested`: one object per half)."""
    if as_json:
        data = {k: r.as_dict() for k, r in reports.items()} if nested else next(iter(reports.values())).as_dict()
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
        return
    refused = any(r.exit_code for r in reports.values())
    for action, report in reports.items():
        render(report, action, refused=refused)


if __name__ == "__main__":
    raise SystemExit(main())
