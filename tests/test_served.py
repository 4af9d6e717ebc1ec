"""`cortex query` answered by the running watcher (cortex/search/served.py).

The contract: a served answer is the answer a cold query in its own process gives, as
fresh (every note written, edited, deleted or committed a moment before is seen), and
whatever the watcher cannot answer the same way — before its index has loaded, another
model, a filter value nobody knows, a hostile question, a watcher killed — is answered
by the query itself. Every test runs the real CLI against a real watcher daemon, and
reads from the daemon's own counts whether it served or declined.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from cortex.layout import search_dir
from tests.conftest import _isolate, cortex, git, observation, watching
from tests.test_watch import daemon, ended

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watcher is Linux's")

FACTS = ("The harbour cranes are serviced every March by the Okonkwo crew.",
         "The tide gauge at the north pier is calibrated by Ilse every April.",
         "The ferry timetable changes on the first of May each year.",
         "Backups of the port database run nightly at 02:00 to the Oslo bucket.",
         "The pilot boat Sula has its engine overhauled every second winter.")


def queries(root: Path) -> dict:
    return daemon(root)["daemon"]["queries"]


def query(root: Path, *args: str):
    return cortex("--vault", str(root), "query", *args)


def served_after(root: Path, *args: str):
    """Run a query and return it with whether the watcher served it (its count moved)."""
    before = queries(root).get("served", 0)
    done = query(root, *args)
    return done, queries(root).get("served", 0) == before + 1


def ready(root: Path, timeout: float = 60.0) -> None:
    """Ask once (declined: it starts the load), then wait for the loaded index."""
    query(root, "warm", "--json")
    deadline = time.monotonic() + timeout
    while queries(root)["state"] != "ready":
        assert queries(root)["state"] == "loading", queries(root)  # not idle: the index could be read
        assert time.monotonic() < deadline, "the watcher never loaded its index"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def indexed_template(tmp_path_factory, vault_template) -> Path:
    """A vault with FACTS memorized and its index built, made once per test process and
    copied for each test (`cortex run` and `cortex index` give every test the same
    notes and index: most of a test's set-up)."""
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, tmp_path_factory.mktemp("served-home"))
        root = tmp_path_factory.mktemp("served-template") / "vault"
        shutil.copytree(vault_template, root, symlinks=True)
        git(root, "add", "-A")
        git(root, "commit", "-qm", "vault", "--no-verify", check=False)
        with open(root / "observer" / "observations.jsonl", "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(observation(body=body, session_id="cli")) + "\n" for body in FACTS)
        assert cortex("--vault", str(root), "run").returncode == 0
        assert cortex("--vault", str(root), "index").returncode == 0
    return root


@pytest.fixture
def served(tmp_path, indexed_template):
    """A copy of the indexed vault with its watcher started and its index loaded there."""
    root = tmp_path / "vault"
    shutil.copytree(indexed_template, root, symlinks=True)  # times kept: the index's folder stamps still match
    git(root, "update-index", "-q", "--refresh", check=False)
    with watching(root):
        ready(root)
        yield root


CASES = (("who services the harbour cranes", "--json"), ("pier calibration", "--lexical-only", "--json"),
         ("when does the boat engine get overhauled", "--semantic-only", "--json"),
         ("database backups", "--paths"), ("ferry", "--jsonl", "--limit", "1"), ("--type", "fact", "--json"),
         ("--recent", "3650d", "--json"), ("zzzqqq vexillology", "--json"), ("cranes", "--archived", "--json"))


def comparable(stdout: str):
    """A query's output with its numbers to three places: recency, and so the score,
    move with the clock between two runs of the same query seconds apart."""
    def rounded(value):
        if isinstance(value, float):
            return round(value, 3)
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rounded(v) for v in value]
        return value

    try:
        return rounded(json.loads(stdout))
    except ValueError:
        try:
            return [rounded(json.loads(line)) for line in stdout.splitlines()]
        except ValueError:
            return stdout


