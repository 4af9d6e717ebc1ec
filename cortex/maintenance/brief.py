"""``cortex brief``: the digest an agent reads at session start and a person in the morning.

Built from git history (each job's commit carries one body line per note) and from
state: what was memorized (marked when archived since), reinforced, merged, faded, replaced
or forgotten, or held in quarantine since a time,
the notes people added, edited or removed in their own commits (with who did it), and
the entities and tags that came up most. ``--write`` commits it as an ``event`` note
(tagged ``brief``, which ordinary searches leave out).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from typing import Any, TYPE_CHECKING

from cortex.layout import template_folders
from cortex.gitrepo import GitRepo, cortex_made
from cortex.maintenance.snapshot import SnapshotCache, take_snapshot
from cortex.timefmt import format_time, parse_time

if TYPE_CHECKING:
    from cortex.vault import Vault

_OBSERVE_LINE = re.compile(r"^(\S+\.md) — (.*) \(([^()]*)\)$")
_MOVE_LINE = re.compile(r"^(\S+\.md) → (\S+\.md) — (.*) \(([0-9.]+)\)$")
# A memory archived as wrong or replaced: by a run's correction (`supersedes`), by dedup
# (a contradicted memory), by `cortex forget` (its reason on the next line).
_SUPERSEDED_LINE = re.compile(r"^(.+?\.md) → (.+?\.md)(?: \(superseded\)|: superseded by (.+?\.md) \(.*\))$")
_FORGOTTEN_LINE = re.compile(r"^(.+?\.md) → (.+\.md)$")
_REINFORCE_LINE = re.compile(r"^(\S+\.md) — (.*) \(\+(\d+)\)( \(back from the archive\))?$")
TOP_ENTITIES = 8
JOB_PREFIXES = ("observe:", "reinforce:", "dedup:", "decay:", "brief:")
_CHANGE = {"A": "added", "M": "edited", "D": "removed", "R": "renamed", "T": "edited"}


def _people_changes(git, commit, templates: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """The notes a commit that no cortex job made touched (added, edited, removed); not
    the files of the folders Obsidian takes templates from (``templates``): no notes."""
    from cortex.layout import in_folders, is_note_path

    if commit.parents:
        diff = commit.parents[0].tree.diff_to_tree(commit.tree)
    else:
        diff = commit.tree.diff_to_tree(swap=True)  # the empty tree → the first commit
    out = []
    for delta in diff.deltas:
        path = delta.new_file.path if delta.status_char() != "D" else delta.old_file.path
        if is_note_path(path) and not in_folders(path, templates):
            out.append({"path": path, "change": _CHANGE.get(delta.status_char(), "edited"),
                        "author": commit.author.name, "commit": str(commit.id)[:10]})
    return out


def _by_cortex(commit, subject: str) -> bool:
    """One of cortex's own commits (a run, a job, `cortex forget`, `init`, a brief): its
    notes are no person's changes, whatever the brief makes of its lines."""
    def who(sig) -> tuple:
        return sig.name, sig.email, sig.time

    return subject.startswith((*JOB_PREFIXES, "init:")) or cortex_made(commit.message, who(commit.author), who(commit.committer))


def _commits_since(repo: GitRepo, since: datetime):
    """Every commit of HEAD's history made since ``since``, newest first: the commits a
    merge brought (a teammate's, pulled) are walked as well as the first parent's line,
    so each change is told with the commit, and the person, that made it."""
    import pygit2

    git = repo.repo
    if git.head_is_unborn:
        return
    stop = since.timestamp()
    for commit in git.walk(git.head.target, pygit2.GIT_SORT_TIME):
        if commit.commit_time < stop:
            return
        yield commit


