"""The note validator: one set of rules for notes ``cortex run`` writes and notes a
person commits (the git hook calls the very same ``NoteValidator``).

Every problem is reported (not just the first) as ``path:line: what — how to fix``.
A problem is an error (the commit is refused) or a warning (reported, not blocking):
a suspected instruction injection in a note a person wrote is a warning unless the
vault sets ``security.strict_notes: true``. Checks that need the whole vault (ids
unique across it) live in ``IdIndex``; ``check`` sees one file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from cortex.layout import in_partition
from cortex.timefmt import jsonable
from cortex.notes import (REQUIRED_FIELDS, SEPARATOR, NoteSyntaxError, digits_alone, is_tag_name, parse_note,
                          source_hash, template_placeholder)
from cortex.schema_lite import compile_schema
from cortex.taxonomy import Taxonomy, type_folder

CONFLICT_RE = re.compile(r"^(<{7}|>{7})(?: |\r?$)", re.M)


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    what: str
    fix: str
    severity: str = "error"  # or "warning": reported, never blocks a commit

    def __str__(self) -> str:
        mark = "warning: " if self.severity == "warning" else ""
        return f"{self.path}:{self.line}: {mark}{self.what} — {self.fix}"

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "severity": self.severity, "what": self.what, "fix": self.fix}


def unfilled(placeholder: str) -> tuple[str, str]:
    """What to say of a template placeholder left in a note's frontmatter, and the fix."""
    shown = placeholder.splitlines()[0][:60] + ("…" if len(placeholder) > 60 or "\n" in placeholder else "")
    return (f"an unfilled template placeholder in the frontmatter ({shown}): the note was made from a template "
            "that did not run",
            "fill it in (in Obsidian: `Templater: Replace templates in the active file`, or write the value), then "
            "commit again; a template itself belongs in the templates folder Obsidian's settings name, which cortex "
            "leaves alone")


