"""The note fixer: text in, text out (``cortex hook fix`` is the thin layer on files).

What it does, and only this:

- completes a note a person wrote with just a ``type`` (or none, where the folder
  implies one) and a body: ``id`` (UUIDv7), ``category``, ``created``, ``source_hash``,
  the ``# ---`` separator, and a ``title`` below it (the body's opening words, or its
  first markdown heading). The required block goes first, in
  order; a file with no frontmatter at all gets one. A ``created`` that is a date with
  no time (Obsidian's Date property) gets midnight UTC.
- keeps a title cortex derived true to the body: when the body changes and the title is
  still what the old body gave, the title (and that alias) follows the new body; a
  title a person wrote is theirs and never changes;
- sets ``source_hash`` from the body of a note entering the vault. Once there, it is the
  identity of the observation the note came from: a person's later edit does not
  change it, so an agent observing the same thing again reinforces the improved note;
- normalises tags (Obsidian habits: ``#tag``, capitals, spaces, ``tags: a, b``);
- completes a property a person left with no value (``tags:``) that the note schema
  refuses so: a list as ``[]``, anything else removed, as if never set (``_emptied``);
- gives a memory a person moved back from the archive a fresh start (``_restored``);
- gives a copy (a new file carrying the id of a note still there; ``copy_of``, which
  ``cortex.hooks`` works out from git) an id of its own.

Only notes under ``vault/`` and ``mind/`` are completed; a note holding a credential is
left as it is (the validator refuses it, and nothing of it is copied into a title).
Every other byte stays: the person's key order, comments, quoting and body. Lines are
edited, never re-dumped; the result is parsed again and must mean the old note plus the
fixes, else the note is left untouched (the validator then says what is wrong). A valid
note comes back byte for byte; fixing twice equals fixing once.

A folder with several types (``mind/goals``: goal_short and goal_long) implies the one
that decays slowest (goal_long): a person who wrote a goal down by hand meant to keep it.
The chosen type is written into the note, where the person can change it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Callable

from cortex import counts
from cortex.layout import in_partition
from cortex.notes import (
    REQUIRED_FIELDS,
    SEPARATOR,
    NoteSyntaxError,
    flow_list,
    is_tag_name,
    make_title,
    note_aliases,
    parse_note,
    quote,
    source_hash,
    split_frontmatter,
    split_tags,
    tag_char,
    tag_name,
    template_placeholder,
    uuid7,
)
from cortex.maintenance.settings import DEFAULT_FORGET_THRESHOLD
from cortex.taxonomy import ARCHIVE, ARCHIVE_FIELDS, Taxonomy, TypeSpec, type_folder
from cortex.timefmt import format_time, parse_time

_KEY_RE = re.compile(r"^([A-Za-z_][\w-]*)\s*:")


@dataclass(frozen=True)
class Fixed:
    text: str
    changes: tuple[str, ...] = ()  # what was done, for people ("added id, created")
    refused: str = ""  # why a change was not made safely (the note is left as it was)
    wants_previous: bool = False  # ask again with the committed version (``previous``)


RESTORED_IMPORTANCE = 0.5  # a new memory's importance (an explicit observation's, pipeline/score.py)

UNKNOWN = object()  # ``previous`` not looked up yet (a git read the fixer spares when it can)


def folder_type(taxonomy: Taxonomy, path: str) -> TypeSpec | None:
    """The type a note's folder implies: the only one, or the slowest-decaying one."""
    specs = taxonomy.types_of_note(path)
    order = {name: i for i, name in enumerate(taxonomy.types)}
    return min(specs, key=lambda s: (s.decay, order[s.name])) if specs else None


# --- tags -------------------------------------------------------------------------------

def normalise_tag(tag: Any) -> str | None:
    """``#Project/Big Idea`` → ``project/big-idea``; None when nothing usable is left.
    Letters stay as typed in any script (``#Café`` → ``café``, ``#项目``): Obsidian counts
    them, and the same word in a note's text is that tag."""
    text = re.sub(r"\s+", "-", tag_name(str(tag)))
    text = "".join(c if c == "/" or tag_char(c) else "-" for c in text)
    segments = [re.sub(r"-{2,}", "-", s).strip("-") for s in text.split("/")]
    out = "/".join(s for s in segments if s)
    return out if out and is_tag_name(out) else None


