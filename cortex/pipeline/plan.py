"""The orchestrator: buffer lines → a ``Plan`` (notes to write, reinforcements,
rejections). Pure: the vault's existing hashes and paths come in as ``VaultView``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Protocol

from cortex.model import Line
from cortex.model import Observation, Plan, PlannedNote, Reinforcement, Rejection, Scored
from cortex.notes import make_title, note_filename, source_hash
from cortex.pipeline import parse, schema, score, security
from cortex.pipeline.context import Context
from cortex.pipeline.render import render_parsed
from cortex.pipeline.route import directory_for
from cortex.timefmt import format_time


class VaultView(Protocol):
    """What planning needs to know of the vault as committed."""

    def lookup(self, hash_hex: str) -> tuple[str, str] | None:  # -> (note id, path)
        ...

    def path_taken(self, path: str) -> bool:
        ...


@dataclass(frozen=True)
class Item:
    line: Line
    key: str


def make_plan(
    lines: Iterable[Line],
    buffer_id: str,
    ctx: Context,
    view: VaultView,
    check_note: Callable[..., list],  # (path, text, parsed) -> problems
) -> Plan:
    plan = Plan(buffer_id=buffer_id)
    parsed: list[tuple[Item, dict]] = []
    for line in lines:
        plan.lines_read += 1
        plan.target_offset = line.end
        item = Item(line, f"{buffer_id}:{line.offset}")
        if not line.raw.strip():
            plan.empty_lines += 1
            continue
        limits = ctx.settings.limits
        if line.oversize:
            result = parse.oversize(line.end - line.offset, limits)
        else:
            result = parse.parse_line(line.raw, limits)
        if isinstance(result, Rejection):
            _reject(plan, item, result, ctx)
        else:
            parsed.append((item, result))

    valid: list[tuple[Item, Observation]] = []
    for item, obj in parsed:
        result = schema.validate(obj, item.key, ctx)
        if isinstance(result, Rejection):
            _reject(plan, item, result, ctx)
        else:
            valid.append((item, result))

    screened = security.screen([obs for _, obs in valid], ctx)
    scored: list[tuple[Item, Scored]] = []
    for (item, _), result in zip(valid, screened):
        if isinstance(result, Rejection):
            _reject(plan, item, result, ctx)
            continue
        plan.redacted += len(result.redactions)
        plan.truncated += len(result.truncated)
        plan.warnings += [f"{item.key}: {w}" for w in result.warnings]
        outcome = score.score(result, ctx)
        if isinstance(outcome, Rejection):
            _reject(plan, item, outcome, ctx)
        else:
            scored.append((item, outcome))

    created_here: dict[str, tuple[str, str]] = {}  # hash -> (id, path) of notes in this plan
    taken_here: set[str] = set()
    for item, s in scored:
        hash_hex = source_hash(s.obs.body)
        hit = created_here.get(hash_hex) or view.lookup(hash_hex)
        if hit is not None:
            note_id, path = hit
            plan.reinforcements.append(Reinforcement(note_id, path, format_time(s.obs.timestamp), item.key))
            continue
        directory = directory_for(s.obs.type, ctx.taxonomy)
        if directory in ctx.refused_dirs:
            _reject(plan, item, Rejection("unsafe_path", f"{ctx.refused_dirs[directory]}; make {directory} a folder, "
                                          "then `cortex quarantine promote` the line"), ctx)
            continue
        day = s.obs.timestamp.strftime("%Y-%m-%d")
        n = 1
        while True:
            path = f"{directory}/{note_filename(day, hash_hex, n)}"
            if path not in taken_here and not view.path_taken(path):
                break
            n += 1
        note_id = ctx.new_id(int(s.obs.timestamp.timestamp() * 1000))
        text, parsed = render_parsed(s, note_id, hash_hex, ctx)
        problems = check_note(path, text, parsed)
        if problems:
            _reject(plan, item, Rejection("schema", "the note it would make is invalid: " + "; ".join(map(str, problems))), ctx)
            continue
        taken_here.add(path)
        created_here[hash_hex] = (note_id, path)
        plan.notes.append(
            PlannedNote(path, note_id, hash_hex, text, item.key, s.obs.session_id, make_title(s.obs.body), s.obs.attribution)
        )
    return plan


def _reject(plan: Plan, item: Item, why: Rejection, ctx: Context) -> None:
    raw = item.line.raw.decode("utf-8", errors="replace")
    if ctx.scanner is not None:  # a held line keeps no credential either, nor its reason (which quotes values)
        raw, _ = ctx.scanner.redact(raw)
        detail, found = ctx.scanner.redact(why.detail)
        if found:
            why = Rejection(why.reason, detail, why.extra)
    plan.rejections.append((item.key, raw, why))