def make_brief(vault: Vault, *, since: datetime, now: datetime) -> dict[str, Any]:
    repo = GitRepo(vault.root, lock_wait=vault.settings.lock_timeout)
    memorized, reinforced, merged, faded, restored, changed = [], [], [], [], [], []
    templates = template_folders(vault.root)
    corrected: list[dict[str, Any]] = []
    for commit in _commits_since(repo, since):
        subject, _, body = commit.message.partition("\n")
        lines = [l for l in body.splitlines() if l and not l.startswith("Cortex-")]
        if len(commit.parents) > 1:
            continue  # a merge: what it brought is told by the merged commits themselves
        if not _by_cortex(commit, subject):
            changed += _people_changes(repo.repo, commit, templates)
        elif subject.startswith("forget:"):
            moved = next((m for line in lines if (m := _FORGOTTEN_LINE.match(line))), None)
            why = next((line[len("reason: "):] for line in lines if line.startswith("reason: ")), None)
            if moved:
                corrected.append({"path": moved.group(1), "archived_to": moved.group(2), "reason": "forgotten",
                                  "by": None, "why": why})
        elif subject.startswith("observe:"):
            for line in lines:
                if (m := _OBSERVE_LINE.match(line)):
                    memorized.append({"path": m.group(1), "title": m.group(2), "attribution": m.group(3)})
        elif subject.startswith("reinforce:"):
            for line in lines:
                if (m := _REINFORCE_LINE.match(line)):
                    item = {"path": m.group(1), "title": m.group(2), "count": int(m.group(3))}
                    reinforced.append(item)
                    if m.group(4):
                        restored.append(item)
        if subject.startswith(("observe:", "dedup:")):  # a correction, in the run or the job that made it
            for line in lines:
                if (m := _SUPERSEDED_LINE.match(line)):
                    corrected.append({"path": m.group(1), "archived_to": m.group(2), "reason": "superseded",
                                      "by": m.group(3) or _new_in(lines), "why": None})
        if subject.startswith("dedup:"):
            for line in lines:
                if (m := _MOVE_LINE.match(line)):
                    merged.append({"path": m.group(1), "into": m.group(2), "title": m.group(3), "cosine": float(m.group(4))})
        elif subject.startswith("decay:"):
            for line in lines:
                if (m := _MOVE_LINE.match(line)):
                    faded.append({"path": m.group(1), "archived_to": m.group(2), "title": m.group(3),
                                  "effective_importance": float(m.group(4))})
    state = vault.load_state()
    pending = 0
    for entry in state.reinforcements.values():
        try:
            if parse_time(entry.get("last")) >= since:
                pending += int(entry.get("count", 1))
        except (ValueError, TypeError):
            continue
    quarantined: Counter[str] = Counter()
    for entry in vault.quarantine.entries():
        try:
            if parse_time(entry.last_seen) >= since:  # held, or said again, since
                quarantined[entry.reason] += 1
        except (ValueError, TypeError):
            continue
    snapshot = take_snapshot(repo, SnapshotCache(vault.cache_dir), vault.settings.limits.max_note_bytes)
    by_path = snapshot.by_path()
    by_name = {n.name: n for n in snapshot}
    entities: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    seen_changes: set[str] = set()
    for item in changed:  # newest first: a note edited twice is listed once, as it is now
        item["title"] = _title_at(by_path, item["path"])
    changed = [c for c in changed if not (c["path"] in seen_changes or seen_changes.add(c["path"]))]
    for item in corrected:  # its title as the archive holds it now
        item["title"] = _title_at(by_path, item["archived_to"])
    # what was memorized and is archived since: a reader of the list must not take it for current
    since_archived = {c["path"]: c["reason"] for c in corrected}
    since_archived.update({m["path"]: "merged" for m in merged})
    since_archived.update({f["path"]: "faded" for f in faded})
    for item in memorized:
        item["archived"] = since_archived.get(item["path"])
    for item in memorized + reinforced + merged + changed:
        note = by_path.get(item.get("into") or item["path"]) or by_name.get(item["path"].rsplit("/", 1)[-1])
        if note is not None:
            for name, _ in note.entities:
                entities[name] += 1
            for tag in note.tags:
                if tag != "brief":
                    tags[tag] += 1
    from cortex.security.secrets import scrub_generated

    # titles, authors and names come from commits people wrote too: none may carry a credential
    return scrub_generated({
        "since": format_time(since),
        "now": format_time(now),
        "memorized": memorized,
        "reinforced": {"applied": reinforced, "observations": sum(i["count"] for i in reinforced) + pending,
                       "pending": pending},
        "restored": restored,
        "merged": merged,
        "faded": faded,
        "corrected": corrected,
        "quarantined": dict(quarantined),
        "changed": changed,
        "entities": [{"name": n, "count": c} for n, c in entities.most_common(TOP_ENTITIES)],
        "tags": [{"tag": t, "count": c} for t, c in tags.most_common(TOP_ENTITIES)],
    })


def _title_at(by_path: dict, path: str) -> str:
    """The title of the note at ``path`` in HEAD, else its file name (a note gone since)."""
    note = by_path.get(path)
    return note.title if note is not None else path.rsplit("/", 1)[-1][:-3]


def _new_in(lines: list[str]) -> str | None:
    """The note a run's commit memorized, which its correction line names no path of: a
    correction's commit holds the note that corrects and the memory it replaced."""
    made = [m.group(1) for line in lines if (m := _OBSERVE_LINE.match(line))]
    return made[0] if len(made) == 1 else None


