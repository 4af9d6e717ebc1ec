"""`cortex query` (and `cortex index`) answered by the running watcher, which keeps the
search index loaded.

A cold `cortex query` spends most of its time before it searches: Python imports numpy
and Whoosh, the index's files are opened and paged in, the model is read — and a vault's
index grows with it. While `cortex watch` runs, the daemon keeps one `Session` loaded
and answers the questions a query sends over its socket; the query process imports
neither numpy nor Whoosh and is done once it has printed the answer.

    cortex query ──"query <json>"──▶ watcher (socket) ──▶ QueryService thread
                 ◀──── results ────                      (Session: refresh, then answer)

**Fresh as a cold query is.** Before answering, the service brings its index up to date
with the same probe a cold query runs — the watcher's own word on what changed since the
index's last update — and reloads the index whole when another process rewrote it
(`cortex index --rebuild`, a cold query on a vault the watcher did not serve).

**Declined, never wrong.** The service answers only what a cold query would answer the
same way; everything else is declined with a reason and the query runs in its own
process as it does without a watcher: a watcher of another cortex install (upgraded
since it started), while the index loads (when the daemon starts, if
the vault has one, else on the first question), when there is none to load or it was
built with another model (the cold query rebuilds it, with its progress on the person's
terminal: the daemon never builds), another model than the daemon's, a filter value the
taxonomy does not know (the cold query says what is wrong), any error (the index is read
afresh for the next question). A watcher that is not running, killed or silent
(`TIMEOUT`) is a declined question too.

Threads: the daemon's loop answers git's and cortex's freshness questions and must
never wait on a search — one of them is the search's own probe — so questions are
queued to one worker thread that owns the session.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from dataclasses import asdict
from pathlib import Path

TIMEOUT = 120.0  # seconds a query waits for the daemon (an update after a big run included) before it asks alone


# -- the query's side ----------------------------------------------------------------------

def ask(root: Path, question, model: str | None) -> dict | None:
    """The running watcher's answer to ``question`` (a `Question`): {results, hidden,
    index, said}; or None when there is none to be had: no watcher, a declined question,
    a reply cut short. The query then answers it itself."""
    return _request(root, encode(question, model), "results")


def update(root: Path, model: str | None) -> dict | None:
    """`cortex index` done by the running watcher on the index it keeps: {report (the
    `UpdateReport` as a dict), summary, touched, said}; or None, as for `ask`."""
    return _request(root, {"op": "index", "model": model, "build": build()}, "report")


def _request(root: Path, request: dict, expected: str) -> dict | None:
    from cortex.fsmonitor import MAX_QUESTION, SOCKET, VERB, exchange
    from cortex.gitlock import git_dir_of

    try:
        where = str(git_dir_of(root))
    except OSError:
        return None
    if not os.path.exists(os.path.join(where, SOCKET)):
        return None
    line = VERB + b" " + json.dumps(request).encode() + b"\n"
    if len(line) > MAX_QUESTION:
        return None
    body = exchange(line, where, TIMEOUT)  # the socket module of the hook: it loads nothing
    if body is None:
        return None
    try:
        reply = json.loads(body)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) and expected in reply else None


def build() -> str:
    """Which cortex this process runs: its version, where its code lives and which files
    are there, taken once, at the first call (the watcher makes it as it starts). A
    watcher started by another install, or by this one before an upgrade, declines: its
    answer could differ. An upgrade in place (``pip install --upgrade`` into the same
    virtualenv, a ``git pull`` of the checkout) keeps the version and the folder, so the
    files count: each one an upgrade writes is a new file (a new inode), read from the
    folders' listings without a stat. A file written over in place (an editor's save into
    an editable install) keeps its inode: the watcher sees that write itself
    (``code_edited``), and its build names it from then on."""
    return _taken() + _edited


@functools.cache
def _taken() -> str:
    import cortex

    where = code_folder()
    return f"{cortex.__version__} {where} {_files_stamp(where)}"


def code_folder() -> str:
    """Where this process's cortex code lives."""
    import cortex

    return os.path.dirname(os.path.abspath(cortex.__file__))


_edited = ""  # a file of this process's code written over since its build was taken


def code_edited(path: str) -> None:
    """A file of this process's code was written over in place (``path``): the code it
    loaded may no longer be what a new process loads, so its build says so."""
    global _edited
    _taken()
    _edited = _edited or f" (then {path} written over)"


