"""`cortex maintain` catching up, the `cortex schedule` loop, `cortex cron`, the CLI and the CI template."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import timedelta

import yaml

from conftest import REPO, VENV_BIN, cortex, git, observation
from cortex.maintenance.settings import When
from cortex.notes import parse_note
from cortex.maintenance.due import run_due, schedule_table
from maint_helpers import MONTH, T0, commit_count, make_note, note_paths, when


def test_when_parses_and_steps():
    daily = When.parse("daily 03:00")
    assert daily.next_after(when("2026-03-01T02:00:00Z")) == when("2026-03-01T03:00:00Z")
    assert daily.next_after(when("2026-03-01T03:00:00Z")) == when("2026-03-02T03:00:00Z")
    assert When.parse("every 1h").next_after(when("2026-03-01T02:10:00Z")) == when("2026-03-01T03:10:00Z")
    assert str(When.parse("03:30")) == "daily 03:30" and str(When.parse("90m")) == "every 90m"


def test_maintain_runs_only_what_is_due_and_catches_up_after_a_missed_week(vault):
    goal = make_note(vault, "goal_short", "Ship Tidewatch offline mode to beta testers this month.", importance=0.6)
    start = T0 + 2.5 * MONTH  # 0.6 - 0.375 = 0.225: still above 0.2
    first = run_due(vault, now=start)
    assert [r.job for r in first.results] == ["reinforce", "decay", "dedup", "graph", "index"]
    assert goal in note_paths(vault)

    soon = run_due(vault, now=start + timedelta(minutes=30))
    assert soon.results == [] and set(soon.not_due) == {"reinforce", "decay", "dedup", "graph", "index"}

    hourly = run_due(vault, now=start + timedelta(minutes=61))
    assert [r.job for r in hourly.results] == ["reinforce", "index"]

    # the laptop slept for a week: everything overdue runs once, and decay sees the whole gap
    before = commit_count(vault)
    week = run_due(vault, now=start + timedelta(days=7))
    assert [r.job for r in week.results] == ["reinforce", "decay", "dedup", "graph", "index"]
    assert commit_count(vault) == before + 1 and goal not in note_paths(vault)
    rows = {r["job"]: r for r in schedule_table(vault, start + timedelta(days=7))}
    assert rows["decay"]["next_run"] == "2026-03-30T03:00:00.000Z" and not rows["decay"]["due"]
    assert vault.status()["jobs"]["decay"]["next_run"] == rows["decay"]["next_run"]


def test_a_run_while_the_clock_was_ahead_does_not_stop_maintenance_once_it_is_right(vault):
    """A machine whose clock was years ahead for one nightly run (a VM resumed with a
    wrong clock, set right by NTP later): every job's next run was counted from that
    future run, and `cortex maintain` ran nothing until then."""
    ahead = cortex("--vault", str(vault.root), "maintain", "--now", "2031-01-01T03:30:00Z")
    assert ahead.returncode == 0, ahead.stderr
    listing = json.loads(cortex("--vault", str(vault.root), "maintain", "--list", "--json").stdout)
    assert all(row["due"] and row["next_run"] == "now" for row in listing), listing
    right = cortex("--vault", str(vault.root), "maintain", "--json")
    assert right.returncode == 0, right.stderr
    assert [r["job"] for r in json.loads(right.stdout)["ran"]] == ["reinforce", "decay", "dedup", "graph", "index"]
    again = json.loads(cortex("--vault", str(vault.root), "maintain", "--json").stdout)
    assert again["ran"] == []  # recorded at the right time now: due again on its schedule


def test_maintain_with_nothing_due_says_so_in_one_line(vault):
    """The hourly cron call appends what maintain says to observer/cron.log: six lines of
    "not due" most hours, for ever. Nothing due is one line, with the soonest job."""
    first = cortex("--vault", str(vault.root), "maintain")
    assert first.returncode == 0 and "5 jobs ran" in first.stderr, first.stderr
    idle = cortex("--vault", str(vault.root), "maintain")
    assert idle.returncode == 0 and idle.stdout == ""
    listing = json.loads(cortex("--vault", str(vault.root), "maintain", "--list", "--json").stdout)
    soonest = min(listing, key=lambda row: row["next_run"])
    assert idle.stderr == f"cortex maintain: nothing due (next: {soonest['job']} at {soonest['next_run']})\n"
    report = json.loads(cortex("--vault", str(vault.root), "maintain", "--json").stdout)
    assert report["ran"] == [] and set(report["not_due"]) == {"reinforce", "decay", "dedup", "graph", "index"}


def _has_open(pid: int, path) -> bool:
    """Whether process ``pid`` has ``path`` open (Linux): a cortex waiting for the vault's lock."""
    fds = f"/proc/{pid}/fd"
    try:
        return any(os.readlink(f"{fds}/{fd}") == os.path.realpath(path) for fd in os.listdir(fds))
    except OSError:  # gone, or an fd closed while looked at
        return False


