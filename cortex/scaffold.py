"""``cortex init``: make a directory a ready vault, idempotently.

Only missing pieces are created; an existing file is never overwritten (a person may
have edited it). The files cortex creates are committed with pygit2, touching nothing
else in the repository.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import shlex
import shutil
from pathlib import Path

from cortex.taxonomy import DEFAULT_TYPES

if TYPE_CHECKING:
    from cortex.vault import Vault

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



def _requirements() -> str:
    """The cortex other machines install for this vault; said on stderr when cortex
    cannot tell one (installed from a file or folder of this machine only)."""
    import sys

    from cortex.distribution import recorded_source, requirements_text, warning

    source = recorded_source()
    said = warning(source)
    if said:
        sys.stderr.write(f"cortex: {said}\n")
    return requirements_text(source)


# (path in the vault, what writes it): files made for this vault, not copied
GENERATED = (("observer/requirements.txt", _requirements),)


def init_vault(vault: Vault, set_up: list[str] | None = None) -> list[str]:
    """Create what is missing; return the repo-relative paths created. ``set_up``, when
    given, receives what was set up in this clone's own git (hooks, merge driver,
    ``cortex.python``: never committed, so missing from a `git clone` of a vault)."""
    from cortex.fsutil import make_dirs
    from cortex.gitrepo import init_repository
    from cortex.layout import require_own_git_dir

    root = vault.root
    require_own_git_dir(root)
    root.mkdir(parents=True, exist_ok=True)
    created: list[str] = []
    if not (root / ".git").exists():
        init_repository(root)
        created.append(".git")
    else:  # `git clone URL && cortex init`: a clone that checked out nothing takes the shared branch first
        from cortex.sync import check_out_remote_branch

        where = shlex.quote(str(root))
        taken = check_out_remote_branch(
            root, lambda first: f"check one out: `git -C {where} switch {first}`, then `cortex init {where}` again")
        if taken and set_up is not None:
            set_up.append(f"branch {taken} checked out, the remote's one branch (the clone had checked out nothing: "
                          "the remote's HEAD names a branch it lacks)")
    keeps = {f"{s.partition}/{s.folder}/.gitkeep": f"{s.partition}/{s.folder}" for s in DEFAULT_TYPES}
    absent = _absent(root, {**{rel: rel for rel, _ in (*FILES, *GENERATED)}, **keeps, ".gitignore": None, ".gitattributes": None})
    if "observer/config.yml" in absent:  # a new vault, made on a folder that may be years old
        _say_own_notes_in_partitions(root)
    for rel, source in FILES:
        target = root / rel
        if rel in absent and source.exists():
            make_dirs(target.parent)
            shutil.copyfile(source, target)
            created.append(rel)
    for rel, make in GENERATED:
        target = root / rel
        if rel in absent:
            make_dirs(target.parent)
            target.write_text(make(), encoding="utf-8")
            created.append(rel)
    for rel in keeps:
        if rel in absent:
            keep = root / rel
            make_dirs(keep.parent)
            keep.touch()
            created.append(rel)
    for rel, edit in ((".gitignore", _with_rules), (".gitattributes", _with_attributes)):
        if rel in absent:
            created += _ensure_lines(root, rel, edit)
    unhooked: list[str] = []  # why the config runs no cortex hook: init exits 1, once the vault is made
    if ".pre-commit-config.yaml" not in created and (root / ".pre-commit-config.yaml").is_file():
        created += _ensure_hook_entries(root, unhooked)
    # Files an interrupted init created but never committed: committed now, or a clone
    # of the vault would not be a vault.
    managed = [rel for rel, _ in (*FILES, *GENERATED)] + [f"{s.partition}/{s.folder}/.gitkeep" for s in DEFAULT_TYPES] + [".gitignore", ".gitattributes"]
    uncommitted = _untracked(root, [rel for rel in managed if rel not in created and (root / rel).is_file()])
    if created or uncommitted:
        _commit(vault, [p for p in created if p != ".git"] + uncommitted)
    done = _install_hooks(root, unhooked)
    if set_up is not None:
        set_up += done
    return created + uncommitted


def _say_own_notes_in_partitions(root: Path) -> None:
    """Warn when folders of the person's own are called `vault/` or `mind/`: there a note
    with frontmatter is a memory, which their next commit of it completes or refuses
    (docs/hooks.md), so they can move what should stay theirs first. Nothing is touched."""
    import os
    import sys

    from cortex.layout import is_note_path

    found = []
    for partition in ("mind", "vault"):
        for folder, dirs, files in os.walk(root / partition):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            rel = Path(folder).relative_to(root).as_posix()
            found += [f"{rel}/{name}" for name in sorted(files) if is_note_path(f"{rel}/{name}")]
    if not found:
        return
    named = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    sys.stderr.write(
        f"cortex: warning: mind/ and vault/ already hold {len(found)} notes of yours ({named}): cortex keeps its "
        "memories there, so your next commit of each note there with frontmatter completes it as a memory (adds "
        "id, type, created, …) or refuses it (a `type:` cortex does not know, such as `type: book`), and "
        "nightly maintenance may archive it; a note there without frontmatter stays yours. To keep them as your "
        "own notes, move them out of mind/ and vault/ before you commit (docs/hooks.md)\n")


def _absent(root: Path, probes: dict[str, str | None]) -> set[str]:
    """Of the paths init may write (each with the file or folder whose presence means
    the vault has it already; None: a file init adds its lines to), those it writes.

    What the vault has is what git holds, HEAD's tree, as well as the working tree: a
    sparse checkout leaves out files a vault has, which is no reason to make them again
    (nor to call a clone of a vault a new one). Nothing is written where the checkout
    leaves the path out: a file there would undo the person's choice of folders."""
    from cortex.gitrepo import GitRepo

    repo = GitRepo(root)
    held = {rel for rel, probe in probes.items()
            if probe is not None and ((root / probe).exists() or repo.at_head(probe))}
    wanted = [rel for rel in probes if rel not in held]
    return set(wanted) - repo.outside_checkout(wanted)