def normalise_tags(tags: Any) -> list[Any] | None:
    """The normalised list, or None when ``tags`` is not something to normalise."""
    if isinstance(tags, str):
        # The string form, `tags: a, b` or `tags: "#a #b"`, split as Obsidian (and every
        # reader of a note's tags) splits it: at commas and spaces, so the list keeps what
        # Obsidian showed ("Home Office" is two tags there, not home-office).
        tags = split_tags(tags)
    elif not isinstance(tags, list):
        return None
    else:  # an item "#a #b" is two tags too
        tags = [part for tag in tags for part in (re.split(r"\s+(?=#)", tag) if isinstance(tag, str) else [tag])]
    out: list[Any] = []
    for tag in tags:
        if isinstance(tag, (dict, list)) or tag is None:
            return None  # not a tag list a person meant; the validator explains
        fixed = normalise_tag(tag)
        value = fixed if fixed is not None else tag  # unusable: kept for the validator
        if value not in out:
            out.append(value)
    return out


# --- frontmatter lines ---------------------------------------------------------------------

def _blocks(lines: list[str]) -> list[tuple[str | None, list[str]]]:
    """Top-level keys with their continuation lines (the same rule as ``notes.set_fields``);
    comments, blank lines and the separator are blocks with no key."""
    out: list[tuple[str | None, list[str]]] = []
    i = 0
    while i < len(lines):
        m = _KEY_RE.match(lines[i])
        j = i + 1
        if m:
            while j < len(lines) and lines[j][:1] in (" ", "\t", "-") and not lines[j].startswith("---"):
                j += 1
        out.append((m.group(1) if m else None, lines[i:j]))
        i = j
    return out


def _is_separator(block: tuple[str | None, list[str]]) -> bool:
    return block[0] is None and block[1][0].strip() == SEPARATOR


def _structure_ok(blocks: list[tuple[str | None, list[str]]]) -> bool:
    """Required keys present, in order, each once, all above the first separator."""
    seen: list[str] = []
    for key, lines in blocks:
        if _is_separator((key, lines)):
            return seen == list(REQUIRED_FIELDS)
        if key in REQUIRED_FIELDS:
            seen.append(key)
    return False


def _yaml_value(rendered: str) -> Any:
    import yaml

    return yaml.safe_load(f"k: {rendered}")["k"]


# --- the fixer -----------------------------------------------------------------------------