class NoteValidator:
    def __init__(
        self,
        taxonomy: Taxonomy,
        schema: dict[str, Any],
        *,
        tag_allow: frozenset[str] | None = None,
        redact: Callable[[str], tuple[str, tuple[str, ...]]] | None = None,
        injection: Callable[[str], Any] | None = None,
        strict_injection: bool = False,
        bulk: bool = False,
        fixing: bool = True,
    ) -> None:
        """``redact(text) -> (text, kinds)`` finds credentials (an error);
        ``injection(text) -> Verdict | None`` finds instruction injection (a warning,
        an error when ``strict_injection``). ``bulk``: many notes in one process (a
        `cortex run`), worth compiling the schema to Python (~10× faster per note, ~30 ms
        to set up: too much for the hook's one note). ``fixing``: a commit completes
        notes (the hook's fixing half); False when ``SKIP=cortex-fix`` left it out of this
        commit, and the hints say so rather than promise it."""
        self.taxonomy = taxonomy
        self.fixing = fixing
        skipped = "SKIP=cortex-fix left that out of this commit"
        self.by_commit = "a commit does it by itself" if fixing else skipped
        self.then_completed = ("the commit then completes the note" if fixing
                               else f"then `cortex hook fix` completes the note ({skipped})")
        if bulk:
            from cortex.schemacheck import SchemaCheck

            self.schema = SchemaCheck(schema)
        else:
            self.schema = compile_schema(schema)
        self.required = tuple(k for k in schema.get("required", ()) if k not in REQUIRED_FIELDS)
        self.tag_allow = tag_allow
        self.redact = redact
        self.injection = injection
        self.strict_injection = strict_injection

    def check(self, path: str, text: str, parsed=None, *, new: bool = False) -> list[Problem]:
        """Every problem of the note ``text`` at ``path``. ``parsed`` is the ``Note`` the
        text is known to parse to (``notes.rendered_note``), saving the YAML read.
        ``new``: the note is entering the vault (not in HEAD), so its ``source_hash`` must
        be its body's; once in the vault, a person's edit never invalidates it.

        Outside ``vault/`` and ``mind/`` a note is a person's own (a daily note, a folder
        they made): only what would harm the vault is checked there (credentials,
        instructions to agents) and frontmatter that does not parse is a warning."""
        problems: list[Problem] = []

        def add(line: int, what: str, fix: str) -> None:
            problems.append(Problem(path, line, what, fix))

        if not text.strip():
            return problems  # an empty note (Obsidian's "Untitled.md"): left alone until it has a body
        cortex_note = in_partition(path)
        if "<<<<<<<" in text or ">>>>>>>" in text:
            marker = CONFLICT_RE.search(text)
            if marker:
                add(text.count("\n", 0, marker.start()) + 1, "an unsettled merge conflict (<<<<<<< ======= >>>>>>> lines)",
                    "keep what is right of each side, delete the three marker lines, `git add` the note (`git diff` shows both sides)")
                return problems
        placeholder = template_placeholder(text)
        if placeholder and cortex_note:
            # A memory made from a template Obsidian did not fill in: its fields would be
            # refused one by one (or its YAML), each for a reason that hides this one.
            problems.append(Problem(path, placeholder[0], *unfilled(placeholder[1])))
            return problems + (self.credential_problems(path, text) if self.redact is not None else [])
        try:
            note = parse_note(text) if parsed is None else parsed
        except NoteSyntaxError as exc:
            fix = unfilled(placeholder[1])[1] if placeholder else "fix the YAML between the `---` lines"
            problems.append(Problem(path, exc.line, str(exc), fix, "error" if cortex_note else "warning"))
            if self.redact is not None:
                problems += self.credential_problems(path, text)
            return problems
        if not cortex_note:
            return problems + self._safety_problems(path, text, note)
        implied = bool(self.taxonomy.types_of_note(path))
        if not note.frontmatter and not note.meta:
            if implied:
                add(1, "no frontmatter", f"run `cortex hook fix {path}` ({self.by_commit}): this folder implies the type")
            else:
                # Text typed straight into vault/ or a folder of one's own below it: no type
                # to complete it as, so a note of the person's own, as outside vault/ and
                # mind/ (searched, never changed, no memory), rather than a refusal that
                # would hold back every other note of the commit (git commits all or nothing).
                problems.append(Problem(
                    path, 1, "no frontmatter, so this is kept as your own note (searched, not a memory)",
                    f"to make it a memory, start the file with a `---` block holding `type:` "
                    f"({', '.join(self.taxonomy.names())}) and commit again, or move it into a type's folder "
                    "(mind/facts/, vault/decisions/, …): the commit completes the rest", "warning"))
            return problems + self._safety_problems(path, text, note)
        meta, lines = note.meta, note.key_lines
        line_of = lambda key: lines.get(key, 2)  # noqa: E731
        repeated = _repeated_keys(note.frontmatter)
        for key, n in repeated:
            add(n, f"`{key}` appears more than once (YAML keeps only the last)", "delete one of them")
        given = meta.get("type")
        unknown = given is not None and (not isinstance(given, str) or given not in self.taxonomy)
        if not note.body.strip() and "id" not in meta:
            # A draft (a new note with its properties and no text yet): completed once it has a body.
            return problems + self._safety_problems(path, text, note)

        missing = [k for k in (*REQUIRED_FIELDS, *self.required) if k not in meta]
        if missing:
            if repeated:  # the fixer will not guess which of the two the person meant
                fix = f"delete one of the repeated `{repeated[0][0]}` lines; {self.then_completed}"
            elif "type" in missing and not implied:
                fix = f"add a `type:` line ({', '.join(self.taxonomy.names())}); {self.then_completed}"
            elif unknown:  # said once, with the type below
                fix = ""
            elif not note.body.strip():
                fix = f"write the note's body below the frontmatter; {self.then_completed}"
            else:
                fix = f"run `cortex hook fix {path}` to complete the note ({self.by_commit})"
            if fix:
                add(2, f"missing required field(s): {', '.join(missing)}", fix)
        sep_line = _separator_line(note.frontmatter)
        if repeated or (missing and not implied and "type" in missing) or (missing and unknown):
            pass  # the layout is the fixer's once it can complete the note: one message, not three
        elif sep_line is None:
            add(2, f"no `{SEPARATOR}` line after the required fields", f"put a `{SEPARATOR}` line after {', '.join(REQUIRED_FIELDS)} (`cortex hook fix` does)")
        else:
            order = [k for k in REQUIRED_FIELDS if k in lines]
            if [lines[k] for k in order] != sorted(lines[k] for k in order):
                add(line_of(order[0]), "required fields out of order", f"order them {', '.join(REQUIRED_FIELDS)} (`cortex hook fix` does)")
            late = [k for k in order if lines[k] > sep_line]
            if late:
                add(line_of(late[0]), f"required field(s) {', '.join(late)} below `{SEPARATOR}`", f"move them above the `{SEPARATOR}` line (`cortex hook fix` does)")

        for error in self.schema.iter_errors(jsonable(meta)):
            key = str(error.absolute_path[0]) if error.absolute_path else ""
            if error.validator == "required" and not error.absolute_path:
                continue  # reported above with the fixer hint
            if key == "type" and unknown:
                continue  # reported below, with what was probably meant
            if _emptied(key, error):
                add(line_of(key), f"{key} has no value", f"delete the `{key}:` line, or give it a value (in Obsidian's "
                    "Properties panel); " + ("a commit through the hook does it itself" if self.fixing
                                                   else f"`cortex hook fix` does it ({self.by_commit})"))
            else:
                add(line_of(key), _schema_what(key, error), _schema_fix(key))

        type_name = meta.get("type")
        spec = self.taxonomy.get(type_name) if isinstance(type_name, str) else None
        if type_name is not None and spec is None:
            then = f"; {self.then_completed}" if missing else ""
            add(line_of("type"), f"type {type_name!r} is not in the taxonomy", self.type_fix(type_name) + then)
        if spec is not None:
            if meta.get("category") is not None and meta.get("category") != spec.category:
                add(line_of("category"), f"category {meta.get('category')!r} does not match type {spec.name} ({spec.category})", f"set `category: {spec.category}`")
            directory = type_folder(path)
            if directory != spec.directory:
                add(1, f"a {spec.name} note belongs in {spec.directory}/, not {directory}/", f"move it to {spec.directory}/ or change its type")

        if not note.body.strip():
            add(note.body_line - 1, "the note has no body", "write the memory below the closing `---`, or delete the file")

        recorded = meta.get("source_hash")
        if new and isinstance(recorded, str) and recorded and source_hash(note.body) != recorded:
            add(line_of("source_hash"), "source_hash does not match the body of this new note",
                f"delete the source_hash line and commit again (or run `cortex hook fix {path}`): it is set from the body")

        tags = meta.get("tags")
        if isinstance(tags, list):
            for tag in tags:
                if not isinstance(tag, str) or not is_tag_name(tag):
                    add(line_of("tags"), f"tag {tag!r} is malformed", "use lowercase segments of letters, digits, `_` and `-` joined by `/`, or delete it (capitals, spaces and `#` the commit tidies itself)")
                elif self.tag_allow is not None and tag not in self.tag_allow:
                    add(line_of("tags"), f"tag {tag!r} is not in observer/tags.yml", "use an allowed tag or add it to observer/tags.yml")
                elif unseen := digits_alone(tag):
                    what, fix = unseen
                    problems.append(Problem(path, line_of("tags"), f"tag {what}",
                                            f"{fix} to find the note by it in Obsidian", "warning"))
        elif tags is not None:
            add(line_of("tags"), "tags must be a list", "write `tags: [a, b]`")

        return problems + self._safety_problems(path, text, note)

    def _safety_problems(self, path: str, text: str, note) -> list[Problem]:
        """What harms the vault wherever the note is: a credential, an instruction to agents."""
        out = []
        if self.redact is not None:
            out += self.credential_problems(path, text)
        if self.injection is not None:
            out += self._injection_problems(path, text, note)
        return out

    def type_fix(self, given: Any) -> str:
        """How to fix an unknown type: the type probably meant, else the list."""
        meant = self.taxonomy.meant(given)
        if meant:
            return f"did you mean `{meant}`? write `type: {meant}`"
        return f"use one of {', '.join(self.taxonomy.names())} or add it to observer/taxonomy.yml"

    def credential_problems(self, path: str, text: str) -> list[Problem]:
        """The whole text first (one scan; a PEM block spans lines), then, only when
        something was found, line by line to say where.

        Lines holding just the note's identity and times (an ``id`` or ``session_id``
        UUID, the 64-hex ``source_hash``, a ``created`` or ``last_reinforced``
        timestamp) are left out: their formats carry no credential, and every note has
        them, so they would make the scanner's "is there any long token at all" check
        pass on every note and run all its rules (4x the time of the rest)."""
        text = without_identity_lines(text)
        redacted, kinds = self.redact(text)
        if not kinds:
            return []
        fix = "remove the secret from the note; rotate it if it was real"
        # A line the whole scan kept as it was holds no credential: alone, it would lose
        # what surrounds it (each line of an Excalidraw drawing's fenced block looked like
        # a key and was reported beside the real one).
        kept = set(redacted.splitlines())
        out, placed = [], []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line or line in kept:
                continue
            _, found = self.redact(line)
            if found:
                out.append(Problem(path, n, f"looks like a credential ({', '.join(found)})", fix))
                placed += found
        unplaced = list(kinds)
        for kind in placed:
            if kind in unplaced:
                unplaced.remove(kind)
        if unplaced:  # spans lines: say so at the top
            out.insert(0, Problem(path, 1, f"looks like a credential over several lines ({', '.join(unplaced)})", fix))
        return out

    def _injection_problems(self, path: str, text: str, note) -> list[Problem]:
        severity = "error" if self.strict_injection else "warning"
        fix = "reword it if it is not meant for an agent" + ("" if self.strict_injection else " (security.strict_notes: true refuses it)")
        out = []
        flat_body = " ".join(note.body.split())
        fields = [
            (k, v)
            for k, v in note.meta.items()
            if isinstance(v, str) and k in ("title", "context", "source_quote")
            and not (k == "title" and v.rstrip("…") in flat_body)  # a title cut from the body: scanned with it
        ]
        for key, value in [*fields, ("body", note.body)]:
            verdict = self.injection(value)
            if verdict is not None:
                line = note.key_lines.get(key, 2) if key != "body" else _line_of(text, verdict.excerpt, note.body_line)
                what = f"{key} reads like an instruction to an agent ({verdict.rule}: {verdict.excerpt!r})"
                out.append(Problem(path, line, what, fix, severity))
        return out


