"""The buffer's position in `observer/state.json`: whatever happens to the buffer between
two runs (truncated and written again, a writer killed mid-line) or to the state file
itself, every buffer line ends as a note, a reinforcement or a quarantine entry, once;
and a damaged state file is a message saying what to do, not a crash."""

from __future__ import annotations

import json

import pytest

from conftest import cortex, observation


# --- a damaged state file -------------------------------------------------------------------


@pytest.mark.parametrize(
    "state, needle",
    [
        ({"offset": "abc"}, "offset"),
        ({"offset": -50}, "offset"),
        ({"offset": 1.5}, "offset"),
        ({"offset": True}, "offset"),
        ({"buffer_id": "../../x"}, "buffer_id"),
        ({"reinforcements": []}, "reinforcements"),
        ({"reinforcements": {"n1": {"count": "x"}}}, "reinforcements"),
        ({"retired": {"abc": "x"}}, "retired"),
        ({"jobs": "nightly"}, "jobs"),
        ({"pending": 3}, "pending"),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else v,
)
@pytest.mark.parametrize("command", ["status", "run", "maintain"])
def test_a_wrong_field_in_the_state_file_is_a_message_not_a_bug(vault, state, needle, command):
    vault.write([observation(body="A fact waiting in the buffer.")])
    vault.state_path.write_text(json.dumps(state))
    result = cortex(command, cwd=vault.root)
    assert result.returncode == 1, result.stderr
    assert "a bug" not in result.stderr and "state.json" in result.stderr and needle in result.stderr, result.stderr
    assert "restore it from a backup" in result.stderr, result.stderr
