"""The memory an agent talks to: one vault, its search index kept loaded, writes that
become notes within seconds.

`Memory` answers plain Python calls with plain values (the MCP tools in mcp_server.py
are a thin layer over it): `observe`, `query`, `recent`, `get_note`, `forget`, `brief`, `status`.
It composes the parts that do the work: `search.live.LiveIndex` (the index kept loaded
and fresh, asked through the same `search.session` as `cortex query`), `noteref` (a
note named by path or id), `debounce.Debouncer` (one `cortex run` after each burst of
writes) and the `Vault` for writes, briefs and status.
"""

import json
import sys
import uuid
from pathlib import Path
from typing import Any, TYPE_CHECKING

from cortex.errors import CortexError, LockBusy

if TYPE_CHECKING:
    from cortex.vault import Vault

MAX_LIMIT = 50
MAX_QUERY_CHARS = 2000
DEFAULT_DEBOUNCE = 1.5
DEFAULT_REFRESH = 1.0


class ToolFailure(Exception):
    """A bad argument or a known problem: reported to the agent as a tool error."""


def _not_found(exc) -> ToolFailure:
    """A note reference that names nothing, with the tools an agent finds notes with."""
    return ToolFailure(f"{exc.message}: use an id or path from `query` or `recent` results "
                       "(archived=true finds archived ones)")


def log(message: str) -> None:
    sys.stderr.write(f"cortex mcp: {message}\n")
    sys.stderr.flush()


def when(text: str | None, name: str) -> float | None:
    from cortex.timefmt import parse_when

    try:
        return parse_when(text)
    except ValueError as exc:
        raise ToolFailure(f"{name} {exc}") from None


