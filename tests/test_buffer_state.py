"""The buffer's position in `observer/state.json`: whatever happens to the buffer between
two runs (truncated and written again, a writer killed mid-line) or to the state file
itself, every buffer line ends as a note, a reinforcement or a quarantine entry, once;
and a damaged state file is a message saying what to do, not a crash."""

from __future__ import annotations

import json

import pytest

from conftest import append_lines, cortex, observation
from test_run_git import Crash, crash_at
from test_run_rules import NOW


def marker(tag: str) -> dict:
    return observation(body=f"Marker {tag} about the kiwi orchard.", importance=0.9)


def run_cli(vault, *args) -> dict:
    result = cortex("run", "--json", *args, cwd=vault.root)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def note_texts(vault) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in vault.iter_note_paths()]


def notes_saying(vault, tag: str) -> int:
    return sum(f"Marker {tag} about" in text for text in note_texts(vault))


# --- a buffer truncated and written again between two runs ------------------------------


def truncated_and_refilled(vault) -> None:
    """A run stops mid-buffer (--limit); the buffer is then emptied (`: >`, logrotate's
    copytruncate) and agents append more than the old offset's worth of new lines."""
    append_lines(vault, *(marker(f"old{i}q") for i in range(10)))
    assert run_cli(vault, "--limit", "5")["read"] == 5
    vault.buffer_path.write_bytes(b"")
    append_lines(vault, *(marker(f"new{i}q") for i in range(20)))


def test_a_buffer_truncated_and_refilled_past_the_offset_is_read_from_its_start(vault):
    truncated_and_refilled(vault)
    status = cortex("status", "--json", cwd=vault.root)
    assert json.loads(status.stdout)["backlog"]["lines"] == 20, status.stdout
    report = run_cli(vault)
    assert report["read"] == 20 and report["memorized"] == 20 and report["quarantined"] == {}, report
    assert any("reading it from the start" in w for w in report["warnings"]), report["warnings"]
    assert [notes_saying(vault, f"new{i}q") for i in range(20)] == [1] * 20
    assert not vault.quarantine.path.exists() or vault.quarantine.entries() == []


@pytest.mark.parametrize(
    "module, attr, after",
    [
        ("cortex.state.State", "save", 0),  # killed saving the reset
        ("cortex.state.State", "save", 1),  # the reset saved; killed saving the new lines' decision
        ("cortex.gitrepo.GitRepo", "commit", 0),  # the new lines' decision saved, not committed
    ],
)
def test_a_kill_after_noticing_the_refilled_buffer_doubles_no_line(vault, monkeypatch, module, attr, after):
    import importlib

    truncated_and_refilled(vault)
    mod_name, cls_name = module.rsplit(".", 1)
    with monkeypatch.context() as m:
        crash_at(m, getattr(importlib.import_module(mod_name), cls_name), attr, after)
        with pytest.raises(Crash):
            vault.run(now=NOW)
    vault.run(now=NOW)
    assert [notes_saying(vault, f"new{i}q") for i in range(20)] == [1] * 20
    assert sum(e["count"] for e in vault.load_state().reinforcements.values()) == 0


def test_lines_appended_after_a_run_are_read_on_from_the_offset(vault):
    """The check costs the common case nothing: a buffer only appended to is read on."""
    append_lines(vault, *(marker(f"a{i}q") for i in range(4)))
    assert run_cli(vault, "--limit", "2")["read"] == 2
    append_lines(vault, marker("b0q"))
    report = run_cli(vault)
    assert report["read"] == 3 and report["warnings"] == [], report


# --- a writer killed mid-line -------------------------------------------------------------

FRAGMENT = b'{"type":"fact","body":"Marker frag1q from a writer killed mid-line'


