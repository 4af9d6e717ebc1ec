"""The example (`make run`): the repository's example vault plus examples/observations.jsonl
give exactly the outcome examples/README.md describes, line by line.

A regression case as data: the buffer is the input, the README's table the expected
output. When a rule changes on purpose, the README and this file change with it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO, cortex, git
from cortex.notes import normalise_body, parse_note

EXAMPLE = REPO / "examples" / "observations.jsonl"

# examples/README.md, "Line by line" (1-based line numbers)
QUARANTINED = {
    "parse": {45, 46},
    "schema": {23, 24, 47, 48, 49, 50, 51, 72},
    "injection": {73, 74, 75, 76},
    "untrusted": {94, 95, 96},
}
BELOW_THRESHOLD = {10, 15, 20, 35, 40, 61, 83, 91, 110, 120}
EMPTY = {77}
REINFORCE_VAULT = {  # hand-written note → lines that repeat it
    "vault/decisions/ledgerline-money-as-integer-cents.md": {4},
    "mind/preferences/small-pull-requests.md": {6, 22},
    "vault/dependencies/ledgerline-stripe.md": {11},
    "vault/projects/tidewatch.md": {25},
    "vault/milestones/tidewatch-public-beta.md": {26, 111},
    "mind/lessons/read-alembic-migrations-by-hand.md": {53, 58},
    "mind/constraints/ledgerline-migration-window.md": {54, 65},
    "vault/projects/ledgerline.md": {113},
}
REINFORCE_BUFFER = {41: 27, 67: 2, 116: 16}  # repeat → the earlier line it repeats
REDACTED = {66: "Tr0ub4dor-staging-77", 84: "ghp_R7mXq2LkV9sTz4NwB8cYd1HfJ6pA3eUo0GiK", 88: "sk-proj-Qe7Lt2Wm9Xv4Nb8Rk3Hs6Jd1Fy5Pa0Zc2Tg7Uw4Ei9Ko3Mn"}
TRUNCATED = {70: "body", 71: "context"}


def example_lines() -> list[str]:
    return EXAMPLE.read_text(encoding="utf-8").split("\n")[:-1]


def line_offsets() -> dict[int, int]:
    """byte offset → 1-based line number"""
    out, pos = {}, 0
    for n, line in enumerate(example_lines(), start=1):
        out[pos] = n
        pos += len(line.encode("utf-8")) + 1
    return out


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The example vault with the example buffer ingested: (root, report)."""
    root = tmp_path_factory.mktemp("example") / "vault"
    env_home = tmp_path_factory.mktemp("home")
    env = {"HOME": str(env_home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Maya Okafor",
           "GIT_AUTHOR_EMAIL": "maya@example.com", "GIT_COMMITTER_NAME": "Maya Okafor",
           "GIT_COMMITTER_EMAIL": "maya@example.com", "PATH": "/usr/bin:/bin"}
    assert cortex("init", str(root), env=env).returncode == 0
    for part in ("vault", "mind"):
        shutil.copytree(REPO / part, root / part, dirs_exist_ok=True)
    for name in ("config.yml", "taxonomy.yml", "calibration.yml"):
        shutil.copyfile(REPO / "observer" / name, root / "observer" / name)
    subprocess.run(["git", "add", "-A"], cwd=root, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "--no-verify", "-m", "Example vault"], cwd=root, env=env, check=True)
    shutil.copyfile(EXAMPLE, root / "observer" / "observations.jsonl")
    proc = cortex("--vault", str(root), "run", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return root, json.loads(proc.stdout)


def hand_written() -> list[Path]:
    return sorted(p for part in ("vault", "mind") for p in (REPO / part).rglob("*.md"))


def test_the_hand_written_notes_pass_the_hook_validator(vault):
    from cortex.validate import NoteValidator  # noqa: F401  (the very validator the hook runs)

    check = vault.note_validator(redact=True).check
    notes = hand_written()
    assert 6 <= len(notes) <= 10
    for path in notes:
        rel = str(path.relative_to(REPO))
        assert check(rel, path.read_text(encoding="utf-8")) == [], rel
        meta = parse_note(path.read_text(encoding="utf-8")).meta
        assert meta["links"] == [f"[[{e['name']}]]" for e in meta["entities"]]


def test_the_buffer_has_every_kind_the_readme_lists():
    lines = example_lines()
    assert len(lines) >= 110
    parsed = {}
    for n, line in enumerate(lines, start=1):
        try:
            parsed[n] = json.loads(line)
        except json.JSONDecodeError:
            pass
    valid_types = {o["type"] for n, o in parsed.items() if n not in set().union(*QUARANTINED.values())}
    assert len(valid_types) == 17
    assert {o["bucket"] for o in parsed.values()} >= {"explicit", "ambient"}
    assert all(o["timestamp"].startswith("2026-") for n, o in parsed.items() if n not in QUARANTINED["schema"])
    for repeat, first in REINFORCE_BUFFER.items():
        assert normalise_body(parsed[repeat]["body"]) == normalise_body(parsed[first]["body"])
        assert parsed[repeat]["body"] != parsed[first]["body"] or repeat == 67


def test_the_run_report_is_the_readme_s(ran):
    _, report = ran
    assert report["read"] == 119 and report["empty"] == 1
    assert report["memorized"] == 77
    assert report["reinforced"] == 15
    assert report["below_threshold"] == 10
    assert report["quarantined"] == {k: len(v) for k, v in QUARANTINED.items()}
    assert report["redacted"] == 3
    assert report["truncated"] == 2
    assert report["commits"] == 1


def test_each_held_line_is_held_for_the_readme_s_reason(ran):
    root, _ = ran
    offsets = line_offsets()
    held = [json.loads(l) for l in (root / "observer" / "quarantine.jsonl").read_text(encoding="utf-8").splitlines()]
    by_reason: dict[str, set[int]] = {}
    for entry in held:
        by_reason.setdefault(entry["reason"], set()).add(offsets[int(entry["key"].rsplit(":", 1)[1])])
    assert by_reason == QUARANTINED


def test_reinforcements_land_on_the_hand_written_notes(ran):
    root, _ = ran
    state = json.loads((root / "observer" / "state.json").read_text())
    ids = {rel: parse_note((REPO / rel).read_text(encoding="utf-8")).meta["id"] for rel in REINFORCE_VAULT}
    counts = {note_id: r["count"] for note_id, r in state["reinforcements"].items()}
    for rel, lines in REINFORCE_VAULT.items():
        assert counts.pop(ids[rel]) == len(lines), rel
    assert sorted(counts.values()) == [1, 1, 1]  # the three repeats within the buffer


def test_secrets_are_redacted_and_long_fields_truncated(ran):
    root, _ = ran
    texts = {p: p.read_text(encoding="utf-8") for part in ("vault", "mind") for p in (root / part).rglob("*.md")}
    everything = "\n".join(texts.values())
    for secret in REDACTED.values():
        assert secret not in everything
    assert sum("[REDACTED]" in t for t in texts.values()) == 3
    summary = [parse_note(t) for t in texts.values() if "Post-incident summary for Ledgerline" in t]
    assert len(summary) == 1 and len(summary[0].body.strip()) == 500
    log = [parse_note(t) for t in texts.values() if "Pasted migration log" in t]
    assert len(log) == 1 and len(log[0].meta["context"]) == 1000


def test_notes_cover_every_type_and_nothing_of_cortex_is_left_uncommitted(ran):
    root, _ = ran
    types = Counter()
    for part in ("vault", "mind"):
        for p in (root / part).rglob("*.md"):
            types[parse_note(p.read_text(encoding="utf-8")).meta["type"]] += 1
    assert len(types) == 17
    assert sum(types.values()) == 77 + len(hand_written())
    assert git(root, "status", "--porcelain") == ""
