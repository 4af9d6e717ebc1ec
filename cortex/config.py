"""Vault settings: ``observer/config.yml`` (trust, threshold, commits, security) and
``observer/calibration.yml`` (scoring rules). Both frozen once loaded.

A corrupt or oversized calibration file is ignored with a warning, never fatal: scoring
falls back to the defaults (as scoring does for a missing file).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortex.errors import ConfigError

CALIBRATION_MAX_BYTES = 4096
TRUST_POLICIES = ("full", "quarantine", "none")
MATCH_KEYS = ("type", "bucket", "attribution", "category")
ADJUST_KEYS = ("confidence", "importance")
WATCH_STARTS = ("auto", "off")


@dataclass(frozen=True)
class Trust:
    default: str = "full"
    trusted_attributions: frozenset[str] = frozenset()
    trusted_sessions: frozenset[str] = frozenset()
    policies: tuple[tuple[str, str], ...] = ()  # attribution -> policy overrides

    def policy_for(self, attribution: str, session_id: str) -> str:
        if attribution in self.trusted_attributions or session_id in self.trusted_sessions:
            return "full"
        return dict(self.policies).get(attribution, self.default)


@dataclass(frozen=True)
class Limits:
    """Bounds on what cortex reads, so that no input can take unbounded time or memory
    (``limits:`` in ``observer/config.yml``). A buffer line past a bound is quarantined
    with the reason; a note past ``max_note_bytes`` is refused with a message."""

    max_line_bytes: int = 1 << 20  # one buffer line (an observation is a few KB)
    max_depth: int = 32  # nesting of JSON arrays and objects (an observation needs 3)
    max_number_digits: int = 100  # characters of one JSON number
    max_note_bytes: int = 4 << 20  # one note file
    max_frontmatter_bytes: int = 256 << 10  # one note's YAML frontmatter

    @classmethod
    def from_config(cls, data: Any) -> "Limits":
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ConfigError("limits: expected a mapping")
        known = cls.__dataclass_fields__
        values = {}
        for key, value in data.items():
            if key not in known:
                raise ConfigError(f"limits: unknown bound {key!r}", f"use {', '.join(known)}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"limits: {key} must be a positive whole number, not {value!r}")
            values[key] = value
        return cls(**values)


@dataclass(frozen=True)
class Settings:
    threshold: float = 0.5
    trust: Trust = Trust()
    author_name: str = "cortex"
    author_email: str = "cortex@localhost"
    commit_per: str = "run"
    injection_patterns: tuple[Any, ...] = ()  # extra patterns, appended to the shipped list
    classifier_threshold: float | None = None
    use_classifier: bool = True
    strict_notes: bool = False  # a suspected injection in a person's note blocks the commit
    run_pre_commit: bool = False  # also run the person's other pre-commit hooks
    lock_timeout: float = 10.0
    workers: int | None = None  # processes `cortex run` plans a big buffer with; None: one per core
    embedding_model: str | None = None
    limits: Limits = Limits()
    sync_remote: str | None = None  # `cortex sync`: None = the branch's upstream, else origin
    sync_on_run: bool = False  # `cortex run` syncs before and after, as `--sync` does
    sync_push: bool = True
    sync_attempts: int = 5  # pushes tried when another machine keeps pushing first
    # `cortex query`, `index` and `status` start `cortex watch` by themselves in a vault of
    # `watch_notes` tracked files or more (cortex/watcher.py `autostart`); it ends after
    # `watch_idle` seconds without a question
    watch: str = "auto"
    watch_notes: int = 20_000
    watch_idle: float = 3600.0


@dataclass(frozen=True)
class Rule:
    match: tuple[tuple[str, tuple[str, ...]], ...]
    adjust: tuple[tuple[str, float], ...]

    def matches(self, fields: dict[str, str]) -> bool:
        return all(fields.get(key) in values for key, values in self.match)


@dataclass(frozen=True)
class Calibration:
    rules: tuple[Rule, ...] = ()
    warnings: tuple[str, ...] = field(default=())


def _read_yaml(path: Path) -> Any:
    import yaml

    from cortex.layout import read_settings_text

    text = read_settings_text(path)
    try:
        # libyaml where PyYAML has it: config.yml took ~19 ms of every command to parse
        # in Python, 0.5 ms so.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        pass  # read again in Python, whose message shows the line in question
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


SHIPPED_SCHEMAS = Path(__file__).parent / "data" / "schemas"


def load_schema(root: Path, name: str) -> dict[str, Any]:
    """The JSON Schema ``name`` (``note``, ``observation``) from the vault's ``schemas/``,
    else the copy cortex ships. The vault's is read as a settings file is (the repository's
    own regular file, no link on its way, at most 1 MiB): a named pipe put there would
    hang every commit's hook."""
    import json

    from cortex.layout import read_settings_text

    for path in (root / "schemas" / f"{name}.schema.json", SHIPPED_SCHEMAS / f"{name}.schema.json"):
        if not os.path.lexists(path):
            continue
        try:
            text = read_settings_text(path) if path.parent != SHIPPED_SCHEMAS else path.read_text(encoding="utf-8")
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})", "restore it with `cortex init`") from None
        except ConfigError as exc:
            raise ConfigError(exc.message, "restore it with `cortex init`") from None
    raise ConfigError(f"no {name} schema found", f"restore schemas/{name}.schema.json with `cortex init`")


