"""The soak in the suite, bounded: a person's commits beside `cortex run` and `cortex
maintain` loops (tests/soak.py; `make soak` runs it longer and prints the counts)."""

from __future__ import annotations

import json
import random

import pytest

from soak import Counts, Person, cortex, soak
from sync_helpers import active, converge, cx, make_fleet, notes, sync, write

pytestmark = pytest.mark.slow


def test_a_person_beside_cortex_loses_nothing(tmp_path):
    counts = soak(tmp_path / "vault", seconds=20, seed=3)
    assert counts.problems == []
    assert sum(n for what, n in counts.person.items() if what.startswith("git commit")) >= 1
    assert sum(counts.cortex.values()) >= 1 and counts.observations >= 20


def test_with_the_watcher_and_an_agent_querying_the_index_follows_it_all(tmp_path):
    def asked(counts) -> int:
        return sum(n for what, n in list(counts.cortex.items()) if what.startswith(("cortex query", "cortex status")))

    def answered_with_paths(root) -> int:  # the soak counts it only at its end: asked of the watcher here
        seen = cortex(root, "watch", "--status", "--json")
        daemon = (json.loads(seen.stdout).get("daemon") or {}) if seen.returncode == 0 else {}
        return daemon.get("answered", {}).get("paths", 0)

    vault = tmp_path / "vault"
    counts = soak(vault, seconds=20, seed=5, watch=True,
                  until=lambda c: asked(c) >= 5 and answered_with_paths(vault) >= 5)
    assert counts.problems == []
    assert asked(counts) >= 5
    assert counts.cortex["watcher answers with paths"] >= 5  # asked through the watcher, not git


def test_two_machines_sharing_a_remote_beside_a_person_converge_and_lose_nothing(tmp_path):
    counts = soak(tmp_path / "vault", seconds=20, seed=7, remote=True)
    assert counts.problems == []
    assert counts.cortex["teammate: observations"] >= 20  # the other machine's memories reached this one
    assert sum(n for what, n in counts.cortex.items() if what.startswith("cortex sync exit 0")) >= 1


def test_a_persons_pull_stopped_where_they_deleted_a_memory_the_other_machine_archived_is_gits_own_conflict(tmp_path):
    """The person `git rm`s a memory while the other machine's decay archives it (moves it
    into mind/archive/, adding its archive fields). git's plain pull stops there, as it
    must: a rename on one side and a deletion on the other, which no merge driver sees.
    The person aborts and `cortex sync` keeps the memory deleted, archive copy and all."""
    _, (here, there) = make_fleet(tmp_path, 2)
    body = "The ledger runs on Postgres 16 in production"
    write(here, body, timestamp="2024-01-10T10:00:00Z")  # old enough to fade at the next decay
    cx(here, "run")
    converge(here, there)
    (path,) = [p for p in active(here) if p.startswith("mind/facts/")]
    counts = Counts()
    person = Person(here, random.Random(0), counts)
    person.delete_memory()  # the only memory there is
    assert person.deleted_paths == {path}
    archived = path.replace("mind/", "mind/archive/", 1)
    assert [item["archived_to"] for item in json.loads(cx(there, "decay", "--json").stdout)["items"]] == [archived]
    sync(there)
    person.pull()
    assert counts.problems == []
    assert counts.person["git pull stopped at a memory deleted on one side, counted or archived on the other (aborted)"] == 1
    assert not (here / ".git" / "MERGE_HEAD").exists()
    assert {"kept_deleted": archived} in json.loads(sync(here, "--json").stdout)["settled"]
    converge(here, there)
    for machine in (here, there):
        assert not [p for p, text in notes(machine).items() if body in text]
