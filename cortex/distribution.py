"""Which cortex this is, and how another machine installs exactly this one.

A bare package name on a registry can belong to anyone (``cortex-memory`` does: an
unrelated project), so a vault never says "install cortex" by name alone. ``cortex init``
records, in ``observer/requirements.txt``, the source and version that made the vault:
the git URL and commit it was installed from, or the released version. The nightly
workflow and ``cortex cron``'s CI schedule install from that file; a person edits it
(or sets ``CORTEX_INSTALL_SPEC`` before ``cortex init``) to pin another.

Standard library only.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

DIST = "cortex-git-memory"  # the distribution name on PyPI; the command is `cortex`
REQUIREMENTS = "observer/requirements.txt"
SPEC_ENV = "CORTEX_INSTALL_SPEC"


def version() -> str:
    from cortex import __version__

    return __version__


def _without_credentials(url: str) -> str:
    """A remote URL with any user:token@ removed: the file is committed."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return url


def _git(path: Path, *args: str) -> str | None:
    from cortex import gitcli

    done = gitcli.run_bytes(path, *args, timeout=10)
    text = done.out.decode("utf-8", "replace").strip() if done is not None and done.ok else ""
    return text or None


def _from_checkout(path: Path) -> str | None:
    """``DIST @ git+URL@commit`` for a source checkout with an origin, else None."""
    origin, commit = _git(path, "remote", "get-url", "origin"), _git(path, "rev-parse", "HEAD")
    if not origin or not commit:
        return None
    if "://" not in origin and not re.match(r"^[\w.-]+@[\w.-]+:", origin):
        origin = Path(origin).resolve().as_uri()  # a local path: pip wants a file:// URL
    elif not origin.startswith(("http", "file", "ssh", "git")):
        origin = "ssh://" + origin.replace(":", "/", 1)  # scp-like user@host:path
    return f"{DIST} @ git+{_without_credentials(origin)}@{commit}"


def install_spec() -> str:
    """The pip requirement that installs the cortex running now."""
    override = os.environ.get(SPEC_ENV, "").strip()
    if override:
        return override
    from importlib import metadata

    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:  # run from a source tree, not installed
        return _from_checkout(Path(__file__).resolve().parents[1]) or f"{DIST}=={version()}"
    direct = dist.read_text("direct_url.json")
    if direct:
        info = json.loads(direct)
        url = str(info.get("url", ""))
        vcs = info.get("vcs_info") or {}
        if vcs.get("vcs") == "git" and vcs.get("commit_id"):
            return f"{DIST} @ git+{_without_credentials(url)}@{vcs['commit_id']}"
        if url.startswith("file://"):
            local = Path(urlsplit(url).path)
            return _from_checkout(local) or f"{DIST} @ {url}"
    return f"{DIST}=={dist.version}"


def requirements_text(spec: str) -> str:
    return (
        "# The cortex that made this vault (`cortex init` wrote this line): the nightly\n"
        "# workflow and `cortex cron`'s CI schedule install exactly this, never whatever a\n"
        f"# bare name resolves to. Edit it to pin another, e.g. `{DIST}==1.2.0`.\n"
        f"{spec}\n"
    )