_READ: dict[Path, tuple[tuple[int, int, int], Settings]] = {}  # config.yml: (its version, settings)


def settings_or_defaults(root: Path) -> Settings:
    """The vault's settings for readers that have none at hand (the HEAD cache, the
    search index, the watcher's start), or the defaults where ``observer/config.yml``
    cannot be read: the command that reads its settings says why. Parsed once per
    version of the file (inode, mtime, size) and process: a query's index and its
    watcher start read it once; a long-running server sees an edit."""
    from cortex.fsutil import version

    path = root / "observer" / "config.yml"
    seen = version(path)
    known = _READ.get(path)
    if seen is not None and known is not None and known[0] == seen:
        return known[1]
    try:
        settings = load_settings(path)
    except (ConfigError, OSError):
        return Settings()
    if seen is not None:
        _READ[path] = (seen, settings)
    return settings


def load_settings(path: Path) -> Settings:
    if not path.exists():
        return Settings()
    data = _read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping")
    try:
        trust_data = _mapping(data, "trust", "e.g. `trust: {default: full}`")
        commit = _mapping(data, "commit", "e.g. `commit: {per: run}`")
        security = _mapping(data, "security", "e.g. `security: {classifier: true}`")
        sync = _mapping(data, "sync", "e.g. `sync: {remote: origin, on_run: true}`")
        watch = _watch(data.get("watch"))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", exc.hint) from None
    default = trust_data.get("default", "full")
    policies = trust_data.get("policies") or {}
    for who, policy in [("default", default), *policies.items()]:
        if policy not in TRUST_POLICIES:
            raise ConfigError(
                f"{path}: trust policy for {who} is {policy!r}", f"use one of {', '.join(TRUST_POLICIES)}"
            )
    trust = Trust(
        default=default,
        trusted_attributions=frozenset(map(str, trust_data.get("trusted_attributions") or ())),
        trusted_sessions=frozenset(map(str, trust_data.get("trusted_sessions") or ())),
        policies=tuple((str(k), str(v)) for k, v in policies.items()),
    )
    commit_per = commit.get("per", "run")
    if commit_per not in ("note", "session", "run"):
        raise ConfigError(f"{path}: commit.per must be note, session or run")
    try:
        return Settings(
            threshold=_bounded(data.get("threshold", 0.5), "threshold", 0.0, 1.0),
            trust=trust,
            author_name=str(commit.get("author_name", "cortex")),
            author_email=str(commit.get("author_email", "cortex@localhost")),
            commit_per=commit_per,
            injection_patterns=tuple(security.get("injection_patterns") or ()),
            classifier_threshold=security.get("classifier_threshold"),
            use_classifier=bool(security.get("classifier", True)),
            strict_notes=bool(security.get("strict_notes", False)),
            run_pre_commit=bool(commit.get("run_pre_commit", False)),
            lock_timeout=_bounded(data.get("lock_timeout", 10.0), "lock_timeout", 0.0, math.inf),
            workers=_workers(data.get("workers")),
            embedding_model=data.get("embedding_model"),
            limits=Limits.from_config(data.get("limits")),
            sync_remote=str(sync["remote"]) if sync.get("remote") else None,
            sync_on_run=bool(sync.get("on_run", False)),
            sync_push=bool(sync.get("push", True)),
            sync_attempts=int(sync.get("attempts", 5)),
            **watch,
        )
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", exc.hint) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _mapping(data: dict, key: str, example: str) -> dict:
    """A section of the file (``commit:``, ``trust:``): a mapping, or absent."""
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"`{key}:` must be a mapping, not {value!r}", example)
    return value


