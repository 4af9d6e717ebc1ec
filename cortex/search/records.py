"""What the search index knows about one note: a frozen record built from the file text.

Pure: text in, record out. The index stores these fields; filters and ranking read them
back from the index, so a query never re-reads note files.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Mapping

from cortex.notes import WIKILINK_RE, inline_tags, note_tags, title_of
from cortex.taxonomy import ARCHIVE, Taxonomy

# The on-disk layout of the search index (`layout.search_dir`); an index of another format is rebuilt.
# 3: tags and entities joined by U+001F, not a comma; accents folded.
# 4: ø, ł, ß, æ, œ... folded too.
# 5: notes outside vault/ and mind/ (the top folder is "."), inline #tags.
# 6: frontmatter tags as Obsidian reads them (`tags: a, b` is two tags, `#a` is a).
# 7: a note whose frontmatter does not parse, searched whole.
# 8: `ts` in milliseconds: notes of one second listed newest first, --since/--until exact;
#    credentials redacted in what is stored and indexed (a note committed past the hooks).
# 9: tags and entities composed (NFC): a decomposed `#résumé` (macOS) was the tag `re`;
#    Chinese and Japanese indexed by pairs of characters (a sentence was one term).
# 10: each Chinese and Japanese character indexed too (a one-character query found nothing).
# 11: a note without `created` dated by its first commit, else its file's time (it had no
#     date: never listed by --recent nor found with --since).
# 12: such a note renamed since dated by its first name's first commit (it had the rename's).
# 13: a person's note dated by its own `Created:` or `created_at:` (read as its commit's date).
# 14: Korean (Hangul syllables) indexed by pairs too (a word with a particle joined was
#     another term). 15: Excalidraw drawings are no notes (layout.is_drawing).
FORMAT = 15
TS_PER_SECOND = 1000  # the stored, sortable `ts`: milliseconds since the epoch

# The index stores tags and entities as one string each, joined by a character no name
# holds (a comma did: "Acme, Inc." could never be matched again).
LIST_SEP = "\x1f"
SNIPPET_CHARS = 300

# Markdown a person writes that reads as noise in a one-line excerpt: a heading's #s, a
# quote's or callout's > and [!kind] at the start of a line. An Obsidian link reads as
# the text it shows ([[Tide Gauge|the gauge]] -> the gauge, [[Tide Gauge#Power]] -> Tide Gauge).
_LINE_MARKUP = re.compile(r"^[ \t]*(?:>[ \t]*)*(?:\[![^\]\n]*\][+-]?[ \t]*)?(?:#{1,6}[ \t]+)?", re.M)


def snippet_of(body: str) -> str:
    """The start of a note's body as one line of reading text, at most SNIPPET_CHARS."""
    head = _LINE_MARKUP.sub("", body[: SNIPPET_CHARS * 2])
    head = WIKILINK_RE.sub(lambda m: m.group(2) or m.group(1), head)
    return " ".join(head.split())[:SNIPPET_CHARS]


@dataclass(frozen=True)
class NoteRecord:
    path: str  # vault-relative, posix
    body: str
    title: str = ""
    id: str = ""
    type: str = ""
    category: str = ""
    partition: str = ""
    archived: bool = False
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    attribution: str = ""
    created: str = ""  # ISO-8601 as written in the note
    created_ts: float = 0.0  # seconds since the epoch; 0 when unknown
    last_reinforced_ts: float = 0.0
    importance: float = 0.5
    confidence: float = 0.5
    content_hash: str = ""  # sha256 of the whole file: what incremental updates compare
    mtime_ns: int = 0
    size: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        return self.path.rsplit("/", 1)[0] if "/" in self.path else "."

    @property
    def text(self) -> str:
        """What both retrievers see: the title (when it adds anything) and the body."""
        if self.title and not self.body.startswith(self.title.rstrip("…")):
            return f"{self.title}\n{self.body}"
        return self.body


def content_hash(data: bytes) -> str:
    import hashlib  # only updates hash: a query need not load OpenSSL

    return hashlib.sha256(data).hexdigest()


def _timestamp(value: Any) -> float:
    from cortex.timefmt import parse_time

    if value in (None, ""):
        return 0.0
    try:
        return parse_time(value).timestamp()
    except (ValueError, TypeError, OverflowError):
        return 0.0


