"""The type taxonomy: which partition and folder each type routes to, and how fast it decays.

Seventeen default types; ``observer/taxonomy.yml`` adds types and overrides
partition, folder and decay. Names are validated so a type or folder can never escape
its partition (no ``..``, no slashes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, NamedTuple

from cortex.errors import ConfigError
from cortex.layout import PARTITIONS, WINDOWS_RESERVED  # PARTITIONS: defined once, with what makes a note

NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
CATEGORIES = ("concept", "entity", "relation")
ARCHIVE = "archive"  # mind/archive/<folder>/: faded, merged, forgotten or superseded memories
# What an archived note carries, and a note brought back loses: when, why, and the
# reason's own field (merged_into, superseded_by, forgotten_reason).
ARCHIVE_FIELDS = ("archived", "archive_reason", "merged_into", "superseded_by", "forgotten_reason")
# The archive reasons someone meant: a memory forgotten as wrong, or replaced by another.
# A repeat of such a memory (an agent observing it again, here or on another machine) is
# counted on the archived note and never brings it back; a faded one comes back.
DELIBERATE_ARCHIVE = frozenset({"forgotten", "superseded"})


class TypeSpec(NamedTuple):  # not a dataclass: a cold query creates it at import, ~0.6M instructions, not ~4M
    name: str
    category: str
    partition: str
    folder: str
    decay: float  # importance lost per month; 0 for permanent or non-decaying types

    @property
    def directory(self) -> str:
        return f"{self.partition}/{self.folder}"


def _t(name: str, category: str, partition: str, folder: str, decay: float = 0.0) -> TypeSpec:
    return TypeSpec(name, category, partition, folder, decay)


DEFAULT_TYPES: tuple[TypeSpec, ...] = (
    _t("fact", "concept", "mind", "facts", 0.01),
    _t("opinion", "concept", "mind", "opinions", 0.05),
    _t("belief", "concept", "mind", "beliefs", 0.02),
    _t("preference", "concept", "mind", "preferences", 0.0),
    _t("lesson", "concept", "mind", "lessons", 0.0),
    _t("decision", "concept", "vault", "decisions"),
    _t("commitment", "concept", "mind", "commitments", 0.10),
    _t("goal_short", "concept", "mind", "goals", 0.15),
    _t("goal_long", "concept", "mind", "goals", 0.03),
    _t("aspiration", "concept", "mind", "aspirations", 0.02),
    _t("constraint", "concept", "mind", "constraints", 0.0),
    _t("milestone", "entity", "vault", "milestones"),
    _t("task", "entity", "vault", "tasks"),
    _t("event", "entity", "vault", "events"),
    _t("resource", "entity", "vault", "resources"),
    _t("project", "relation", "vault", "projects"),
    _t("dependency", "relation", "vault", "dependencies"),
)

# `observation` is the staging state of a buffer line, never a note type.
RESERVED_TYPES = frozenset({"observation"})


@dataclass(frozen=True)
class Taxonomy:
    types: Mapping[str, TypeSpec]

    def get(self, name: str) -> TypeSpec | None:
        return self.types.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.types

    def names(self) -> list[str]:
        return sorted(self.types)

    def meant(self, given: object) -> str | None:
        """The type a near miss means: another case (`Fact`), a plural (`decisions`),
        one letter wrong, missing, extra or two swapped (`fcat`); None when unsure."""
        if not isinstance(given, str) or not given.strip():
            return None
        word = given.strip().casefold().replace(" ", "_").replace("-", "_")
        for candidate in (word, word[:-1] if word.endswith("s") else word, word[:-2] if word.endswith("es") else word):
            if candidate in self.types:
                return candidate
        close = [n for n in self.names() if _one_edit(word, n)]
        return close[0] if len(close) == 1 else None

    def folders(self) -> set[str]:
        """Every ``partition/folder`` a note may live in (archive excluded)."""
        return {spec.directory for spec in self.types.values()}

    def types_for_directory(self, directory: str) -> list[TypeSpec]:
        """Types whose notes live in ``partition/folder``."""
        return [s for s in self.types.values() if s.directory == directory]

    def types_of_note(self, path: str) -> list[TypeSpec]:
        """Types whose folder holds the note at ``path`` (at any depth below it, or in the
        archive's copy of it)."""
        return self.types_for_directory(type_folder(path))


def _one_edit(a: str, b: str) -> bool:
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def type_folder(path: str) -> str:
    """The ``partition/folder`` a note's path files it under, at any depth (cortex files
    its notes by month below it): ``mind/facts/x.md``, ``mind/facts/2026-03/x.md`` and
    ``mind/archive/facts/2026-03/x.md`` → ``mind/facts``; ``notes/x.md`` → ``notes``."""
    parts = path.strip("/").split("/")
    if len(parts) >= 4 and parts[0] == "mind" and parts[1] == ARCHIVE:
        return f"mind/{parts[2]}"
    return "/".join(parts[:2]) if len(parts) >= 3 else parts[0]


DEFAULT_TAXONOMY = Taxonomy({spec.name: spec for spec in DEFAULT_TYPES})


def _check_name(value: object, what: str, source: str) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise ConfigError(
            f"{source}: {what} {value!r} is not a valid name",
            "use lowercase letters, digits and underscores, starting with a letter",
        )
    return value


def parse_taxonomy(data: object, source: str = "taxonomy.yml") -> Taxonomy:
    """Build a taxonomy from the parsed ``taxonomy.yml`` mapping.

    Shape::

        types:
          meeting_note: {category: entity, partition: vault, folder: meetings}
          opinion: {decay: 0.1}        # override one field of a default type
    """
    types = dict(DEFAULT_TAXONOMY.types)
    if data is None:
        return Taxonomy(types)
    if not isinstance(data, dict) or not isinstance(data.get("types", {}), dict):
        raise ConfigError(f"{source}: expected a mapping with a `types:` mapping")
    for name, fields in (data.get("types") or {}).items():
        _check_name(name, "type", source)
        if name in RESERVED_TYPES:
            raise ConfigError(f"{source}: `{name}` is reserved for buffer lines")
        fields = fields or {}
        if not isinstance(fields, dict):
            raise ConfigError(f"{source}: type {name} must map to fields, got {fields!r}")
        unknown = set(fields) - {"category", "partition", "folder", "decay"}
        if unknown:
            raise ConfigError(f"{source}: type {name}: unknown field(s) {sorted(unknown)}")
        base = types.get(name)
        if base is None:
            missing = {"category", "partition"} - set(fields)
            if missing:
                raise ConfigError(f"{source}: new type {name} needs {sorted(missing)}")
            base = TypeSpec(name, "concept", "mind", name, 0.0)
        spec = base._replace(**fields)
        if spec.category not in CATEGORIES:
            raise ConfigError(f"{source}: type {name}: category must be one of {CATEGORIES}")
        if spec.partition not in PARTITIONS:
            raise ConfigError(f"{source}: type {name}: partition must be one of {PARTITIONS}")
        _check_name(spec.folder, "folder", source)
        if spec.folder in WINDOWS_RESERVED:
            raise ConfigError(f"{source}: type {name}: folder {spec.folder!r} is a name Windows reserves "
                              "(con, prn, aux, nul, com0–9, lpt0–9)", "give the type another `folder:`")
        if spec.folder == ARCHIVE:
            raise ConfigError(f"{source}: type {name}: `archive` is reserved")
        try:
            decay = float(spec.decay)
        except (TypeError, ValueError):
            raise ConfigError(f"{source}: type {name}: decay must be a number") from None
        if not 0.0 <= decay <= 1.0:
            raise ConfigError(f"{source}: type {name}: decay must be within 0..1 per month")
        types[name] = spec._replace(decay=decay)
    return Taxonomy(types)


def file_stamp(path: Path) -> list[int] | None:
    """What says ``path`` changed: mtime, ctime (`cp -p` keeps mtime), size, inode; None
    when it is missing. A link is stamped itself (it is refused when read)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]


def load_taxonomy(path: Path, *, cache: Path | None = None) -> Taxonomy:
    """The taxonomy of ``path`` (the defaults when it is missing). With ``cache``, its
    parsed content is kept there as JSON by the file's size and mtime: a command that runs
    in loops (`cortex query`) then never imports PyYAML (~10 ms) for an unchanged file."""
    stamp = file_stamp(path)  # a link is refused when read, never served from the cache
    if stamp is None:
        return DEFAULT_TAXONOMY
    if cache is not None:
        import json

        try:
            cached = json.loads(cache.read_text(encoding="utf-8"))
            if cached.get("stamp") == stamp:
                return parse_taxonomy(cached.get("data"), str(path))
        except (OSError, ValueError, AttributeError):
            pass
    import yaml

    try:
        from cortex.layout import read_settings_text

        data = yaml.safe_load(read_settings_text(path))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}", "fix the file or delete it to use the defaults") from None
    taxonomy = parse_taxonomy(data, str(path))
    if cache is not None:
        from cortex.layout import write_cache

        write_cache(cache, {"stamp": stamp, "data": data})
    return taxonomy