def _untracked(root: Path, paths: list[str]) -> list[str]:
    if not paths:
        return []
    from cortex.gitrepo import GitRepo

    repo = GitRepo(root)
    return [rel for rel in paths if repo.file_at_head(rel) is None]


def _template_rules(name: str) -> tuple[str, list[str]]:
    block = (TEMPLATES / name).read_text()
    return block, [line for line in block.splitlines() if line and not line.startswith("#")]


def _with_lines(text: str, name: str, header: str) -> str:
    """``text`` with the template ``name``'s rules it lacks appended (never a line rewritten)."""
    block, rules = _template_rules(name)
    current = text.splitlines()
    missing = [line for line in rules if line not in current]
    if not missing:
        return text
    if not text:
        return block
    return text + ("" if text.endswith("\n") else "\n") + "\n".join(["", header, *missing, ""])


def _with_rules(text: str) -> str:
    """A .gitignore with the runtime-file rules (machine-local files never travel)."""
    return _with_lines(text, "gitignore", "# cortex runtime files")


def _with_attributes(text: str) -> str:
    """A .gitattributes naming cortex's merge driver for notes."""
    return _with_lines(text, "gitattributes", "# cortex: notes merge with cortex's driver (`cortex sync`, `git pull`)")


def _ensure_lines(root: Path, rel: str, edit) -> list[str]:
    """Append the lines a person's file lacks to the working file."""
    path = root / rel
    current = path.read_text() if path.exists() else ""
    wanted = edit(current)
    if wanted == current:
        return []
    with open(path, "a") as fh:
        fh.write(wanted[len(current):])
    return [rel]


HOOK_ID = "cortex"  # fix, then validate, in one hook (cortex/hooks.py `check`)
LEGACY_HOOK_IDS = {"cortex-fix", "cortex-validate"}  # the pair vaults made before: still complete


