"""A frozen view of the committed notes, built from HEAD's tree, for the maintenance jobs.

Jobs plan over HEAD (what git holds), never over half-saved files: a note a person is
editing is skipped by the apply step (``GitRepo.is_dirty``). Parsing 50,000 notes costs
seconds, so what each blob says is cached in ``maintain/notes.json`` (``layout.cache_dir``) by blob oid,
and each folder's listing by tree oid: after a commit only the changed folders are
listed again and only the changed notes parsed again.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cached_property
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterator

from cortex.counts import Count, parse_merged
from cortex.fsutil import atomic_write
from cortex.layout import (MAX_NOTE_BYTES, NOT_NOTES, PARTITIONS, in_partition, is_drawing, misnamed_warning,
                           template_folders, unprintable_name)
from cortex.notes import NoteSyntaxError, inline_tags, note_tags, parse_note, source_hash, split_frontmatter, title_of
from cortex.taxonomy import ARCHIVE
from cortex.timefmt import format_time

CACHE_VERSION = 8  # 2: inline #tags counted; notes outside vault/ and mind/ too; 3: links listed apart; 4: merged_counts; 5: archive_reason;
# 6: frontmatter tags as Obsidian reads them (notes.note_tags); 7: misnamed files listed apart;
# 8: tags composed (NFC)


@dataclass(frozen=True)
class NoteInfo:
    path: str
    blob: str
    id: str | None
    type: str | None
    created: str | None
    importance: float | None
    last_reinforced: str | None
    reinforced: int
    locked: bool
    title: str
    attribution: str | None
    entities: tuple[tuple[str, str], ...]
    tags: tuple[str, ...]
    links: tuple[str, ...]
    merged_from: tuple[str, ...]
    merged_into: str | None
    source_hash: str
    body: str
    broken: bool = False  # frontmatter that does not parse: read, never rewritten
    merged_counts: tuple[tuple[str, int], ...] = ()  # cortex/counts.py
    archive_reason: str | None = None  # faded, merged, forgotten, superseded (in mind/archive/)

    @property
    def count(self) -> Count:
        """``reinforced`` with what each absorbed note brought (``cortex.counts``)."""
        return Count(self.reinforced, dict(self.merged_counts))

    @property
    def as_memorized(self) -> bool:
        """Whether the body is still the observation its ``source_hash`` names: not so
        after a person's edit of the words, nor in a note written to claim another's."""
        return source_hash(self.body) == self.source_hash

    @property
    def partition(self) -> str:
        """``vault`` or ``mind``; "" for a person's note elsewhere in the repository."""
        return self.path.split("/", 1)[0] if in_partition(self.path) else ""

    @property
    def archived(self) -> bool:
        parts = self.path.split("/")
        return len(parts) >= 4 and parts[0] == "mind" and parts[1] == ARCHIVE

    @property
    def archived_by_person(self) -> bool:
        """In the archive without the ``archive_reason`` every archiving of cortex's writes
        (decay, forget, dedup, supersede): a person put it there, and it stays."""
        return self.archived and self.archive_reason is None

    @property
    def folder(self) -> str:
        """The type folder, archive or not: ``mind/archive/facts/x.md`` → ``facts``."""
        parts = self.path.split("/")
        return parts[2] if self.archived else (parts[1] if len(parts) > 2 else "")

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def key(self) -> str:
        return self.id or f"path:{self.path}"

    def meta(self) -> dict[str, Any]:
        """The fields ``effective_importance`` reads."""
        return {"type": self.type, "importance": self.importance, "created": self.created,
                "last_reinforced": self.last_reinforced}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _strings(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None and not isinstance(v, (dict, list))]
    if isinstance(value, str) and value:
        return [value]
    return []


_LINE_RE = re.compile(r"([A-Za-z_][\w-]*):(?: (.*))?")
_ENTITY_RE = re.compile(r"  - \{name: (\"(?:[^\"\\]|\\.)*\"|[^,{}\"]+), type: (\"(?:[^\"\\]|\\.)*\"|[^,{}\"]+)\}")
_ITEM_RE = re.compile(r"\s*(\"(?:[^\"\\]|\\.)*\"|[^,\[\]\"]*?)\s*(?:,|$)")
_PLAIN_RE = re.compile(r"[A-Za-z0-9_.:+@-][^#{}\[\],&*!|>'%`\"]*")
_NUMBER_RE = re.compile(r"-?\d+(\.\d+)?")
_SURROGATE = re.compile("[\ud800-\udfff]")


_WANTED = frozenset({"id", "type", "created", "importance", "last_reinforced", "reinforced", "maintainer", "locked",
                     "title", "attribution", "entities", "tags", "links", "merged_from", "merged_into", "source_hash",
                     "merged_counts", "archive_reason"})
