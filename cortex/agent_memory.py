"""The memory an agent talks to: one vault, its search index kept loaded, writes that
become notes within seconds.

`Memory` answers plain Python calls with plain values (the MCP tools in mcp_server.py
are a thin layer over it): `observe`, `query`, `recent`, `get_note`, `brief`, `status`.
Queries go through `cortex.search.query`, the very ranking and filters `cortex query`
uses, over the index this object keeps open; a background thread keeps that index in
step with the notes (cheap stamps every second, a `git status` sweep every 30 s) and,
when asked, a debounced `cortex run` follows each burst of writes.

Threads: the MCP SDK runs tools on worker threads; every use of the index holds one lock.
"""

import json
import os
import re
import sys
import threading
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Any, Callable, TYPE_CHECKING

from cortex.errors import CortexError, LockBusy
from cortex.layout import UnreadableNote, is_note_path, read_note_bytes
from cortex.layout import PARTITIONS

if TYPE_CHECKING:
    from cortex.vault import Vault

MAX_LIMIT = 50
MAX_QUERY_CHARS = 2000
DEFAULT_DEBOUNCE = 1.5
DEFAULT_REFRESH = 1.0
FULL_CHECK_EVERY = 30.0  # seconds between `git status` sweeps that catch in-place edits


class ToolFailure(Exception):
    """A bad argument or a known problem: reported to the agent as a tool error."""


def log(message: str) -> None:
    sys.stderr.write(f"cortex mcp: {message}\n")
    sys.stderr.flush()


# --- small helpers -----------------------------------------------------------------------------


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


def note_path(root: Path, ref: str) -> str | None:
    """The vault-relative path `ref` names, if it is a path inside vault/ or mind/."""
    text = ref.strip().replace("\\", "/")
    if not (text.endswith(".md") or "/" in text):
        return None
    candidate = Path(text)
    if candidate.is_absolute():
        try:
            text = candidate.resolve().relative_to(root).as_posix()
        except ValueError:
            raise ToolFailure(f"{ref!r} is outside the vault: pass a path like mind/facts/2026-02-16-e7f4a2b9.md") from None
    parts = PurePosixPath(text).parts
    if not parts or ".." in parts or not is_note_path(PurePosixPath(*parts).as_posix()):
        raise ToolFailure(f"{ref!r} is not a note path: a note is a markdown file of the vault (.md), "
                          "not under observer/ or a dot folder")
    return text


_ID_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,99}$")
_FRONT_ID = re.compile(r"^id:[ \t]*['\"]?([^'\"\s]+)['\"]?[ \t]*$", re.M)