def _has_cortex_hooks(ids: set[str]) -> bool:
    return HOOK_ID in ids or LEGACY_HOOK_IDS <= ids


def _template_entry() -> tuple[str, str]:
    """(the template pre-commit config, its `repo: local` entry with cortex's hooks)."""
    template = (TEMPLATES / "pre-commit-config.yaml").read_text(encoding="utf-8")
    return template, template[template.index("  - repo: local"):]


def _hook_ids(data: object) -> set[str] | None:
    """Hook ids of a parsed pre-commit config, None when it has no `repos:` list."""
    repos = data.get("repos") if isinstance(data, dict) else None
    if not isinstance(repos, list):
        return None
    return {h.get("id") for r in repos if isinstance(r, dict) for h in r.get("hooks") or () if isinstance(h, dict)}


def _with_hooks(text: str) -> str | None:
    """``text`` (a pre-commit config) with cortex's `repo: local` hook, or None when
    they cannot be added safely.

    Appended as text (comments, layout and line endings stay), indented like the file's
    own entries, at the end of its `repos:` list, and kept only if the result reads back
    as the same config plus cortex's hooks. An empty (or comments-only) file gets a list.
    """
    import re

    import yaml

    template, entry = _template_entry()
    if not text.strip():
        return template  # nothing of the person's: the commented template whole
    try:
        before = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if before is None:  # comments only
        before, text = {"repos": []}, text + ("" if text.endswith("\n") else "\n") + "repos: []\n"
    ids = _hook_ids(before)
    if ids is None:
        return None
    if _has_cortex_hooks(ids):
        return text
    newline = "\r\n" if "\r\n" in text else "\n"
    first = re.search(r"^([ \t]*)- repo:", text, re.M)
    indent = first.group(1) if first else "  "
    entry = "".join(indent + line[2:] if line.strip() else line for line in entry.splitlines(keepends=True))
    entry = entry.replace("\n", newline)
    merged = re.sub(r"^repos:[ \t]*\[[ \t]*\][ \t]*(#[^\r\n]*)?(?=\r?$)", r"repos: \1", text, count=1, flags=re.M)
    merged += "" if merged.endswith("\n") else newline
    repos = re.search(r"^repos:.*$", merged, re.M)
    after_repos = re.compile(r"^[A-Za-z_\"'][^\n]*:", re.M).search(merged, repos.end()) if repos else None
    at = after_repos.start() if after_repos else len(merged)  # the end of the repos list
    merged = merged[:at] + entry + merged[at:]
    try:
        after = yaml.safe_load(merged)
    except yaml.YAMLError:
        return None
    after_ids = _hook_ids(after)
    if after_ids is None or not _has_cortex_hooks(after_ids):
        return None
    same = {k: v for k, v in after.items() if k != "repos"} == {k: v for k, v in before.items() if k != "repos"}
    return merged if same and after["repos"][: len(before["repos"])] == before["repos"] else None


# What the hooks an older cortex wrote hold (their ids, the wrapper their entry starts
# with, the values each other key had): such an entry is cortex's own, and `cortex hook
# install` replaces it. A value a person changed makes it theirs.
_WRAPPER = """sh -c 'py="$(git config cortex.python)";"""
_MISSING = object()
_VALUES = {"language": ["system"], "files": [r"^(vault|mind)/.*\.md$", r"\.md$"],
           "exclude": [_MISSING, r"^observer/|(^|/)\."], "types": [_MISSING, []],
           "types_or": [_MISSING, ["file", "symlink"]], "verbose": [_MISSING, True], "require_serial": [_MISSING, True]}
_KEYS = {"id", "name", "entry", *_VALUES}