def test_a_dead_writers_unfinished_line_is_quarantined_and_the_next_line_is_its_own(vault):
    vault.buffer_path.write_bytes(FRAGMENT)
    first = run_cli(vault)
    assert first["read"] == 0  # it may be a writer still at work: left for the next run
    second = run_cli(vault)
    assert second["read"] == 1 and second["quarantined"] == {"parse": 1} and second["rotated"], second
    assert any("unfinished" in w for w in second["warnings"]), second["warnings"]
    assert [e.line for e in vault.quarantine.entries()] == [FRAGMENT.decode()]
    status = cortex("status", cwd=vault.root)
    assert "backlog      0 lines (0 bytes)" in status.stdout + status.stderr
    append_lines(vault, marker("after1q"))  # an agent's `>>`
    third = run_cli(vault)
    assert third["memorized"] == 1 and third["quarantined"] == {}, third
    assert notes_saying(vault, "after1q") == 1


def test_a_whole_observation_a_gone_writer_left_without_its_newline_is_memorized(vault):
    vault.buffer_path.write_bytes(json.dumps(marker("nonl1q")).encode())  # printf '%s' >> …
    assert run_cli(vault)["read"] == 0
    assert run_cli(vault)["memorized"] == 1
    assert notes_saying(vault, "nonl1q") == 1


def test_a_line_still_being_written_is_left_alone(vault):
    line = json.dumps(marker("slow1q")).encode()
    vault.buffer_path.write_bytes(line[:30])
    assert run_cli(vault)["read"] == 0
    with open(vault.buffer_path, "ab") as fh:
        fh.write(line[30:60])  # it grew since the last run: its writer is alive
    assert run_cli(vault)["read"] == 0
    with open(vault.buffer_path, "ab") as fh:
        fh.write(line[60:] + b"\n")
    assert run_cli(vault)["memorized"] == 1
    assert notes_saying(vault, "slow1q") == 1 and vault.quarantine.entries() == []


def test_a_line_whose_writer_still_holds_the_buffer_open_is_left_alone(vault):
    line = json.dumps(marker("open1q")).encode()
    with open(vault.buffer_path, "ab") as fh:
        fh.write(line[:40])
        fh.flush()
        for _ in range(2):
            assert run_cli(vault)["read"] == 0
        fh.write(line[40:] + b"\n")
    assert run_cli(vault)["memorized"] == 1
    assert vault.quarantine.entries() == []


def test_a_write_killed_before_its_first_byte_leaves_a_dead_writers_line_to_be_ended(vault, monkeypatch):
    """A `>>` writer died mid-line; then a `cortex write` is killed after recording its
    batch, before a byte of it reached the buffer. The run that ends the dead writer's
    line settles that batch first, under the same lock: nothing of it to cut, so the line
    stays ended and is read, and no batch is said to be removed."""
    from cortex import buffer

    vault.buffer_path.write_bytes(FRAGMENT)
    assert run_cli(vault)["read"] == 0  # it may be a writer still at work: left for the next run
    with monkeypatch.context() as m:
        crash_at(m, buffer, "write_all", after_calls=2)  # the record written, not the batch
        with pytest.raises(Crash):
            vault.write(marker("late1q"))
    assert vault.buffer_path.read_bytes() == FRAGMENT
    report = run_cli(vault)
    assert report["read"] == 1 and report["quarantined"] == {"parse": 1}, report
    assert not any("removed from the buffer" in w for w in report["warnings"]), report["warnings"]
    assert [e.line for e in vault.quarantine.entries()] == [FRAGMENT.decode()]
    assert notes_saying(vault, "late1q") == 0


# --- a damaged state file -------------------------------------------------------------------


@pytest.mark.parametrize(
    "state, needle",
    [
        ({"offset": "abc"}, "offset"),
        ({"offset": -50}, "offset"),
        ({"offset": 1.5}, "offset"),
        ({"offset": True}, "offset"),
        ({"buffer_id": "../../x"}, "buffer_id"),
        ({"last_line": {"offset": "12"}}, "last_line"),
        ({"unfinished": {"size": -1}}, "unfinished"),
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