def _watch(value: Any) -> dict[str, Any]:
    """``watch:``: ``auto`` or ``off`` (YAML reads a bare off / on as false / true), or a
    mapping ``{start: auto, notes: 20000, idle: 3600}``."""
    example = "e.g. `watch: off`, or `watch: {start: auto, notes: 20000, idle: 3600}`"
    if value is None:
        return {}
    if isinstance(value, (bool, str)):
        value = {"start": value}
    if not isinstance(value, dict):
        raise ConfigError(f"`watch:` must be auto, off or a mapping, not {value!r}", example)
    unknown = set(value) - {"start", "notes", "idle"}
    if unknown:
        raise ConfigError(f"watch: unknown setting {sorted(unknown)[0]!r}", example)
    start = value.get("start", "auto")
    start = {True: "auto", False: "off"}.get(start, start) if isinstance(start, bool) else str(start).lower()
    if start not in WATCH_STARTS:
        raise ConfigError(f"watch: start is {value.get('start')!r}", "use auto or off")
    notes = value.get("notes", 20_000)
    if isinstance(notes, bool) or not isinstance(notes, int) or notes < 0:
        raise ConfigError(f"watch: notes must be a whole number, 0 or more, not {notes!r}", example)
    idle = value.get("idle", 3600)
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) or not 0 < idle < math.inf:
        raise ConfigError(f"watch: idle must be a number of seconds above 0, not {idle!r}", example)
    return {"watch": start, "watch_notes": notes, "watch_idle": float(idle)}


def _bounded(value: Any, key: str, low: float, high: float) -> float:
    """A number of the file from low to high: `threshold: .nan` memorized every line,
    `threshold: 1e999` (or 5, for 0.5) sent every line to skipped.jsonl, and
    `lock_timeout: .inf` waited for ever, each without a word."""
    number = float(value)
    if not (low <= number <= high and math.isfinite(number)):
        raise ConfigError(f"{key} is {value!r}: use a number from {low:g} to {high:g}" if math.isfinite(high)
                          else f"{key} is {value!r}: use a number of seconds, 0 or more")
    return number


def vault_scanner(root: Path, extra_patterns, **options):
    """The vault's security scanner (``cortex.security.Scanner``), its pattern words cached
    where no pull writes (``layout.private_cache_dir``); a pattern of the vault's own that
    the scanner refuses (``injection.vault_patterns``: one that could stall every
    teammate's hook and run) is a ConfigError naming the file it came from."""
    from cortex.layout import private_cache_dir, write_cache
    from cortex.security import Scanner
    from cortex.security.injection import PatternRefused

    try:
        return Scanner(extra_patterns=extra_patterns, cache_dir=private_cache_dir(root), save_cache=write_cache,
                       **options)
    except PatternRefused as exc:
        raise ConfigError(f"{root / 'observer' / 'config.yml'}: {exc}",
                          "fix or remove it in security.injection_patterns") from None


def _workers(value: Any) -> int | None:
    if value is None or value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"workers is {value!r}", "use a whole number of processes (1 or more), or auto")
    return value


def load_calibration(path: Path) -> Calibration:
    """Never raises: a bad file yields no rules and a warning."""
    if not path.exists():
        return Calibration()
    size = path.stat().st_size
    if size > CALIBRATION_MAX_BYTES:
        return Calibration(warnings=(f"{path.name} is {size} bytes (limit {CALIBRATION_MAX_BYTES}): ignored",))
    try:
        return parse_calibration(_read_yaml(path))
    except ConfigError as exc:
        return Calibration(warnings=(f"{path.name} ignored: {exc.message}",))


def parse_calibration(data: Any) -> Calibration:
    if data is None:
        return Calibration()
    if not isinstance(data, dict) or not isinstance(data.get("rules", []), list):
        raise ConfigError("expected `rules:` as a list")
    rules = []
    for n, raw in enumerate(data.get("rules") or [], start=1):
        if not isinstance(raw, dict) or not isinstance(raw.get("match"), dict) or not isinstance(raw.get("adjust"), dict):
            raise ConfigError(f"rule {n} needs `match:` and `adjust:` mappings")
        match = []
        for key, value in raw["match"].items():
            key = "attribution" if key == "source" else key
            if key not in MATCH_KEYS:
                raise ConfigError(f"rule {n}: cannot match on {key!r} (use {', '.join(MATCH_KEYS)})")
            values = value if isinstance(value, list) else [value]
            match.append((key, tuple(str(v) for v in values)))
        adjust = []
        for key, value in raw["adjust"].items():
            if key not in ADJUST_KEYS or isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"rule {n}: adjust {key!r} must be confidence or importance with a number")
            adjust.append((key, float(value)))
        rules.append(Rule(tuple(match), tuple(adjust)))
    return Calibration(tuple(rules))
