"""The observation's fields, one row each: the single list to follow when a field is
added or changed. Standard library only (the hook and the CLI's fast paths read it).

Who reads it:
- ``schemas/observation.schema.json`` (and the copy in ``cortex/data/schemas/``, which
  ``cortex init`` puts in each vault): its properties and length caps must match this
  table (tests/test_fields.py checks, and says what differs);
- ``cortex.pipeline.schema``: ``CAPS`` (longer text is cut with a warning, not refused);
- ``cortex.pipeline.security`` and ``cortex.agent_memory``: ``SCANNED`` (the prose that
  is scanned for credentials and injections);
- the note renderer: ``frontmatter`` is the key a note carries the value under;
- ``cortex write`` and the MCP ``observe`` tool: ``cli`` and ``mcp`` name the flag and
  the argument (tests/test_fields.py checks both surfaces offer every field).

Adding a field: a row here, the property in both schema copies, the ``Observation``
record (``cortex/model.py``), and its rendering (``cortex/pipeline/render.py``); the
tests name whatever is still missing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    name: str  # the observation's JSON key
    required: bool = False
    cap: int | None = None  # characters kept; a longer value is cut with a warning
    max_length: int | None = None  # characters allowed; a longer value is refused
    scanned: bool = False  # free prose: scanned for credentials and injection
    frontmatter: str | None = None  # the note's key for it (None: not stored as such)
    cli: str | None = None  # `cortex write` flag
    mcp: str | None = None  # MCP `observe` argument


FIELDS: tuple[Field, ...] = (
    Field("timestamp", required=True, frontmatter="created", cli="--timestamp", mcp="timestamp"),
    Field("bucket", required=True, frontmatter="bucket", cli="--bucket", mcp="bucket"),
    Field("type", required=True, frontmatter="type", cli="--type", mcp="type"),
    Field("body", required=True, cap=500, scanned=True, frontmatter=None, cli="--body", mcp="body"),  # the note's body
    Field("attribution", required=True, max_length=200, frontmatter="attribution", cli="--attribution", mcp="attribution"),
    Field("session_id", required=True, frontmatter="session_id", cli="--session", mcp="session_id"),
    Field("entities", frontmatter="entities", cli="--entity", mcp="entities"),
    Field("confidence", frontmatter="confidence", cli="--confidence", mcp="confidence"),
    Field("importance", frontmatter="importance", cli="--importance", mcp="importance"),
    Field("context", cap=1000, scanned=True, frontmatter="context", cli="--context", mcp="context"),
    Field("source_quote", cap=500, scanned=True, frontmatter="source_quote", cli="--quote", mcp="source_quote"),
    Field("tags", frontmatter="tags", cli="--tag", mcp="tags"),
    # the memory this one replaces (its id or path): archived by the run that writes this one
    Field("supersedes", max_length=200, frontmatter="supersedes", cli="--supersedes", mcp="supersedes"),
)

BY_NAME = {f.name: f for f in FIELDS}
REQUIRED = tuple(f.name for f in FIELDS if f.required)
CAPS = {f.name: f.cap for f in FIELDS if f.cap is not None}  # prose is cut, never refused
SCANNED = tuple(f.name for f in FIELDS if f.scanned)
