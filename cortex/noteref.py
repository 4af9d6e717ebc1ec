"""Naming a note: by its vault path or by the `id` in its frontmatter.

What an agent or a person passes to `get_note`, `cortex show` or `cortex forget` is
resolved here, the same way everywhere; a reference that cannot name a note of this
vault is `BadReference`, with a message saying what would.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Iterable

from cortex.errors import UsageError
from cortex.layout import in_folders, is_note_path, template_folders
from cortex.taxonomy import ARCHIVE

if TYPE_CHECKING:
    from cortex.vault import Vault


class BadReference(UsageError):
    """Not a note of this vault, or not one cortex can read: the message says why and
    what to pass instead (exit 2 from the CLI, a tool error for the MCP server)."""


class NoteNotUTF8(BadReference):
    """A note saved in another encoding: a file to fix, as `validate` and the hook say
    (exit 1, "vault"), not a wrong argument."""

    kind = "vault"
    exit_code = 1


FIND_HINT = "use an id or path from `cortex query` or `cortex query --recent 7d` results (`--archived` finds archived ones)"


class NoteNotFound(BadReference):
    """A well-formed id or path that names no note here: nothing found, exit 1, as in
    every command that looks a name up (`quarantine show`, `graph neighbors`). The hint
    names the CLI's commands; the MCP server says its own tools instead."""

    kind = "not_found"  # the name given is no note's
    exit_code = 1

    def __init__(self, message: str, paths: tuple = ()) -> None:
        super().__init__(message, FIND_HINT)
        self.paths = paths


# what an archived memory's fields say of why it left, each only as cortex writes it: a
# person's file could put any words there, and an error text reaches the agent unfenced
_SUCCESSOR = {"merged": ("merged_into", "merged into"), "superseded": ("superseded_by", "superseded by")}
_REASONS = ("merged", "superseded", "forgotten", "faded")


def gone(root: Path, rel: str) -> NoteNotFound:
    """The error for a path that names no file. A memory of that path in `mind/archive/`
    (a path an agent kept from an earlier answer, archived since by dedup, decay, a
    correction or `forget`) is named, with why it was archived and the id of the memory
    that replaced it, which `get_note` and `cortex show` take."""
    parts = rel.split("/")
    if len(parts) > 2 and parts[0] == "mind" and parts[1] != ARCHIVE:
        archived = "/".join(["mind", ARCHIVE, *parts[1:]])
        meta = _frontmatter(root, archived)
        if meta is not None:
            said = f"no note at {rel}: a memory of that name was archived to {archived}"
            reason = meta.get("archive_reason")
            field, words = _SUCCESSOR.get(reason, ("", ""))
            successor = meta.get(field)
            if isinstance(successor, str) and ID_RE.match(successor):
                said += f", {words} the memory {successor}"
            elif reason in _REASONS:
                said += f" ({reason})"
            return NoteNotFound(said, (archived,))
    return NoteNotFound(f"no note at {rel} (moved or archived, maybe)")


def _frontmatter(root: Path, rel: str) -> dict | None:
    """A note's frontmatter, or None for a file that is not there or not a note cortex reads."""
    from cortex.layout import UnreadableNote, read_note_bytes
    from cortex.notes import NoteSyntaxError, parse_note

    try:
        return dict(parse_note(read_note_bytes(root, rel).decode("utf-8")).meta)
    except (OSError, UnreadableNote, UnicodeDecodeError, NoteSyntaxError):
        return None


def note_path(root: Path, ref: str) -> str | None:
    """The vault-relative path `ref` names, if it is written as a path (a `.md` name or a
    slash); None for anything else (an id, perhaps)."""
    text = ref.strip().replace("\\", "/")
    if not (text.endswith(".md") or "/" in text):
        return None
    candidate = Path(text)
    if candidate.is_absolute():
        try:
            text = candidate.resolve().relative_to(root).as_posix()
        except ValueError:
            raise BadReference(f"{ref!r} is outside the vault: pass a path like mind/facts/2026-02-16-e7f4a2b9.md") from None
    parts = PurePosixPath(text).parts
    if not parts or ".." in parts or not is_note_path(PurePosixPath(*parts).as_posix()):
        raise BadReference(f"{ref!r} is not a note path: a note is a markdown file of the vault (.md), "
                          "not under observer/ or a dot folder")
    folder = next((f for f in template_folders(root) if in_folders(PurePosixPath(*parts).as_posix(), (f,))), None)
    if folder is not None:
        raise BadReference(f"{ref!r} is a template, not a note: {folder}/ is the folder Obsidian's Templates or "
                           "Templater plugin takes templates from (.obsidian settings)")
    return text


ID_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,99}$")
_FRONT_ID = re.compile(r"^id:[ \t]*['\"]?([^'\"\s]+)['\"]?[ \t]*$", re.M)