def test_a_maintain_that_waited_for_another_does_not_run_its_jobs_again(vault):
    """A slow night: the next cron's `cortex maintain` starts while the last one still holds
    the vault. Once it gets the vault, the jobs the other one ran are no longer due: done
    again, a large vault's dedup took as long a second time."""
    from cortex.maintenance.settings import load_maintenance
    from cortex.timefmt import format_time

    now = T0 + timedelta(days=1)
    settings = load_maintenance(vault)
    with vault.lock():  # the maintain still running
        second = subprocess.Popen([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "maintain", "--json",
                                   "--now", format_time(now)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(600):
            if _has_open(second.pid, vault.lock_path) or second.poll() is not None:
                break
            time.sleep(0.05)
        assert second.poll() is None, second.stderr.read()
        state = vault.load_state()  # ... records every job it ran, as it does under the lock
        for job, schedule in settings.when.items():
            state.jobs[job] = {"last_run": format_time(now), "next_run": format_time(schedule.next_after(now)),
                               "schedule": str(schedule)}
        vault.save_state(state)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    report = json.loads(out)
    assert report["ran"] == [] and set(report["not_due"]) == {"reinforce", "decay", "dedup", "graph", "index"}


def test_only_and_force(vault):
    run_due(vault, now=T0)
    report = run_due(vault, now=T0 + timedelta(minutes=5), force=True, only=["graph", "decay"])
    assert [r.job for r in report.results] == ["decay", "graph"]
    assert cortex("--vault", str(vault.root), "maintain", "--only", "nonsense").returncode == 2  # a usage error


def test_a_failing_job_is_recorded_and_the_rest_still_run(vault):
    run_due(vault, now=T0)
    (vault.root / "observer" / "taxonomy.yml").write_text("types: [not, a, mapping]\n")
    report = run_due(vault, now=T0 + timedelta(days=2))
    assert "decay" in report.errors and "graph" in [r.job for r in report.results]
    assert "taxonomy.yml" in vault.load_state().jobs["decay"]["last_error"]


def test_cli_maintain_json_and_list(vault):
    vault.write(observation(body="The payments service retries failed webhooks with exponential backoff."))
    vault.write(observation(body="The payments service retries failed webhooks with exponential backoff."))
    vault.run(now=T0)
    out = cortex("--vault", str(vault.root), "maintain", "--json", "--now", "2026-01-06T00:00:00Z")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["commits"] == 1 and data["ran"][0]["job"] == "reinforce" and data["ran"][0]["changed"] == 1
    listing = json.loads(cortex("--vault", str(vault.root), "maintain", "--list", "--json", "--now", "2026-01-06T00:10:00Z").stdout)
    assert {r["job"]: r["due"] for r in listing} == dict.fromkeys(["reinforce", "decay", "dedup", "graph", "index"], False)
    status = cortex("--vault", str(vault.root), "status")
    assert "reinforce" in status.stdout and "next" in status.stdout


def test_cli_dedup_dry_run_lists_pairs_with_scores(vault):
    make_note(vault, "fact", "Ledgerline's API is built with FastAPI.")
    make_note(vault, "fact", "FastAPI is the framework behind the Ledgerline API.", created=T0 + MONTH)
    make_note(vault, "fact", "Ledgerline runs PostgreSQL 15.", created=T0 + MONTH)
    make_note(vault, "fact", "Ledgerline runs PostgreSQL 16.", created=T0 + 2 * MONTH)
    before = commit_count(vault)
    out = cortex("--vault", str(vault.root), "dedup", "--dry-run")
    assert out.returncode == 0, out.stderr
    merge_lines = [l for l in out.stdout.splitlines() if l.startswith("merge")]
    keep_lines = [l for l in out.stdout.splitlines() if l.startswith("keep")]
    assert len(merge_lines) == 1 and "different numbers" in "".join(keep_lines)
    assert commit_count(vault) == before


def test_cli_graph_neighbors_and_export(vault):
    make_note(vault, "fact", "Maya owns payments in [[Ledgerline]].", entities=[("Maya Okafor", "person")], tags=["payments"])
    out = cortex("--vault", str(vault.root), "graph", "neighbors", "Ledgerline", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["neighbors"][0]["edge"] == "links_to"
    for fmt, head in (("dot", "digraph"), ("graphml", "<?xml"), ("mermaid", "graph LR")):
        res = cortex("--vault", str(vault.root), "graph", "export", "--format", fmt)
        assert res.returncode == 0 and res.stdout.startswith(head), res.stderr
    assert cortex("--vault", str(vault.root), "graph", "neighbors", "Nobody").returncode == 1


def test_an_entity_whose_name_no_note_can_hold_gets_no_link(vault):
    """Obsidian refuses : * " \\ / < > | ? # ^ [ ] in a note's name: a link made from `C#`
    by dropping the `#` was [[C]], the C language note beside it; `AC/DC` a path. Such an
    entity stays in `entities` and the graph by its name, with no link to another note."""
    (vault.root / "C.md").write_text("Notes on the C programming language.\n")
    git(vault.root, "add", "C.md")
    git(vault.root, "commit", "-qm", "vault backup")
    names = ["C#", "F#", "Alpha#Budget", "AC/DC", "Meeting: Q3", "O'Brien: Sean", "Maya Okafor"]
    vault.write(observation(body="The billing service is written in C# and its reports in F#.",
                            entities=[{"name": n, "type": "thing"} for n in names]))
    vault.run()
    [memory] = [p for p in note_paths(vault) if p.startswith("mind/")]
    meta = parse_note((vault.root / memory).read_text()).meta
    assert [e["name"] for e in meta["entities"]] == names
    assert meta["links"] == ["[[Maya Okafor]]"]
    linked = cortex("--vault", str(vault.root), "graph", "neighbors", "C.md", "--json")
    assert linked.returncode == 0 and json.loads(linked.stdout)[0]["neighbors"] == []
    for name in names:
        out = cortex("--vault", str(vault.root), "graph", "neighbors", name, "--json")
        assert out.returncode == 0, (name, out.stderr)
        assert {n["path"] for n in json.loads(out.stdout)[0]["neighbors"]} == {memory}, name


def test_cron_prints_crontab_systemd_and_ci(vault):
    out = cortex("--vault", str(vault.root), "cron").stdout
    assert f"--vault {vault.root} maintain" in out and "Persistent=true" in out and "OnCalendar=" in out
    assert "schedule:" in out and "cron:" in out


def test_cron_lines_survive_a_vault_path_with_spaces_and_percent(tmp_path, ready_vault):
    """cron turns an unescaped % into a newline and hands the rest to sh; systemd expands
    % specifiers and splits on spaces unless quoted: each line must give back the path."""
    import shlex


    root = ready_vault(tmp_path / "My Vault %d")
    out = cortex("--vault", str(root), "cron").stdout
    line = next(l for l in out.splitlines() if l.startswith("7 * * * *"))
    command = line.split(None, 5)[5].replace("\\%", "%")  # what cron gives the shell
    assert "%" not in line.replace("\\%", "")
    assert shlex.split(command.split(" >> ", 1)[0])[1:] == ["--vault", str(root), "maintain"]
    exec_line = next(l for l in out.splitlines() if l.startswith("ExecStart=") and l.endswith(" maintain"))
    words = shlex.split(exec_line.removeprefix("ExecStart=").replace("%%", "%"))
    assert words[1:] == ["--vault", str(root), "maintain"]


def test_the_systemd_unit_maintains_when_the_run_before_it_fails(vault, tmp_path):
    """systemd runs a oneshot unit's ExecStart lines in turn and stops at the first that
    fails, unless it is marked `-`. A laptop that syncs around each run fails its run while
    its remote is out of reach: the unit's maintain must run all the same, as cron's does."""
    import shlex

    git(vault.root, "remote", "add", "origin", str(tmp_path / "unmounted" / "notes.git"))
    git(vault.root, "config", "cortex.syncOnRun", "true")
    out = cortex("--vault", str(vault.root), "cron").stdout
    unit = out.split("[Service]", 1)[1].split("\n\n", 1)[0]
    codes = []
    for line in (l for l in unit.splitlines() if l.startswith("ExecStart=")):
        command = line.removeprefix("ExecStart=")
        failure_ignored = command.startswith("-")
        words = shlex.split(command.removeprefix("-").replace("%%", "%"))
        codes.append(subprocess.run(words, stdin=subprocess.DEVNULL, capture_output=True).returncode)
        if codes[-1] != 0 and not failure_ignored:
            break  # systemd: the unit failed, the lines after it do not run
    assert codes[0] != 0 and len(codes) == 2 and codes[1] == 0, codes
    assert vault.load_state().jobs["decay"]["last_run"]


def test_brief_reports_the_day(vault):
    vault.write(observation(body="Maya will finish the DATEV export before the end of March.", type="commitment",
                            entities=[{"name": "Maya Okafor", "type": "person"}]))
    vault.write(observation(body="Maya will finish the DATEV export before the end of March.", type="commitment"))
    vault.run()
    run_due(vault, only=["reinforce"])
    out = cortex("--vault", str(vault.root), "brief", "--json")
    data = json.loads(out.stdout)
    assert len(data["memorized"]) == 1 and data["reinforced"]["observations"] == 1 and len(data["reinforced"]["applied"]) == 1
    assert data["entities"][0]["name"] == "Maya Okafor"
    wrote = cortex("--vault", str(vault.root), "brief", "--write")
    assert wrote.returncode == 0, wrote.stderr
    assert any(p.startswith("vault/events/") and p.endswith("-brief.md") for p in note_paths(vault))
    assert git(vault.root, "log", "-1", "--format=%s").startswith("brief: ")
    assert cortex("--vault", str(vault.root), "validate", "--all").returncode == 0


def test_the_brief_counts_only_peoples_own_commits_as_changed_by_people(vault):
    """`cortex forget` is cortex's commit, not a person's edit; a person's commit is listed."""
    vault.write(observation(body="Prefers small, reviewable pull requests", type="preference"))
    vault.run()
    [memory] = [p for p in note_paths(vault) if p.startswith("mind/preferences/")]
    done = cortex("--vault", str(vault.root), "forget", memory, "--reason", "replaced by the 03:30 note")
    assert done.returncode == 0, done.stderr
    (vault.root / "Printer.md").write_text("The printer in room 4 needs toner.\n")
    git(vault.root, "add", "Printer.md")
    git(vault.root, "commit", "-qm", "vault backup")
    data = json.loads(cortex("--vault", str(vault.root), "brief", "--json").stdout)
    assert [(c["path"], c["change"], c["author"]) for c in data["changed"]] == [("Printer.md", "added", "Test Person")]
    text = cortex("--vault", str(vault.root), "brief").stdout
    assert "changed by people: 1 note" in text and "by cortex" not in text


def test_the_brief_names_who_made_a_change_a_merge_brought(vault, tmp_path):
    """A pull that merges names the teammate who wrote the change, not the person who
    pulled (the merge commit's diff against its first parent is the teammate's work), and
    the teammate's memorized notes are listed too."""
    remote = tmp_path / "remote.git"
    git(vault.root, "init", "-q", "--bare", str(remote))
    git(vault.root, "remote", "add", "origin", str(remote))
    git(vault.root, "push", "-q", "-u", "origin", "HEAD")
    mate = tmp_path / "mate"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(mate))
    (mate / "Boiler.md").write_text("The boiler is serviced every October.\n")
    git(mate, "add", "Boiler.md")
    git(mate, "-c", "user.name=Dana Teammate", "-c", "user.email=dana@example.com", "commit", "-q", "--no-verify",
        "-m", "vault backup", "--author", "Dana Teammate <dana@example.com>")
    git(mate, "push", "-q")
    (vault.root / "Printer.md").write_text("The printer in room 4 needs toner.\n")
    git(vault.root, "add", "Printer.md")
    git(vault.root, "commit", "-qm", "vault backup")
    git(vault.root, "pull", "-q", "--no-rebase", "--no-edit")
    assert len(git(vault.root, "log", "-1", "--format=%P").split()) == 2  # a merge
    data = json.loads(cortex("--vault", str(vault.root), "brief", "--json").stdout)
    assert sorted((c["path"], c["author"]) for c in data["changed"]) == [
        ("Boiler.md", "Dana Teammate"), ("Printer.md", "Test Person")]


def test_the_written_brief_names_tags_and_titles_without_carrying_them(vault):
    """The brief lists the day's tags and titles; Obsidian and cortex's graph must not read
    them as the brief's own tags and links, or every brief is tagged with every tag."""
    (vault.root / "Printer.md").write_text("The printer in room 4 needs toner. #office/printers\n")
    git(vault.root, "add", "Printer.md")
    git(vault.root, "commit", "-qm", "vault backup")
    vault.write(observation(body="Crane inspection moved to Friday #urgent, see [[Alpha]]", tags=["cranes"]))
    vault.run()
    wrote = cortex("--vault", str(vault.root), "brief", "--write")
    assert wrote.returncode == 0, wrote.stderr
    [brief] = [p for p in note_paths(vault) if p.endswith("-brief.md")]
    text = (vault.root / brief).read_text()
    assert "cranes (1)" in text and "office/printers (1)" in text and "Friday" in text
    for name in ("#office/printers", "#cranes", "#urgent", "Alpha"):
        out = cortex("--vault", str(vault.root), "graph", "neighbors", name, "--json")
        assert out.returncode == 0, (name, out.stderr)
        assert brief not in {n.get("path") for n in json.loads(out.stdout)[0]["neighbors"]}, name


def test_graph_neighbors_json_of_a_name_not_in_the_graph_is_an_empty_list(vault):
    """Nothing found: exit 1, as `query --json`, and JSON on stdout all the same (the list a match prints)."""
    done = cortex("--vault", str(vault.root), "graph", "neighbors", "nobody", "--json")
    assert done.returncode == 1 and "nothing in the graph is called 'nobody'" in done.stderr
    assert json.loads(done.stdout) == []


def test_every_maintenance_command_has_help():
    for args in (["reinforce"], ["decay"], ["dedup"], ["graph"], ["graph", "neighbors"], ["graph", "export"],
                 ["maintain"], ["schedule"], ["cron"], ["brief"]):
        out = cortex(*args, "--help")
        assert out.returncode == 0 and len(out.stdout) > 80, args


def test_init_ships_the_nightly_workflow(vault):
    workflow = vault.root / ".github" / "workflows" / "cortex-nightly.yml"
    data = yaml.safe_load(workflow.read_text())
    steps = " ".join(str(s.get("run", "")) for s in data["jobs"]["maintain"]["steps"])
    assert "cortex validate --all" in steps and "cortex maintain" in steps
    assert steps.rindex("cortex sync") > steps.index("cortex maintain")  # pushes (docs/sync.md), after maintaining
    assert data[True]["schedule"][0]["cron"]  # YAML reads the `on:` key as True
    project = yaml.safe_load((REPO / ".github" / "workflows" / "nightly.yml").read_text())
    assert "cortex maintain" in json.dumps(project)


def _wait_for(path, text: str, proc, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        if text in content:
            return content
        if proc.poll() is not None:
            raise AssertionError(f"loop exited early:\n{content}")
        time.sleep(0.1)
    raise AssertionError(f"never saw {text!r}:\n{path.read_text() if path.exists() else ''}")


def test_schedule_loop_survives_a_failing_job_and_stops_on_sigterm(vault, tmp_path):
    config = vault.root / "observer" / "config.yml"
    good = config.read_text()
    config.write_text("threshold: [broken\n")  # every cortex command fails while this is here
    log = tmp_path / "loop.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([str(VENV_BIN / "cortex"), "--vault", str(vault.root), "schedule", "--run-every", "1s",
                                 "--maintain-every", "1s"], stdout=fh, stderr=subprocess.STDOUT, env=os.environ.copy())
    try:
        _wait_for(log, "failed (exit 1)", proc)
        config.write_text(good)
        vault.write(observation(body="Tidewatch caches 7 days of tide predictions."))
        deadline = time.monotonic() + 60
        while not any(p.startswith("mind/facts/") for p in note_paths(vault)) and time.monotonic() < deadline:
            time.sleep(0.1)
        _wait_for(log, "`cortex maintain` ok", proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "carrying on" in text and "stopped (" in text
    assert any(p.startswith("mind/facts/") for p in note_paths(vault))


def test_schedule_loop_keeps_calling_when_the_wall_clock_goes_back(tmp_path, monkeypatch):
    """Summer time ends (the local clock repeats an hour), or the clock is set back: the
    loop counted in naive local time (the `schedule` package) and called nothing for that
    hour, every autumn. A wall clock set back an hour stands in for the real one here
    (it cannot be moved under a test; with libfaketime, the loop across Europe/Berlin's
    2026-10-25 03:00 called nothing from 02:59 CEST to 02:05 CET)."""
    import datetime as dt
    import sys

    from cortex.maintenance.scheduler import Loop

    class SetBack(dt.datetime):
        back = dt.timedelta(0)

        @classmethod
        def now(cls, tz=None):
            return super().now(tz) - cls.back

    monkeypatch.setattr(dt, "datetime", SetBack)
    calls: list[str] = []

    def command(root, *args):
        calls.append(args[0])
        if calls == ["run"]:  # the first call, the next one already due in a second
            SetBack.back = dt.timedelta(hours=1)  # then the hour repeats
        if calls.count("run") == 5:
            loop.stopping = True
        return [sys.executable, "-c", "pass"]

    loop = Loop(tmp_path, run_every=timedelta(seconds=1), maintain_every=timedelta(hours=1),
                log=open(os.devnull, "w"), command=command)
    assert loop.serve(max_loops=60) == 0  # about a minute at most
    assert calls.count("run") == 5, calls  # before: the first, then nothing for an hour


def test_jobs_leave_the_search_index_fresh(vault):
    from cortex.maintenance.due import run_job
    from cortex.search.index import SearchIndex

    path = make_note(vault, "goal_short", "Close all open security alerts in the dotfiles repo.", importance=0.5)
    built = cortex("--vault", str(vault.root), "index")
    assert built.returncode == 0, built.stderr
    result = run_job(vault, "decay", now=T0 + 3 * MONTH)
    assert result.commit
    index = SearchIndex(vault.root).load(vectors=False)
    try:
        assert index.state.head == git(vault.root, "rev-parse", "HEAD").strip()
        assert index.lexical.stored(path) is None
        assert index.lexical.stored(path.replace("mind/goals/", "mind/archive/goals/")) is not None
    finally:
        index.close()


def test_maintain_only_nothing_is_a_usage_error(vault):
    result = cortex("--vault", str(vault.root), "maintain", "--only", "")
    assert result.returncode == 2 and "--only needs at least one job" in result.stderr


def test_the_brief_says_which_memories_were_replaced_or_forgotten_since(vault):
    """A session starts with the brief: a memory memorized this morning and replaced (or
    forgotten) at noon must not read as one of today's current memories beside the one
    that replaced it. The brief lists it as replaced, by what, and marks it where it lists
    what was memorized."""
    vault.write(observation(body="The billing deploy window is Tuesday at 14:00 UTC.", type="fact"))
    vault.write(observation(body="The office printer takes A3 paper.", type="fact"))
    vault.run()
    old, printer = sorted(p for p in note_paths(vault) if p.startswith("mind/facts/2"))
    old_id = parse_note((vault.root / old).read_text()).meta["id"]
    if "Tuesday" not in (vault.root / old).read_text():
        old, printer = printer, old
        old_id = parse_note((vault.root / old).read_text()).meta["id"]
    vault.write(observation(body="The billing deploy window is Thursday at 09:00 UTC.", type="fact", supersedes=old_id))
    new = vault.run().paths[0]
    assert cortex("--vault", str(vault.root), "forget", printer, "--reason", "the printer is gone").returncode == 0
    data = json.loads(cortex("--vault", str(vault.root), "brief", "--json").stdout)
    corrected = {c["path"]: c for c in data["corrected"]}
    assert corrected[old]["reason"] == "superseded" and corrected[old]["by"] == new
    assert corrected[old]["title"].startswith("The billing deploy window is Tuesday")
    assert corrected[printer]["reason"] == "forgotten" and corrected[printer]["why"] == "the printer is gone"
    assert {m["path"]: m.get("archived") for m in data["memorized"]} == {old: "superseded", printer: "forgotten", new: None}
    text = cortex("--vault", str(vault.root), "brief").stdout
    assert "- replaced or forgotten: 2" in text
    assert "Tuesday at 14:00 UTC. (owner) — superseded since" in text
