"""Asking the index a question: one path for `cortex query`, `cortex index` and the MCP server.

A `Session` owns one vault's `SearchIndex` and knows the index's life: opened (rebuilt
when missing or from another format), brought up to date, answered from, and rebuilt
and asked again when its files turn out to be damaged. Callers state a `Question` and
get an `Answer`; how they print it is theirs.

    cortex query   Session.open -> ask(question, probe): answer from the index as it
                   is while `git status` runs, then check freshness, and answer again
                   only when notes changed (the exception)
    cortex index   Session.update(probe)
    MCP server     live.LiveIndex keeps a Session loaded and fresh; each tool call asks
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cortex.search.index import IndexUnavailable, Progress, SearchIndex, UpdateReport, damaged_index, stderr_progress
from cortex.search.query import Hit, recent, search
from cortex.search.question import Question

if TYPE_CHECKING:
    import threading


@dataclass
class Answer:
    hits: list[Hit]
    report: UpdateReport  # what bringing the index up to date did on the way
    hidden: int = 0  # archived notes that would have answered an empty answer


def one_blas_thread() -> None:
    """A query multiplies one vector by the matrix: OpenBLAS's thread pool would cost ~60 ms
    of start-up and add jitter, and buy nothing. Effective only before numpy is imported."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


class BuildStopped(Exception):
    """A rebuild given up between two batches because its process is stopping: the index
    is left without its state file, so the next process to open it builds it again."""


class Session:
    def __init__(self, root: Path | str, *, model: str | None = None, say: Callable[[str], None] = lambda _m: None,
                 stopping: threading.Event | None = None):
        one_blas_thread()  # every process that searches: the CLI, the MCP server, the watcher
        self.root = Path(root)
        self.say = say  # one line for the person: "index updated (...)", "rebuilding ..."
        self.index = SearchIndex(self.root, model=model)
        self.stopping = stopping  # set by a long-lived process whose rebuild should give up

    def _progress(self) -> Progress:
        """The rebuild's progress on stderr, raising ``BuildStopped`` between two batches
        once ``stopping`` is set."""
        shown = stderr_progress()
        if self.stopping is None:
            return shown

        def report(done: int, total: int) -> None:
            if self.stopping.is_set():
                raise BuildStopped(f"stopped after {done} of {total} notes")
            shown(done, total)

        return report

    # --- the index's life ----------------------------------------------------------------

    def open(self, *, vectors: bool = True) -> UpdateReport:
        """Load the index, building it when missing, foreign or unreadable (then the
        report says `rebuilt`)."""
        try:
            self.index.load(vectors=vectors)
        except IndexUnavailable as exc:
            self.say(f"{exc}: rebuilding the search index")
            report = self.index.rebuild(progress=self._progress(), reason=str(exc), force=False)
            self.tell_skipped(report)
            return report
        return UpdateReport(notes=self.index.lexical.doc_count())

    def refresh(self, probe=None, *, quiet: bool = False) -> UpdateReport:
        """Bring the loaded index up to date with the notes (`probe`: a started
        `freshness.GitProbe`, git's word on what changed)."""
        report = self.index.refresh(probe)
        if report.touched and not quiet:
            self.say(f"index updated ({report.summary()})")
        self.tell_skipped(report)
        return report

    def recover(self, exc: BaseException) -> UpdateReport:
        """After `exc`: rebuild an index whose files could not be read, saying so; any
        other exception is re-raised."""
        if not damaged_index(exc):
            raise exc
        self.say(f"the search index is unreadable ({exc}): rebuilding it")
        report = self.index.rebuild(progress=self._progress(), reason=f"unreadable: {exc}")
        self.tell_skipped(report)
        return report

    def update(self, probe=None, *, rebuild: bool = False) -> UpdateReport:
        """`cortex index`: rebuild when asked or needed, else apply what changed."""
        if rebuild:
            report = self.index.rebuild(progress=self._progress(), reason="--rebuild")
            self.tell_skipped(report)
            return report
        try:
            report = self.open(vectors=True)
            return report if report.rebuilt else self.refresh(probe, quiet=True)
        except Exception as exc:
            return self.recover(exc)

    def watcher_probe(self):
        """For a session kept loaded (the watcher's, the MCP server's): the index read
        afresh if another process replaced it on disk, then a probe asking the watcher
        what changed since this index's own token."""
        from cortex.search.freshness import GitProbe

        self.reread_if_rewritten()
        return GitProbe.start(self.root, since=self.index.state.watch or "")

    def reread_if_rewritten(self) -> None:
        """For a session kept loaded: the index read afresh when another process replaced
        it on disk, or a file it reads mapped was changed under it (read as it is, a file
        cut short would end the process); `IndexUnavailable` when it is damaged."""
        if self.index.rewritten():
            self.index.load(vectors=True)

    def tell_skipped(self, report: UpdateReport) -> None:
        for line in report.skipped:
            self.say(f"warning: {line}")

    # --- questions -----------------------------------------------------------------------

    def ask(self, question: Question, probe=None, *, count_hidden: bool = False) -> Answer:
        """Answer from the loaded index. With `probe`, freshness is checked after the
        first answer (git's status runs meanwhile) and the question asked again only if
        notes changed; before it when the probe's answer is in already (the watcher's).
        A damaged index is rebuilt and the question asked again. `count_hidden`: for an
        empty answer, also count the archived notes that would have answered."""
        report = UpdateReport()
        try:
            if probe is not None and probe.answered:  # the watcher's word, in already: update, then answer once
                report = self._freshen(probe)
                hits = self._answer(question)
            else:
                hits = self._answer(question)
                if probe is not None:
                    report = self._freshen(probe)
                    if report.touched:
                        hits = self._answer(question)
        except Exception as exc:
            report = self.recover(exc)
            hits = self._answer(question)
        hidden = 0
        if count_hidden and not hits and not question.filters.archived:
            wider = replace(question, filters=replace(question.filters, archived=True))
            hidden = len(self._answer(wider))
        return Answer(hits=hits, report=report, hidden=hidden)

    def _freshen(self, probe) -> UpdateReport:
        """`refresh` for a question: when another process holds the index past lock_timeout
        (a stopped `cortex index`), the answer comes from the index as it is."""
        from cortex.errors import LockBusy

        try:
            return self.refresh(probe)
        except LockBusy as exc:
            self.say(f"{exc.message}: answering from the index as it is")
            return UpdateReport()

    def _answer(self, q: Question) -> list[Hit]:
        if q.listing:
            return recent(self.index, q.filters.since, filters=q.filters, limit=q.limit)
        return search(self.index, q.text, filters=q.filters, limit=q.limit, mode=q.mode, min_score=q.min_score)
