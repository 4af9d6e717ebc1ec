"""An Obsidian session on a real vault: notes where Obsidian puts them, each edit
committed with a real `git commit` through the hooks `cortex init` installed.

The session runs twice: from a terminal (the virtualenv on PATH) and as a GUI client
or Obsidian's git plugin runs git (a minimal PATH, no virtualenv on it): the hooks must
find cortex either way. Every ordinary change commits on the first try and the commit
holds the completed note; a pasted token is refused with a message that leads to a fix;
then every note is found by `cortex query` and listed by `cortex brief`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cortex.notes import REQUIRED_FIELDS, parse_note, source_hash

VENV_BIN = Path(sys.executable).parent
CORTEX = str(VENV_BIN / "cortex")


def fake_token() -> str:
    # Built at test time from pieces, so no file in the repository looks like a live key.
    rng = random.Random(11)
    return "gh" + "p_" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(36))


def _env(home: Path, path: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CORTEX_VAULT", "SKIP", "GIT_DIR", "GIT_INDEX_FILE", "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               PRE_COMMIT_HOME=str(home / "pre-commit"), GIT_CONFIG_NOSYSTEM="1", PATH=path)
    return env


def _minimal_path() -> str:
    """What a GUI app gets: the system folders holding git and sh, nothing of ours."""
    dirs = []
    for tool in ("git", "sh"):
        found = shutil.which(tool, path="/usr/bin:/bin")
        assert found, f"{tool} not in /usr/bin or /bin"
        dirs.append(str(Path(found).parent))
    return os.pathsep.join(dict.fromkeys(dirs))


class Vault:
    def __init__(self, root: Path, env: dict, cli_env: dict) -> None:
        self.root, self.env, self.cli_env = root, env, cli_env

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=self.root, env=self.env, capture_output=True, text=True, check=check)

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        return path

    def save(self, message: str) -> subprocess.CompletedProcess:
        """What Obsidian's git plugin does on each save: stage everything, commit once."""
        self.git("add", "-A")
        done = self.git("commit", "-m", message, check=False)
        done.output = done.stdout + done.stderr  # type: ignore[attr-defined]
        return done

    def head(self, rel: str) -> str:
        return self.git("show", f"HEAD:{rel}").stdout

    def cortex(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([CORTEX, "--vault", str(self.root), *args], cwd=self.root, env=self.cli_env,
                              capture_output=True, text=True)

    def found(self, text: str, *args: str) -> list[str]:
        done = self.cortex("query", text, "--json", "--limit", "20", *args)
        assert done.returncode in (0, 1), done.stderr
        return [r["path"] for r in json.loads(done.stdout)["results"]]


@pytest.fixture(params=["terminal", "gui"])
def vault(request, tmp_path, ready_vault) -> Vault:
    home = tmp_path / "home"
    home.mkdir()
    cli_env = _env(home, f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    root = ready_vault(tmp_path / "notes")  # as `cortex init` makes it
    for key, value in (("user.name", "Ada Person"), ("user.email", "ada@example.com")):
        subprocess.run(["git", "config", key, value], cwd=root, check=True)
    git_env = cli_env if request.param == "terminal" else _env(home, _minimal_path())
    return Vault(root, git_env, cli_env)


DAILY = "2026-11-23.md"
GARDEN = "projects/garden/plan.md"
FACT = "mind/facts/staging.md"


def test_an_obsidian_session_commits_every_edit_first_time(vault):
    # A daily note at the top, where Obsidian puts it: no frontmatter, inline tags.
    daily = "Standup notes. Need a #review of the tide tables before Friday; #ops/night shift is short.\n"
    vault.write(DAILY, daily)
    done = vault.save("daily note")
    assert done.returncode == 0, done.output
    assert vault.head(DAILY) == daily  # a person's note is never rewritten

    # A note in a folder the person invented, with their own properties.
    garden = "---\nstatus: draft\ntype: plan\nid: 1\n---\n\nPlant the espaliered pears along the south wall in March.\n"
    vault.write(GARDEN, garden)
    vault.write("projects/garden/log.md", "---\nid: 1\n---\n\nPruned the pears.\n")  # their own `id`, not cortex's
    done = vault.save("garden plan")
    assert done.returncode == 0, done.output
    assert vault.head(GARDEN) == garden

    # A memory written by hand with only a type: complete in the very first commit.
    body = "The staging database is rebuilt every night at 02:00 Europe/Berlin."
    path = vault.write(FACT, f"---\ntype: fact\n---\n\n{body}\n")
    done = vault.save("a fact")
    assert done.returncode == 0, done.output
    committed = vault.head(FACT)
    meta = parse_note(committed).meta
    assert all(meta.get(k) for k in REQUIRED_FIELDS), committed
    assert meta["category"] == "concept" and meta["source_hash"] == source_hash(body)
    assert meta["title"] == body
    assert path.read_text() == committed  # what Obsidian shows is what was committed
    assert vault.git("status", "--porcelain").stdout == ""

    # A body edit: the derived title follows, the source_hash (the observation's identity) stays.
    edited = committed.replace("02:00", "03:30")
    path.write_text(edited)
    done = vault.save("later")
    assert done.returncode == 0, done.output
    meta = parse_note(vault.head(FACT)).meta
    assert meta["title"] == body.replace("02:00", "03:30")
    assert meta["source_hash"] == source_hash(body)
    assert meta["id"] == parse_note(committed).meta["id"]
    assert vault.git("status", "--porcelain").stdout == ""

    # A property edit, as Obsidian's property editor makes it (tags with capitals, a new key).
    text = path.read_text().replace("\n---\n\n", "\ntags: [Ops, Databases]\nimportance: 0.8\n---\n\n", 1)
    path.write_text(text)
    done = vault.save("properties")
    assert done.returncode == 0, done.output
    meta = parse_note(vault.head(FACT)).meta
    assert meta["tags"] == ["ops", "databases"] and meta["importance"] == 0.8
    # Obsidian's property editor writes the frontmatter anew: block lists, comments gone.
    path.write_text(path.read_text().replace("# ---\n", "").replace("tags: [ops, databases]", "tags:\n  - ops\n  - databases\n  - staging"))
    done = vault.save("property editor")
    assert done.returncode == 0, done.output
    assert "# ---\n" in vault.head(FACT) and parse_note(vault.head(FACT)).meta["tags"] == ["ops", "databases", "staging"]
    assert vault.git("status", "--porcelain").stdout == ""

    # A title the person wrote is theirs: a later body edit leaves it alone.
    text = path.read_text()
    text = text.replace(f'title: "{meta["title"]}"', 'title: "Nightly staging rebuild"')
    path.write_text(text)
    assert vault.save("my title").returncode == 0
    path.write_text(path.read_text().replace("03:30", "04:00"))
    done = vault.save("moved again")
    assert done.returncode == 0, done.output
    assert parse_note(vault.head(FACT)).meta["title"] == "Nightly staging rebuild"

    # An empty note (Obsidian's "Untitled.md") is left alone until it has a body.
    vault.write("Untitled.md", "")
    vault.write("mind/facts/Untitled.md", "")
    done = vault.save("untitled")
    assert done.returncode == 0, done.output
    assert vault.head("Untitled.md") == ""

    # A pasted token: refused, with the place and what to do, and never echoed.
    token = fake_token()
    vault.write(DAILY, daily + f"\nThe deploy bot pushes with {token} for now.\n")
    done = vault.save("oops")
    assert done.returncode != 0
    assert f"{DAILY}:3: looks like a credential (github)" in done.output
    assert "remove the secret from the note; rotate it if it was real" in done.output
    assert token not in done.output
    assert vault.head(DAILY) == daily
    vault.write(DAILY, daily + "\nThe deploy bot pushes with the token from the vault manager. See [[staging]].\n")
    done = vault.save("no token")
    assert done.returncode == 0, done.output

    # A near-miss type says what was meant.
    vault.write("mind/facts/typo.md", "---\ntype: fcat\n---\n\nThe VPN drops at midnight.\n")
    done = vault.save("typo")
    assert done.returncode != 0
    assert "type 'fcat' is not in the taxonomy — did you mean `fact`? write `type: fact`" in done.output
    vault.write("mind/facts/typo.md", "---\ntype: fact\n---\n\nThe VPN drops at midnight.\n")
    assert vault.save("typo fixed").returncode == 0
    assert vault.git("status", "--porcelain").stdout == ""

    # Every note is found, inline tags included; the brief lists them with who changed them.
    assert DAILY in vault.found("tide tables review")
    assert vault.found("friday tables", "--tag", "review") == [DAILY]
    assert DAILY in vault.found("shift", "--tag", "ops/night")
    assert GARDEN in vault.found("espaliered pears")
    assert FACT in vault.found("staging database rebuilt")
    done = vault.cortex("graph", "neighbors", "#review", "--json")
    assert done.returncode == 0, done.stderr
    assert [n["path"] for n in json.loads(done.stdout)[0]["neighbors"]] == [DAILY]
    done = vault.cortex("graph", "neighbors", FACT, "--json")  # [[staging]] is the file, as in Obsidian
    assert {(n["edge"], n["direction"], n.get("path")) for n in json.loads(done.stdout)[0]["neighbors"]} >= {
        ("links_to", "in", DAILY)}
    done = vault.cortex("brief", "--since", "1d", "--json")
    assert done.returncode == 0, done.stderr
    changed = {c["path"]: c for c in json.loads(done.stdout)["changed"]}
    author = vault.git("log", "-1", "--format=%an").stdout.strip()
    for rel in (DAILY, GARDEN, FACT, "mind/facts/typo.md"):
        assert changed[rel]["author"] == author, changed
    assert {t["tag"] for t in json.loads(done.stdout)["tags"]} >= {"review", "ops/night", "ops"}
    text = vault.cortex("brief", "--since", "1d").stdout
    assert f"Nightly staging rebuild (mind/facts/staging.md, edited by {author})" in text
    done = vault.cortex("validate", "--all")
    assert done.returncode == 0, done.stdout + done.stderr

    # What Obsidian keeps per device stays out of git; its settings and plugins may travel.
    vault.write(".obsidian/workspace.json", "{}")
    vault.write(".obsidian/app.json", "{}")
    vault.write(".trash/old.md", f"An old note with {token} in it.\n")
    assert vault.git("status", "--porcelain", "-uall").stdout == "?? .obsidian/app.json\n"
    assert vault.save("settings").returncode == 0


@pytest.mark.parametrize("FACT", [FACT, "mind/facts/café crème.md"])  # a name git quotes in its patch
def test_unstaged_edits_of_the_same_note_are_never_touched(vault, FACT):
    """pre-commit sets unstaged changes aside while hooks run; a completion staged into
    such a note could clash with them when they come back, so the hook asks first."""
    path = vault.write(FACT, "---\ntype: fact\n---\n\nThe VPN drops at midnight.\n")
    vault.git("add", FACT)
    path.write_text(path.read_text() + "\nSometimes at one.\n")  # still being written
    done = vault.git("commit", "-m", "half", check=False)
    assert done.returncode != 0
    assert f"{FACT}:1: this note has changes that are not staged — stage them too (`git add {FACT}`)" in done.stdout + done.stderr
    assert path.read_text().endswith("Sometimes at one.\n")  # the person's words, where they were
    assert vault.git("-c", "core.quotepath=off", "diff", "--cached", "--name-only").stdout.strip() == FACT
    done = vault.save("whole")  # as the message says
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Sometimes at one." in vault.head(FACT) and "source_hash:" in vault.head(FACT)


def test_unstaged_edits_elsewhere_come_back_after_the_completion(vault):
    vault.write(DAILY, "Monday.\n")
    assert vault.save("daily").returncode == 0
    (vault.root / DAILY).write_text("Monday. Still typing\n")  # not staged
    vault.write(FACT, "---\ntype: fact\n---\n\nThe VPN drops at midnight.\n")
    vault.git("add", FACT)
    done = vault.git("commit", "-m", "fact", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "id:" in vault.head(FACT)
    assert (vault.root / DAILY).read_text() == "Monday. Still typing\n"
    assert vault.git("status", "--porcelain").stdout == " M 2026-11-23.md\n"


def test_committing_named_paths_fixes_and_asks_for_a_second_commit(vault):
    """`git commit PATH` commits a temporary index that git then discards: a staged
    completion would not stay staged, so the hook falls back to fix-and-ask."""
    vault.write(FACT, "---\ntype: fact\n---\n\nThe VPN drops at midnight.\n")
    vault.git("add", FACT)
    done = vault.git("commit", "-m", "named", "--", FACT, check=False)
    assert done.returncode != 0
    assert f"{FACT}: fixed (added id, category, created, source_hash, title) — review it, `git add` it and commit again" in done.stdout + done.stderr
    done = vault.git("commit", "-m", "named", "--", FACT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert vault.git("status", "--porcelain").stdout == ""


def terminal_vault(tmp_path) -> Vault:
    """A fresh vault used from a terminal (the virtualenv on PATH) by git and cortex alike."""
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home, f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    root = tmp_path / "notes"
    subprocess.run([CORTEX, "init", str(root)], env=env, check=True, capture_output=True)
    return Vault(root, env, env)


def test_cortex_notes_carry_a_readable_name_and_the_brief_stays_out_of_searches(tmp_path):
    vault = terminal_vault(tmp_path)
    root = vault.root
    vault.write("standup.md", "Talked about the ledger migration. #ledger\n")
    assert vault.save("mine").returncode == 0
    body = "The ledger runs on Postgres 16 in the Frankfurt region."
    assert vault.cortex("write", "--type", "fact", "--body", body, "--author", "claude-code").returncode == 0
    done = vault.cortex("run")
    assert done.returncode == 0, done.stderr
    [written] = [p for p in (root / "mind" / "facts").rglob("*.md")]
    assert parse_note(written.read_text()).meta["aliases"] == [body]  # what Obsidian lists and completes
    done = vault.cortex("brief", "--since", "1d", "--write")
    assert done.returncode == 0, done.stderr
    assert "changed by people: 1 note" in done.stdout and "standup (standup.md, added by" in done.stdout
    assert "memorized: 1" in done.stdout
    assert not any(p.startswith("vault/events/") for p in vault.found("ledger Postgres"))
    assert any(p.startswith("vault/events/") for p in vault.found("ledger Postgres", "--tag", "brief"))

    # The index follows notes made after it was built, top folder and new folders alike,
    # and leaves out what .gitignore excludes.
    (root / ".gitignore").write_text((root / ".gitignore").read_text() + "exports/\n")
    vault.write("Weekly review.md", "The quokka census is due on Thursday.\n")
    vault.write("areas/wildlife/quokkas.md", "Quokka census results go to the ranger station.\n")
    vault.write("exports/old.md", "An exported quokka census from last year.\n")
    assert set(vault.found("quokka census")) == {"Weekly review.md", "areas/wildlife/quokkas.md"}


def test_renaming_an_edited_memory_keeps_what_it_remembers(tmp_path):
    """Obsidian renames a note when its title is edited: git sees the old path deleted and
    a new one added. The note keeps its `source_hash` (the observation it came from), so
    the agent saying the same thing again still reinforces it rather than making a twin."""
    vault = terminal_vault(tmp_path)
    root = vault.root
    said = "The night shift lead at quay 3 is Ingrid Quist."
    assert vault.cortex("write", "--type", "fact", "--body", said).returncode == 0
    assert vault.cortex("run").returncode == 0
    [written] = (root / "mind" / "facts").rglob("*.md")
    original = parse_note(written.read_text()).meta["source_hash"]
    # the person corrects the body, commits; later renames the file, commits again
    written.write_text(written.read_text().replace("Ingrid Quist.", "Ingrid Quist (until March)."))
    assert vault.save("until March").returncode == 0
    renamed = root / "mind" / "facts" / "Night shift lead.md"
    written.rename(renamed)
    done = vault.save("rename")
    assert done.returncode == 0, done.output
    assert "source_hash" not in done.output  # nothing to complete: a rename is not a new note
    assert parse_note(vault.head("mind/facts/Night shift lead.md")).meta["source_hash"] == original
    assert vault.cortex("write", "--type", "fact", "--body", said).returncode == 0
    report = json.loads(vault.cortex("run", "--json").stdout)
    assert report["reinforced"] == 1 and report["memorized"] == 0
    assert [p.name for p in (root / "mind" / "facts").rglob("*.md")] == ["Night shift lead.md"]


TEMPLATE = """---
type: fact
created: <% tp.date.now("YYYY-MM-DDTHH:mm:ss") %>
tags: [meeting]
---
# <% tp.file.title %>

Meeting with the crane operators about <% tp.system.prompt("topic") %>, see [[rota]].
"""
# What Templater made of it for one meeting: a note like any other.
FROM_TEMPLATE = """---
type: fact
created: 2026-11-20T09:00:00Z
tags: [meeting]
---
# Crane rota

Meeting with the crane operators about the night shift rota, see [[rota]].
"""


def _templater_vault(tmp_path, ready_vault, folder: str) -> Path:
    from conftest import git

    root = ready_vault(tmp_path / "notes")
    settings = root / ".obsidian/plugins/templater-obsidian/data.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"templates_folder": folder, "trigger_on_file_creation": True}))
    for name in ("meeting", "standup"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / f"{name}.md").write_text(TEMPLATE, encoding="utf-8")
    (root / "mind/facts/crane-rota.md").write_text(FROM_TEMPLATE, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "templates, and a note made from one")
    return root


def _cli(root: Path, *args: str):
    from conftest import cortex

    done = cortex("--vault", str(root), *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _found(root: Path) -> list[str]:
    return [r["path"] for r in _cli(root, "query", "crane operators meeting rota")["results"]]


def test_templates_inside_the_memory_folders_are_no_memories_to_any_reader(tmp_path, ready_vault):
    """A Templater template in vault/ (placeholders and all) is no memory: no query, no
    MCP answer, no count, no graph node, no person's change in the brief; the note made
    from it is a note like any other."""
    root = _templater_vault(tmp_path, ready_vault, "vault/templates")
    assert _found(root) == ["mind/facts/crane-rota.md"]
    assert _cli(root, "status")["notes"]["by_type"] == {"vault": {}, "mind": {"fact": 1}}
    _cli(root, "maintain")
    graph = json.loads((root / ".git/cortex/graph.json").read_text(encoding="utf-8"))
    assert [n["path"] for n in graph["nodes"].values() if n["kind"] == "note"] == ["mind/facts/crane-rota.md"]
    assert [c["path"] for c in _cli(root, "brief")["changed"]] == ["mind/facts/crane-rota.md"]
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "query", "arguments": {"text": "crane operators meeting"}}}]
    done = subprocess.run([CORTEX, "--vault", str(root), "mcp"], capture_output=True, text=True,
                          input="".join(json.dumps(m) + "\n" for m in lines), timeout=120)
    assert done.returncode == 0, done.stderr
    from cortex.mcp_server import unfence

    (answer,) = [a["result"]["content"][0]["text"] for a in map(json.loads, done.stdout.splitlines()) if a["id"] == 2]
    assert [r["path"] for r in unfence(answer)] == ["mind/facts/crane-rota.md"]


def test_the_index_and_counts_follow_a_templates_folder_moved_in_obsidian_without_a_rebuild(tmp_path, ready_vault):
    """The person points Templater at another folder: what was a template is a note
    again, and the new folder's files are templates, at the next query and status, the
    search index updated in place (two settings files read per update, no rebuild)."""
    root = _templater_vault(tmp_path, ready_vault, "vault/templates")
    assert _found(root) == ["mind/facts/crane-rota.md"]
    settings = root / ".obsidian/plugins/templater-obsidian/data.json"
    settings.write_text(json.dumps({"templates_folder": "mind/facts"}))
    answer = _cli(root, "query", "crane operators meeting rota")
    assert sorted(r["path"] for r in answer["results"]) == ["vault/templates/meeting.md", "vault/templates/standup.md"]
    assert answer["index"] == {"notes": 2, "updated": 3}  # two notes read, one dropped: no rebuild
    assert _cli(root, "status")["notes"]["by_type"] == {"vault": {"fact": 2}, "mind": {}}
    settings.write_text(json.dumps({"templates_folder": "vault/templates"}))
    assert _found(root) == ["mind/facts/crane-rota.md"]
    assert _cli(root, "status")["notes"]["by_type"] == {"vault": {}, "mind": {"fact": 1}}


DRAWING = """---

excalidraw-plugin: parsed
tags: [excalidraw]

---
==⚠  Switch to EXCALIDRAW VIEW in the MORE OPTIONS menu of this document. ⚠==


# Excalidraw Data

## Text Elements
Crane rota night shift ^Ab12Cd34

%%
## Drawing
```compressed-json
N4KAkARALgngDgUwgLgAQQQDwMYEMA2AlgCYBOuA7hADTgQBuCpAzoQPYB2KqATLZMzYBXUtiRoIACyhQ4zZAHoFAc0JRJQgEYA6bGwC2CgF7N6hbEcK4OCtptbErHALRY8RMpWdx8Q1TdIEfARcZgRmBShcZQUebQBmAE4EmjoghH0EDihmbgBtcDBQMBLoeHF0QOwojmVg1JLIRhZ2LjQANgAWWtLm1k4AOU4xbgAGAHYANhGADgBWcYBGABYAYAAtlxgARZTkmHgtslGNyFkfWlbJTkaO65OxmDHSxMiN
```
%%
"""


def test_an_excalidraw_drawing_is_committed_as_it_is_and_is_no_memory(tmp_path, ready_vault):
    """The Excalidraw plugin saves each drawing as markdown, in vault/ as anywhere: the
    commit takes it as it is (it was refused, asked for a type, holding back the git
    plugin's backup) and no reader takes it for a memory; a token pasted in is refused."""
    from conftest import cortex, git

    root = ready_vault(tmp_path / "notes")
    drawings = ["vault/diagrams/Crane yard.excalidraw.md", "Excalidraw/Drawing 2026-11-29 04.30.12.excalidraw.md"]
    for rel in drawings:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(DRAWING, encoding="utf-8")
    (root / "mind/facts/crane-rota.md").write_text(FROM_TEMPLATE, encoding="utf-8")
    git(root, "add", "-A")
    done = subprocess.run(["git", "commit", "-m", "two drawings and a note"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(git(root, "show", f"HEAD:{rel}") == DRAWING for rel in drawings)
    assert "\nid: " in git(root, "show", "HEAD:mind/facts/crane-rota.md")  # the hook ran, and completed the note
    assert [r["path"] for r in _cli(root, "query", "crane rota night shift")["results"]] == ["mind/facts/crane-rota.md"]
    assert _cli(root, "status")["notes"]["by_type"] == {"vault": {}, "mind": {"fact": 1}}
    _cli(root, "maintain")
    graph = json.loads((root / ".git/cortex/graph.json").read_text(encoding="utf-8"))
    assert [n["path"] for n in graph["nodes"].values() if n["kind"] == "note"] == ["mind/facts/crane-rota.md"]
    (root / drawings[0]).write_text(DRAWING.replace("night shift", f"token {fake_token()}"), encoding="utf-8")
    git(root, "add", "-A")
    done = subprocess.run(["git", "commit", "-m", "a token drawn"], cwd=root, capture_output=True, text=True)
    assert done.returncode != 0 and drawings[0] in done.stdout + done.stderr
    git(root, "commit", "-qm", "a token drawn", "--no-verify")  # past the hook: the check of every note finds it
    done = cortex("--vault", str(root), "validate")
    assert done.returncode == 1 and f"{drawings[0]}:13: looks like a credential" in done.stdout + done.stderr


def test_an_observation_superseding_a_template_never_moves_it_out_of_the_templates_folder(tmp_path, ready_vault):
    """A memory that says it replaces a template in mind/ archived the template: `cortex
    run` moved it out of the folder Obsidian takes templates from, gone from the person's
    templates menu. The reference is refused when written, and a line appended without
    `cortex write` archives nothing."""
    from conftest import cortex, git, observation

    root = _templater_vault(tmp_path, ready_vault, "mind/templates")
    template = "mind/templates/meeting.md"
    done = cortex("--vault", str(root), "write", "-t", "fact", "-b", "The crane rota changes on Mondays.",
                  "--supersedes", template)
    assert done.returncode == 1 and f"{template!r} is a template, not a note" in done.stderr, done.stderr
    with open(root / "observer/observations.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(observation(body="The crane rota changes on Mondays.", supersedes=template)) + "\n")
    done = cortex("--vault", str(root), "run")
    assert done.returncode == 0, done.stderr
    assert git(root, "show", f"HEAD:{template}") == TEMPLATE
    assert git(root, "ls-files", "mind/archive") == ""
    shown = cortex("--vault", str(root), "show", template)
    assert shown.returncode == 2 and "is a template, not a note" in shown.stderr