_IDENTITY_LINES = re.compile(
    r'^(?:id|session_id): "?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"?[ \t]*\r?$'
    r"|^source_hash: [0-9a-f]{64}[ \t]*\r?$"
    r"|^(?:created|last_reinforced): \d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d{1,9})?)?(?:Z|[+-]\d\d:?\d\d)?[ \t]*\r?$",
    re.M,
)


def without_identity_lines(text: str) -> str:
    """The note without the lines that only hold its identity and times (no credential
    has their format): what the credential scan reads, fast because of it."""
    return _IDENTITY_LINES.sub("", text)


_TOP_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:")


_TOP_KEYS = re.compile(_TOP_KEY.pattern, re.M)


def _repeated_keys(frontmatter: str) -> list[tuple[str, int]]:
    keys = _TOP_KEYS.findall(frontmatter)
    if len(set(keys)) == len(keys):  # the common case, said without numbering lines
        return []
    seen, out = set(), []
    for n, line in enumerate(frontmatter.splitlines(), start=2):
        m = _TOP_KEY.match(line)
        if m:
            if m.group(1) in seen:
                out.append((m.group(1), n))
            seen.add(m.group(1))
    return out


def _line_of(text: str, excerpt: str, default: int) -> int:
    probe = excerpt.rstrip("…").strip()[:40]
    if probe:
        for n, line in enumerate(text.splitlines(), start=1):
            if n >= default and probe.lower() in line.lower():
                return n
    return default