_SAFE_START = frozenset('"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ')


class _Unusual(Exception):
    """A frontmatter line the fast reader does not know: YAML reads the note instead."""


def _scalar(text: str) -> Any:
    if text.startswith('"'):
        value = json.loads(text)
        if "\\u" in text and _SURROGATE.search(value):
            raise _Unusual(text)  # "\ud800": JSON takes half a character, YAML refuses the note
        return value
    if not _PLAIN_RE.fullmatch(text) or text.endswith(" ") or " #" in text or text.endswith(":") or ": " in text:
        raise _Unusual(text)
    if _NUMBER_RE.fullmatch(text):
        return float(text) if "." in text else int(text)
    low = text.lower()
    if low in ("true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"):
        raise _Unusual(text)  # YAML's booleans and nulls: let YAML decide
    return text


def _flow(text: str) -> list[Any]:
    inner = text[1:-1].strip()
    if not inner:
        return []
    items, pos = [], 0
    while pos < len(inner):
        m = _ITEM_RE.match(inner, pos)
        if m is None or m.end() == pos:
            raise _Unusual(text)
        items.append(_scalar(m.group(1)))
        pos = m.end()
    return items


def fast_meta(frontmatter: str) -> dict[str, Any]:
    """The frontmatter cortex itself renders (cortex/notes.py), read ~20× faster than YAML.
    Anything else raises ``_Unusual`` and YAML reads the note: the result is the same."""
    meta: dict[str, Any] = {}
    block: list | None = None
    for line in frontmatter.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("  - "):
            m = _ENTITY_RE.fullmatch(line)
            if block is None or m is None:
                raise _Unusual(line)
            block.append({"name": _scalar(m.group(1)), "type": _scalar(m.group(2))})
            continue
        m = _LINE_RE.fullmatch(line)
        if m is None or m.group(1) in meta:
            raise _Unusual(line)
        key, value = m.group(1), (m.group(2) or "").strip()
        block = None
        if key not in _WANTED and value and value[0] in _SAFE_START:
            continue  # a field no job reads (context, quotes, scores): not parsed
        if not value:
            block = meta[key] = []
        elif value == "true" and key == "locked":
            meta[key] = True
        elif value.startswith("[") and value.endswith("]"):
            meta[key] = _flow(value)
        else:
            meta[key] = _scalar(value)
    return meta


def _read(text: str) -> tuple[dict[str, Any], str, bool]:
    try:
        split = split_frontmatter(text)
    except NoteSyntaxError:
        return {}, text, True
    if split is not None:
        try:
            return fast_meta(split[0]), split[1], False
        except (_Unusual, ValueError):
            pass
    try:
        note = parse_note(text)
        return note.meta, note.body, False
    except NoteSyntaxError:
        return {}, text, True


def describe(data: bytes | None) -> dict[str, Any]:
    """What a note blob says, as a JSON-able dict (the cached form of ``NoteInfo``).
    A blob over the note limit (None: never read) is not parsed: it counts as broken,
    as the hook says."""
    if data is None:
        meta, body, broken = {}, "", True
    else:
        meta, body, broken = _read(data.decode("utf-8", errors="replace"))
    entities = []
    listed = meta.get("entities")  # a person may write anything there: only a list names entities
    for item in listed if isinstance(listed, list) else ():
        if isinstance(item, dict) and item.get("name"):
            entities.append([str(item["name"]), str(item.get("type") or "")])
        elif isinstance(item, str) and item:
            entities.append([item, ""])
    # a person may write anything: .inf, .nan, a word (a value that is no number counts as none)
    try:
        importance = float(meta["importance"]) if meta.get("importance") is not None else None
    except (TypeError, ValueError):
        importance = None
    if importance is not None and not math.isfinite(importance):
        importance = None
    try:
        reinforced = max(0, int(meta.get("reinforced") or 0))
    except (TypeError, ValueError, OverflowError):
        reinforced = 0
    body = body.strip()
    return {
        "id": _text(meta.get("id")),
        "type": _text(meta.get("type")),
        "created": _text(meta.get("created")),
        "importance": importance,
        "last_reinforced": _text(meta.get("last_reinforced")),
        "reinforced": reinforced,
        "locked": meta.get("maintainer") == "human" or meta.get("locked") is True,
        "title": _text(meta.get("title")) or body.split("\n", 1)[0][:80],
        "titled": bool(meta.get("title")),
        "attribution": _text(meta.get("attribution")),
        "entities": entities,
        "tags": list(dict.fromkeys([*note_tags(meta.get("tags")), *inline_tags(body)])),
        "links": _strings(meta.get("links")),
        "merged_from": _strings(meta.get("merged_from")),
        "merged_into": _text(meta.get("merged_into")),
        "archive_reason": _text(meta.get("archive_reason")),
        "merged_counts": sorted(parse_merged(meta.get("merged_counts")).items()),
        "source_hash": _text(meta.get("source_hash")) or source_hash(body),
        "body": body,
        "broken": broken,
    }


