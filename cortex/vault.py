"""``Vault``: the Python API. The CLI is a thin shell over it.

A vault is found the way git finds a repository: an explicit path, else
``$CORTEX_VAULT``, else the git repository around the current directory.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Iterator

from cortex import buffer
from cortex.config import Calibration, Settings, load_calibration, load_settings
from cortex.errors import BatchRefused, CortexError, InvalidObservation
from cortex.fsutil import file_lock, share_as, version
from cortex.model import RunReport
from cortex.quarantine import SECURITY_REASONS, Quarantine
from cortex.state import State
from cortex.layout import PARTITIONS, cache_dir, find_vault, is_other_repository, load_tag_allow
from cortex.taxonomy import Taxonomy, load_taxonomy
from cortex.timefmt import format_time, utcnow

RUNTIME_PATHS = ("observer/observations.jsonl", "observer/.observations.jsonl.append", "observer/state.json",
                 "observer/quarantine.jsonl", "observer/skipped.jsonl", "observer/archive", "observer/cortex.lock",
                 ".cortex")


CONFIG_WAIT = 10.0  # seconds a missing config is waited for while a person's commit runs


class Vault:
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).resolve()
        share_as(self.root)  # cortex's files made as the repository is shared (a group's vault)
        observer = self.root / "observer"
        self.buffer_path = observer / "observations.jsonl"
        self.state_path = observer / "state.json"
        self.quarantine = Quarantine(observer / "quarantine.jsonl")
        self.skipped = Quarantine(observer / "skipped.jsonl")
        self.archive_dir = observer / "archive"
        self.lock_path = observer / "cortex.lock"
        self._config_cache: dict[str, tuple[Any, Any]] = {}

    def __repr__(self) -> str:
        return f"Vault({str(self.root)!r})"

    @cached_property
    def cache_dir(self) -> Path:
        """Where the derived caches live (``layout.cache_dir``): the git directory's
        ``cortex/``, where no pull writes."""
        return cache_dir(self.root)

    # --- discovery and creation ------------------------------------------------------

    @classmethod
    def discover(cls, path: str | os.PathLike | None = None) -> "Vault":
        """The vault ``--vault``, ``$CORTEX_VAULT`` or the working directory names
        (``cortex.layout.find_vault``); raises ``VaultNotFound``."""
        return cls(find_vault(path))

    @classmethod
    def init(cls, path: str | os.PathLike, set_up: list[str] | None = None) -> tuple["Vault", list[str]]:
        """``set_up``: receives what was set up in the clone's own git (``init_vault``)."""
        from cortex.scaffold import init_vault

        vault = cls(path)
        return vault, init_vault(vault, set_up)

    # --- configuration -----------------------------------------------------------------

    # Config files are re-read when they change, so a long-lived Vault (the MCP server,
    # `cortex schedule`) follows a person's edits.
    def _config(self, name: str, loader):
        path = self.root / "observer" / name
        stamp = version(path)
        cached = self._config_cache.get(name)
        if cached is None or cached[0] != stamp:
            # pre-commit's stash, in a person's commit, rewrites the working files: a
            # config missing for that instant would make cortex run on the defaults
            # (trust everyone), or fail between the check and the read.
            from cortex.gitlock import wait_for_file

            if stamp is None:
                wait_for_file(path, self.root, CONFIG_WAIT)
                stamp = version(path)
            try:
                loaded = loader(path)
            except FileNotFoundError:
                wait_for_file(path, self.root, CONFIG_WAIT)
                stamp, loaded = version(path), loader(path)
            cached = (stamp, loaded)
            self._config_cache[name] = cached
            self.__dict__.pop("scanner", None)
            self.__dict__.pop("observation_validator", None)
        return cached[1]

    @property
    def settings(self) -> Settings:
        return self._config("config.yml", load_settings)

    @property
    def sync_on_run(self) -> bool:
        """Whether `cortex run` syncs before and after: this machine's choice, `git
        config cortex.syncOnRun` (git's own config never travels), else the team's
        default, `sync.on_run` in observer/config.yml (tracked and shared)."""
        from cortex import gitcli

        mine = gitcli.config_bool(self.root, "cortex.syncOnRun")
        return self.settings.sync_on_run if mine is None else mine

    @property
    def taxonomy(self) -> Taxonomy:
        return self._config("taxonomy.yml", load_taxonomy)

    @property
    def calibration(self) -> Calibration:
        return self._config("calibration.yml", load_calibration)

    def schema(self, name: str) -> dict[str, Any]:
        """A JSON Schema from the vault's ``schemas/``, else the shipped copy."""
        from cortex.config import load_schema

        return load_schema(self.root, name)

    @cached_property
    def observation_validator(self):
        from cortex.schemacheck import SchemaCheck

        return SchemaCheck(self.schema("observation"))

    @cached_property
    def scanner(self):
        from cortex.config import vault_scanner

        s = self.settings
        return vault_scanner(self.root, s.injection_patterns, classifier_threshold=s.classifier_threshold,
                             use_classifier=s.use_classifier)

    def note_validator(self, *, redact: bool = False, bulk: bool = False):
        from cortex.validate import NoteValidator

        return NoteValidator(
            self.taxonomy,
            self.schema("note"),
            tag_allow=load_tag_allow(self.root),
            redact=self.scanner.redact if redact else None,
            bulk=bulk,
        )

    def context(self, now: datetime | None = None, *, scan: bool = True, **flags: bool):
        """The pipeline context. ``scan=False`` leaves the scanner out (the write path
        checks the schema only, and must not pay for loading the security layer)."""
        from cortex.layout import link_on_path
        from cortex.notes import uuid7
        from cortex.pipeline.context import Context

        refused = {}
        if scan:  # the run, which writes notes: never through a link
            for folder in self.taxonomy.folders():
                why = link_on_path(self.root, folder)
                if why:
                    refused[folder] = why
        return Context(
            taxonomy=self.taxonomy,
            settings=self.settings,
            calibration=self.calibration,
            observation_validator=self.observation_validator,
            scanner=self.scanner if scan else None,
            now=now or utcnow(),
            new_id=uuid7,
            refused_dirs=refused,
            **flags,
        )

    def refuse_links(self) -> None:
        """The runtime files are written in place: a link among them (``observer/`` made a
        link to a shared folder) would carry the writes out of the repository."""
        from cortex.layout import link_on_path

        for rel in RUNTIME_PATHS:
            why = link_on_path(self.root, rel)
            if why:
                raise CortexError(why, "replace the link with the file or folder itself")

    def lock(self, timeout: float | None = None):
        self.refuse_links()
        return file_lock(self.lock_path, self.settings.lock_timeout if timeout is None else timeout, "the vault")

    def load_state(self) -> State:
        return State.load(self.state_path)

    def save_state(self, state: State) -> None:
        state.save(self.state_path)

    # --- the write path ----------------------------------------------------------------

    def complete_observation(self, obs: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
        """Fill the defaults ``cortex write`` promises (timestamp, bucket, session, author)."""
        out = dict(obs)
        out.setdefault("timestamp", format_time(now or utcnow()))
        out.setdefault("bucket", "explicit")
        out.setdefault("session_id", "cli")
        out.setdefault("attribution", "system")
        return out

    def write(self, observations: dict[str, Any] | Iterable[dict[str, Any]], *, complete: bool = True,
              dry_run: bool = False) -> list[str]:
        """Validate and append observations, all or none: one invalid observation and
        nothing is appended (``BatchRefused`` names every invalid one). Returns warnings.

        With ``complete`` (the default), missing timestamp, bucket, session and
        attribution take the defaults ``cortex write`` documents."""
        from cortex.model import Rejection
        from cortex.pipeline import schema
        from cortex.pipeline.parse import check_value

        batch = [observations] if isinstance(observations, dict) else list(observations)
        lines, warnings, refused = [], [], []
        bodies: dict[int, str] = {}
        supersedes: dict[int, str] = {}
        ctx = self.context(scan=False)
        for n, obs in enumerate(batch, start=1):
            if not isinstance(obs, dict):
                refused.append((n, "expected a JSON object"))
                continue
            problem = check_value(obs, self.settings.limits)  # objects that never were JSON text
            if problem:
                refused.append((n, problem))
                continue
            if complete:
                obs = self.complete_observation(obs)
            obs, cut = schema.truncate(obs)  # the buffer gets what the run would keep, no more
            result = schema.validate(obs, "write", ctx)
            if isinstance(result, Rejection):
                from cortex.security.secrets import redact

                refused.append((n, redact(result.detail)[0]))  # the message quotes values: no credential in it
                continue
            warnings += list(result.warnings) + list(cut)
            lines.append(json.dumps(obs, ensure_ascii=False, separators=(",", ":")))
            bodies[n] = result.body
            if result.supersedes:
                supersedes[n] = result.supersedes
        never, unknown, deleted = self._at_head(supersedes, bodies)
        if refused or never:
            raise BatchRefused(sorted(refused + never), len(batch))
        warnings += [(f"observation {n}: " if len(batch) > 1 else "") + why for n, why in unknown.items()]
        warnings += deleted
        if dry_run:
            return warnings
        self.refuse_links()
        return buffer.append(self.buffer_path, lines) + warnings

    def run(
        self,
        *,
        dry_run: bool = False,
        commit_per: str | None = None,
        now: datetime | None = None,
        limit: int | None = None,
    ) -> RunReport:
        from cortex.cycle import run_pass

        return run_pass(self, dry_run=dry_run, commit_per=commit_per or self.settings.commit_per, now=now, limit=limit)

    def _at_head(self, refs: dict[int, str], bodies: dict[int, str]):
        """What the run will make of these lines, from one look at the HEAD cache: the
        ``supersedes`` it could never follow (refused now), those that name no memory at
        HEAD (warnings: ``supersede.at_write``), and the bodies of memories a commit
        deleted (warnings). Hints: when the cache cannot say, the run decides."""
        import sqlite3

        from cortex.errors import RepositoryDamaged
        from cortex.headcache import HeadCache
        from cortex.supersede import at_write

        cache = HeadCache(self.root, self.settings.limits.max_note_bytes)
        try:
            cache.sync()
            return (*at_write(self.root, refs, cache), self._deleted_by_people(bodies, cache))
        except (OSError, ValueError, sqlite3.Error, RepositoryDamaged):  # the line waits in the buffer all the same
            return [], {}, []
        finally:
            cache.close()

    def _deleted_by_people(self, bodies: dict[int, str], cache) -> list[str]:
        """What the run will hold as a memory a commit deleted, said when it is written."""
        from cortex.notes import source_hash

        hashes = {n: source_hash(body) for n, body in bodies.items()}
        gone = cache.deleted(list(hashes.values()))
        return [(f"observation {n}: " if len(bodies) > 1 else "") + f"this memory was deleted from {gone[h]} in a commit: "
                "the run will hold it in the quarantine, not memorize it (`cortex quarantine promote` keeps it after all)"
                for n, h in hashes.items() if h in gone]

    # --- quarantine ---------------------------------------------------------------------

    def promote(self, ident: str, *, force: bool = False, now: datetime | None = None) -> RunReport:
        from cortex.cycle import promote

        entry = self.quarantine.find(ident)
        if entry.reason in SECURITY_REASONS and not force:
            raise CortexError(
                f"{entry.short_id} was held by a security layer ({entry.reason}: {entry.detail})",
                "read it with `cortex quarantine show`; promote it anyway with --force",
            )
        return promote(self, entry, force=force, now=now)

    def edit(self, ident: str, line: str, *, now: datetime | None = None) -> RunReport:
        """Send a person's corrected version of a held line through the pipeline: the
        entry leaves the quarantine in the same exactly-once step that commits its note.
        The security layers still apply to the corrected line."""
        from dataclasses import replace

        from cortex.cycle import promote

        entry = self.quarantine.find(ident)
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InvalidObservation(f"the corrected line is not JSON: {exc}", "one JSON object, as in the buffer") from None
        if not isinstance(obj, dict):
            raise InvalidObservation("the corrected line is not a JSON object", "one JSON object, as in the buffer")
        corrected = replace(entry, line=json.dumps(self.complete_observation(obj), ensure_ascii=False))
        return promote(self, corrected, force=False, now=now)

    def discard(self, ident: str) -> int:
        entry = self.quarantine.find(ident)
        with self.lock():
            return self.quarantine.remove({entry.key})

    def purge(self, older_than: timedelta | None = None, reason: str | None = None, now: datetime | None = None) -> int:
        with self.lock():
            before = None if older_than is None else (now or utcnow()) - older_than
            return self.quarantine.purge(before=before, reason=reason)

    # --- status -------------------------------------------------------------------------

    def iter_note_paths(self) -> Iterator[Path]:
        for partition in PARTITIONS:
            base = self.root / partition
            if base.is_dir() and not base.is_symlink():  # links lead out of the vault: never followed
                for dirpath, dirnames, filenames in os.walk(base):
                    dirnames[:] = [d for d in dirnames if not d.startswith(".") and not is_other_repository(Path(dirpath) / d)]
                    for name in filenames:
                        if name.endswith(".md") and not os.path.islink(os.path.join(dirpath, name)):
                            yield Path(dirpath) / name

    def status(self) -> dict[str, Any]:
        from cortex.status import vault_status

        return vault_status(self)
