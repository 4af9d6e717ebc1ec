"""The git hooks and the whole-vault check: ``cortex hook check|validate|fix|install``, the
agents' ``cortex hook session-start`` and ``cortex validate``. Thin: parse, call
``cortex.hooks``, render."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from cortex.cli.app import JSON, _options, arg, command, emit_json, flag, group, info

hook = group("hook", help="The git hooks pre-commit runs on staged notes (usable by hand too).")

FILES = arg("files", many=True, help="Files as pre-commit passes them; files that are not markdown notes are ignored.")


def _hook_root() -> Optional[Path]:
    # --vault when given; else the repository around the working directory (where
    # pre-commit runs), never $CORTEX_VAULT: the hook checks the repo being committed.
    return _options["vault"]


def _finish(report, action: str, json_: bool, *, hook: bool = True) -> int:
    from cortex.hooks import render

    if json_:
        emit_json(report.as_dict())
    else:
        render(report, action, hook=hook)
    return report.exit_code


@hook.command(FILES, JSON, flag("--stage", help="Inside a commit: stage what was completed, so the commit takes it."),
              name="check")
def hook_check(files: list[str], json_: bool, stage: bool) -> int:
    """What a commit runs: `fix`, then `validate` over the completed notes, in one process.
    `SKIP=cortex-fix` (or `cortex-validate`) leaves that half out, as pre-commit's SKIP does."""
    from cortex.hooks import check, render_all

    reports = check(files or [], root=_hook_root(), stage=stage)
    render_all(reports, as_json=json_, nested=True)
    return max((r.exit_code for r in reports.values()), default=0)


@hook.command(FILES, JSON, name="validate")
def hook_validate(files: list[str], json_: bool) -> int:
    """Refuse notes that break the rules: one `path:line: what — how to fix` per problem; exit 1 if any."""
    from cortex.hooks import FIX_ID, skipped, validate

    # the validating hook of a pair: `SKIP=cortex-fix` left the other out of this commit
    return _finish(validate(files or [], root=_hook_root(), fixing=FIX_ID not in skipped()), "validate", json_)


@hook.command(FILES, JSON,
              flag("--stage", help="Inside a commit: stage what was completed, so the commit takes it (exit 0)."),
              name="fix")
def hook_fix(files: list[str], json_: bool, stage: bool) -> int:
    """Complete hand-written notes, keep derived titles true, normalise tags; exit 1 when a file changed unstaged."""
    from cortex.hooks import fix, rescue_saves

    report = fix(files or [], root=_hook_root(), stage=stage)
    if stage:  # inside a commit: a save made meanwhile that pre-commit would throw away is kept
        report.problems += rescue_saves(_hook_root(), report.written)
    return _finish(report, "fix", json_)


@hook.command(name="install")
def hook_install() -> int:
    """Install the pre-commit hook in this vault and point it, the commit guard and the notes'
    merge driver at the python running this cortex (after a clone, or when cortex moved)."""
    from cortex.hookinstall import install
    from cortex.hooks import HookVault

    root = HookVault(_options["vault"]) if _options["vault"] else HookVault.around()
    done, problems = install(root.root, force=True)
    for line in done + problems:
        info(line)
    return 1 if problems else 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _resolve(root, name: str) -> Path:
    """A path as a person means it: from the current directory, else from the vault's top."""
    return (Path(name) if Path(name).exists() else root / name).resolve()


def _is_note(root, name: str) -> bool:
    from cortex.layout import is_note_path

    path = _resolve(root, name)
    try:
        rel = path.relative_to(root.resolve())
    except ValueError:
        return False
    return is_note_path(rel.as_posix())


@hook.command(flag("--path", help="Print the script's path (for a harness config) instead of running it."),
              name="session-start")
def hook_session_start(path: bool) -> None:
    """What an agent should know at the start of a session: the brief, the memories about
    the current project and the last week, fenced as data (docs/agents.md, section 4).
    Never fails a session: it prints what it can and exits 0."""
    import os
    import sys

    script = Path(__file__).resolve().parents[1] / "data" / "hooks" / "session-start.sh"
    if path:
        sys.stdout.write(f"{script}\n")
        return
    env = dict(os.environ)
    env.setdefault("CORTEX_BIN", str(Path(sys.argv[0]).resolve()) if Path(sys.argv[0]).name == "cortex" else "cortex")
    if _options["vault"] is not None:
        env["CORTEX_VAULT"] = str(_options["vault"])
    os.execve("/bin/sh", ["sh", str(script)], env)


@command(
    arg("files", many=True, help="Notes to check (default: every note)."),
    flag("--all", dest="all_", help="Every note of the working tree, committed or not, git-ignored files aside (the "
                                    "default without FILES): for CI, which --no-verify cannot skip."),
    JSON,
    name="validate",
)
def validate_command(files: list[str], all_: bool, json_: bool) -> int:
    """Check notes with the git hook's rules (ids unique across the vault); exit 1 on any error."""
    from cortex.cli.app import open_vault
    from cortex.hooks import validate

    from cortex.errors import UsageError

    root = open_vault().root
    missing = [f for f in files or [] if not _resolve(root, f).exists()]
    if missing:  # named on purpose (unlike the hook's staged paths, which may be deletions)
        raise UsageError(f"no such file: {', '.join(missing)}")
    outside = [f for f in files or [] if not _is_note(root, f)]
    if outside:
        raise UsageError(f"not a note under vault/ or mind/, nor a markdown note elsewhere: {', '.join(outside)} "
                         "(only notes are validated; observer/ and dot folders hold none)")
    named = [str(_resolve(root, f)) for f in files or []]
    report = validate(named, root=root, all_notes=all_ or not files)
    code = _finish(report, "validate", json_, hook=False)
    if not json_:
        info(f"{_count(report.checked, 'note')} checked: {_count(len(report.errors), 'error')}, "
             f"{_count(len(report.warnings), 'warning')}")
    return code