def _note_id(path: Path) -> str | None:
    """The `id` in a note's frontmatter (first 4 KB), without a YAML parse."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    if not head.startswith("---"):
        return None
    end = head.find("\n---", 3)
    m = _FRONT_ID.search(head[: end if end > 0 else len(head)])
    return m.group(1) if m else None


def find_note_by_id(root: Path, ident: str) -> str | None:
    """The vault path of the note whose frontmatter has `id: ident` (`git grep`, in C, over
    tracked and untracked notes; a walk over the files where git cannot answer)."""
    from cortex import gitcli

    candidates: list[str] | None = None
    proc = gitcli.run_bytes(root, "-c", "core.quotepath=off", "grep", "-l", "-I", "-E", "--untracked",
                            "-e", f"^id:[[:space:]]*['\"]?{ident}['\"]?[[:space:]]*$", "--", *PARTITIONS, timeout=60)
    if proc is not None and proc.code in (0, 1):
        candidates = [p for p in proc.out.decode("utf-8", "replace").splitlines() if p.endswith(".md")]
    if candidates is None:
        candidates = [p.relative_to(root).as_posix() for part in PARTITIONS for p in (root / part).rglob("*.md")]
    return next((p for p in sorted(candidates) if _note_id(root / p) == ident), None)


class Resident:
    """The loaded `SearchIndex` as `cortex.search.query` sees it, with the stored fields and
    path lookups it reads kept in memory for as long as the searcher they came from.

    Same functions, same ranking and filters: a long-lived server just stops paying again
    for reads it already made (on a 50,000-note vault they were half of a warm query)."""

    def __init__(self, index) -> None:
        self._index = index
        self.lexical = _ResidentLexical(index)

    def __getattr__(self, name: str):
        return getattr(self._index, name)


class _ResidentLexical:
    def __init__(self, index) -> None:
        self._index = index
        self._searcher = None
        self._stored: dict[int, dict] = {}
        self._docnums: dict[str, int | None] = {}

    def _current(self):
        lexical = self._index.lexical
        searcher = lexical.searcher
        if searcher is not self._searcher:  # reopened after a write: docnums may have moved
            self._searcher = searcher
            self._stored.clear()
            self._docnums.clear()
        return lexical

    def stored(self, docnum: int) -> dict:
        lexical = self._current()
        fields = self._stored.get(docnum)
        if fields is None:
            fields = self._stored[docnum] = lexical.stored(docnum)
        return fields

    def docnum(self, path: str) -> int | None:
        lexical = self._current()
        try:
            return self._docnums[path]
        except KeyError:
            num = self._docnums[path] = lexical.docnum(path)
            return num

    def __getattr__(self, name: str):
        return getattr(self._index.lexical, name)


class Debouncer:
    """Calls `fn` once, `delay` seconds after the last `poke()`, on its own thread."""

    def __init__(self, delay: float, fn: Callable[[], None]) -> None:
        self.delay = delay
        self.fn = fn
        self._due: float | None = None
        self._busy = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="cortex-run-after-writes", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> bool:
        with self._cond:
            return self._due is not None or self._busy

    def poke(self, delay: float | None = None) -> None:
        with self._cond:
            self._due = time.monotonic() + (self.delay if delay is None else delay)
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._due is None or time.monotonic() < self._due:
                    self._cond.wait(None if self._due is None else max(0.0, self._due - time.monotonic()))
                self._due = None
                self._busy = True
            try:
                self.fn()
            except Exception:  # a bug in one run must not stop every later one
                import traceback

                traceback.print_exc(file=sys.stderr)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def flush(self, timeout: float) -> None:
        """Run a pending call now and wait (up to `timeout`) until none is pending or running."""
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._due is not None:
                self._due = time.monotonic()
                self._cond.notify_all()
            while (self._due is not None or self._busy) and time.monotonic() < deadline:
                self._cond.wait(max(0.0, deadline - time.monotonic()))


# --- the service -------------------------------------------------------------------------------


class Memory:
    """One vault served to agents: writes, warm queries, notes, status."""

    def __init__(self, vault: "Vault", *, model: str | None = None, attribution: str = "agent", session_id: str | None = None,
                 process_after_writes: bool = False, debounce: float = DEFAULT_DEBOUNCE,
                 refresh_interval: float = DEFAULT_REFRESH) -> None:
        from cortex.search.index import SearchIndex

        self.vault = vault
        self.root: Path = vault.root
        self.index = SearchIndex(self.root, model=model)
        self.resident = Resident(self.index)
        self._ids: dict[str, str] = {}  # note ids the server has handed out -> their paths
        self.attribution = attribution
        self.session_id = session_id or str(uuid.uuid4())
        self.refresh_interval = refresh_interval
        self._lock = threading.RLock()  # the index: queries and updates take turns
        self._ready = threading.Event()
        self._load_error: str | None = None
        self._signature: tuple | None = None
        self._state_stamp: tuple | None = None
        self._last_full = 0.0
        self._stop = threading.Event()
        self.last_run: dict | None = None
        self.last_run_error: str | None = None
        self._runner = Debouncer(debounce, self._process) if process_after_writes else None

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> "Memory":
        """Load the index in the background (the server answers meanwhile), then watch."""
        # Whoosh is imported with a stand-in `urllib.request` in sys.modules (search/lexical.py
        # saves ~35 ms for the CLI that way); on our loader thread that stand-in would be seen
        # by imports on other threads (httpx2 under the SDK, jsonschema) and break them.
        # With the real module loaded first, no stand-in is ever installed.
        import urllib.request  # noqa: F401

        threading.Thread(target=self._load_then_watch, name="cortex-index", daemon=True).start()
        if self._runner is not None and self._backlog():
            self._runner.poke()  # lines written while no server ran are processed now too
        return self

    def _backlog(self) -> bool:
        from cortex import buffer

        return buffer.size(self.vault.buffer_path) > self.vault.load_state().offset

    def stop(self, flush_timeout: float = 30.0) -> None:
        """Stop watching; observations still waiting for their run are processed first."""
        self._stop.set()
        if self._runner is not None:
            self._runner.flush(flush_timeout)

    def wait_ready(self, timeout: float | None = 30.0) -> None:
        if not self._ready.wait(timeout):
            raise ToolFailure("the search index is still being loaded or built (progress on the server's stderr): "
                              "try again in a minute")
        if self._load_error:
            raise ToolFailure(f"search is unavailable: {self._load_error}")

    def _load_then_watch(self) -> None:
        try:
            self.load()
        except Exception as exc:  # reported to every query; the server keeps serving writes
            self._load_error = f"{type(exc).__name__}: {exc}"
            log(f"could not load the search index ({self._load_error})")
        finally:
            self._ready.set()
        while not self._load_error and not self._stop.wait(self.refresh_interval):
            try:
                self.refresh_if_changed()
            except Exception as exc:  # a failed refresh must not end the watcher
                log(f"index refresh failed ({type(exc).__name__}: {exc}); retrying")

    def load(self) -> None:
        """Open (or rebuild) the index, bring it up to date, and warm every part a query touches."""
        from cortex.search.freshness import GitProbe
        from cortex.search.index import IndexUnavailable, stderr_progress
        from cortex.search.query import search

        idx = self.index
        probe = GitProbe.start(self.root)
        with self._lock:
            try:
                idx.load(vectors=True)
                idx.refresh(probe)
            except IndexUnavailable as exc:
                log(f"{exc}: rebuilding the search index")
                idx.rebuild(progress=stderr_progress(), reason=str(exc))
            search(self.resident, "warm up", limit=1)  # model, vectors and searcher paged in now, not on the first query
            self._state_stamp = self._stamp()
            self._signature = self._changes_signature()
            self._last_full = time.monotonic()
        self._ready.set()
        log(f"search index ready: {idx.lexical.doc_count()} notes")

    # --- freshness ----------------------------------------------------------------------

    def _stamp(self) -> tuple | None:
        try:
            st = os.stat(self.index.directory / "state.json")
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _changes_signature(self) -> tuple:
        """Cheap signs that notes changed: folder mtimes, git's index and HEAD log."""
        sig = []
        for rel in sorted(self.index.state.dirs) if self.index.state else ():
            try:
                sig.append(os.stat(self.root / rel).st_mtime_ns)
            except OSError:
                sig.append(None)
        for name in ("index", "HEAD", "logs/HEAD"):
            try:
                st = os.stat(self.root / ".git" / name)
                sig.append((st.st_mtime_ns, st.st_size))
            except OSError:
                sig.append(None)
        return tuple(sig)

    def refresh_if_changed(self) -> bool:
        with self._lock:
            changed = self._changes_signature() != self._signature or self._stamp() != self._state_stamp
        if changed or time.monotonic() - self._last_full >= FULL_CHECK_EVERY:
            self.refresh()
            return True
        return False

    def refresh(self) -> None:
        """Bring the loaded index up to date (git runs before the lock, so queries go on)."""
        from cortex.search.freshness import GitProbe
        probe = GitProbe.start(self.root).result()
        with self._lock:
            try:
                if self._stamp() != self._state_stamp:
                    # Another process (`cortex query`, `cortex index --rebuild`) rewrote the index on
                    # disk: reopen it whole, even when no note changed, so no searcher outlives its files.
                    self.index.load(vectors=True)
                report = self.index.refresh(probe)
            except Exception as exc:  # deleted (`git clean -X`, `rm -rf .cortex`) or damaged
                report = self.index.rebuild_if_damaged(exc, log)
            self._state_stamp = self._stamp()
            self._signature = self._changes_signature()
            self._last_full = time.monotonic()
        if report.touched:
            log(f"index updated: {report.added} added, {report.changed} changed, {report.moved} moved, {report.deleted} deleted")

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
        if self._ready.is_set() and not self._load_error and not self._stop.is_set():
            self.refresh()

    # --- reads ------------------------------------------------------------------------------

    def query(self, text: str, *, limit: int = 10, mode: str = "hybrid", **filters) -> list[dict]:
        from cortex.search.query import search

        if not text or not text.strip():
            raise ToolFailure("text is empty: say what to look for, or use `recent` for the latest memories")
        if len(text) > MAX_QUERY_CHARS:
            raise ToolFailure(f"text is {len(text)} characters: keep a query under {MAX_QUERY_CHARS} (the words that matter)")
        if mode not in ("hybrid", "lexical", "semantic"):
            raise ToolFailure(f"mode {mode!r}: use hybrid, lexical or semantic")
        flt = self._filters(**filters)
        limit = _limit(limit)
        self.wait_ready()
        hits = self._searching(lambda: search(self.resident, text, filters=flt, limit=limit, mode=mode))
        self._ids.update((h.id, h.path) for h in hits if h.id)
        return [_hit_record(rank, h) for rank, h in enumerate(hits, start=1)]

    def _searching(self, ask):
        """Run a search under the lock; an index whose files cannot be read is rebuilt
        (it is a cache) and the search asked again."""
        with self._lock:
            try:
                return ask()
            except Exception as exc:
                self.index.rebuild_if_damaged(exc, log)
                self._state_stamp = self._stamp()
                return ask()

    def recent(self, *, within: str = "7d", limit: int = 10, **filters) -> list[dict]:
        from cortex.search.query import recent

        since = when(within, "within")
        flt = self._filters(**filters)
        if flt.since is not None:
            since = flt.since if since is None else max(since, flt.since)
        limit = _limit(limit)
        self.wait_ready()
        hits = self._searching(lambda: recent(self.resident, since, filters=flt, limit=limit))
        self._ids.update((h.id, h.path) for h in hits if h.id)
        return [_hit_record(rank, h, scored=False) for rank, h in enumerate(hits, start=1)]

    def _filters(self, *, types=None, categories=None, partitions=None, tags=None, entities=None, attributions=None,
                 since=None, until=None, archived=False):
        from cortex.search.query import Filters, unknown_values

        flt = Filters(types=_as_tuple(types), categories=_as_tuple(categories), partitions=_as_tuple(partitions),
                      tags=_as_tuple(tags), entities=_as_tuple(entities), attributions=_as_tuple(attributions),
                      since=when(since, "since"), until=when(until, "until"), archived=bool(archived))
        for field_, bad, allowed in unknown_values(flt, self.index.taxonomy):
            raise ToolFailure(f"{field_} {bad}: not known here; use any of {', '.join(allowed)}")
        return flt

    def get_note(self, ref: str) -> dict:
        from cortex.notes import NoteSyntaxError, parse_note

        ref = (ref or "").strip()
        if not ref:
            raise ToolFailure("give a note id (from query results) or a path like mind/facts/2026-02-16-e7f4a2b9.md")
        rel = note_path(self.root, ref) or self._path_for_id(ref)
        try:
            text = read_note_bytes(self.root, rel, self.vault.settings.limits.max_note_bytes).decode("utf-8")
        except UnreadableNote as exc:  # a link (to .git/config, outside the vault) or a huge file
            if exc.link:
                raise ToolFailure(f"{exc}: it could lead outside the vault or into .git/; cortex reads notes only") from None
            raise ToolFailure(str(exc)) from None
        except FileNotFoundError:
            raise ToolFailure(f"no note at {rel}: it may have been moved or archived; search for it with `query`") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolFailure(f"cannot read {rel}: {exc}") from None
        try:
            note = parse_note(text)
            meta, body = dict(note.meta), note.body
        except NoteSyntaxError as exc:
            meta, body = {"frontmatter_error": f"line {exc.line}: {exc}"}, text
        return {"path": rel, "id": meta.get("id", ""), "type": meta.get("type", ""), "title": meta.get("title", ""),
                "frontmatter": meta, "body": body.strip("\n")}

    def _path_for_id(self, ident: str) -> str:
        if not _ID_RE.match(ident):
            raise ToolFailure(f"{ident!r} is neither a note id nor a note path (vault/... or mind/..., ending in .md)")
        known = self._ids.get(ident)
        if known and _note_id(self.root / known) == ident:
            return known
        found = find_note_by_id(self.root, ident)
        if found is None:
            raise ToolFailure(f"no note with id {ident!r}: use an id or path from `query` or `recent` results")
        self._ids[ident] = found
        return found

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
        if self._ready.is_set():
            server["index"] = {"error": self._load_error} if self._load_error else {"notes": self._doc_count()}
        else:
            server["index"] = {"loading": True}
        out["server"] = server
        return out

    def _doc_count(self) -> int:
        with self._lock:
            return self.index.lexical.doc_count()


def _limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < 1:
        raise ToolFailure(f"limit {limit!r}: use a whole number from 1 to {MAX_LIMIT}")
    return min(limit, MAX_LIMIT)


def _hit_record(rank: int, hit, *, scored: bool = True) -> dict:
    record = {"rank": rank, "id": hit.id, "path": hit.path, "type": hit.type, "title": hit.title,
              "created": hit.created, "score": hit.score, "archived": hit.archived, "attribution": hit.attribution,
              "tags": hit.tags, "entities": hit.entities, "text": hit.snippet}
    if not scored:  # the temporal view orders by time: its "score" is a timestamp
        del record["score"]
    return record


def _report_dict(report) -> dict:
    to_json = getattr(report, "to_json", None)
    if callable(to_json):
        data = to_json()
        return json.loads(data) if isinstance(data, str) else data
    return dict(getattr(report, "__dict__", {}))