def _separator_line(frontmatter: str) -> int | None:
    for n, line in enumerate(frontmatter.splitlines(), start=2):
        if line.strip() == SEPARATOR:
            return n
    return None


# What each pattern of the note schema asks for, in words: a value that does not match is
# explained by these, never by the regex (which reached people double-escaped).
_FORMS = {
    "id": "a UUIDv7 such as 019c7a1e-5b40-7a2c-9d3e-4f1a2b3c4d5e",
    "type": "a lowercase name (letters, digits, _) such as fact",
    "created": "a date and time such as 2026-02-16T15:23:14.527Z or 2026-03-01T09:30",
    "source_hash": "64 lowercase hex digits",
    "links": "a wikilink such as [[Maya Okafor]]",
}


# JSON Schema's type names in words
_KINDS = {"array": "a list", "string": "text", "number": "a number", "integer": "a whole number",
          "boolean": "true or false", "object": "a set of properties", "null": "empty"}


def _emptied(key: str, error: Any) -> bool:
    """A property left with no value (``tags:``, as Obsidian's Properties panel saves a
    property whose last value was removed) that the schema refuses so."""
    return len(error.absolute_path) == 1 and error.instance in (None, "")


def _schema_what(key: str, error: Any) -> str:
    if error.validator == "type":
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{key}: {error.instance!r} is not {' or '.join(_KINDS.get(k, k) for k in kinds)}"
    if error.validator != "pattern":
        return f"{key or 'frontmatter'}: {error.message}"
    form = _FORMS.get(key, f"in the form the note schema (schemas/note.schema.json) gives `{key}`")
    return f"{key}: {error.instance!r} is not {form}"