def _files_stamp(top: str) -> str:
    """A digest of the names and inodes of the files under ``top`` (not the bytecode
    Python caches beside them, which it writes as it pleases)."""
    import hashlib

    digest = hashlib.sha256()
    folders = [top]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != "__pycache__":
                            folders.append(entry.path)
                    else:
                        digest.update(f"{entry.path}\0{entry.inode()}\n".encode("utf-8", "surrogateescape"))
        except OSError:
            digest.update(f"{folder}\0?\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]


def encode(question, model: str | None) -> dict:
    return {"text": question.text, "filters": asdict(question.filters), "limit": question.limit,
            "mode": question.mode, "min_score": question.min_score, "model": model, "build": build()}


def decode(request: dict):
    """The `Question` a request states; ValueError for anything else."""
    from cortex.search.question import Filters, Question

    if not isinstance(request, dict):
        raise ValueError("a question is a JSON object")
    raw = request.get("filters") or {}
    if not isinstance(raw, dict) or set(raw) - set(Filters.__dataclass_fields__):
        raise ValueError("unknown filters")
    filters = {}
    for name, value in raw.items():
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise ValueError(f"filter {name} holds a value that is not text")
            value = tuple(value)
        elif name in ("since", "until") and value is not None and not isinstance(value, (int, float)):
            raise ValueError(f"filter {name} is not a time")
        filters[name] = value
    text, limit, mode, floor = request.get("text", ""), request.get("limit", 10), request.get("mode"), request.get("min_score")
    if not isinstance(text, str) or not isinstance(limit, int) or limit < 1 or mode not in ("hybrid", "lexical", "semantic"):
        raise ValueError("a question needs text, a limit and a mode")
    if floor is not None and not isinstance(floor, (int, float)):
        raise ValueError("min_score is not a number")
    return Question(text=text, filters=Filters(**filters), limit=limit, mode=mode, min_score=floor)


# -- the daemon's side ---------------------------------------------------------------------

_STOP = object()  # queued by `QueryService.close`: the worker ends

class QueryService:
    """One vault's questions, answered in order by one thread that owns the `Session`."""

    def __init__(self, root: Path, reply) -> None:
        import queue

        self.root = Path(root)
        self.model = os.environ.get("CORTEX_SEARCH_MODEL") or None  # as a query started here would use
        self._reply = reply  # (connection, body): sends the framed body and closes
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._session = None
        self._said: list[str] = []
        self.state = "idle"  # idle → loading → ready; back to idle when the index could not be read (why)
        self.why = ""
        self.counts = {"served": 0, "declined": 0}
        self._thread = threading.Thread(target=self._work, name="cortex-query", daemon=True)
        self._thread.start()

    def submit(self, conn, line: bytes) -> None:
        """Called on the daemon's loop: queue the question; a service not ready declines
        at once (and the first question starts the load)."""
        if self.state != "ready":
            self.preload()
            self.counts["declined"] += 1
            self._reply(conn, self._declined("the search index is loading" + (f" ({self.why})" if self.why else "")))
            return
        self._queue.put((conn, line))

    def preload(self) -> None:
        """Start loading the index, unless it is loading or loaded."""
        if self.state == "idle":
            self.state = "loading"
            self._queue.put(None)

    def status(self) -> dict:
        return {"state": self.state, **self.counts, **({"why": self.why} if self.why else {})}

    def close(self, timeout: float = 10.0) -> None:
        """End the worker after the question it is answering, and wait for it: a daemon
        thread still inside native code (the tokenizer, numpy, with the GIL released) when
        the interpreter finalises is unwound by force there, and the process aborts."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _declined(self, why: str) -> bytes:
        return json.dumps({"declined": why}).encode()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            if job is None:
                self._load()
                continue
            conn, line = job
            try:
                body = json.dumps(self.answer(line), ensure_ascii=False).encode()
            except (ValueError, TypeError) as exc:  # a question that is not one
                body = self._declined(f"{type(exc).__name__}: {exc}")
            except Exception as exc:  # the query answers alone; this index is read afresh for the next
                self._session, self.state, self.why = None, "idle", f"{type(exc).__name__}: {exc}"
                body = self._declined(self.why)
            if body.startswith(b'{"declined"'):
                self.counts["declined"] += 1
            else:
                self.counts["served"] += 1
            self._reply(conn, body)

    def _load(self) -> None:
        """Open the index as it is on disk. Never built here: a missing index, or one built
        with another model, is the cold query's to rebuild (with its progress on the
        person's terminal); the next question tries again."""
        from cortex.search.question import Question
        from cortex.search.session import Session

        try:
            session = Session(self.root, model=self.model, say=self._said.append)
            session.index.load(vectors=True)
            session.ask(Question("warm up", limit=1))  # the model, vectors and searcher paged in
        except Exception as exc:
            self.state, self.why = "idle", f"{type(exc).__name__}: {exc}"
            return
        self._said.clear()
        self._session, self.state, self.why = session, "ready", ""

    def answer(self, line: bytes) -> dict:
        """What `cortex query` prints for the question in ``line`` (or `cortex index` for
        an update), or why it is declined."""
        from cortex.search.query import result_shape, unknown_values

        request = json.loads(line)
        if not isinstance(request, dict) or request.get("op", "query") not in ("query", "index"):
            raise ValueError("a request is a JSON object asking a query or an index update")
        question = decode(request) if request.get("op", "query") == "query" else None
        if request.get("build") != build():
            return {"declined": f"the watcher runs cortex {build()}: restart it (`cortex watch --stop`, then start it)"}
        if request.get("model") != self.model:
            return {"declined": f"the watcher searches with model {self.model or 'shipped'}"}
        session = self._session
        if question is not None and unknown_values(question.filters, session.index.taxonomy):
            return {"declined": "a filter value the taxonomy does not know"}
        self._said.clear()
        probe = session.watcher_probe()
        if question is None:  # `cortex index`: the update a query would make first, and its report
            report = session.refresh(probe, quiet=True)
            return {"report": report.as_dict(), "summary": report.summary(), "touched": report.touched,
                    "said": list(self._said)}
        answer = session.ask(question, probe=probe, count_hidden=True)
        return {"results": result_shape(answer.hits), "hidden": answer.hidden, "said": list(self._said),
                "index": {"notes": answer.report.notes or session.index.lexical.doc_count(),
                          "updated": answer.report.touched}}