def fix_note(
    path: str,
    text: str,
    taxonomy: Taxonomy,
    *,
    now: datetime,
    new_id: Callable[[int], str] = uuid7,
    redact: Callable[[str], tuple[str, tuple[str, ...]]] | None = None,
    previous: Any = None,
    forget_threshold: float = DEFAULT_FORGET_THRESHOLD,
    copy_of: str | None = None,
    properties: dict[str, Any] | None = None,
    taken_ids: frozenset[str] = frozenset(),
    moved_from: str | None = None,
) -> Fixed:
    """``previous``: the note's committed text (None: there is none, the note is entering
    the vault; ``UNKNOWN``: not looked up yet, and the result says when it is needed). ``redact``: the credential
    scanner; a note it flags is left alone, and a generated title it flags is not written.
    ``forget_threshold``: decay's (``maintenance.forget_threshold``), for a memory a person
    brings back from the archive. ``copy_of``: the note this one is a copy of (a new file
    carrying the id of a note still there, as Obsidian's "Make a copy" leaves it): it is a
    memory of its own, and gets an id of its own. ``properties``: the note schema's, for
    the properties a person left with no value (``_emptied``). ``taken_ids``: the ids
    other notes of the commit carry, which the committed note's id is not put back as.
    ``moved_from``: the path the note is staged as moved from (``previous`` is its text
    there), for a memory a person moved into another type's folder (``_followed_type``)."""
    if not in_partition(path):
        return Fixed(text)  # a person's own note: cortex fields are not asked of it
    try:
        note = parse_note(text)
    except NoteSyntaxError:
        return Fixed(text)  # broken YAML: only a person can fix it; the validator says where
    if template_placeholder(text):
        return Fixed(text)  # a template not filled in: completing it would keep its placeholders (as a title, tags)
    split = split_frontmatter(text)
    if split is None:
        return _add_frontmatter(path, text, taxonomy, now, new_id, redact, previous, taken_ids)

    meta, body = note.meta, note.body
    newline = "\r\n" if text.split("\n", 1)[0].endswith("\r") else "\n"
    type_name = meta.get("type")
    spec = taxonomy.get(type_name) if isinstance(type_name, str) else None
    if type_name is None:
        spec = folder_type(taxonomy, path)

    updates: dict[str, str] = {}  # existing keys: new rendered value
    adds: dict[str, str] = {}  # missing keys: rendered value
    changes: list[str] = []
    if spec is not None and type_folder(path) != spec.directory and (here := folder_type(taxonomy, path)) is not None:
        if previous is UNKNOWN:
            return Fixed(text, wants_previous=True)
        spec = _followed_type(meta, spec, here, previous, moved_from, updates, changes)
    removes = _restored(path, meta, now, forget_threshold, updates, adds, changes)
    if copy_of and meta.get("id"):
        updates["id"] = quote(new_id(int(now.timestamp() * 1000)))
        changes.append(f"a copy of {copy_of}, which keeps its id: given an id of its own")
    has_body = bool(body.strip())
    digest = source_hash(body)
    if has_body and "source_hash" in meta and meta["source_hash"] != digest:
        if previous is UNKNOWN:
            return Fixed(text, wants_previous=True)
        if previous is None:  # entering the vault: the hash is set now, from this body
            updates["source_hash"] = digest
            changes.append("set source_hash from the body")
    title = meta.get("title")
    if has_body and isinstance(title, str) and title and title not in _derived_titles(body):
        if previous is UNKNOWN:
            return Fixed(text, wants_previous=True)
        followed = followed_title(meta, body, previous, redact)
        if followed:
            updates.update(render_followed(followed))
            changes.append("title follows the edited body")
    if "tags" in meta:
        tags = normalise_tags(meta["tags"])
        if tags is not None and tags != meta["tags"]:
            updates["tags"] = flow_list(tags)
            changes.append("normalised tags")
    committed = _committed_meta(previous)
    if committed is not None and "id" in meta:
        _counts_kept(meta, committed, previous, updates, adds, changes)
    removes |= _emptied(meta, properties or {}, updates, changes)
    completed = _completed_date(meta.get("created"))
    if completed:
        updates["created"], said = completed
        changes.append(said)
    if spec is not None and has_body:
        fresh = _required_values(spec, body, now, new_id)
        lacking = [k for k in IDENTITY if meta.get(k) is None or meta[k] == ""]
        if lacking and previous is UNKNOWN:
            return Fixed(text, wants_previous=True)
        kept = _identity_kept(previous, committed, lacking, taken_ids)
        fresh.update(kept)
        generated = ("title",) if _clean(title_for(body), redact) else ()
        for key in (*REQUIRED_FIELDS, *generated):
            if key not in meta:
                adds[key] = fresh[key]
            elif meta[key] is None or meta[key] == "":  # `id:` left empty: as good as missing
                updates[key] = fresh[key]
                if key not in kept:
                    changes.append(f"filled the empty {key}")
        if kept:
            changes.append(_said_kept(kept))
        added = [k for k in adds if k in (*REQUIRED_FIELDS, "title") and k not in kept]
        if added:
            how = " (type from the folder)" if "type" in adds else ""
            changes.append(f"added {', '.join(added)}{how}")

    lines = text.splitlines(keepends=True)
    close = split[2] - 2  # index of the closing fence
    blocks = _blocks(lines[1:close])
    keys = [key for key, _ in blocks if key is not None]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice and changes:  # YAML keeps the last one; which did the person mean?
        return Fixed(text, refused=f"`{twice[0]}` appears more than once")
    restructure = spec is not None and has_body and not _structure_ok(blocks)
    if restructure and not set(adds) & {*REQUIRED_FIELDS, "title"}:
        changes.append(f"moved the required fields above `{SEPARATOR}`")
    if not changes:
        return Fixed(text)
    if not _clean(text, redact):
        return Fixed(text)  # refused by the validator; nothing of it goes into a title

    kept = [(key, block) for key, block in blocks if key not in removes]
    fm = _rebuild(kept, updates, adds, newline) if restructure else _edit(kept, updates, adds, newline)
    new_text = "".join([lines[0], *fm, *lines[close:]])
    expected = {k: v for k, v in meta.items() if k not in removes}
    expected.update({k: _yaml_value(v) for k, v in {**updates, **adds}.items()})
    try:
        check = parse_note(new_text)
    except NoteSyntaxError as exc:
        return Fixed(text, refused=f"fixing would break the frontmatter ({exc})")
    if check.meta != expected or check.body != body:
        return Fixed(text, refused="the frontmatter is too unusual to edit safely")
    return Fixed(new_text, tuple(changes))


