"""``cortex init``: make a directory a ready vault, idempotently.

Only missing pieces are created; an existing file is never overwritten (a person may
have edited it). The files cortex creates are committed with pygit2, touching nothing
else in the repository.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cortex.taxonomy import DEFAULT_TYPES

DATA = Path(__file__).parent / "data"
TEMPLATES = DATA / "templates"

# (path in the vault, template source)
FILES = (
    ("schemas/observation.schema.json", DATA / "schemas" / "observation.schema.json"),
    ("schemas/note.schema.json", DATA / "schemas" / "note.schema.json"),
    ("observer/taxonomy.yml", TEMPLATES / "taxonomy.yml"),
    ("observer/calibration.yml", TEMPLATES / "calibration.yml"),
    ("observer/config.yml", TEMPLATES / "config.yml"),
    (".pre-commit-config.yaml", TEMPLATES / "pre-commit-config.yaml"),
    (".github/workflows/cortex-nightly.yml", TEMPLATES / "cortex-nightly.yml"),
)


def init_vault(vault) -> list[str]:
    """Create what is missing; return the repo-relative paths created."""
    import pygit2

    root = vault.root
    root.mkdir(parents=True, exist_ok=True)
    created: list[str] = []
    if not (root / ".git").exists():
        pygit2.init_repository(str(root), initial_head="main")
        created.append(".git")
    for rel, source in FILES:
        target = root / rel
        if not target.exists() and source.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            created.append(rel)
    for spec in DEFAULT_TYPES:
        keep = root / spec.partition / spec.folder / ".gitkeep"
        if not keep.parent.is_dir():
            keep.parent.mkdir(parents=True, exist_ok=True)
            keep.touch()
            created.append(str(keep.relative_to(root)))
    created += _ensure_gitignore(root)
    if created:
        _commit(vault, [p for p in created if p != ".git"])
    _install_hooks(root)
    return created


def _ensure_gitignore(root: Path) -> list[str]:
    """Append the runtime-file rules a person's .gitignore lacks (never rewrite theirs)."""
    path = root / ".gitignore"
    block = (TEMPLATES / "gitignore").read_text()
    current = path.read_text().splitlines() if path.exists() else []
    rules = [line for line in block.splitlines() if line and not line.startswith("#")]
    missing = [line for line in rules if line not in current]
    if not missing:
        return []
    text = block if not current else "\n".join(["", "# cortex runtime files", *missing, ""])
    with open(path, "a") as fh:
        fh.write(text)
    return [".gitignore"]


def _commit(vault, paths: list[str]) -> None:
    from cortex.gitrepo import GitRepo

    if not paths:
        return
    repo = GitRepo(vault.root)
    changes = {p: repo.write_blob((vault.root / p).read_bytes()) for p in paths if (vault.root / p).is_file()}
    repo.commit(changes, "init: cortex vault\n", (vault.settings.author_name, vault.settings.author_email))
    repo.materialize(changes)


def _install_hooks(root: Path) -> None:
    """Install the pre-commit hook (offline: the hooks are `repo: local`,
    `language: system`) and record which python runs cortex; see ``cortex.hooks.install``.
    A problem (pre-commit missing) is said on stderr, never fatal: the vault works
    without hooks, and `cortex hook install` finishes the job later."""
    import sys

    from cortex.hooks import install

    _done, problems = install(root)
    for line in problems:
        sys.stderr.write(f"cortex: {line}\n")