def test_a_served_query_prints_what_a_cold_query_prints(served):
    root = served
    answers = {}
    for case in CASES:
        done, was_served = served_after(root, *case)
        assert was_served, (case, done.stderr)
        answers[case] = (done.returncode, comparable(done.stdout))
    assert answers[CASES[0]][0] == 0 and "Okonkwo" in json.dumps(answers[CASES[0]][1])
    assert answers[CASES[7]][0] == 1  # nonsense: nothing found, as cold
    assert cortex("--vault", str(root), "watch", "--stop").returncode == 0
    for case in CASES:
        done = query(root, *case)
        assert (done.returncode, comparable(done.stdout)) == answers[case], case


def test_a_served_query_sees_every_change_made_a_moment_before(served):
    root = served
    note = root / "vault" / "kiosk.md"  # a person's note, not committed
    note.write_text("The lobby kiosk runs Debian 12 and is rebooted by Amara.\n")
    done, was_served = served_after(root, "who reboots the lobby kiosk Amara", "--paths")
    assert was_served and done.returncode == 0 and done.stdout.splitlines()[0] == "vault/kiosk.md"
    note.write_text("The lobby kiosk runs Debian 12 and is rebooted by Tomasz.\n")  # in place
    done, was_served = served_after(root, "Amara", "--lexical-only", "--paths")
    assert was_served and done.returncode == 1, done.stdout
    done, was_served = served_after(root, "Tomasz", "--lexical-only", "--paths")
    assert was_served and done.stdout.splitlines() == ["vault/kiosk.md"]
    git(root, "add", "-A")
    assert git(root, "commit", "-qm", "kiosk", check=False) is not None  # through the real hooks
    note.unlink()
    done, was_served = served_after(root, "Tomasz", "--lexical-only", "--paths")
    assert was_served and done.returncode == 1, done.stdout
    with open(root / "observer" / "observations.jsonl", "a", encoding="utf-8") as fh:  # cortex's own commit
        fh.write(json.dumps(observation(body="The crane cabins are repainted orange by Ferreira.", session_id="cli"))
                 + "\n")
    assert cortex("--vault", str(root), "run").returncode == 0
    done, was_served = served_after(root, "Ferreira crane cabins", "--json")
    assert was_served and done.returncode == 0
    assert "Ferreira" in json.loads(done.stdout)["results"][0]["snippet"]


def test_an_index_another_process_rebuilt_or_deleted_is_followed(served):
    root = served
    assert cortex("--vault", str(root), "index", "--rebuild").returncode == 0  # new files under the daemon
    done, was_served = served_after(root, "tide gauge calibration", "--json")
    assert was_served and done.returncode == 0 and "Ilse" in done.stdout
    (root / "vault" / "kiosk.md").write_text("The lobby kiosk is rebooted by Amara.\n")
    import shutil

    shutil.rmtree(search_dir(root))
    done = query(root, "who reboots the lobby kiosk", "--paths")  # declined, rebuilt by the query itself
    assert done.returncode == 0 and done.stdout.splitlines()[0] == "vault/kiosk.md", done.stderr
    assert queries(root)["state"] != "ready"  # its index was gone: it reads the new one afresh
    ready(root)
    done, was_served = served_after(root, "Amara kiosk", "--paths")
    assert was_served and done.stdout.splitlines()[0] == "vault/kiosk.md"


def test_a_watcher_started_on_an_indexed_vault_serves_the_first_query(served):
    root = served
    assert cortex("--vault", str(root), "watch", "--stop").returncode == 0
    assert cortex("--vault", str(root), "watch", "--background").returncode == 0
    deadline = time.monotonic() + 60
    while queries(root)["state"] != "ready":  # loaded in the background, nobody asking
        assert time.monotonic() < deadline
        time.sleep(0.1)
    done, was_served = served_after(root, "who services the harbour cranes", "--paths")
    assert was_served and done.returncode == 0 and queries(root)["declined"] == 0