def _restored(path: str, meta: dict, now: datetime, threshold: float, updates: dict[str, str],
              adds: dict[str, str], changes: list[str]) -> frozenset[str]:
    """A memory a person moved from ``mind/archive/`` back to its folder: their decision,
    which decay must not undo at its next run. The archive fields go, and the move counts
    as a reinforcement at the commit's time (``last_reinforced``); an importance below the
    forget threshold, which would fade again however fresh, becomes a new memory's.
    Returns the keys to remove (none for any other note: cortex moves notes out of the
    archive itself only with these fields cleared)."""
    if not path.startswith("mind/") or path.startswith(f"mind/{ARCHIVE}/"):
        return frozenset()
    removes = frozenset(k for k in ARCHIVE_FIELDS if k in meta)
    if not removes:
        return removes
    done = [f"cleared {', '.join(k for k in ARCHIVE_FIELDS if k in removes)}"]
    try:
        fresh = parse_time(meta.get("last_reinforced")) < now
    except ValueError:
        fresh = True
    if fresh:
        (updates if "last_reinforced" in meta else adds)["last_reinforced"] = format_time(now)
        done.append("last_reinforced is the commit's time")
    importance = meta.get("importance")
    if isinstance(importance, (int, float)) and not isinstance(importance, bool) and importance < threshold:
        updates["importance"] = f"{RESTORED_IMPORTANCE:g}"
        done.append(f"importance {importance:g} was below the forget threshold {threshold:g}: now {RESTORED_IMPORTANCE:g}")
    changes.append(f"back from the archive ({'; '.join(done)})")
    return removes


# What makes a memory the one it is: an editor that saves its copy of a note from before
# a commit completed it (Obsidian, the note open while the Git plugin committed) drops
# them, and completed afresh they would make it another memory (a new id, its references
# and its observation's repeats lost).
IDENTITY = ("id", "created", "source_hash")


def _followed_type(meta: dict, spec: TypeSpec, here: TypeSpec, previous: Any, moved_from: str | None,
                   updates: dict[str, str], changes: list[str]) -> TypeSpec:
    """A memory a person moved from its type's folder into another type's (``here``, the
    folder's: dragged in Obsidian from `mind/facts/` to `vault/decisions/`), its `type`
    left as committed: the move says what it is now, so its type (and the category that
    type gave it) follows the folder. A type the person wrote, or a note from elsewhere,
    keeps its type (the validator then says where it belongs)."""
    committed = _committed_meta(previous)
    if (moved_from is None or committed is None or committed.get("type") != spec.name
            or type_folder(moved_from) != spec.directory):
        return spec
    updates["type"] = here.name
    if meta.get("category") == spec.category != here.category:
        updates["category"] = here.category
    changes.append(f"moved from {spec.directory}/: type {spec.name} → {here.name}")
    return here


def _committed_meta(previous: Any) -> dict | None:
    """The frontmatter of the committed note (``previous``), read once for what a commit
    keeps of it; None where there is none or it does not parse."""
    if not isinstance(previous, str):
        return None
    try:
        return parse_note(previous).meta
    except NoteSyntaxError:
        return None


def _identity_kept(previous: Any, committed: dict | None, lacking: list[str], taken_ids: frozenset[str]) -> dict[str, str]:
    """The committed note's (``previous``, its frontmatter ``committed``) values of the
    ``lacking`` identity fields, as written there; none when its id is another note's now
    (a new memory at a path another one left)."""
    if committed is None or not lacking:
        return {}
    ident = committed.get("id")
    if not isinstance(ident, str) or not ident or ident in taken_ids:
        return {}
    raw = _written(previous)
    return {k: raw[k] for k in lacking if raw.get(k) and committed.get(k) not in (None, "")}