def _written_by_cortex(repo: object) -> bool:
    """Whether ``repo`` (an entry of a parsed config's `repos:`) is cortex's `repo: local`
    entry as some cortex wrote it: cortex's hook ids alone, each running cortex's hooks
    through its wrapper, with no key or value cortex never wrote."""
    if not isinstance(repo, dict) or repo.get("repo") != "local" or set(repo) != {"repo", "hooks"}:
        return False
    hooks = repo["hooks"]
    if not isinstance(hooks, list) or not hooks or not all(isinstance(h, dict) for h in hooks):
        return False
    ids = {h.get("id") for h in hooks}
    if ids not in ({HOOK_ID}, LEGACY_HOOK_IDS) or len(hooks) != len(ids):
        return False
    return all(set(h) <= _KEYS and isinstance(h.get("entry"), str) and h["entry"].startswith(_WRAPPER)
               and "-m cortex.hooks " in h["entry"]
               and all(h.get(key, _MISSING) in values for key, values in _VALUES.items()) for h in hooks)


def outdated_hooks(text: str) -> str | None:
    """``text`` (a pre-commit config) with cortex's hook entry, as an older cortex wrote it,
    replaced by the current one; None when it holds none outdated (the current entry, a
    person's own, or one edited by hand). An older entry keeps working the old way: the
    two hooks `cortex-fix` and `cortex-validate`, or before them a fixer that stages
    nothing (a hand-edited note's commit refused once, for its completion) over
    `vault/` and `mind/` only (other notes unchecked), or a hook without
    `require_serial` (batches racing for git's index lock). Only that entry's lines
    change (comments, layout and other entries stay), and the result must read back as
    the same config with the current entry."""
    import re

    import yaml

    template, entry = _template_entry()
    try:
        before = yaml.safe_load(text)
        current = yaml.safe_load(template)["repos"][0]
    except yaml.YAMLError:
        return None
    repos = before.get("repos") if isinstance(before, dict) else None
    if not isinstance(repos, list):
        return None
    ours = [i for i, repo in enumerate(repos) if _written_by_cortex(repo)]
    if len(ours) != 1 or repos[ours[0]] == current:
        return None
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if re.match(r"^[ \t]*- repo:[ \t]*['\"]?local['\"]?[ \t]*(#.*)?\r?$", line)]
    for start in starts:
        indent = len(lines[start]) - len(lines[start].lstrip(" \t"))
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip(" \t")) > indent):
            end += 1
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1  # blank lines after the entry stay where they are
        newline = "\r\n" if lines[start].endswith("\r\n") else "\n"
        new = "".join(lines[start][:indent] + line[2:] if line.strip() else line
                      for line in entry.splitlines(keepends=True)).replace("\n", newline)
        merged = "".join(lines[:start]) + new + "".join(lines[end:])
        try:
            after = yaml.safe_load(merged)
        except yaml.YAMLError:
            continue
        if (isinstance(after, dict) and {k: v for k, v in after.items() if k != "repos"} ==
                {k: v for k, v in before.items() if k != "repos"}
                and after.get("repos") == [current if i == ours[0] else r for i, r in enumerate(repos)]):
            return merged
    return None


def hooks_warning(root: Path) -> str | None:
    """What to say of a vault whose `.pre-commit-config.yaml` holds cortex's hook entry as
    an older cortex wrote it (``outdated_hooks``): `cortex init` leaves a person's file as
    it is, so an upgrade of cortex left that one in place."""
    try:
        text = (Path(root) / ".pre-commit-config.yaml").read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "cortex.hooks" not in text or outdated_hooks(text) is None:
        return None
    return ("warning: .pre-commit-config.yaml holds the cortex hook an older cortex wrote, which checks commits the "
            "old way (docs/hooks.md): `cortex hook install` replaces it with the current one, the file's other "
            "entries left as they are; then commit it")