def render_brief(data: dict[str, Any]) -> str:
    r = data["reinforced"]
    out = [f"# Brief {data['since'][:16]} → {data['now'][:16]} (UTC)", ""]
    out.append(f"- memorized: {len(data['memorized'])}")
    for item in data["memorized"][:10]:
        out.append(f"  - {item['title']} ({item['attribution']})"
                   + (f" — {item['archived']} since" if item.get("archived") else ""))
    if len(data["memorized"]) > 10:
        out.append(f"  - … and {len(data['memorized']) - 10} more")
    out.append(f"- reinforced: {_n(r['observations'], 'observation')} of known memories; {_n(len(r['applied']), 'note')} updated"
               + (f"; {r['pending']} waiting for `cortex reinforce`" if r["pending"] else ""))
    for item in data["restored"]:
        out.append(f"  - back from the archive: {item['title']}")
    out.append(f"- merged: {len(data['merged'])} near-duplicates")
    for item in data["merged"][:5]:
        out.append(f"  - {item['title']} → {item['into']}")
    out.append(f"- faded: {len(data['faded'])} memories archived")
    for item in data["faded"][:5]:
        out.append(f"  - {item['title']} ({item['effective_importance']:.2f})")
    corrected = data.get("corrected", [])
    out.append(f"- replaced or forgotten: {len(corrected)} memor{'y' if len(corrected) == 1 else 'ies'} archived")
    for item in corrected[:5]:
        said = (f"forgotten: {item['why']}" if item["reason"] == "forgotten"
                else f"replaced by {item['by']}" if item["by"] else "replaced")
        out.append(f"  - {item['title']} ({said})")
    if len(corrected) > 5:
        out.append(f"  - … and {len(corrected) - 5} more")
    q = data["quarantined"]
    out.append(f"- quarantined: {sum(q.values())}" + (f" ({', '.join(f'{k} {v}' for k, v in sorted(q.items()))}) → `cortex quarantine list`" if q else ""))
    changed = data.get("changed", [])
    out.append(f"- changed by people: {_n(len(changed), 'note')}")
    for item in changed[:10]:
        out.append(f"  - {item['title']} ({item['path']}, {item['change']} by {item['author']})")
    if len(changed) > 10:
        out.append(f"  - … and {len(changed) - 10} more")
    if data["entities"]:
        out.append("- most active: " + ", ".join(f"{e['name']} ({e['count']})" for e in data["entities"]))
    if data.get("tags"):
        out.append("- tags: " + ", ".join(f"#{t['tag']} ({t['count']})" for t in data["tags"]))
    return "\n".join(out) + "\n"


def write_brief(vault: Vault, data: dict[str, Any], now: datetime) -> str | None:
    """Commit the brief as ``vault/events/<date>-brief.md`` (one per day, updated in place)."""
    from cortex.errors import CortexError
    from cortex.notes import NoteDraft, inert, make_title, parse_note, render_note, source_hash, uuid7

    day = format_time(now)[:10]
    path = f"vault/events/{day}-brief.md"
    body = render_brief(data).split("\n", 2)[2].strip() if render_brief(data).count("\n") > 2 else "Nothing happened."
    # The tags and titles it lists are quoted, not the brief's own: unescaped, each
    # brief would be tagged with every active tag and link every note a title links.
    body = f"Daily brief for {day}.\n\n{inert(body)}"
    with vault.lock():
        repo = GitRepo(vault.root, lock_wait=vault.settings.lock_timeout)
        existing = repo.file_at_head(path)
        note_id, created = uuid7(int(now.timestamp() * 1000)), format_time(now)
        if existing is not None:
            meta = parse_note(existing.decode("utf-8")).meta
            note_id = str(meta.get("id") or note_id)
            created = meta["created"] if isinstance(meta.get("created"), str) else format_time(parse_time(meta.get("created", now)))
        draft = NoteDraft(
            id=note_id, type="event", category="entity", created=created, source_hash=source_hash(body),
            title=make_title(f"Daily brief for {day}"), body=body, bucket="explicit", attribution="cortex",
            confidence=1.0, importance=0.5, entities=tuple((e["name"], "entity") for e in data["entities"][:5]),
            tags=("brief",), last_reinforced=created,
        )
        text = render_note(draft)
        if existing is not None and existing.decode("utf-8") == text:
            return None
        problems = vault.note_validator().check(path, text)
        if problems:
            raise CortexError(f"the brief note would be invalid: {problems[0]}")
        changes = {path: repo.write_blob(text.encode("utf-8"))}
        with repo.locked(), repo.materializing(changes):  # HEAD and the index move together (cortex/gitlock.py)
            repo.commit(changes, f"brief: {day}\n", (vault.settings.author_name, vault.settings.author_email))
    return path


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