def _written(previous: str) -> dict[str, str]:
    """Each top-level key of the committed note's frontmatter and its value as written."""
    lines = (split_frontmatter(previous) or ("",))[0].splitlines()
    return {m.group(1): line[m.end():].strip() for line in lines if (m := _KEY_RE.match(line))}


# What cortex's jobs count on a memory (a repeat, a twin folded in). A person's commit never
# takes them back: an editor saving its copy from before `cortex reinforce` or `cortex
# dedup` committed (Obsidian, the note open meanwhile) would otherwise undo what they counted.
COUNTED = ("reinforced", "reinforced_tally", counts.KEY, "last_reinforced", "merged_from")


def _counts_kept(meta: dict, committed: dict, previous: str, updates: dict[str, str], adds: dict[str, str],
                 changes: list[str]) -> None:
    """The counted fields as the committed note (``previous``, its frontmatter
    ``committed``) has them, where the note has fewer repeats, an earlier
    `last_reinforced` or fewer folded twins than that."""
    back: dict[str, str] = {}
    had, has = committed.get("reinforced"), meta.get("reinforced")
    if _count(had) > _count(has):
        back["reinforced"] = str(had)
        merged = counts.parse_merged(committed.get(counts.KEY))
        if merged and counts.parse_merged(meta.get(counts.KEY)) != merged:
            back[counts.KEY] = counts.render_merged(merged)
        tally = committed.get("reinforced_tally")
        # a token of hex digits, which an older cortex wrote plain: YAML reads one of
        # digits alone as a number (`00001111` as 585), so it goes back as written, quoted
        if isinstance(tally, str):
            back["reinforced_tally"] = quote(tally)
        elif isinstance(tally, (int, float)) and not isinstance(tally, bool):
            back["reinforced_tally"] = quote(_written(previous)["reinforced_tally"].strip("\"'"))
    last = committed.get("last_reinforced")
    if last not in (None, "") and _is_later(last, meta.get("last_reinforced")):
        back["last_reinforced"] = format_time(parse_time(last))
    folded = committed.get("merged_from")
    if isinstance(folded, list) and set(map(str, folded)) - set(map(str, meta.get("merged_from") or [])):
        back["merged_from"] = flow_list([str(x) for x in dict.fromkeys([*(meta.get("merged_from") or []), *folded])])
    # A return from the archive sets its own; a property a person emptied in Obsidian's
    # Properties panel is their choice (``_emptied``), no older copy's doing.
    back = {k: v for k, v in back.items() if k not in updates and k not in adds and not (k in meta and meta[k] in (None, ""))}
    for key, value in back.items():
        (updates if key in meta else adds)[key] = value
    if back:
        changes.append(f"kept {', '.join(back)} as cortex last committed them (saved from a copy older than that commit?)")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_later(committed: Any, value: Any) -> bool:
    """Whether ``committed`` is a time later than the note's ``value`` (or it has none).
    The same instant written to a coarser precision is no earlier: Obsidian's Linter and
    its Properties panel write `last_reinforced` again in the person's timezone, to the
    second or the minute, and ``2026-11-28T21:00:06+01:00`` is cortex's
    ``2026-11-28T20:00:06.422Z``, not a copy from before it."""
    if value is None or value == "":
        return True
    try:
        return parse_time(committed) >= parse_time(value) + _written_unit(value)
    except (ValueError, TypeError, OverflowError):
        return False


_TIME_RE = re.compile(r"\s*\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(:\d{2}(?:[.,](\d+))?)?)?")


def _written_unit(value: Any) -> timedelta:
    """The smallest step of a time as written: a day, a minute, a second or the last
    fraction digit (any instant up to one step later reads the same)."""
    if isinstance(value, datetime):
        return timedelta(microseconds=1) if value.microsecond else timedelta(seconds=1)
    if isinstance(value, date):
        return timedelta(days=1)
    m = _TIME_RE.match(str(value))
    if m is None:
        return timedelta(0)
    if m.group(2):
        return timedelta(seconds=10 ** -min(len(m.group(2)), 6))
    if m.group(1):
        return timedelta(seconds=1)
    return timedelta(minutes=1) if ":" in m.group(0) else timedelta(days=1)


def _said_kept(kept: dict[str, str]) -> str:
    return f"put back {', '.join(kept)} as committed (saved without them: an editor's copy from before the last commit?)"


