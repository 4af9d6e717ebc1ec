"""cortex/fields.py is the one list of observation fields: the JSON schemas, the caps,
the scanned prose, `cortex write` and the MCP `observe` tool all follow it. Each test
names what is out of step, so adding a field shows every place still missing it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import anyio
import pytest

from conftest import VENV_BIN
from cortex.fields import CAPS, FIELDS, REQUIRED, SCANNED
from cortex.pipeline import schema as schema_stage
from cortex.pipeline import security as security_stage

REPO = Path(__file__).resolve().parents[1]
SCHEMA_COPIES = [REPO / "schemas" / "observation.schema.json", REPO / "cortex" / "data" / "schemas" / "observation.schema.json"]


@pytest.mark.parametrize("path", SCHEMA_COPIES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_schema_has_exactly_the_fields_of_the_table(path):
    schema = json.loads(path.read_text())
    assert list(schema["properties"]) == [f.name for f in FIELDS]
    assert schema["required"] == list(REQUIRED)
    for f in FIELDS:
        bound = schema["properties"][f.name].get("maxLength")
        assert bound == (f.cap or f.max_length), f"{f.name}: schema maxLength {bound}, table {f.cap or f.max_length}"


def test_the_two_schema_copies_are_one():
    """The package's copy (which `cortex init` puts in each vault) and the example vault's."""
    for name in ("observation.schema.json", "note.schema.json"):
        assert (REPO / "schemas" / name).read_bytes() == (REPO / "cortex" / "data" / "schemas" / name).read_bytes(), name


def test_the_pipeline_reads_caps_and_scanned_fields_from_the_table():
    assert schema_stage.CAPS is CAPS
    assert security_stage.SCANNED_FIELDS is SCANNED
    assert set(SCANNED) == {"body", "context", "source_quote"}
    long = {name: "x" * (cap + 5) for name, cap in CAPS.items()}
    cut, warnings = schema_stage.truncate(long)
    assert {name: len(value) for name, value in cut.items()} == CAPS and len(warnings) == len(CAPS)


def test_cortex_write_offers_a_flag_for_every_field():
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    help_text = subprocess.run([str(VENV_BIN / "cortex"), "write", "--help"], capture_output=True, text=True, env=env).stdout
    flags = set(re.findall(r"(--[a-z][a-z-]*)", help_text))
    missing = [f"{f.name} ({f.cli})" for f in FIELDS if f.cli not in flags]
    assert not missing, f"`cortex write` has no flag for: {', '.join(missing)}"


def test_the_mcp_observe_tool_takes_every_field(tmp_path):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    root = tmp_path / "vault"
    subprocess.run([str(VENV_BIN / "cortex"), "init", str(root)], check=True, capture_output=True)

    async def tool_args() -> set[str]:
        params = StdioServerParameters(command=str(VENV_BIN / "cortex"), args=["--vault", str(root), "mcp"],
                                       env=dict(os.environ), cwd=str(root))
        with open(tmp_path / "mcp.err", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    tools = {t.name: t for t in (await session.list_tools()).tools}
                    return set(tools["observe"].input_schema["properties"])

    offered = anyio.run(tool_args)
    missing = [f"{f.name} ({f.mcp})" for f in FIELDS if f.mcp not in offered]
    assert not missing, f"MCP observe has no argument for: {', '.join(missing)}"