def test_what_the_watcher_cannot_answer_the_same_way_the_query_answers_itself(served, tmp_path):
    root = served
    before = queries(root)
    done = query(root, "cranes", "--type", "facts")  # a folder name, not a type: the query's own error
    assert done.returncode == 2 and "--type facts: not known here" in done.stderr
    done = cortex("--vault", str(root), "query", "cranes", "--paths",
                  env={**os.environ, "CORTEX_SEARCH_MODEL": str(tmp_path / "no-model")})
    assert done.returncode == 2 and "no-model" in done.stderr  # another model: asked alone, which says what is wrong
    # hostile questions straight at the socket: declined, and the daemon goes on serving
    from cortex.watcher import _question

    for line in (b"query {not json\n", b"query [1, 2]\n", b'query {"text": 5, "mode": "hybrid"}\n',
                 b'query {"text": "x", "mode": "hybrid", "limit": 1, "filters": {"types": [1]}}\n',
                 b'query {"text": "x", "mode": "hybrid", "limit": 1, "filters": {"owner": "me"}}\n'):
        reply = json.loads(_question(root, line))
        assert set(reply) == {"declined"}, reply
    from cortex.search.question import Question
    from cortex.search.served import encode

    elsewhere = {**encode(Question("cranes"), None), "build": "0.0.9 /opt/an-older-cortex"}  # an install since replaced
    reply = json.loads(_question(root, b"query " + json.dumps(elsewhere).encode() + b"\n"))
    assert "restart it" in reply["declined"]
    after = queries(root)
    assert after["declined"] - before["declined"] == 8 and after["served"] == before["served"]
    done, was_served = served_after(root, "who services the harbour cranes", "--paths")
    assert was_served and done.returncode == 0