def _emptied(meta: dict, properties: dict[str, Any], updates: dict[str, str], changes: list[str]) -> frozenset[str]:
    """Properties left with no value that the note schema refuses so: Obsidian's
    Properties panel saves ``tags:`` when a person removes the last tag, or clears a
    field. A list becomes an empty one; anything else goes, the same as never set (every
    reader falls back to its default then). The required fields and the title are
    completed as missing ones are. Returns the keys to remove."""
    from cortex.schema_lite import compile_schema

    lists, dropped = [], []
    for key, value in meta.items():
        rule = properties.get(key)
        if (value is not None and value != "") or key in updates or key in (*REQUIRED_FIELDS, "title") \
                or not isinstance(rule, dict) or not any(True for _ in compile_schema(rule).iter_errors(value)):
            continue
        kinds = rule.get("type")
        if "array" in (kinds if isinstance(kinds, list) else [kinds]):
            lists.append(key)
            updates[key] = "[]"
        else:
            dropped.append(key)
    if lists:
        changes.append(f"{', '.join(lists)} had no value: now []")
    if dropped:
        changes.append(f"{', '.join(dropped)} had no value: removed, as if never set")
    return frozenset(dropped)


# A date and time with a space between them, as Templater's `tp.file.creation_date()` and
# the core Templates plugin's `{{date}} {{time}}` write them by default (`2026-03-01 09:30`);
# YAML reads it as text unless it has seconds (then it is a timestamp, and passes as one).
_SPACED_TIME_RE = re.compile(r"(\d{4}-\d{2}-\d{2})[ \t]+(\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?)")


def _completed_date(value: Any) -> tuple[str, str] | None:
    """``(created as written, what was done)`` for a date with no time (`2026-03-01`, what
    Obsidian's Date property writes): the time cortex writes, midnight UTC, the time every
    reader already took it for; for a date and time written with a space
    (`2026-03-01 09:30`): the `T` of ISO 8601 between them, the time as written. None for
    anything else (a date and time passes as it is, whatever its precision)."""
    if isinstance(value, str) and (spaced := _SPACED_TIME_RE.fullmatch(value.strip())):
        joined = f"{spaced.group(1)}T{spaced.group(2)}"
        try:
            parse_time(joined)
        except ValueError:
            return None  # no such day or hour: the validator says what is expected
        return joined, f"wrote the date and time in created with a T ({joined})"
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        try:
            value = date.fromisoformat(value.strip())
        except ValueError:
            return None  # no such day: the validator says what is expected
    if isinstance(value, date) and not isinstance(value, datetime):
        return format_time(parse_time(value)), "gave the date in created a time (midnight UTC)"
    return None


def _required_values(spec: TypeSpec, body: str, now: datetime, new_id: Callable[[int], str]) -> dict[str, str]:
    return {
        "id": quote(new_id(int(now.timestamp() * 1000))),
        "type": spec.name,
        "category": spec.category,
        "created": format_time(now),
        "source_hash": source_hash(body),
        "title": quote(title_for(body)),
    }


def _derived_titles(body: str) -> tuple[str, ...]:
    """The titles cortex gives a body: the fixer's (heading first) and ``cortex run``'s."""
    return (title_for(body), make_title(body))


def followed_title(meta: dict, body: str, previous: str | None, redact=None) -> dict[str, Any]:
    """What a note's title cortex derived becomes for ``body``: ``{"title": ...}``, with
    ``"aliases"`` when the old title is one of them (the same rule for the hook and the
    merge driver, which derives the title of a body merged from two machines' edits);
    {} when the title is a person's, already the body's, or would hold a credential.
    ``meta``: the note's fields; ``previous``: the committed text whose body gave the
    title (None: nothing to follow)."""
    title = meta.get("title")
    if not body.strip() or not isinstance(title, str) or not title or title in _derived_titles(body):
        return {}
    followed = _followed_title(title, body, previous)
    if not followed or not _clean(followed, redact):
        return {}
    out: dict[str, Any] = {"title": followed}
    aliases = meta.get("aliases")
    if isinstance(aliases, str):  # Obsidian reads a string as aliases separated by commas
        aliases = note_aliases(aliases)
    if isinstance(aliases, list) and title in aliases:
        out["aliases"] = [followed if a == title else a for a in aliases]
    return out