def _iso(value: Any) -> str:
    """`created` as written: YAML turns unquoted timestamps into datetimes, so format them back."""
    from datetime import date, datetime

    if value is None:
        return ""
    if isinstance(value, (datetime, date)):
        from cortex.timefmt import format_time, parse_time

        try:
            return format_time(parse_time(value))
        except ValueError:  # 9999-12-31T23:59:59-14:00 is past the calendar in UTC: kept as written
            return value.isoformat()
    return str(value)


def _score(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    # `.nan` or `.inf` in YAML: no score, as the maintenance snapshot reads them
    return max(0.0, min(1.0, number)) if math.isfinite(number) else default


def _names(values: Any, key: str | None = None) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, (str, dict)):
        values = [values]
    out = []
    for item in values if isinstance(values, (list, tuple)) else []:
        if key and isinstance(item, dict):
            item = item.get(key)
        if item not in (None, ""):
            out.append(unicodedata.normalize("NFC", str(item).strip()))  # one entity however macOS composed it
    return tuple(dict.fromkeys(out))


# How Obsidian templates name a note's creation, in any case. Read only for a person's
# note (outside vault/ and mind/): there, every memory has cortex's own `created`. Not
# `date`: a template's `date` is as often a meeting's, a book's or a deadline's.
_CREATED_KEYS = frozenset({"created", "created_at"})


def _created(meta: Mapping[str, Any], partition: str) -> Any:
    """The note's `created`; for a person's note without one, its `Created:` or
    `created_at:` (the first such key), else None."""
    if meta.get("created") not in (None, "") or partition:
        return meta.get("created")
    return next((v for k, v in meta.items() if str(k).strip().lower() in _CREATED_KEYS and v not in (None, "")), None)


def where(path: str, taxonomy: Taxonomy) -> tuple[str, bool, list]:
    """(partition, archived, types of the folder) from a vault-relative path."""
    parts = path.split("/")
    partition = parts[0] if parts[0] in ("mind", "vault") else ""
    archived = len(parts) > 2 and parts[0] == "mind" and parts[1] == ARCHIVE
    return partition, archived, taxonomy.types_of_note(path) if len(parts) > 1 else []


def record_from_note(path: str, meta: Mapping[str, Any], body: str, taxonomy: Taxonomy, **stat: Any) -> NoteRecord:
    partition, archived, folder_types = where(path, taxonomy)
    note_type = str(meta.get("type") or (folder_types[0].name if len(folder_types) == 1 else ""))
    spec = taxonomy.get(note_type)
    category = str(meta.get("category") or (spec.category if spec else ""))
    created = _created(meta, partition)
    title = title_of(path, meta)
    # What the index stores is what query and recent serve, and what it indexes is what a
    # query finds: a credential committed past the hooks (`--no-verify`, or before cortex
    # was installed) is redacted here, once, as the brief redacts what it shows.
    from cortex.security.secrets import scrub_generated

    title, body, tags, entities, attribution = scrub_generated((
        title, body.strip(), tuple(dict.fromkeys([*note_tags(meta.get("tags")), *inline_tags(body)])),
        _names(meta.get("entities"), "name"), str(meta.get("attribution") or "")))
    return NoteRecord(
        path=path,
        body=body,
        title=title,
        id=str(meta.get("id") or ""),
        type=note_type,
        category=category,
        partition=partition,
        archived=archived or bool(meta.get("archived")),
        tags=tuple(dict.fromkeys(tags)),
        entities=tuple(dict.fromkeys(entities)),
        attribution=attribution,
        created=_iso(created),
        created_ts=_timestamp(created),
        last_reinforced_ts=_timestamp(meta.get("last_reinforced")),
        importance=_score(meta.get("importance"), 0.5),
        confidence=_score(meta.get("confidence"), 0.5),
        **stat,
    )


def record_from_file(path: str, data: bytes, taxonomy: Taxonomy, *, mtime_ns: int = 0) -> NoteRecord:
    """A record from a note file's bytes. A note whose frontmatter does not parse is
    searched by its whole text (the validator, not search, is where it gets reported):
    what opens it may be no frontmatter at all (a `---` rule above a first paragraph) or
    a template's broken YAML, and Obsidian's search finds its words; the graph and the
    brief read such a note whole too (cortex.maintenance.snapshot)."""
    from cortex.notes import NoteSyntaxError, parse_note

    text = data.decode("utf-8", errors="replace")
    try:
        note = parse_note(text)
        meta, body = note.meta, note.body
    except NoteSyntaxError:
        meta, body = {}, text
    return record_from_note(path, meta, body, taxonomy, content_hash=content_hash(data), mtime_ns=mtime_ns, size=len(data))