def _as_tuple(value: str | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    return tuple(str(v).strip() for v in items if str(v).strip())


class Memory:
    """One vault served to agents: writes, warm queries, notes, status."""

    def __init__(self, vault: "Vault", *, model: str | None = None, attribution: str = "agent", session_id: str | None = None,
                 process_after_writes: bool = False, debounce: float = DEFAULT_DEBOUNCE,
                 refresh_interval: float = DEFAULT_REFRESH) -> None:
        from cortex.debounce import Debouncer
        from cortex.search.live import LiveIndex

        self.vault = vault
        self.root: Path = vault.root
        self.live = LiveIndex(self.root, model=model, say=log, interval=refresh_interval)
        self.index = self.live.index
        self._ids: dict[str, str] = {}  # note ids the server has handed out -> their paths
        self.attribution = attribution
        self.session_id = session_id or str(uuid.uuid4())
        self.last_run: dict | None = None
        self.last_run_error: str | None = None
        self._runner = Debouncer(debounce, self._process) if process_after_writes else None

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> "Memory":
        """Load the index in the background (the server answers meanwhile), then watch."""
        # Whoosh is imported with a stand-in `urllib.request` in sys.modules (search/lexical.py
        # saves ~35 ms for the CLI that way); on the loader thread that stand-in would be seen
        # by imports on other threads (httpx under the SDK, jsonschema) and break them.
        # With the real module loaded first, no stand-in is ever installed.
        import urllib.request  # noqa: F401

        self.live.start()
        if self._runner is not None and self._backlog():
            self._runner.poke()  # lines written while no server ran are processed now too
        return self

    def _backlog(self) -> bool:
        from cortex import buffer

        state = self.vault.load_state()
        return buffer.size(self.vault.buffer_path) > buffer.unread_from(self.vault.buffer_path, state.offset,
                                                                        state.last_line)

    def stop(self, flush_timeout: float = 30.0) -> None:
        """Stop watching; observations still waiting for their run are processed first."""
        self.live.stop()
        if self._runner is not None:
            self._runner.flush(flush_timeout)

    def load(self) -> None:
        """Open (or rebuild) the index now and bring it up to date (`start` does it in the background)."""
        self.live.load()

    def refresh(self) -> None:
        """Bring the loaded index up to date with the notes now."""
        self.live.refresh()

    # --- writes -----------------------------------------------------------------------------

    def observe(self, obs: dict[str, Any]) -> dict[str, Any]:
        from cortex.errors import InvalidObservation

        obs = {k: v for k, v in obs.items() if v is not None}
        obs.setdefault("attribution", self.attribution)
        obs.setdefault("session_id", self.session_id)
        try:
            warnings = self.vault.write(obs)
        except InvalidObservation as exc:
            raise ToolFailure(f"observation refused: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")) from None
        if self._runner is not None:
            self._runner.poke()
        warnings = list(warnings) + self._foresee(obs)
        return {"accepted": 1, "warnings": warnings, "processing": "after-writes" if self._runner else "next-run"}

    def _foresee(self, obs: dict[str, Any]) -> list[str]:
        """What the run's security stage will make of it, said now, while the agent can
        still rephrase (the run decides: the line is appended either way, nothing is lost)."""
        from cortex.pipeline.security import foresee, foresight_message

        try:
            found = foresee([obs], self.vault.scanner, classify=True)
        except Exception as exc:  # a hint, never a reason to fail the write
            log(f"could not pre-scan an observation ({type(exc).__name__}: {exc})")
            return []
        return [foresight_message(f) for f in found]

    def _process(self) -> None:
        try:
            report = self.vault.run()
        except LockBusy as exc:
            log(f"{exc.message}: will try again")
            self._runner.poke(delay=max(self._runner.delay, 2.0))
            return
        except CortexError as exc:
            self.last_run_error = exc.message
            log(f"cortex run failed: {exc}")
            return
        self.last_run_error = None
        if report.read == 0 and self.last_run is not None:
            return  # a poke that arrived during the previous run: nothing new to say
        self.last_run = _report_dict(report)
        log(f"processed the buffer: {json.dumps(self.last_run, default=str)}")
        if self.live.ready and not self.live.error and not self.live.stopped:
            self.live.refresh()

    # --- reads ------------------------------------------------------------------------------

    def query(self, text: str, *, limit: int = 10, mode: str = "hybrid", min_score: float | None = None,
              **filters) -> list[dict]:
        from cortex.search.question import Question

        if not text or not text.strip():
            raise ToolFailure("text is empty: say what to look for, or use `recent` for the latest memories")
        if len(text) > MAX_QUERY_CHARS:
            raise ToolFailure(f"text is {len(text)} characters: keep a query under {MAX_QUERY_CHARS} (the words that matter)")
        if mode not in ("hybrid", "lexical", "semantic"):
            raise ToolFailure(f"mode {mode!r}: use hybrid, lexical or semantic")
        if min_score is not None and not 0.0 <= min_score <= 1.0:
            raise ToolFailure(f"min_score {min_score}: use a relevance between 0 (keep every candidate) and 1")
        hits = self._ask(Question(text, self._filters(**filters), _limit(limit), mode, min_score))
        return [_hit_record(rank, h) for rank, h in enumerate(hits, start=1)]

    def recent(self, *, within: str = "7d", limit: int = 10, **filters) -> list[dict]:
        from dataclasses import replace

        from cortex.search.question import Question

        since = when(within, "within")
        flt = self._filters(**filters)
        if flt.since is not None:
            since = flt.since if since is None else max(since, flt.since)
        hits = self._ask(Question("", replace(flt, since=since), _limit(limit)))
        return [_hit_record(rank, h, scored=False) for rank, h in enumerate(hits, start=1)]

    def _ask(self, question) -> list:
        from cortex.search.live import NotReady

        try:
            hits = self.live.ask(question).hits
        except NotReady as exc:
            raise ToolFailure(str(exc)) from None
        self._remember_ids(hits)
        return hits

    def _remember_ids(self, hits) -> None:
        """Keep the paths of ids `get_note` may be asked next, only where a result is the
        note its id names (``noteref.preferred``: an active memory, a record): a person's
        copy of a memory carries its id too, and a results list that happened to name the
        copy must not make `get_note` serve it. Other ids are looked up when asked."""
        from cortex.noteref import preferred
        from cortex.taxonomy import ARCHIVE

        named: dict[str, list[str]] = {}
        for hit in hits:
            if hit.id:
                named.setdefault(hit.id, []).append(hit.path)
        for ident, paths in named.items():
            best = preferred(paths)
            if best.startswith(("mind/", "vault/")) and not best.startswith(f"mind/{ARCHIVE}/"):
                self._ids[ident] = best

    def _filters(self, *, types=None, categories=None, partitions=None, tags=None, entities=None, attributions=None,
                 since=None, until=None, archived=False):
        from cortex.search.query import unknown_values
        from cortex.search.question import Filters

        flt = Filters(types=_as_tuple(types), categories=_as_tuple(categories), partitions=_as_tuple(partitions),
                      tags=_as_tuple(tags), entities=_as_tuple(entities), attributions=_as_tuple(attributions),
                      since=when(since, "since"), until=when(until, "until"), archived=bool(archived))
        for field_, bad, allowed in unknown_values(flt, self.index.taxonomy):
            raise ToolFailure(f"{field_} {bad}: not known here; use any of {', '.join(allowed)}")
        return flt

    def get_note(self, ref: str) -> dict:
        """The note's fields, read from its file, each credential redacted: an agent is
        served what query serves (a note committed past the hooks may hold one);
        `cortex show` prints the file as it is, for the person who fixes it."""
        from cortex.noteref import BadReference, NoteNotFound, read_note
        from cortex.security.secrets import scrub_generated

        try:
            return scrub_generated(read_note(self.vault, ref, self._ids)[0])
        except NoteNotFound as exc:
            raise _not_found(exc) from None
        except BadReference as exc:
            raise ToolFailure(str(exc)) from None

    def forget(self, ref: str, reason: str) -> dict:
        """`cortex forget`: archive a memory with the reason; the index follows at once.
        What was archived is served as `get_note` serves a note: each credential redacted."""
        from cortex.maintenance.forget import forget
        from cortex.noteref import NoteNotFound
        from cortex.security.secrets import scrub_generated
        from cortex.timefmt import utcnow

        try:
            done = forget(self.vault, ref, reason, now=utcnow())
        except NoteNotFound as exc:
            raise _not_found(exc) from None
        if self.live.ready and not self.live.error:
            self.live.refresh()
        return scrub_generated(done.to_json())

    def brief(self, since: str = "24h") -> dict:
        """`cortex brief`: what was memorized, reinforced, merged, faded or held since a time."""
        from cortex.maintenance.brief import make_brief, render_brief
        from cortex.timefmt import parse_duration, utcnow

        try:
            window = parse_duration(since)
        except ValueError:
            raise ToolFailure(f"since {since!r}: use a duration back from now (24h, 7d)") from None
        now = utcnow()
        data = make_brief(self.vault, since=now - window, now=now)
        return {"since": data["since"], "now": data["now"], "brief": render_brief(data)}

    def status(self) -> dict:
        out = self.vault.status()
        server: dict[str, Any] = {"session_id": self.session_id, "attribution": self.attribution,
                                  "process_after_writes": self._runner is not None}
        if self._runner is not None:
            server["run_pending"] = self._runner.pending
            server["last_run"] = self.last_run
            if self.last_run_error:
                server["last_run_error"] = self.last_run_error
        if self.live.ready:
            server["index"] = {"error": self.live.error} if self.live.error else {"notes": self.live.doc_count()}
        else:
            server["index"] = {"loading": True}
        out["server"] = server
        return out