@pytest.mark.parametrize("how", ["written anew", "written over"])
def test_a_watcher_started_before_an_upgrade_in_place_declines(tmp_path, indexed_template, monkeypatch, how):
    """`pip install --upgrade` into the same virtualenv (or a `git pull` of the checkout)
    keeps cortex's version and folder: a watcher started before it went on answering the
    new `cortex query` with the code it had loaded (an older one found no Chinese words:
    "nothing found", exit 1, for a vault holding them). Its answers are declined now.
    So they are after an edit into an editable install that keeps the file's inode (an
    editor saving in place), which the build stamp's inodes did not see."""
    import cortex as package

    site = tmp_path / "site"

    def link_or_copy(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(Path(package.__file__).parent, site / "cortex", copy_function=link_or_copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    upgraded = site / "cortex" / "search" / "query.py"
    shutil.copy2(upgraded, upgraded.with_suffix(".new"))  # a file of its own, not the tree's: it is edited below
    os.replace(upgraded.with_suffix(".new"), upgraded)
    monkeypatch.setenv("PYTHONPATH", str(site))
    root = tmp_path / "vault"
    shutil.copytree(indexed_template, root, symlinks=True)
    git(root, "update-index", "-q", "--refresh", check=False)
    with watching(root):
        ready(root)
        before, was_served = served_after(root, "who services the harbour cranes", "--paths")
        assert was_served and before.returncode == 0
        assert "another cortex" not in cortex("--vault", str(root), "watch", "--status").stderr
        assert json.loads(cortex("--vault", str(root), "status", "--json").stdout)["watch"]["other_cortex"] is None
        if how == "written anew":  # as pip and git write a file
            shutil.copy2(upgraded, upgraded.with_suffix(".new"))
            os.replace(upgraded.with_suffix(".new"), upgraded)
        else:  # as an editor saving in place does: the same inode
            inode = upgraded.stat().st_ino
            with open(upgraded, "a", encoding="utf-8") as fh:
                fh.write("\n# edited\n")
            assert upgraded.stat().st_ino == inode
        done, was_served = served_after(root, "who services the harbour cranes", "--paths")
        assert not was_served, "the watcher answered with the code from before the upgrade"
        assert done.returncode == 0 and done.stdout == before.stdout  # answered by the query itself
        # and the person is told why queries are slow again, and what to do (it was silent)
        said = cortex("--vault", str(root), "watch", "--status")
        assert "runs another cortex than this one" in said.stderr and "cortex watch --stop" in said.stderr
        assert "runs another cortex than this one" in cortex("--vault", str(root), "status").stdout
        assert json.loads(cortex("--vault", str(root), "status", "--json").stdout)["watch"]["other_cortex"]


def test_a_taxonomy_edited_while_the_watcher_runs_is_read_again(served):
    """A type added to taxonomy.yml filters served queries at once: the daemon's index
    lives for days, its taxonomy must not."""
    root = served
    (root / "observer" / "taxonomy.yml").write_text(
        "types:\n  meeting: {category: entity, partition: vault, folder: meetings}\n")
    (root / "vault" / "meetings").mkdir()
    (root / "vault" / "meetings" / "standup.md").write_text("The harbour standup moved to 09:30 on Mondays.\n")
    done, was_served = served_after(root, "harbour standup", "--type", "meeting", "--paths")
    assert was_served, done.stderr
    assert done.returncode == 0 and done.stdout.splitlines() == ["vault/meetings/standup.md"]


def test_cortex_index_is_done_by_the_watcher_on_the_index_every_query_reads(served):
    root = served
    (root / "vault" / "kiosk.md").write_text("The lobby kiosk is rebooted by Amara.\n")
    before = queries(root)["served"]
    done = cortex("--vault", str(root), "index", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["added"] == 1 and report["notes"] >= 6 and queries(root)["served"] == before + 1
    again = json.loads(cortex("--vault", str(root), "index", "--json").stdout)
    assert again["added"] == again["changed"] == again["deleted"] == 0
    assert cortex("--vault", str(root), "watch", "--stop").returncode == 0
    cold = query(root, "Amara kiosk", "--lexical-only", "--json")  # in its own process now: nothing left to index
    assert cold.returncode == 0 and json.loads(cold.stdout)["index"]["updated"] == 0
    rebuilt = cortex("--vault", str(root), "index", "--rebuild", "--json")
    assert rebuilt.returncode == 0 and json.loads(rebuilt.stdout)["rebuilt"] is True


def test_the_mcp_servers_index_asks_the_watcher_before_each_answer(served):
    """The MCP server keeps its own index loaded (`LiveIndex`); with the watcher running,
    a note edited in place a moment before is in its next answer, without waiting for
    its periodic checks (an hour apart here)."""
    from cortex.search.live import LiveIndex
    from cortex.search.question import Question

    root = served
    live = LiveIndex(root, interval=3600).start()
    try:
        live.wait_ready(60)
        note = root / "vault" / "kiosk.md"
        note.write_text("The lobby kiosk is rebooted by Amara.\n")
        assert [h.path for h in live.ask(Question("Amara kiosk", mode="lexical")).hits] == ["vault/kiosk.md"]
        note.write_text("The lobby kiosk is rebooted by Tomasz.\n")  # in place: no folder changes
        assert [h.path for h in live.ask(Question("Tomasz kiosk", mode="lexical")).hits] == ["vault/kiosk.md"]
        assert not live.ask(Question("Amara", mode="lexical")).hits
    finally:
        live.stop()


def test_a_killed_watcher_leaves_queries_answered_alone(served):
    root = served
    expected = comparable(query(root, "who services the harbour cranes", "--json").stdout)
    pid = int((root / ".git" / "cortex-watch" / "pid").read_text())
    os.kill(pid, signal.SIGKILL)
    assert ended(pid, timeout=120)  # dead before the query, however loaded the machine (not a time bound)
    assert (root / ".git" / "cortex-watch" / "sock").exists()  # left behind: nobody listens
    done = query(root, "who services the harbour cranes", "--json")
    assert done.returncode == 0 and comparable(done.stdout) == expected


def test_a_watcher_stopped_by_ctrl_z_leaves_queries_answered_alone_at_once(served):
    """A `cortex watch` in a terminal stopped with Ctrl-Z still has its socket: each query
    waited out the whole wait for an answer (two minutes) before it answered alone. The
    subprocess's own limit below is far under that, and far over a query's time."""
    import subprocess

    from tests.conftest import VENV_BIN

    root = served
    expected = comparable(query(root, "who services the harbour cranes", "--json").stdout)
    pid = int((root / ".git" / "cortex-watch" / "pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    done = subprocess.run([str(VENV_BIN / "cortex"), "--vault", str(root), "query", "who services the harbour cranes",
                           "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and comparable(done.stdout) == expected
    said = cortex("--vault", str(root), "watch", "--status").stderr
    assert "stopped (Ctrl-Z, SIGSTOP)" in said and f"kill -CONT {pid}" in said
    assert cortex("--vault", str(root), "watch", "--stop").returncode == 0  # a stopped watcher ends too
    assert cortex("--vault", str(root), "watch", "--status").stderr.startswith("not watching")

def cut_short(path: Path) -> None:
    """The file truncated in place, as a disk tool or a full disk leaves it (cortex's own
    writes replace a file whole: what a process has mapped stays as it was)."""
    os.truncate(path, path.stat().st_size // 2)


def test_a_vector_file_cut_short_under_the_watcher_is_declined_then_rebuilt_by_the_query(served):
    """The daemon reads the vector file memory-mapped: read past the end of a file cut
    short, it would die (SIGBUS) at its next question, silently, and stay gone. It
    declines instead; the query rebuilds the index and answers; the daemon serves again."""
    root = served
    done, was_served = served_after(root, "who services the harbour cranes", "--json")
    assert was_served and "Okonkwo" in done.stdout
    cut_short(search_dir(root) / "vectors.npy")
    done = query(root, "who services the harbour cranes", "--json")
    assert done.returncode == 0 and "Okonkwo" in done.stdout, done.stderr
    assert "rebuilding" in done.stderr
    ready(root)  # alive, and reading the rebuilt index
    done, was_served = served_after(root, "who services the harbour cranes", "--json")
    assert was_served and done.returncode == 0 and "Okonkwo" in done.stdout


MCP_ASKS_TWICE = """
import os, sys
from pathlib import Path
from cortex.layout import search_dir
from cortex.search.live import LiveIndex
from cortex.search.question import Question

root = Path(sys.argv[1])
live = LiveIndex(root, interval=3600).start()
live.wait_ready(60)
print([h.path for h in live.ask(Question("who services the harbour cranes", limit=1)).hits])
matrix = search_dir(root) / "vectors.npy"
os.truncate(matrix, matrix.stat().st_size // 2)
print([h.path for h in live.ask(Question("who services the harbour cranes", limit=1)).hits])
"""


def test_the_mcp_servers_index_survives_its_vector_file_cut_short(served):
    """The MCP server's index (`LiveIndex`), without a watcher to ask: a vector file cut
    short under it is read again (rebuilt), not read past its end (SIGBUS, the server gone)."""
    import subprocess

    root = served
    assert cortex("--vault", str(root), "watch", "--stop").returncode == 0
    done = subprocess.run([sys.executable, "-c", MCP_ASKS_TWICE, str(root)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr)
    before, after = done.stdout.splitlines()
    assert before == after and before != "[]"


def test_a_served_query_sees_an_edit_that_kept_size_and_mtime(served):
    """The watcher names the note (its bytes were written); its size and mtime are those
    the index stored (`cp -p`, `rsync -a` of a restored copy): its words are read again."""
    from tests.test_search import keep_stat_while_rewriting

    root = served
    note = root / "vault" / "kiosk.md"
    note.write_text("The lobby kiosk is rebooted by Amara.\n")
    done, was_served = served_after(root, "Amara kiosk", "--lexical-only", "--paths")
    assert was_served and done.stdout.splitlines() == ["vault/kiosk.md"]
    keep_stat_while_rewriting(note, "Amara", "Jonas")
    done, was_served = served_after(root, "Jonas", "--lexical-only", "--paths")
    assert was_served and (done.returncode, done.stdout.splitlines()) == (0, ["vault/kiosk.md"]), done.stderr
    done, was_served = served_after(root, "Amara", "--lexical-only", "--paths")
    assert was_served and done.returncode == 1, done.stdout


def test_the_query_service_ends_its_worker_before_the_watcher_exits(served):
    """The watcher stops: its query worker finishes what it was doing (here the load of
    the index) and ends, so no thread is left inside the tokenizer or numpy while the
    interpreter finalises (a daemon thread unwound by force there aborts the process)."""
    import threading

    from cortex.search.served import QueryService

    service = QueryService(served, lambda conn, body: None)
    service.preload()
    service.close()
    assert not [t for t in threading.enumerate() if t.name == "cortex-query"]
    assert service.state == "ready"  # the load queued first was done, not cut off