def render_followed(values: dict[str, Any]) -> dict[str, str]:
    """``followed_title``'s values as the fixer writes them."""
    render = {"title": quote, "aliases": flow_list}
    return {key: render[key](value) for key, value in values.items()}


def _followed_title(title: str, body: str, previous: str | None) -> str | None:
    """The new title when ``title`` is the one cortex derived from the committed body
    and the person left it alone; None when the title is theirs."""
    if previous is None:
        return None
    try:
        old = parse_note(previous)
    except NoteSyntaxError:
        return None
    if old.meta.get("title") != title:
        return None  # the person changed the title in this very edit: it is theirs
    fixer_rule, run_rule = _derived_titles(old.body)
    if title == fixer_rule:
        return title_for(body)
    if title == run_rule:
        return make_title(body)
    return None  # a title a person wrote


def _clean(text: str, redact) -> bool:
    """Whether generated text is free of credentials (scanned before it is written)."""
    return redact is None or not redact(text)[1]


def title_for(body: str) -> str:
    """The title rule (the body's first 80 characters), except that a body
    opening with a markdown heading, as people write in Obsidian, is titled by it."""
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    heading = re.fullmatch(r"#{1,6}\s+(.+?)(?:\s+#+)?", first)
    return make_title(heading.group(1)) if heading else make_title(body)


def _line(key: str, value: str, newline: str) -> str:
    return f"{key}: {value}{newline}"


def _edit(blocks, updates: dict[str, str], adds: dict[str, str], newline: str) -> list[str]:
    """In place: replace updated keys' lines; a missing title goes under the separator."""
    out: list[str] = []
    for key, lines in blocks:
        if key in updates:
            out.append(_line(key, updates[key], newline))
        else:
            out.extend(lines)
        if _is_separator((key, lines)) and "title" in adds:
            out.append(_line("title", adds["title"], newline))
    return out + _other_adds(adds, newline)


def _rebuild(blocks, updates: dict[str, str], adds: dict[str, str], newline: str) -> list[str]:
    """Required block first, in order, then the separator and title, then every other
    line in the person's order."""
    required: dict[str, list[str]] = {}
    separator: list[str] | None = None
    rest: list[str] = []
    for key, lines in blocks:
        if key in updates:
            lines = [_line(key, updates[key], newline)]
        if key in REQUIRED_FIELDS and key not in required:
            required[key] = lines
        elif separator is None and _is_separator((key, lines)):
            separator = lines
        else:
            rest.extend(lines)
    out: list[str] = []
    for key in REQUIRED_FIELDS:
        out.extend(required.get(key) or [_line(key, adds[key], newline)])
    out.extend(separator or [SEPARATOR + newline])
    if "title" in adds:
        out.append(_line("title", adds["title"], newline))
    out.extend(rest)
    return out + _other_adds(adds, newline)


def _other_adds(adds: dict[str, str], newline: str) -> list[str]:
    """Added keys other than the required ones and the title (``last_reinforced`` of a
    memory back from the archive): at the end of the frontmatter."""
    return [_line(k, v, newline) for k, v in adds.items() if k not in (*REQUIRED_FIELDS, "title")]


def _add_frontmatter(path: str, text: str, taxonomy: Taxonomy, now: datetime, new_id, redact=None,
                     previous: Any = None, taken_ids: frozenset[str] = frozenset()) -> Fixed:
    spec = folder_type(taxonomy, path)
    body = text[1:] if text.startswith("\ufeff") else text
    if spec is None or not body.strip() or not _clean(text, redact):
        return Fixed(text)
    if previous is UNKNOWN:
        return Fixed(text, wants_previous=True)
    newline = "\r\n" if body.split("\n", 1)[0].endswith("\r") else "\n"
    values = _required_values(spec, body, now, new_id)
    kept = _identity_kept(previous, _committed_meta(previous), list(IDENTITY), taken_ids)
    values.update(kept)
    title = [f"title: {values['title']}"] if _clean(title_for(body), redact) else []
    lines = ["---", *(f"{k}: {values[k]}" for k in REQUIRED_FIELDS), SEPARATOR, *title, "---"]
    gap = "" if body.startswith(("\n", "\r\n")) else newline
    new_text = newline.join(lines) + newline + gap + body
    said = f"added a frontmatter block (type {spec.name} from the folder)"
    if kept:
        said += f"; {_said_kept(kept)}"
    return Fixed(new_text, (said,))