def _limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < 1:
        raise ToolFailure(f"limit {limit!r}: use a whole number from 1 to {MAX_LIMIT}")
    return min(limit, MAX_LIMIT)


def _hit_record(rank: int, hit, *, scored: bool = True) -> dict:
    """One result as an agent reads it; `why` is `cortex query --json`'s (each side's score,
    the share matched, the relevance `min_score` and the floor compare with, the priors):
    without it a result kept by `min_score=0` could not be told from one that answers."""
    record = {"rank": rank, "id": hit.id, "path": hit.path, "type": hit.type, "title": hit.title,
              "created": hit.created, "score": hit.score, "archived": hit.archived, "attribution": hit.attribution,
              "tags": hit.tags, "entities": hit.entities, "text": hit.snippet, "why": hit.why}
    if not scored:  # the temporal view orders by time: its "score" is a timestamp
        del record["score"]
    if getattr(hit, "via", None):  # reached by the second hop: from which result, through which entity
        record["via"] = hit.via
    if getattr(hit, "when", None):  # created in the time the question names: put first
        record["when"] = hit.when
    return record


def _report_dict(report) -> dict:
    to_json = getattr(report, "to_json", None)
    if callable(to_json):
        data = to_json()
        return json.loads(data) if isinstance(data, str) else data
    return dict(getattr(report, "__dict__", {}))
