"""Helpers for the maintenance tests: notes in cortex's format, committed to a vault."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from conftest import git
from cortex.gitrepo import GitRepo
from cortex.notes import NoteDraft, make_title, note_path, parse_note, render_note, source_hash, uuid7
from cortex.timefmt import format_time, parse_time

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
MONTH = timedelta(days=30.4375)
FOLDERS = {"fact": "mind/facts", "opinion": "mind/opinions", "preference": "mind/preferences",
           "commitment": "mind/commitments", "goal_short": "mind/goals", "lesson": "mind/lessons",
           "decision": "vault/decisions", "project": "vault/projects"}
CATEGORY = {"project": "relation"}


def make_note(vault, type_: str, body: str, *, created: datetime = T0, importance: float = 0.7, name: str | None = None,
              entities=(), tags=(), extra=(), folder: str | None = None, attribution: str = "maya",
              last_reinforced: datetime | None = None) -> str:
    """Write and commit one note; return its vault-relative path."""
    h = source_hash(body)
    folder = folder or FOLDERS[type_]
    path = f"{folder}/{name}.md" if name else note_path(folder, created.date().isoformat(), h)  # filed as cortex files it
    draft = NoteDraft(
        id=uuid7(int(created.timestamp() * 1000)), type=type_, category=CATEGORY.get(type_, "concept"),
        created=format_time(created), source_hash=h, title=make_title(body), body=body, bucket="explicit",
        attribution=attribution, confidence=0.9, importance=importance, entities=tuple(entities), tags=tuple(tags),
        last_reinforced=format_time(last_reinforced) if last_reinforced else None, extra=tuple(extra),
    )
    commit_files(vault, {path: render_note(draft)})
    return path


def commit_files(vault, files: dict[str, str], message: str = "person: notes") -> None:
    repo = GitRepo(vault.root)
    changes = {p: repo.write_blob(t.encode("utf-8")) for p, t in files.items()}
    before = repo.head_oid()
    repo.commit(changes, message + "\n", ("Test Person", "person@example.com"))
    repo.materialize(changes, before)


def meta(vault, path: str) -> dict:
    return parse_note((vault.root / path).read_text(encoding="utf-8")).meta


def commit_count(vault) -> int:
    return int(git(vault.root, "rev-list", "--count", "HEAD"))


def subjects(vault, n: int = 20) -> list[str]:
    return git(vault.root, "log", f"-{n}", "--format=%s").splitlines()


def note_paths(vault) -> list[str]:
    return sorted(p.relative_to(vault.root).as_posix() for p in vault.iter_note_paths())


def when(value) -> datetime:
    return parse_time(value)