def _schema_fix(key: str) -> str:
    return {
        "id": "ids are UUIDv7 strings; delete the line and commit again: the hook writes a new one",
        "created": "write the time the note was made, such as 2026-02-16T15:23:14.527Z (a date alone, "
                   "2026-03-01, the commit completes to midnight UTC; 2026-03-01 09:30 to 2026-03-01T09:30)",
        "links": "write each link as [[Name]]",
        "source_hash": "delete the source_hash line and commit again: the hook sets it from the body",
        "confidence": "use a number from 0 to 1",
        "importance": "use a number from 0 to 1",
    }.get(key, "see schemas/note.schema.json")


# --- vault-level checks ---------------------------------------------------------------

_ID_LINE = re.compile(r"^id:[ \t]*[\"']?([^\"'\s#]+)", re.M)


def read_id(text: str) -> tuple[str, int] | None:
    """``(id, line)`` from a note's frontmatter without parsing the YAML (fast enough
    to read every note of a vault on each commit)."""
    if not text.startswith(("---\n", "---\r\n", "\ufeff---")):
        return None
    end = text.find("\n---", 3)
    m = _ID_LINE.search(text, 0, end if end != -1 else len(text))
    return (m.group(1), text.count("\n", 0, m.start()) + 1) if m else None


class IdIndex:
    """Which notes carry which id: every note of the vault, so a checked note's id can
    be proven unique (ids are unique across the vault)."""

    def __init__(self, ids: Mapping[str, str] = ()) -> None:
        self.paths: dict[str, list[str]] = {}
        for path, ident in dict(ids).items():
            self.add(path, ident)

    def add(self, path: str, ident: str) -> None:
        paths = self.paths.setdefault(ident, [])
        if path not in paths:
            paths.append(path)

    def problems(self, checked: Iterable[tuple[str, str, int]],
                 hint: Callable[[str, list[str]], str] | None = None) -> list[Problem]:
        """One problem per checked ``(path, id, line)`` whose id another note uses too;
        ``hint(path, others)``: what to do, where the caller can tell (which file is new)."""
        out = []
        for path, ident, line in checked:
            others = sorted(p for p in self.paths.get(ident, ()) if p != path)
            if others:
                out.append(
                    Problem(
                        path,
                        line,
                        f"id {ident} is also the id of {', '.join(others)}",
                        (hint(path, others) if hint else "")
                        or "a renamed note: stage the old path's removal too (`git add -A`); one memory a merge "
                        "left at two paths (renamed on one machine, renamed or archived on the other): keep "
                        "one, `git rm -f` the other; a copy: delete this id line and commit again (the hook "
                        "writes a new one)",
                    )
                )
        return out