def _ensure_hook_entries(root: Path, problems: list[str]) -> list[str]:
    """Add cortex's hooks to a person's existing pre-commit config (without them their
    commits would pass unchecked while `cortex init` said all was well), or say what to add
    (and add to ``problems`` why the vault's commits go unchecked)."""
    import sys

    path = root / ".pre-commit-config.yaml"
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        text = None  # not UTF-8: not a file cortex can edit safely
    merged = _with_hooks(text) if text is not None else None
    if merged is None:
        sys.stderr.write(
            f"cortex: {path} has no cortex hooks and cortex could not add them safely: add this entry "
            f"to its `repos:` list (make one if it has none), then `cortex hook install`:\n{_template_entry()[1]}"
        )
        problems.append(".pre-commit-config.yaml names no cortex hook and cortex could not add it safely: add the "
                        "entry above to its `repos:` list, then `cortex hook install`")
        return []
    if merged == text:
        return []
    from cortex.fsutil import atomic_write

    atomic_write(path, merged.encode("utf-8"), path.stat().st_mode & 0o7777)  # a person's file: never half-written
    return [".pre-commit-config.yaml"]


# Files a person may own already: cortex adds its part to them. The commit gets HEAD's
# version with that part, never the person's uncommitted edits, which stay in the file.
EDITED = {".gitignore": _with_rules, ".gitattributes": _with_attributes, ".pre-commit-config.yaml": _with_hooks}


def _edited_bytes(edit, data: bytes) -> bytes:
    """A person's staged version with cortex's part added (unchanged if it cannot be)."""
    merged = edit(data.decode("utf-8"))
    return merged.encode("utf-8") if merged is not None else data


def _commit(vault: Vault, paths: list[str]) -> None:
    from cortex.gitrepo import GitRepo

    if not paths:
        return
    repo = GitRepo(vault.root, lock_wait=vault.settings.lock_timeout)
    changes = {p: repo.write_blob((vault.root / p).read_bytes()) for p in paths if (vault.root / p).is_file()}
    edited: dict[str, tuple[str | None, bytes | None]] = {}  # path: (blob to stage, HEAD's old content)
    for rel, edit in EDITED.items():
        if rel not in changes:
            continue
        before = repo.file_at_head(rel)
        try:
            committed_text = edit(before.decode("utf-8") if before is not None else "")
        except UnicodeDecodeError:
            committed_text = None
        committed = committed_text.encode("utf-8") if committed_text is not None else None
        if committed is None or committed == before:
            del changes[rel]  # HEAD has cortex's part already (or cannot take it): no commit of it
            edited[rel] = (repo.write_blob(before) if before is not None else None, before)
        elif committed != (vault.root / rel).read_bytes():
            changes[rel] = repo.write_blob(committed)
            edited[rel] = (changes[rel], before)
    with repo.locked():  # HEAD and the index move together (cortex/gitlock.py)
        if changes:
            with repo.materializing({p: oid for p, oid in changes.items() if p not in edited}):
                repo.commit(changes, "init: cortex vault\n", (vault.settings.author_name, vault.settings.author_email))
        for rel, (oid, before) in edited.items():
            if oid is None:
                continue
            edit = EDITED[rel]
            repo.stage_committed(rel, oid, before, restage=lambda data, edit=edit: _edited_bytes(edit, data))


def _install_hooks(root: Path, unhooked: list[str]) -> list[str]:
    """Install the pre-commit hook (offline: the hooks are `repo: local`,
    `language: system`), record which python runs cortex and define the notes' merge
    driver; see ``cortex.hookinstall.install``. A vault whose hook could not be installed,
    or whose config names no cortex hook (``unhooked``: why), takes every commit unchecked:
    that is an error (exit 1) naming what to fix, after the vault is made, so `cortex hook
    install` then finishes the job. Returns what it set up that was not set up already,
    for people."""
    import sys

    from cortex import gitcli
    from cortex.errors import CortexError
    from cortex.hookinstall import install

    python = gitcli.config(root, "cortex.python")
    done, problems = install(root)
    problems = unhooked + problems
    for line in [d for d in done if d.startswith("warning:")]:
        sys.stderr.write(f"cortex: {line}\n")
    if problems:
        raise CortexError(f"{root} is a vault, but its git hook is not installed, so commits there would go in "
                          f"unchecked: {'; '.join(problems)}")
    # "cortex.python" is said every time by `cortex hook install`; here only when it changed
    return [line for line in done if not line.startswith("warning:")
            and not ("cortex.python" in line and python == sys.executable)]