def _info(path: str, blob: str, d: dict[str, Any]) -> NoteInfo:
    return NoteInfo(
        path=path, blob=blob, id=d["id"], type=d["type"], created=d["created"], importance=d["importance"],
        last_reinforced=d["last_reinforced"], reinforced=d["reinforced"], locked=d["locked"],
        # named as query and get_note name it; a memory without a title, by its first line
        title=d["title"] if d.get("titled") else title_of(path, {}) or d["title"],
        attribution=d["attribution"], entities=tuple((n, t) for n, t in d["entities"]), tags=tuple(d["tags"]),
        links=tuple(d["links"]), merged_from=tuple(d["merged_from"]), merged_into=d["merged_into"],
        source_hash=d["source_hash"], body=d["body"], broken=d["broken"],
        merged_counts=tuple((str(i), int(n)) for i, n in d.get("merged_counts") or ()),
        archive_reason=d.get("archive_reason"),
    )


@dataclass(frozen=True)
class Snapshot:
    head: str | None
    trees: tuple[tuple[str, str], ...]  # (partition, tree oid) at HEAD
    notes: tuple[NoteInfo, ...]
    links: tuple[str, ...] = ()  # `.md` paths that are symbolic links: no notes, never followed
    misnamed: tuple[str, ...] = ()  # warnings for names no note may have (`layout.unprintable_name`): never read
    templates: tuple[str, ...] = ()  # the folders Obsidian takes templates from (`layout.template_folders`): no notes

    def __iter__(self) -> Iterator[NoteInfo]:
        return iter(self.notes)

    def __len__(self) -> int:
        return len(self.notes)

    @property
    def signature(self) -> str:
        """Changes exactly when a note at HEAD changes, or a folder is set apart for templates."""
        listed = ",".join(f"{p}:{t}" for p, t in self.trees)
        return f"{listed};templates:{','.join(self.templates)}" if self.templates else listed

    def by_id(self) -> dict[str, NoteInfo]:
        return self._by_id

    def by_path(self) -> dict[str, NoteInfo]:
        return self._by_path

    @cached_property
    def _by_id(self) -> dict[str, NoteInfo]:
        """The note each id names when several carry it (``noteref.preferred``): the
        memory in mind/, not a copy a person keeps elsewhere with its id; a memory a
        person moved out of mind/ is still the one note its id names."""
        from cortex.noteref import by_preference

        by_path = {n.path: n for n in self.notes if n.id}
        named: dict[str, NoteInfo] = {}
        for path in by_preference(by_path):
            named.setdefault(by_path[path].id, by_path[path])
        return named

    @cached_property
    def _by_path(self) -> dict[str, NoteInfo]:
        return {n.path: n for n in self.notes}

    @cached_property
    def by_merged_from(self) -> dict[str, NoteInfo]:
        """The note each folded id now lives in: a sync folds a twin into the note that
        lists its id in ``merged_from`` (``cortex.settle``)."""
        return {i: n for n in self.notes if not n.archived for i in n.merged_from}


