"""The note validator: one set of rules for notes ``cortex run`` writes and notes a
person commits (the git hook calls the very same ``NoteValidator``).

Every problem is reported (not just the first) as ``path:line: what — how to fix``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import PurePosixPath
from typing import Any, Callable

from cortex.notes import REQUIRED_FIELDS, SEPARATOR, NoteSyntaxError, parse_note, source_hash
from cortex.taxonomy import ARCHIVE, Taxonomy
from cortex.timefmt import format_time

TAG_RE = re.compile(r"[a-z0-9_-]+(/[a-z0-9_-]+)*")
PARTITIONS = ("vault/", "mind/")


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} — {self.fix}"


def is_note_path(path: str) -> bool:
    return path.endswith(".md") and path.startswith(PARTITIONS)


def _jsonable(value: Any) -> Any:
    """YAML turns unquoted timestamps into datetimes; the schema speaks JSON."""
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def expected_directory(path: str) -> str:
    """``mind/archive/facts/x.md`` → ``mind/facts``; ``vault/decisions/x.md`` → ``vault/decisions``."""
    parts = PurePosixPath(path).parts
    if len(parts) >= 4 and parts[0] == "mind" and parts[1] == ARCHIVE:
        return f"mind/{parts[2]}"
    return "/".join(parts[:2]) if len(parts) >= 3 else parts[0]


class NoteValidator:
    def __init__(
        self,
        taxonomy: Taxonomy,
        schema: dict[str, Any],
        *,
        tag_allow: frozenset[str] | None = None,
        redact: Callable[[str], tuple[str, tuple[str, ...]]] | None = None,
    ) -> None:
        from jsonschema import Draft202012Validator

        self.taxonomy = taxonomy
        self.schema = Draft202012Validator(schema)
        self.tag_allow = tag_allow
        self.redact = redact

    def check(self, path: str, text: str) -> list[Problem]:
        problems: list[Problem] = []

        def add(line: int, what: str, fix: str) -> None:
            problems.append(Problem(path, line, what, fix))

        try:
            note = parse_note(text)
        except NoteSyntaxError as exc:
            add(exc.line, str(exc), "fix the YAML between the `---` lines")
            return problems
        if not note.frontmatter and not note.meta:
            add(1, "no frontmatter", "start the file with a `---` block holding at least `type:` (run `cortex hook fix`)")
            return problems
        meta, lines = note.meta, note.key_lines
        line_of = lambda key: lines.get(key, 2)  # noqa: E731

        missing = [k for k in REQUIRED_FIELDS if k not in meta]
        if missing:
            add(2, f"missing required field(s): {', '.join(missing)}", "run `cortex hook fix` to complete the note")
        sep_line = _separator_line(note.frontmatter)
        if sep_line is None:
            add(2, f"no `{SEPARATOR}` line after the required fields", f"put a `{SEPARATOR}` line after {', '.join(REQUIRED_FIELDS)}")
        else:
            order = [k for k in REQUIRED_FIELDS if k in lines]
            if [lines[k] for k in order] != sorted(lines[k] for k in order):
                add(line_of(order[0]), "required fields out of order", f"order them {', '.join(REQUIRED_FIELDS)}")
            late = [k for k in order if lines[k] > sep_line]
            if late:
                add(line_of(late[0]), f"required field(s) {', '.join(late)} below `{SEPARATOR}`", f"move them above the `{SEPARATOR}` line")

        for error in self.schema.iter_errors(_jsonable(meta)):
            key = str(error.absolute_path[0]) if error.absolute_path else ""
            if error.validator == "required":
                continue  # reported above with the fixer hint
            add(line_of(key), f"{key or 'frontmatter'}: {error.message}", _schema_fix(key))

        type_name = meta.get("type")
        spec = self.taxonomy.get(type_name) if isinstance(type_name, str) else None
        if type_name is not None and spec is None:
            add(line_of("type"), f"type {type_name!r} is not in the taxonomy", f"use one of {', '.join(self.taxonomy.names())} or add it to observer/taxonomy.yml")
        if spec is not None:
            if meta.get("category") is not None and meta.get("category") != spec.category:
                add(line_of("category"), f"category {meta.get('category')!r} does not match type {spec.name} ({spec.category})", f"set `category: {spec.category}`")
            directory = expected_directory(path)
            if directory != spec.directory:
                add(1, f"a {spec.name} note belongs in {spec.directory}/, not {directory}/", f"move it to {spec.directory}/ or change its type")

        recorded = meta.get("source_hash")
        if isinstance(recorded, str) and recorded and source_hash(note.body) != recorded:
            add(line_of("source_hash"), "source_hash does not match the body", "run `cortex hook fix` to re-hash the edited body")

        tags = meta.get("tags")
        if isinstance(tags, list):
            for tag in tags:
                if not isinstance(tag, str) or not TAG_RE.fullmatch(tag):
                    add(line_of("tags"), f"tag {tag!r} is malformed", "use lowercase [a-z0-9_-] segments joined by `/` (`cortex hook fix` normalises)")
                elif self.tag_allow is not None and tag not in self.tag_allow:
                    add(line_of("tags"), f"tag {tag!r} is not in observer/tags.yml", "use an allowed tag or add it to observer/tags.yml")
        elif tags is not None:
            add(line_of("tags"), "tags must be a list", "write `tags: [a, b]`")

        if self.redact is not None:
            for n, line in enumerate(text.splitlines(), start=1):
                _, kinds = self.redact(line)
                if kinds:
                    add(n, f"looks like a credential ({', '.join(kinds)})", "remove the secret from the note; rotate it if it was real")
        return problems


def _separator_line(frontmatter: str) -> int | None:
    for n, line in enumerate(frontmatter.splitlines(), start=2):
        if line.strip() == SEPARATOR:
            return n
    return None


def _schema_fix(key: str) -> str:
    return {
        "id": "ids are UUIDv7 strings; delete the line and run `cortex hook fix` for a new one",
        "created": "use an ISO-8601 time such as 2026-02-16T15:23:14.527Z",
        "source_hash": "run `cortex hook fix`",
        "confidence": "use a number from 0 to 1",
        "importance": "use a number from 0 to 1",
    }.get(key, "see schemas/note.schema.json")
