"""A shared vault on several machines, for the sync tests and bench: a bare repository
as the remote and clones made the way a person joins (`cortex clone`)."""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
CORTEX = str(VENV_BIN / "cortex")


def sh(cwd, *args, check=True, timeout=120) -> subprocess.CompletedProcess:
    done = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def cx(machine: Path, *args, check=True, input=None, timeout=120) -> subprocess.CompletedProcess:
    """The real CLI on one machine's vault."""
    done = subprocess.run([CORTEX, "--vault", str(machine), *args], capture_output=True, text=True, input=input,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"cortex {' '.join(args)} on {machine.name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def git(machine: Path, *args, check=True) -> str:
    return sh(machine, "git", *args, check=check).stdout


def make_fleet(tmp: Path, n: int, prepare=None) -> tuple[Path, list[Path]]:
    """A seed vault (``prepare(seed)`` adds to it) pushed to a bare remote, and ``n``
    machines cloned from it. Without ``prepare``, a copy of one such fleet made once per
    test process (`cortex init` and `cortex clone` are the same every time)."""
    if prepare is not None:
        return _build_fleet(tmp, n, prepare)
    return _copy_fleet(_template(("fleet", n), lambda where: _build_fleet(where, n)), tmp)


def _build_fleet(tmp: Path, n: int, prepare=None) -> tuple[Path, list[Path]]:
    seed = tmp / "seed"
    sh(tmp, CORTEX, "init", str(seed))
    if prepare is not None:
        prepare(seed)
    remote = tmp / "remote.git"
    sh(tmp, "git", "clone", "--quiet", "--bare", str(seed), str(remote))
    machines = []
    for i in range(n):
        machine = tmp / f"m{i}"
        sh(tmp, CORTEX, "clone", str(remote), str(machine))
        machines.append(machine)
    return remote, machines


_TEMPLATES: dict[tuple, tuple[Path, object]] = {}


def _template(key: tuple, build):
    """What ``build(folder)`` returned and the folder it built, once per key and process."""
    if key not in _TEMPLATES:
        where = Path(tempfile.mkdtemp(prefix="cortex-fleet-"))
        atexit.register(shutil.rmtree, where, True)
        _TEMPLATES[key] = (where, build(where))
    return _TEMPLATES[key]


def _copy_fleet(template: tuple[Path, object], tmp: Path):
    """The template's folders copied into ``tmp`` (modes, links and times kept), each
    clone's ``origin`` pointed at the copied remote; what the template's builder returned,
    with its paths moved to ``tmp``."""
    where, built = template
    for entry in where.iterdir():
        shutil.copytree(entry, tmp / entry.name, symlinks=True)
    remote = tmp / "remote.git"
    git(remote, "config", "remote.origin.url", str(tmp / "seed"))
    for machine in sorted(tmp.glob("m[0-9]*")):
        git(machine, "remote", "set-url", "origin", str(remote))

    def moved(value):
        if isinstance(value, Path) and value.is_relative_to(where):
            return tmp / value.relative_to(where)
        if isinstance(value, (tuple, list)):
            return type(value)(moved(v) for v in value)
        return value

    return moved(built)


def write(machine: Path, body: str, *, type_: str = "fact", timestamp: str = "2026-02-16T10:00:00Z", **extra) -> None:
    obs = {"type": type_, "body": body, "timestamp": timestamp, "attribution": "owner", **extra}
    cx(machine, "write", "-", input=json.dumps(obs) + "\n")


def sync(machine: Path, *args, check=True) -> subprocess.CompletedProcess:
    return cx(machine, "sync", *args, check=check)


def head_tree(machine: Path) -> str:
    return git(machine, "rev-parse", "HEAD^{tree}").strip()


def notes(machine: Path) -> dict[str, str]:
    """Every note file at HEAD: path → text."""
    out = {}
    for part in ("vault", "mind"):
        base = machine / part
        for path in sorted(base.rglob("*.md")):
            out[str(path.relative_to(machine))] = path.read_text(encoding="utf-8")
    return out


def field(text: str, key: str) -> str | None:
    for line in text.split("\n---\n", 1)[0].splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip().strip('"')
    return None


def active(machine: Path) -> dict[str, str]:
    return {p: t for p, t in notes(machine).items() if not p.startswith("mind/archive/")}


def person_commit(machine: Path, rel: str, text: str, message: str) -> None:
    """A person's edit committed through the real pre-commit hook (which may complete the
    note, as `cortex hook fix` does: then it is added and committed again)."""
    (machine / rel).write_text(text, encoding="utf-8")
    git(machine, "add", rel)
    first = sh(machine, "git", "commit", "-q", "-m", message, check=False)
    if first.returncode != 0:
        git(machine, "add", rel)
        sh(machine, "git", "commit", "-q", "-m", message)


def fsck(machine: Path) -> None:
    sh(machine, "git", "fsck", "--no-progress", "--no-dangling")


def converge(*machines) -> None:
    """At most two rounds: the last machine's merge reaches the first ones in the second.
    Where the first leaves every machine at one commit (the others had only to fast-
    forward: most calls), a second round syncs nothing and is not made."""
    for _ in range(2):
        for m in machines:
            sync(m)
        if len({git(m, "rev-parse", "HEAD") for m in machines}) == 1:
            break
    trees = {head_tree(m) for m in machines}
    assert len(trees) == 1, trees


def shared_memory(tmp_path: Path, body: str) -> tuple[Path, Path, str]:
    """Two machines that both have one memory (a's, synced): (a, b, its path). Made once
    per body and test process, copied for each test."""
    return _copy_fleet(_template(("shared", body), lambda where: _shared_memory(where, body)), tmp_path)


def _shared_memory(tmp: Path, body: str) -> tuple[Path, Path, str]:
    _, (a, b) = _build_fleet(tmp, 2)
    write(a, body)
    cx(a, "run")
    converge(a, b)
    (rel,) = [p for p, t in active(a).items() if body in t]
    return a, b, rel
