"""Note files: the frontmatter text format, parsed and rendered.

Rendering is deterministic and hand-written (no ``yaml.dump``): the exact text is a
contract with people editing in Obsidian and with the git hook. Editing goes through
``set_fields``, which rewrites only the lines of the keys it touches, so every other
byte a person wrote (key order, comments, body) survives.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

SEPARATOR = "# ---"
REQUIRED_FIELDS = ("id", "type", "category", "created", "source_hash")
TITLE_MAX = 80

_WS_RE = re.compile(r"\s+")
_PLAIN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_ .+@-]*")
_YAML_WORDS = frozenset(
    "true false yes no on off null none ~ y n".split()
)  # plain scalars YAML would not read back as strings
_UNSAFE_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ufeff]")


# --- content identity -------------------------------------------------------------

def normalise_body(body: str) -> str:
    """The dedup normal form: NFC, lowercase, trimmed, whitespace collapsed."""
    return _WS_RE.sub(" ", unicodedata.normalize("NFC", body).lower()).strip()


def source_hash(body: str) -> str:
    return hashlib.sha256(normalise_body(body).encode("utf-8")).hexdigest()


def uuid7(unix_ms: int, rand: bytes | None = None) -> str:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, variant 10, 74 random bits."""
    rand = os.urandom(10) if rand is None else rand
    value = (unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (int.from_bytes(rand[:2], "big") & 0x0FFF) << 64
    value |= 0b10 << 62
    value |= int.from_bytes(rand[2:10], "big") & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


UUID7_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def make_title(body: str) -> str:
    """At most 80 characters of the body: when longer, cut at the last word boundary
    that leaves room for the ``…`` appended (the title, ellipsis included, fits in 80)."""
    flat = _WS_RE.sub(" ", body).strip()
    if len(flat) <= TITLE_MAX:
        return flat
    head = flat[: TITLE_MAX - 1]
    if flat[TITLE_MAX - 1] != " ":
        cut = head.rfind(" ")
        if cut > 0:
            head = head[:cut]
    return head.rstrip() + "…"


def title_of(path: str, meta: Mapping[str, Any]) -> str:
    """A note's title wherever one is shown (query, recent, `get_note`, `cortex show`, the
    graph and the brief): its `title`, else, for a person's note outside vault/ and mind/,
    its file name, as Obsidian names it. A memory without one has none ('')."""
    from cortex.layout import in_partition

    title = str(meta.get("title") or "").strip()
    if title or in_partition(path):
        return title
    return path.rsplit("/", 1)[-1][:-3]


NOTE_NAME_RE = re.compile(r"^(\d{4}-\d{2})-\d{2}-[0-9a-f]{8}(?:-\d+)?\.md$")  # note_filename's (group 1: the month)


def note_filename(date_iso: str, hash_hex: str, n: int = 1) -> str:
    suffix = "" if n == 1 else f"-{n}"
    return f"{date_iso}-{hash_hex[:8]}{suffix}.md"


def note_path(directory: str, date_iso: str, hash_hex: str, n: int = 1) -> str:
    """Where cortex files a new note: in a folder per month of its type's folder
    (``mind/facts/2026-03/2026-03-14-1a2b3c4d.md``). A commit rewrites git's tree of every
    folder it touches, whole: in a flat folder of 40,000 notes that is a 2 MB tree per
    one-note commit, and every later diff of two commits compares it; a month holds a few
    hundred. Notes anywhere below the type's folder are that type's (a person's own, an
    older vault's flat ones)."""
    return f"{directory}/{date_iso[:7]}/{note_filename(date_iso, hash_hex, n)}"


# --- rendering --------------------------------------------------------------------

def quote(text: str) -> str:
    """A YAML double-quoted scalar (JSON escapes are valid YAML; line breaks YAML treats
    specially are escaped too)."""
    out = json.dumps(text, ensure_ascii=False)
    return _UNSAFE_CHARS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", out)


def scalar(value: Any) -> str:
    """A flow-safe YAML scalar: plain when it reads back as the same string, else quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(round(float(value), 4)) if isinstance(value, float) else str(value)
    text = str(value)
    if (
        _PLAIN_RE.fullmatch(text)
        and text.lower() not in _YAML_WORDS
        and not text.endswith(" ")
        and "  " not in text
        and not _looks_numeric(text)
    ):
        return text
    return quote(text)


def _looks_numeric(text: str) -> bool:
    try:
        float(text.replace("_", ""))
        return True
    except ValueError:
        return False


def flow_list(items: Iterable[Any]) -> str:
    return "[" + ", ".join(scalar(i) for i in items) + "]"


# The marker cortex.security.secrets writes where a credential was (spelt here too so
# this module stays free of the scanner; tests/test_security_secrets.py holds them equal).
REDACTED = "[REDACTED]"


# What Obsidian refuses in a note's name, so in a link's target: `#` and `^` start a
# heading or block, `|` the shown text, `/` a folder, the rest no file system holds.
_NOT_A_NOTE_NAME = re.compile(r'[:*"\\/<>|?#^\[\]\x00-\x1f]')


def linkable(entities) -> list[str]:
    """Entity names worth a link: not one whose credential was redacted (every such
    "[REDACTED]" would link unrelated notes together in Obsidian's graph), nor one no
    note can be called. A link made from `C#` by dropping the `#` would be [[C]], the C
    language's note; `AC/DC` a path: such an entity stays in `entities`, unlinked."""
    return [name for name, _ in entities
            if REDACTED not in name and name.strip() and not _NOT_A_NOTE_NAME.search(name)]


def wikilink(name: str) -> str:
    """An Obsidian link to an entity ``linkable`` kept."""
    return f"[[{name.strip()}]]"


# [[target]], [[target#heading]], [[target^block]], [[target|shown text]]: group 1 the
# target (empty in a bare [[]]), group 2 the shown text when given
WIKILINK_RE = re.compile(r"\[\[([^\]\[|#^]*)(?:[#^][^\]\[|]*)?(?:\|([^\]\[]*))?\]\]")


def wikilinks(text: str) -> list[str]:
    """The targets of the Obsidian links in ``text``, whitespace collapsed."""
    return [name for m in WIKILINK_RE.finditer(text) if (name := " ".join(m.group(1).split()))]


@dataclass(frozen=True)
class NoteDraft:
    """Everything needed to render a note cortex writes."""

    id: str
    type: str
    category: str
    created: str
    source_hash: str
    title: str
    body: str
    bucket: str
    attribution: str
    confidence: float
    importance: float
    entities: tuple[tuple[str, str], ...] = ()
    tags: tuple[str, ...] = ()
    context: str | None = None
    source_quote: str | None = None
    session_id: str | None = None
    last_reinforced: str | None = None
    supersedes: str | None = None
    extra: tuple[tuple[str, str], ...] = field(default=())  # pre-rendered (key, value) lines
    # What Obsidian shows and completes instead of the file name (its own convention):
    # `cortex run` gives its title, so `2026-11-23-1dc6b62e.md` is found by what it says.
    aliases: tuple[str, ...] = ()


def render_note(d: NoteDraft) -> str:
    lines = [
        "---",
        f"id: {quote(d.id)}",
        f"type: {d.type}",
        f"category: {d.category}",
        f"created: {d.created}",
        f"source_hash: {d.source_hash}",
        SEPARATOR,
        f"title: {quote(d.title)}",
        *([f"aliases: [{', '.join(quote(a) for a in d.aliases)}]"] if d.aliases else []),
        f"bucket: {d.bucket}",
        f"attribution: {scalar(d.attribution)}",
        f"confidence: {_score(d.confidence)}",
        f"importance: {_score(d.importance)}",
    ]
    if d.entities:
        lines.append("entities:")
        lines += [f"  - {{name: {scalar(n)}, type: {scalar(t)}}}" for n, t in d.entities]
        lines.append("links: " + "[" + ", ".join(quote(wikilink(n)) for n in linkable(d.entities)) + "]")
    if d.tags:
        lines.append(f"tags: {flow_list(d.tags)}")
    if d.context:
        lines.append(f"context: {quote(d.context)}")
    if d.source_quote:
        lines.append(f"source_quote: {quote(d.source_quote)}")
    if d.session_id:
        lines.append(f"session_id: {quote(d.session_id)}")
    lines.append(f"last_reinforced: {d.last_reinforced or d.created}")
    if d.supersedes:
        lines.append(f"supersedes: {quote(d.supersedes)}")
    lines += [f"{k}: {v}" for k, v in d.extra]
    lines += ["---", "", d.body.strip(), ""]
    return "\n".join(lines)


def _score(value: float) -> str:
    text = f"{round(float(value), 3):.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


# --- parsing ----------------------------------------------------------------------

class NoteSyntaxError(ValueError):
    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Note:
    meta: dict[str, Any]
    body: str
    frontmatter: str  # the raw text between the fences
    body_line: int  # 1-based line number where the body starts
    key_lines: Mapping[str, int]  # top-level key -> 1-based line number

    def get(self, key: str, default: Any = None) -> Any:
        return self.meta.get(key, default)


_KEY_RE = re.compile(r"^([A-Za-z_][\w-]*)\s*:")


def split_frontmatter(text: str) -> tuple[str, str, int] | None:
    """``(frontmatter, body, body_line)`` or None when the file has no frontmatter."""
    if text.startswith("\ufeff"):
        text = text[1:]
    # A fence may carry trailing spaces (an editor's, or a paste): YAML's document markers
    # and Obsidian take `--- ` as `---`, so a person's block is not mistaken for body text.
    if not text.startswith("---") or text.partition("\n")[0].rstrip(" \t\r") != "---":
        return None
    lines = text.splitlines(keepends=True)
    for i in range(1, len(lines)):
        if lines[i].rstrip(" \t\r\n") in ("---", "..."):
            fm = "".join(lines[1:i])
            body = "".join(lines[i + 1 :])
            return fm, body, i + 2
    raise NoteSyntaxError("frontmatter opened with `---` is never closed", 1)


# A placeholder of a template Obsidian did not fill in: Templater's (`<% tp.date.now() %>`,
# `<%* ... %>`, with `-`/`_` trimming) and the core Templates plugin's (`{{date}}`,
# `{{time:HH:mm}}`, `{{title}}`).
DERIVED_FROM_BODY = ("title", "aliases")  # what cortex writes from the body: a placeholder there is the body's text
PLACEHOLDER_RE = re.compile(r"<%[\s\S]*?%>|\{\{\s*(?:date|time|title)\s*(?::[^}\n]*)?\}\}")


def template_placeholder(text: str) -> tuple[int, str] | None:
    """The first unfilled template placeholder in the note's frontmatter, as (line, the
    placeholder), or None. The frontmatter only: there it is a template's (and where the
    YAML or a field's format breaks on it); a body may show one as text of its own (a note
    about templates, ERB), and so may the title and aliases cortex derives from it."""
    if "<%" not in text and "{{" not in text:
        return None  # most notes: no second look
    try:
        split = split_frontmatter(text)
    except NoteSyntaxError:
        return None
    if split is None:
        return None
    key = None
    for n, line in enumerate(split[0].splitlines(), start=2):
        if line[:1] not in ("", " ", "\t", "-", "#"):
            key = line.partition(":")[0].strip()
        if key in DERIVED_FROM_BODY:
            continue
        found = PLACEHOLDER_RE.search(line)
        if found is not None:
            return n, found.group(0)
    found = PLACEHOLDER_RE.search(split[0])  # one spanning lines (`<%* … %>`)
    if found is not None and "\n" in found.group(0):
        return 2 + split[0].count("\n", 0, found.start()), found.group(0)
    return None


def _loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


MAX_FRONTMATTER_CHARS = 256 << 10  # as config.Limits.max_frontmatter_bytes
_ANCHOR = re.compile(r"(?:^|[\s\[{,:-])&[^\s]")


def _refuse_aliases(frontmatter: str) -> None:
    """A YAML alias (``*a`` repeating ``&a``) can make a few lines stand for billions of
    values (the "billion laughs"), which whatever walks them later pays for: notes never
    need one, so a frontmatter that uses one is refused. Checked only where an anchor
    could be (most notes have no ``&``), by parser events, which do not expand anything."""
    if "&" not in frontmatter or not _ANCHOR.search(frontmatter):
        return
    import yaml

    for event in yaml.parse(frontmatter, Loader=_loader()):
        if isinstance(event, yaml.AliasEvent):
            line = event.start_mark.line + 2 if event.start_mark else 1
            raise NoteSyntaxError("frontmatter uses a YAML alias (*name): notes do not allow anchors and aliases", line)


def parse_note(text: str, *, max_frontmatter: int = MAX_FRONTMATTER_CHARS) -> Note:
    """Parse a note file. Raises ``NoteSyntaxError`` (with a line) on broken frontmatter,
    one over ``max_frontmatter`` characters, or one that uses YAML aliases."""
    import yaml

    split = split_frontmatter(text)
    if split is None:
        return Note({}, text, "", 1, {})
    fm, body, body_line = split
    if len(fm) > max_frontmatter:
        raise NoteSyntaxError(f"frontmatter is {len(fm):,} characters, over the limit of {max_frontmatter:,} "
                              "(limits.max_frontmatter_bytes in observer/config.yml)", 1)
    try:
        _refuse_aliases(fm)
        meta = yaml.load(fm, Loader=_loader()) if fm.strip() else {}
    except NoteSyntaxError:
        raise  # an alias, said as such (a ValueError too, which the last clause would take)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise NoteSyntaxError(f"frontmatter is not valid YAML: {problem}", line) from None
    except ValueError as exc:  # YAML 1.1 reads 2026-02-30 as a date, which Python cannot hold
        raise NoteSyntaxError(f"frontmatter holds a date that does not exist ({exc}): "
                              "correct it, or quote it to keep it as text", _impossible_date_line(fm)) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise NoteSyntaxError("frontmatter must be a mapping of `key: value` lines", 2)
    if _too_deep(fm, meta):
        raise NoteSyntaxError(f"frontmatter nests lists or mappings deeper than {MAX_DEPTH} levels", 2)
    return Note(meta, body, fm, body_line, _key_lines(fm))


MAX_DEPTH = 32  # as config.Limits.max_depth for a buffer line; a note needs 3


def _too_deep(frontmatter: str, meta: dict) -> bool:
    """Nesting past ``MAX_DEPTH`` (`tags: [[[[…]]]]`), which YAML's C reader builds and every
    recursive walker after it (the validator's, JSON's) overflows the stack on. Walked,
    without recursion, only where the text has enough indicators to nest that deep."""
    if sum(frontmatter.count(c) for c in "[{:-?") <= MAX_DEPTH:
        return False
    stack = [(meta, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return False


_DATE_RE = re.compile(r"(?<![\d-])(\d{4})-(\d\d?)-(\d\d?)(?![\d-])")


def _impossible_date_line(frontmatter: str) -> int:
    import datetime

    for n, line in enumerate(frontmatter.splitlines(), start=2):
        for m in _DATE_RE.finditer(line):
            try:
                datetime.date(*map(int, m.groups()))
            except ValueError:
                return n
    return 2


def _key_lines(frontmatter: str) -> dict[str, int]:
    key_lines: dict[str, int] = {}
    for n, line in enumerate(frontmatter.splitlines(), start=2):
        m = _KEY_RE.match(line)
        if m and m.group(1) not in key_lines:
            key_lines[m.group(1)] = n
    return key_lines


def draft_meta(d: NoteDraft) -> dict[str, Any]:
    """The frontmatter values of ``render_note(d)`` as YAML reads them back (timestamps as
    their text). A test holds the two equal over awkward inputs."""
    meta: dict[str, Any] = {
        "id": d.id,
        "type": d.type,
        "category": d.category,
        "created": d.created,
        "source_hash": d.source_hash,
        "title": d.title,
        **({"aliases": list(d.aliases)} if d.aliases else {}),
        "bucket": d.bucket,
        "attribution": d.attribution,
        "confidence": float(_score(d.confidence)),
        "importance": float(_score(d.importance)),
    }
    if d.entities:
        meta["entities"] = [{"name": n, "type": t} for n, t in d.entities]
        meta["links"] = [wikilink(n) for n in linkable(d.entities)]
    if d.tags:
        meta["tags"] = list(d.tags)
    for key in ("context", "source_quote", "session_id"):
        if getattr(d, key):
            meta[key] = getattr(d, key)
    meta["last_reinforced"] = d.last_reinforced or d.created
    if d.supersedes:
        meta["supersedes"] = d.supersedes
    return meta


def rendered_note(d: NoteDraft) -> tuple[str, Note]:
    """Render a draft, and the ``Note`` it parses to, without re-reading the YAML:
    ``cortex run`` validates thousands of its own notes per pass."""
    text = render_note(d)
    fm, body, body_line = split_frontmatter(text)  # type: ignore[misc]
    if d.extra:  # pre-rendered lines: only YAML knows what they mean
        return text, parse_note(text)
    return text, Note(draft_meta(d), body, fm, body_line, _key_lines(fm))


def note_body(text: str) -> str:
    """The body; the whole text when there is no frontmatter, or one that never closes
    (a broken note the hook refuses, which a --no-verify commit or a pull may still bring)."""
    try:
        split = split_frontmatter(text)
    except NoteSyntaxError:
        return text
    return text if split is None else split[1]


# --- byte-preserving edits ------------------------------------------------------------

def set_fields(text: str, updates: Mapping[str, str | None], *, after: str | None = None) -> str:
    """Set top-level frontmatter keys to pre-rendered values, touching only their lines.

    A value of None removes the key. A new key goes after ``after`` (when present), else
    before the closing fence. A key's continuation lines (block lists) are replaced too.
    """
    split = split_frontmatter(text)
    if split is None:
        raise NoteSyntaxError("note has no frontmatter", 1)
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    close = split[2] - 2  # index of the closing fence line
    fm_lines = lines[1:close]
    pending = dict(updates)
    out: list[str] = []
    i = 0
    while i < len(fm_lines):
        line = fm_lines[i]
        m = _KEY_RE.match(line)
        j = i + 1
        if m:  # the key's block: following indented or list-item lines
            while j < len(fm_lines) and fm_lines[j][:1] in (" ", "\t", "-") and not fm_lines[j].startswith("---"):
                j += 1
        if m and m.group(1) in pending:
            value = pending.pop(m.group(1))
            if value is not None:
                out.append(f"{m.group(1)}: {value}{newline}")
        else:
            out.extend(fm_lines[i:j])
            if m and after is not None and m.group(1) == after:
                for key in [k for k in pending if pending[k] is not None]:
                    out.append(f"{key}: {pending.pop(key)}{newline}")
        i = j
    for key, value in pending.items():
        if value is not None:
            out.append(f"{key}: {value}{newline}")
    return "".join([lines[0], *out, *lines[close:]])


# --- tags and aliases, as Obsidian reads them -------------------------------------------
# Every reader of a note's `tags` or `aliases` goes through these (the search index, the
# graph and brief, query filters, the fixer), so a note means the same to all of them as
# to Obsidian. Obsidian reads a string as a list (its parseFrontMatterTags and
# parseFrontMatterAliases): `tags: recipes, kitchen` is two tags, split at commas and
# spaces; `aliases: Kumquat, Cumquat` two aliases, split at commas only. Indexing the
# string as one tag ("recipes, kitchen") hid the note from `--tag recipes`.

_TAG_SEPARATORS = re.compile(r"[,\s]+")


def split_tags(text: str) -> list[str]:
    """A ``tags`` string as Obsidian splits it: at commas and spaces (`#a #b`, `a, b`)."""
    return [t for t in _TAG_SEPARATORS.split(text) if t]


def tag_name(text: str) -> str:
    """A tag as Obsidian counts it: no leading `#`, lowercased, nesting kept
    (`#Recipes/Jam` is `recipes/jam`), composed (NFC: `é` typed as e + U+0301 on macOS
    is the same tag as `é`)."""
    return unicodedata.normalize("NFC", text.strip().lstrip("#")).lower()


def tag_char(char: str) -> bool:
    """Whether ``char`` may stand in a tag's segment: a letter or digit of any script, a
    mark that belongs to one (Hindi's vowel signs, the dot of a lowercased `İ`), `_` or
    `-`, as Obsidian takes `#项目`, `#café` and `#ελληνικά`."""
    return char.isalnum() or char in "_-" or unicodedata.category(char)[0] == "M"


def is_tag_name(tag: str) -> bool:
    """Whether ``tag`` is a tag as a memory's ``tags`` holds it: as ``tag_name`` gives it
    (lowercase, composed), segments of ``tag_char``s joined by `/`."""
    return (tag == tag_name(tag) and
            all(segment and all(tag_char(c) for c in segment) for segment in tag.split("/")))


def name_key(text: str) -> str:
    """A name as one thing whatever its case, spacing or composition: `Café Central` typed
    on Windows and `Café Central` with e + U+0301 from macOS are one entity, one note name."""
    return unicodedata.normalize("NFC", " ".join(text.split())).casefold()


def tag_within(tag: str, parent: str) -> bool:
    """Whether ``tag`` is ``parent`` or nested in it (both as ``tag_name`` gives them):
    Obsidian's `tag:#project` search and its tag pane count `project/alpha` under
    `project`, never `projects`."""
    return tag == parent or tag.startswith(parent + "/")


def note_tags(value: Any) -> list[str]:
    """A note's frontmatter ``tags`` (a list, or a string of them) as tag names, in order,
    once each; what is neither reads as no tags (the validator says what is wrong)."""
    if isinstance(value, str):
        items = split_tags(value)
    elif isinstance(value, (list, tuple)):
        items = [str(v) for v in value if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    else:
        return []
    return [t for t in dict.fromkeys(tag_name(item) for item in items) if t]


def note_aliases(value: Any) -> list[str]:
    """A note's frontmatter ``aliases``: a list, or a string of them separated by commas."""
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = [v for v in value if isinstance(v, str)]
    else:
        return []
    return [a for a in dict.fromkeys(item.strip() for item in items) if a]


# --- what a body says ------------------------------------------------------------------

# Obsidian's inline tag: `#` after the line's start or a space, then letters, digits,
# `_`, `-` and `/` (nesting), at least one of them not a digit (`#2024` is no tag).
_INLINE_TAG_RE = re.compile(r"(?:(?<=\s)|^)#([\w/-]*[^\W\d][\w/-]*)", re.M)
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN_RE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def inert(text: str) -> str:
    """``text`` as a note may quote it without being tagged or linked by it: each `#` and
    `[[` escaped with a backslash, which Obsidian shows as the characters alone, reading
    no tag, heading or link from them (nor do ``inline_tags`` and ``wikilinks``: a `#`
    after a backslash starts no tag, `\\[\\[` is no `[[`)."""
    return text.replace("#", "\\#").replace("[[", "\\[\\[")


def digits_alone(tag: Any) -> tuple[str, str] | None:
    """``(what, fix)`` when Obsidian would not count ``tag`` as a tag, else None: a tag
    needs a character that is not a digit (``2026`` is none, ``y2026`` and ``2026/q1``
    are), so a note tagged ``2026`` is not found under that tag there."""
    if isinstance(tag, int) and not isinstance(tag, bool):
        tag = str(tag)
    if not (isinstance(tag, str) and tag.isascii() and tag.isdigit()):
        return None
    return (f"{tag!r} is digits alone, which Obsidian does not count as a tag",
            f"give it a letter (y{tag}, fy-{tag})")


def inline_tags(body: str) -> list[str]:
    """The ``#tags`` of a body as Obsidian counts them (lowercased, in order, once each):
    not inside code fences or code spans, not in headings."""
    if "#" not in body:
        return []
    out: list[str] = []
    fence = ""
    for line in body.splitlines():
        m = _FENCE_RE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = ""
            continue
        if m:
            fence = m.group(1)
            continue
        if "#" not in line or re.match(r" {0,3}#{1,6}(\s|$)", line):
            continue  # no tag, or a heading
        if not line.isascii():  # a decomposed accent is no letter: `#résumé` would read `#re`
            line = unicodedata.normalize("NFC", line)
        for tag in _INLINE_TAG_RE.findall(_CODE_SPAN_RE.sub(" ", line)):
            tag = tag.strip("/").lower()
            if tag and tag not in out:
                out.append(tag)
    return out
