"""What makes a directory a vault, the vault files read on the fast paths (the git
hook, `cortex query`), and the derived caches under `.cortex/` that keep them fast.
Standard library only: importing this costs next to nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

VAULT_MARKERS = ("observer/config.yml", "observer/taxonomy.yml", "schemas/observation.schema.json")


def is_vault(root: Path) -> bool:
    """Whether ``cortex init`` set this directory up. Any git repository is not a vault:
    writing notes into a person's code repository by accident must not be possible."""
    return any((root / marker).is_file() for marker in VAULT_MARKERS)


def load_tag_allow(root: Path) -> frozenset[str] | None:
    """The optional tag allow-list, ``observer/tags.yml`` (a list, or ``tags:`` holding one);
    None when the vault has none, so every well-formed tag is accepted."""
    path = root / "observer" / "tags.yml"
    if not path.exists():
        return None
    import yaml

    from cortex.errors import ConfigError

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}", "fix it, or delete it to allow every well-formed tag") from None
    tags = data.get("tags") if isinstance(data, dict) else data
    if not isinstance(tags, list):
        raise ConfigError(f"{path}: expected a list of tags (or `tags:` holding one)", "e.g. `tags: [ops, billing/invoices]`")
    return frozenset(str(t).lower() for t in tags)  # notes' tags are lowercase


def write_cache(path: Path, obj: Any) -> None:
    """Replace a derived JSON cache whole, without fsync: lost or unwritable (a read-only
    checkout), it is simply worked out again next time."""
    try:
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(obj, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):  # unwritable, or not JSON (a YAML date)
        pass