def note_id_of(path: Path) -> str | None:
    """The `id` in a note's frontmatter (first 4 KB), without a YAML parse."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    if not head.startswith("---"):
        return None
    end = head.find("\n---", 3)
    m = _FRONT_ID.search(head[: end if end > 0 else len(head)])
    return m.group(1) if m else None


def preferred(paths: Iterable[str]) -> str | None:
    """Of the notes that carry one id, the one the id names: a memory in ``mind/`` (an
    active one before one in the archive), then ``vault/``; only where neither has it, a
    note elsewhere (the first by path): a memory a person moved into a folder of their
    own is still the note its id names. A copy a person made beside the memory keeps the
    id and is never the note the id names: archiving it (a ``--supersedes`` that picked
    it by its name's order) left the memory active."""
    ranked = by_preference(paths)
    return ranked[0] if ranked else None


def by_preference(paths: Iterable[str]) -> list[str]:
    """``paths`` in the order of ``preferred``: the note an id names first."""
    def rank(path: str) -> tuple[int, str]:
        if path.startswith(f"mind/{ARCHIVE}/"):
            return 2, path
        return {"mind": 0, "vault": 1}.get(path.split("/", 1)[0], 3), path

    return sorted(paths, key=rank)


def kind_of(path: str) -> str:
    """What a note that is not an active memory is, for a message refusing to archive it."""
    if path.startswith("vault/"):
        return "permanent data (vault/)"
    return "a person's own note (outside vault/ and mind/)"


def find_note_by_id(root: Path, ident: str) -> str | None:
    """The vault path of the note whose frontmatter has `id: ident` (`git grep`, in C, over
    tracked and untracked notes, wherever a person keeps them; a walk over the files
    where git cannot answer), by the rule of ``preferred``."""
    from cortex import gitcli

    candidates: list[str] | None = None
    proc = gitcli.run_bytes(root, "-c", "core.quotepath=off", "grep", "-l", "-I", "-E", "--untracked",
                            "-e", f"^id:[[:space:]]*['\"]?{ident}['\"]?[[:space:]]*$", "--", "*.md", timeout=60)
    if proc is not None and proc.code in (0, 1):
        candidates = proc.out.decode("utf-8", "surrogateescape").splitlines()  # names as listed everywhere
    if candidates is None:
        candidates = [p.relative_to(root).as_posix() for p in root.rglob("*.md")]
    return preferred(p for p in candidates if is_note_path(p) and note_id_of(root / p) == ident)


def resolve(root: Path, ref: str, known: dict[str, str] | None = None) -> str:
    """The vault path `ref` names: a path as given, else a note id (looked up in
    `known` first, a cache of ids already seen, which it updates)."""
    ref = (ref or "").strip()
    if not ref:
        raise BadReference("give a note id (from query results) or a path like mind/facts/2026-02-16-e7f4a2b9.md")
    rel = note_path(root, ref)
    if rel is not None:
        return rel
    if not ID_RE.match(ref):
        raise BadReference(f"{ref!r} is neither a note id nor a note path (vault/... or mind/..., ending in .md)")
    cached = (known or {}).get(ref)
    if cached and note_id_of(root / cached) == ref:
        return cached
    found = find_note_by_id(root, ref)
    if found is None:
        raise NoteNotFound(f"no note with id {ref!r}")
    if known is not None:
        known[ref] = found
    return found


def read_note(vault: "Vault", ref: str, known: dict[str, str] | None = None) -> tuple[dict, str]:
    """(the note's fields: path, id, type, title, frontmatter, body; its text as
    written) for `ref`. Read bounded and never through a link (`layout.read_note_bytes`)."""
    from cortex.layout import UnreadableNote, read_note_bytes
    from cortex.notes import NoteSyntaxError, parse_note, title_of

    rel = resolve(vault.root, ref, known)
    try:
        text = read_note_bytes(vault.root, rel, vault.settings.limits.max_note_bytes).decode("utf-8")
    except UnreadableNote as exc:  # a link (to .git/config, outside the vault) or a huge file
        if exc.link:
            raise BadReference(f"{exc}: it could lead outside the vault or into .git/; cortex reads notes only") from None
        raise BadReference(str(exc)) from None
    except FileNotFoundError:
        raise gone(vault.root, rel) from None
    except UnicodeDecodeError as exc:  # said as the hook and validate say it
        raise NoteNotUTF8(f"{rel} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                           "save it as UTF-8: cortex reads and writes UTF-8 only") from None
    except OSError as exc:
        raise BadReference(f"cannot read {rel}: {exc}") from None
    try:
        note = parse_note(text)
        meta, body = dict(note.meta), note.body
    except NoteSyntaxError as exc:
        meta, body = {"frontmatter_error": f"line {exc.line}: {exc}"}, text
    record = {"path": rel, "id": meta.get("id", ""), "type": meta.get("type", ""), "title": title_of(rel, meta),
              "frontmatter": meta, "body": body.strip("\n")}
    return record, text
