"""The orchestrator: buffer lines → a ``Plan`` (notes to write, reinforcements,
rejections). Pure: the vault's existing hashes and paths come in as ``VaultView``.

Two steps. ``assess`` takes each line on its own through parse, schema, security, score
and render — independent of every other line, so a big buffer's lines are assessed in
slices on all cores (``cortex.parallel``). ``settle`` then walks the outcomes in buffer
order: the first of several equal bodies makes the note and the rest reinforce it, paths
are made unique, and the rejections come out in the order one pass would give (by
stage, then by line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol, Sequence

from cortex.model import Line
from cortex.model import Plan, PlannedNote, Reinforcement, Rejection, Scored
from cortex.notes import make_title, note_path, source_hash
from cortex.pipeline import parse, schema, score, security
from cortex.pipeline.context import Context
from cortex.pipeline.render import render_parsed
from cortex.pipeline.route import directory_for
from cortex.timefmt import format_time
from cortex.taxonomy import ARCHIVE

PARALLEL_FROM = 1_000  # lines: below this, forking costs more than it saves

# The stage a rejection comes from, which orders the plan's rejections.
PARSE, SCHEMA, SECURITY, SCORE, NOTE = range(5)


class VaultView(Protocol):
    """What planning needs to know of the vault as committed."""

    def lookup(self, hash_hex: str) -> tuple[str, str] | None:  # -> (note id, path)
        ...

    def path_taken(self, path: str) -> bool:
        ...

    def deleted(self, hash_hex: str) -> str | None:  # -> the path a commit deleted its note from
        ...

    def prefetch(self, hashes: list[str], paths: list[str]) -> None:  # many lookups asked at once
        ...


CheckNote = Callable[..., list]  # (path, text, parsed) -> problems


@dataclass(frozen=True)
class Item:
    line: Line
    key: str


@dataclass(frozen=True)
class Candidate:
    """A line that passed every per-line stage, rendered as the note it would make at
    ``path`` (the first free name as the vault stands; ``settle`` may pick another)."""

    key: str
    scored: Scored
    hash_hex: str
    directory: str
    path: str
    note_id: str
    text: str
    problems: tuple[str, ...]  # the note's at ``path``


@dataclass
class Assessed:
    """What ``assess`` makes of a run of lines."""

    lines_read: int = 0
    empty_lines: int = 0
    target_offset: int | None = None
    rejections: list[tuple[int, str, str, Rejection]] = field(default_factory=list)  # (stage, key, raw, why)
    candidates: list[Candidate] = field(default_factory=list)
    redacted: int = 0
    truncated: int = 0
    warnings: list[str] = field(default_factory=list)


def make_plan(
    lines: Iterable[Line],
    buffer_id: str,
    ctx: Context,
    view: VaultView,
    check_note: CheckNote,
    *,
    workers: int = 1,
) -> Plan:
    lines = list(lines)
    if workers > 1 and len(lines) >= PARALLEL_FROM:
        return plan_later(lines, buffer_id, ctx, view, check_note, workers=workers)()
    return settle([assess(lines, buffer_id, ctx, view, check_note)], lines, buffer_id, ctx, view, check_note)


def plan_later(
    lines: Sequence[Line],
    buffer_id: str,
    ctx: Context,
    view: VaultView,
    check_note: CheckNote,
    *,
    workers: int = 1,
) -> Callable[[], Plan]:
    """``make_plan`` in two halves: the lines' assessment starts now, in children, and
    the function returned settles it into the plan — against ``view`` as it is then, so
    a caller can commit the previous chunk meanwhile (what that adds to the vault is
    seen by ``settle``; ``assess`` only used the view to save work).

    The first line is assessed here, before the children are forked: every stage has
    then loaded what it loads on first use (the classifier, the scanner's pattern words,
    the note schema's compiled check, the renderer's patterns) and each child inherits
    it, instead of each loading it again (a third of a child's time for 500 lines)."""
    if workers <= 1 or len(lines) < PARALLEL_FROM:
        return lambda: make_plan(lines, buffer_id, ctx, view, check_note)
    from cortex.parallel import fork_all, split

    if ctx.scanner is not None:  # loaded even when the first line stops before the scan
        ctx.scanner.scan_many(["warm"], classify=[True])
    first = assess(lines[:1], buffer_id, ctx, view, check_note)
    join = fork_all(lambda part: assess(part, buffer_id, ctx, view, check_note), split(lines[1:], workers))
    return lambda: settle([first, *join()], lines, buffer_id, ctx, view, check_note)


def assess(lines: Sequence[Line], buffer_id: str, ctx: Context, view: VaultView, check_note: CheckNote) -> Assessed:
    out = Assessed()
    rejected: list[tuple[int, Item, Rejection]] = []
    parsed: list[tuple[Item, dict]] = []
    limits = ctx.settings.limits
    for line in lines:
        out.lines_read += 1
        out.target_offset = line.end
        item = Item(line, f"{buffer_id}:{line.offset}")
        if not line.raw.strip():
            out.empty_lines += 1
            continue
        if line.oversize:
            result = parse.oversize(line.end - line.offset, limits)
        else:
            result = parse.parse_line(line.raw, limits)
        if isinstance(result, Rejection):
            rejected.append((PARSE, item, result))
        else:
            parsed.append((item, result))

    valid = []
    for item, obj in parsed:
        result = schema.validate(obj, item.key, ctx)
        if isinstance(result, Rejection):
            rejected.append((SCHEMA, item, result))
        else:
            valid.append((item, result))

    screened = security.screen([obs for _, obs in valid], ctx)
    kept: list[tuple[Item, Scored]] = []
    for (item, _), result in zip(valid, screened):
        if isinstance(result, Rejection):
            rejected.append((SECURITY, item, result))
            continue
        out.redacted += len(result.redactions)
        out.truncated += len(result.truncated)
        out.warnings += [f"{item.key}: {w}" for w in result.warnings]
        outcome = score.score(result, ctx)
        if isinstance(outcome, Rejection):
            rejected.append((SCORE, item, outcome))
        else:
            kept.append((item, outcome))
    hashes = [source_hash(s.obs.body) for _, s in kept]
    view.prefetch(hashes, [_first_path(s, h, ctx) for (_, s), h in zip(kept, hashes)])
    out.candidates = [_render(item.key, s, h, ctx, view, check_note) for (item, s), h in zip(kept, hashes)]
    out.rejections = [(stage, item.key, *_held(item, why, ctx)) for stage, item, why in rejected]
    return out


def _repeated(s: Scored, hit: tuple[str, str] | None) -> tuple[str, str] | None:
    """The note at HEAD that ``s`` repeats (``hit``: the one its words match), or None.
    Not an archived one when ``s`` corrects another memory ("it was 02:00 after all", the
    words of the memory that correction had replaced): counted on the archived note, the
    correction was lost and the memory it names stayed the answer. A new note says it."""
    if hit is not None and s.obs.supersedes and hit[1].startswith(f"mind/{ARCHIVE}/"):
        return None
    return hit


def _render(key: str, s: Scored, hash_hex: str, ctx: Context, view: VaultView, check_note: CheckNote) -> Candidate:
    directory = directory_for(s.obs.type, ctx.taxonomy)
    note_id = ctx.new_id(int(s.obs.timestamp.timestamp() * 1000))
    if directory in ctx.refused_dirs or _repeated(s, view.lookup(hash_hex)) is not None:
        # Never written: a repeat of a note the vault has reinforces it; one whose folder
        # is refused is held by settle (unless an earlier line made the note).
        return Candidate(key, s, hash_hex, directory, "", note_id, "", ())
    path = _free_path(directory, s, hash_hex, view, set())
    text, parsed = render_parsed(s, note_id, hash_hex, ctx)
    return Candidate(key, s, hash_hex, directory, path, note_id, text, tuple(map(str, check_note(path, text, parsed))))


def _path(directory: str, s: Scored, hash_hex: str, n: int = 1) -> str:
    """The ``n``th name the note of ``s`` may take (the first when it is free)."""
    return note_path(directory, s.obs.timestamp.strftime("%Y-%m-%d"), hash_hex, n)


def _first_path(s: Scored, hash_hex: str, ctx: Context) -> str:
    return _path(directory_for(s.obs.type, ctx.taxonomy), s, hash_hex)


def _free_path(directory: str, s: Scored, hash_hex: str, view: VaultView, taken_here: set[str]) -> str:
    n = 1
    while True:
        path = _path(directory, s, hash_hex, n)
        if path not in taken_here and not view.path_taken(path):
            return path
        n += 1


def settle(parts: list[Assessed], lines: Sequence[Line], buffer_id: str, ctx: Context, view: VaultView,
           check_note: CheckNote) -> Plan:
    plan = Plan(buffer_id=buffer_id)
    rejections: list[tuple[int, str, str, Rejection]] = []
    by_key: dict[str, Line] = {}

    def reject(key: str, why: Rejection) -> None:
        if not by_key:  # the lines by key, the first time one is needed
            by_key.update((f"{buffer_id}:{line.offset}", line) for line in lines)
        rejections.append((NOTE, key, *_held(Item(by_key[key], key), why, ctx)))

    for part in parts:
        plan.lines_read += part.lines_read
        plan.empty_lines += part.empty_lines
        if part.target_offset is not None:
            plan.target_offset = part.target_offset
        plan.redacted += part.redacted
        plan.truncated += part.truncated
        plan.warnings += part.warnings
        rejections += part.rejections

    created_here: dict[str, tuple[str, str]] = {}  # hash -> (id, path) of notes in this plan
    taken_here: set[str] = set()
    candidates = [c for part in parts for c in part.candidates]
    view.prefetch([c.hash_hex for c in candidates], [c.path for c in candidates if c.path])
    for c in candidates:
        hit = created_here.get(c.hash_hex) or _repeated(c.scored, view.lookup(c.hash_hex))
        if hit is not None:
            note_id, path = hit
            plan.reinforcements.append(Reinforcement(note_id, path, format_time(c.scored.obs.timestamp), c.key,
                                                     c.scored.obs.supersedes))
            continue
        gone = None if ctx.skip_trust else view.deleted(c.hash_hex)
        if gone is not None:
            # A person deleted this memory (in Obsidian, with git rm): an agent saying it
            # again does not bring it back behind their back. Held, not dropped: a person
            # who wants it after all promotes it.
            # Its repeats are counted on one entry (by source_hash), not held one by one.
            reject(c.key, Rejection("deleted", f"this memory was deleted from {gone} in a commit (`git log -- '{gone}'` "
                                    "says who and when); promote the line to memorize it again",
                                    {"source_hash": c.hash_hex}))
            continue
        if c.directory in ctx.refused_dirs:
            why = Rejection("unsafe_path", f"{ctx.refused_dirs[c.directory]}; make {c.directory} a folder, "
                            "then `cortex quarantine promote` the line")
            reject(c.key, why)
            continue
        path = _free_path(c.directory, c.scored, c.hash_hex, view, taken_here)
        problems = c.problems
        if path != c.path:  # an earlier line of this plan took the name: checked at its own
            text, parsed = render_parsed(c.scored, c.note_id, c.hash_hex, ctx)
            problems = tuple(map(str, check_note(path, text, parsed)))
        if problems:
            why = Rejection("schema", "the note it would make is invalid: " + "; ".join(problems))
            reject(c.key, why)
            continue
        taken_here.add(path)
        created_here[c.hash_hex] = (c.note_id, path)
        obs = c.scored.obs
        plan.notes.append(PlannedNote(path, c.note_id, c.hash_hex, c.text, c.key, obs.session_id, make_title(obs.body),
                                      obs.attribution, obs.supersedes))
    rejections.sort(key=lambda r: r[0])  # stable: by stage, then in buffer order
    plan.rejections = [(key, raw, why) for _, key, raw, why in rejections]
    return plan


def _held(item: Item, why: Rejection, ctx: Context) -> tuple[str, Rejection]:
    """The line as it is kept with its reason: with no credential, nor in the reason
    (which quotes values)."""
    raw = item.line.raw.decode("utf-8", errors="replace")
    if ctx.scanner is not None:
        raw, _ = ctx.scanner.redact(raw)
        detail, found = ctx.scanner.redact(why.detail)
        if found:
            why = Rejection(why.reason, detail, why.extra)
    return raw, why
