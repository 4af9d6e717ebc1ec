"""Which cortex this is, and how another machine installs exactly this one.

A bare package name on a registry can belong to anyone (``cortex-memory`` does: an
unrelated project), so a vault never says "install cortex" by name alone. ``cortex init``
records, in ``observer/requirements.txt``, the source and version that made the vault:
the git URL and commit it was installed from, or the released version. The nightly
workflow and ``cortex cron``'s CI schedule install from that file; a person edits it
(or sets ``CORTEX_INSTALL_SPEC`` before ``cortex init``) to pin another.

Only a source another machine can reach is recorded: a remote's URL holding the commit,
or a released version. A cortex installed from a file or folder of this machine (a
wheel, an sdist, a clone with no remote, or whose commit no remote has) leaves the file
with no requirement, its comment saying why and what to write, and ``cortex init`` says
so: a line naming this machine's paths would fail on every other one.

Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

DIST = "cortex-git-memory"  # the distribution name on PyPI; the command is `cortex`
REQUIREMENTS = "observer/requirements.txt"
SPEC_ENV = "CORTEX_INSTALL_SPEC"
EXAMPLE = f"{DIST} @ git+https://HOST/OWNER/cortex@COMMIT"


def version() -> str:
    from cortex import __version__

    return __version__


@dataclass(frozen=True)
class Source:
    """What ``observer/requirements.txt`` records. ``spec``: the requirement another
    machine installs (None when cortex cannot tell one); then ``problem`` says why,
    ``todo`` what to do, and ``candidate`` is a line that works once that is done."""

    spec: str | None
    problem: str = ""
    todo: str = ""
    candidate: str | None = None
    pushed_later: bool = False  # ``candidate`` installs anywhere once its commit is pushed


def _without_credentials(url: str) -> str:
    """A remote URL with any password or token removed (the file is committed): an ssh
    URL keeps its user name (`git@`), which is no secret and which the server needs."""
    parts = urlsplit(url)
    if not parts.scheme or "@" not in parts.netloc:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    keep = parts.scheme.endswith("ssh") and user and ":" not in userinfo
    return urlunsplit(parts._replace(netloc=f"{user}@{host}" if keep else host))


def _local_uri(path: Path) -> str:
    """A folder of this machine as a git URL pip 23 reads too: ``file://localhost/…``
    (pip before 24.2 refuses ``git+file:///…``, a URL without a host)."""
    return "file://localhost" + quote(str(path.resolve()))


def _pip_url(url: str, base: Path) -> tuple[str, bool]:
    """(a remote's URL as pip's ``git+`` wants it, whether another machine can reach it)."""
    if "://" not in url:
        scp = re.match(r"^((?:[\w.-]+@)?[\w.-]+):(?!//)(.*)$", url)
        if scp and "/" not in scp.group(1):  # scp-like user@host:path
            return "ssh://" + scp.group(1) + "/" + scp.group(2).lstrip("/"), True
        return _local_uri(base / url), False  # a path on this machine
    if url.startswith("file:"):
        return _local_uri(Path(unquote(urlsplit(url).path))), False
    return _without_credentials(url), True


def _git(path: Path, *args: str) -> str | None:
    from cortex import gitcli

    done = gitcli.run_bytes(path, *args, timeout=10)
    text = done.out.decode("utf-8", "replace").strip() if done is not None and done.ok else ""
    return text or None


def _from_checkout(path: Path) -> Source:
    """A git clone: ``DIST @ git+URL@commit`` when a remote of it has the commit (a
    remote-tracking branch holds it) and lies on another machine."""
    top = _git(path, "rev-parse", "--show-toplevel")
    commit = _git(path, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    if not top or not commit or Path(top).resolve() != path.resolve():
        return Source(None, f"it was installed from the folder {path}, which is on this machine only and not a git clone",
                      "name a source other machines can install")
    remotes = sorted((_git(path, "remote") or "").split(), key=lambda r: (r != "origin", r))
    if not remotes:
        return Source(None, f"it was installed from the git clone {path} (commit {commit[:12]}), which has no remote: "
                            "no other machine can fetch it",
                      "push it where other machines reach it and name that")
    holding = set()
    for ref in (_git(path, "for-each-ref", "--contains", commit, "--format=%(refname)", "refs/remotes/") or "").split():
        name = ref.removeprefix("refs/remotes/")
        holding |= {r for r in remotes if name.startswith(r + "/")}
    remote = next((r for r in remotes if r in holding), remotes[0])
    url, reachable = _pip_url(_git(path, "remote", "get-url", remote) or "", path)
    line = f"{DIST} @ git+{url}@{commit}"
    if not reachable:
        return Source(None, f"it was installed from {path}, whose remote {remote} is a folder on this machine ({url})",
                      "name a source other machines can reach", line)
    if remote not in holding:
        return Source(None, f"it was installed from {path} at commit {commit[:12]}, which no remote branch of that "
                            f"clone holds (not pushed?), so {remote} may not have it",
                      f"push that commit to {remote}, then remove the `# ` before its line", line, pushed_later=True)
    return Source(line)


def recorded_source() -> Source:
    """What ``observer/requirements.txt`` records for the cortex running now."""
    override = os.environ.get(SPEC_ENV, "").strip()
    if override:
        return Source(override)
    here = Path(__file__).resolve().parents[1]
    if (here / "pyproject.toml").is_file():  # a source tree (an editable install, PYTHONPATH): its clone says
        return _from_checkout(here)
    from importlib import metadata

    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:  # copied somewhere by hand
        return Source(None, f"it runs from {here}, copied there without being installed",
                      "name a source other machines can install")
    direct = dist.read_text("direct_url.json")
    if not direct:
        return Source(f"{DIST}=={dist.version}")  # from a package index
    info = json.loads(direct)
    url = str(info.get("url", ""))
    vcs = info.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and vcs.get("commit_id"):
        pip_url, reachable = _pip_url(url, Path.cwd())
        line = f"{DIST} @ git+{pip_url}@{vcs['commit_id']}"
        if reachable:
            return Source(line)
        return Source(None, f"it was installed from the git repository {pip_url}, a folder on this machine",
                      "name a source other machines can reach", line)
    if url.startswith("file:"):
        local = Path(unquote(urlsplit(url).path))
        if "dir_info" in info:
            return _from_checkout(local)
        return Source(None, f"it was installed from the file {local}, which only this machine has",
                      "name a source other machines can install")
    return Source(f"{DIST} @ {_without_credentials(url)}")  # an archive on a server


def requirements_text(source: Source) -> str:
    if source.spec:
        return (
            "# The cortex that made this vault (`cortex init` wrote this line): the nightly\n"
            "# workflow and `cortex cron`'s CI schedule install exactly this, never whatever a\n"
            f"# bare name resolves to. Edit it to pin another, e.g. `{DIST}==1.2.0`.\n"
            f"{source.spec}\n"
        )
    say = (f"No cortex is named here yet: `cortex init` could not tell where other machines can install the "
           f"cortex that made this vault: {source.problem}. The nightly workflow and `cortex cron`'s CI schedule "
           "install from this file, and stop at that step until it names one.")
    if source.pushed_later:
        say += f" To do: {source.todo} (the last line), and commit this file."
    else:
        say += f" To do: {source.todo} here, one line such as"
    text = textwrap.fill(say, 88, initial_indent="# ", subsequent_indent="# ", break_long_words=False,
                         break_on_hyphens=False) + "\n"
    if source.pushed_later:
        return text + f"# {source.candidate}\n"
    text += f"#   {EXAMPLE}\n#   {DIST}=={version()}   (a released version)\n"
    text += f"# and commit it (or set {SPEC_ENV} before `cortex init`).\n"
    if source.candidate:
        text += f"# Where it came from, which only this machine can install:\n# {source.candidate}\n"
    return text


def warning(source: Source) -> str | None:
    """What ``cortex init`` says when the file names no cortex (one line), else None."""
    if source.spec:
        return None
    example = "" if source.candidate else f" (e.g. `{EXAMPLE}`)"
    return (f"warning: {REQUIREMENTS} names no cortex, so the nightly workflow and other machines cannot install "
            f"this one: {source.problem}. {source.todo[0].upper()}{source.todo[1:]} in {REQUIREMENTS}{example} and "
            f"commit it, or set {SPEC_ENV} before `cortex init`")


WORKFLOW = ".github/workflows/cortex-nightly.yml"
# The install step of the nightly workflow the first cortex wrote: a bare name on PyPI
# that is another project's, run nightly with write access to the vault.
_BY_NAME = re.compile(r"^\s*(?:-\s+)?run:\s*pip3?\s+install\s+(?:-U\s+|--upgrade\s+)*cortex-memory\s*$", re.M)


def workflow_warning(root: Path) -> str | None:
    """What to say of a nightly workflow an older cortex wrote that installs cortex by the
    name ``cortex-memory`` (None when it does not): ``cortex init`` writes the workflow
    only where there is none, so an upgrade left that one in place."""
    try:
        text = (Path(root) / WORKFLOW).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if not _BY_NAME.search(text):
        return None
    return (f"warning: {WORKFLOW}, written by an older cortex, installs `cortex-memory` from PyPI, an unrelated "
            f"project, and runs it every night with write access to this vault: delete the file and run "
            f"`cortex init`, which writes and commits the current one (it installs what {REQUIREMENTS} names)")