class SnapshotCache:
    """Blob and tree caches under ``maintain/`` (``layout.cache_dir``); rebuildable, so any damage just
    means parsing again."""

    def __init__(self, cache_dir: Path) -> None:
        self.path = cache_dir / "maintain" / "notes.json"
        self.blobs: dict[str, dict] = {}
        self.trees: dict[str, dict] = {}
        self._loaded = False
        self._dirty = False

    def load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") == CACHE_VERSION:
                self.blobs, self.trees = data["blobs"], data["trees"]
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            self.blobs, self.trees = {}, {}

    def save(self, used_blobs: set[str], used_trees: set[str]) -> None:
        if not self._dirty and set(self.blobs) == used_blobs and set(self.trees) == used_trees:
            return
        self.blobs = {k: v for k, v in self.blobs.items() if k in used_blobs}
        self.trees = {k: v for k, v in self.trees.items() if k in used_trees}
        payload = {"version": CACHE_VERSION, "blobs": self.blobs, "trees": self.trees}
        atomic_write(self.path, json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        self._dirty = False


_LINK = 0o120000  # git's mode for a symbolic link


def _json_safe(name: str) -> str:
    """A name that is not UTF-8 (lone surrogates, as pygit2 decodes it) in a form the
    UTF-8 cache can hold and give back: its bytes, one character each."""
    return name.encode("utf-8", "surrogateescape").decode("latin-1")


def _from_json_safe(name: str) -> str:
    return name.encode("latin-1").decode("utf-8", "surrogateescape")


def _described(git, oid: str, max_note_bytes: int) -> dict[str, Any]:
    """``describe`` of a blob, read only when within the note limit: its size comes from
    the object's header (pygit2's ``Blob.size`` reads the whole blob first). A pygit2
    without ``Odb.read_header`` (1.18, the last for Python 3.10) loads the blob for its
    size, as before, and still does not describe it when over the limit."""
    header = getattr(git.odb, "read_header", None)
    if header is not None:
        return describe(None if header(oid)[1] > max_note_bytes else git[oid].data)
    blob = git[oid]
    return describe(None if blob.size > max_note_bytes else blob.data)


def take_snapshot(repo, cache: SnapshotCache, max_note_bytes: int = MAX_NOTE_BYTES) -> Snapshot:
    """Every note at HEAD: ``vault/`` and ``mind/`` (archive included) and a person's
    notes anywhere else (not ``observer/``, not dot folders, not the folders Obsidian takes
    templates from: `layout.template_folders`, as its settings say now; the listings cached
    are the trees', so a folder set apart or let go is followed at once). A note over
    ``max_note_bytes`` (the vault's ``limits.max_note_bytes``) is never read."""
    templates = template_folders(repo.root)
    cache.load()
    notes: list[NoteInfo] = []
    links: list[str] = []
    misnamed: list[str] = []
    trees: list[tuple[str, str]] = []
    used_blobs: set[str] = set()
    used_trees: set[str] = set()
    git = repo.repo

    def described(blob: str) -> dict[str, Any]:
        """The blob's description, from the cache or read now (``_described``)."""
        used_blobs.add(blob)
        if blob not in cache.blobs:
            cache.blobs[blob] = _described(git, blob, max_note_bytes)
            cache._dirty = True
        return cache.blobs[blob]

    def walk(tree, prefix: str) -> None:
        key = str(tree.id)
        listing = cache.trees.get(key)
        if listing is None:
            files, dirs, linked, unnamed = [], [], [], []
            for obj in tree:
                if obj.name.startswith(".") or (obj.type_str != "tree" and not obj.name.endswith(".md")):
                    continue
                if unprintable_name(obj.name):
                    unnamed.append(_json_safe(obj.name))
                elif obj.type_str == "tree":
                    dirs.append([obj.name, str(obj.id)])
                else:  # a link's blob is the path it points to, not a note
                    (linked if obj.filemode == _LINK else files).append([obj.name, str(obj.id)])
            listing = cache.trees[key] = {"files": files, "dirs": dirs, "links": linked, "misnamed": unnamed}
            cache._dirty = True
        used_trees.add(key)
        links.extend(f"{prefix}/{name}" for name, _ in listing["links"])
        misnamed.extend(misnamed_warning(f"{prefix}/{_from_json_safe(name)}") for name in listing["misnamed"])
        for name, blob in listing["files"]:
            if is_drawing(name):
                continue  # an Excalidraw drawing: no note
            notes.append(_info(f"{prefix}/{name}", blob, described(blob)))
        for name, oid in listing["dirs"]:
            if f"{prefix}/{name}" not in templates:
                walk(git[oid], f"{prefix}/{name}")

    top = repo.head_tree()
    for obj in sorted(top or (), key=lambda o: (o.name not in PARTITIONS, o.name)):
        if obj.name.startswith(".") or obj.name in NOT_NOTES or obj.name in templates:
            continue
        if unprintable_name(obj.name) and (obj.type_str == "tree" or obj.name.endswith(".md")):
            misnamed.append(misnamed_warning(obj.name))
        elif obj.type_str == "tree":
            trees.append((obj.name, str(obj.id)))
            walk(obj, obj.name)
        elif obj.name.endswith(".md") and is_drawing(obj.name):
            continue
        elif obj.name.endswith(".md") and obj.filemode == _LINK:
            links.append(obj.name)
        elif obj.name.endswith(".md"):  # a note at the top, where Obsidian puts new ones
            trees.append((obj.name, str(obj.id)))
            blob = str(obj.id)
            notes.append(_info(obj.name, blob, described(blob)))
    cache.save(used_blobs, used_trees)
    return Snapshot(repo.head_oid(), tuple(trees), tuple(notes), tuple(links), tuple(misnamed), templates)
