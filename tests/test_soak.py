"""The soak in the suite, bounded: a person's commits beside `cortex run` and `cortex
maintain` loops (tests/soak.py; `make soak` runs it longer and prints the counts)."""

from __future__ import annotations

import pytest

from soak import soak

pytestmark = pytest.mark.slow


def test_a_person_beside_cortex_loses_nothing(tmp_path):
    counts = soak(tmp_path / "vault", seconds=20, seed=3)
    assert counts.problems == []
    assert sum(n for what, n in counts.person.items() if what.startswith("git commit")) >= 1
    assert sum(counts.cortex.values()) >= 1 and counts.observations >= 20


def test_with_the_watcher_and_an_agent_querying_the_index_follows_it_all(tmp_path):
    def asked(counts) -> int:
        return sum(n for what, n in list(counts.cortex.items()) if what.startswith(("cortex query", "cortex status")))

    counts = soak(tmp_path / "vault", seconds=20, seed=5, watch=True,
                  until=lambda c: asked(c) >= 5 and c.cortex["watcher answers with paths"] >= 5)
    assert counts.problems == []
    assert asked(counts) >= 5
    assert counts.cortex["watcher answers with paths"] >= 5  # asked through the watcher, not git


def test_two_machines_sharing_a_remote_beside_a_person_converge_and_lose_nothing(tmp_path):
    counts = soak(tmp_path / "vault", seconds=20, seed=7, remote=True)
    assert counts.problems == []
    assert counts.cortex["teammate: observations"] >= 20  # the other machine's memories reached this one
    assert sum(n for what, n in counts.cortex.items() if what.startswith("cortex sync exit 0")) >= 1
