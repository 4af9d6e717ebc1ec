"""`cortex index` and `cortex query`: thin shells over cortex.search.

Scripts call `cortex query` in loops, so this module imports only the standard library
and the CLI's conventions; Whoosh, numpy and the model load inside the commands, and only the parts a
query needs (`--lexical-only` never imports numpy unless the index must change). While
`cortex watch` runs, a query is answered by the watcher, which keeps the index loaded
(`cortex.search.served`), and loads none of them.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn, Optional

from cortex.cli.app import arg, autowatch, command, emit_failure, emit_json, emit_jsonl, flag, info, opt
from cortex.errors import CortexError, UsageError, os_said

MODEL_ENV = "CORTEX_SEARCH_MODEL"
MODEL_HELP = f"A model2vec model folder to embed with (default: ${MODEL_ENV}, else the shipped model)."


class _Failed(Exception):
    """A problem reported to the user; the command exits 2."""


def _target(model: Optional[str]):
    """(vault root, model): the vault found, the model `--model` or $CORTEX_SEARCH_MODEL
    names (None: the shipped one)."""
    return _vault_root(), model or os.environ.get(MODEL_ENV) or None


def _tell(said: list) -> None:
    """What the watcher said while it answered ("index updated (...)"), as this command
    would have said it."""
    for line in said:
        info(f"cortex: {line}")


def _session(model: Optional[str], root):
    """(Session, probe): git's status probe started first, so it runs while the heavy
    modules import."""
    from cortex.search.freshness import GitProbe, search_token

    probe = GitProbe.start(root, since=search_token(root))
    from cortex.search.session import Session

    return Session(root, model=model, say=lambda m: info(f"cortex: {m}")), probe


def _vault_root():
    """The vault's root (``cortex.layout.find_vault``, as every command finds it),
    without importing the write path (~20 ms a query)."""
    from cortex.cli.app import _options
    from cortex.layout import find_vault

    return find_vault(_options.get("vault")).resolve()


def _search_errors(exc: Exception) -> NoReturn:
    """Turn what a search command can meet into exit 2 with one line (and, with --json,
    the failure's document: `emit_failure`); re-raise the rest."""
    embed = sys.modules.get("cortex.embed")  # loaded if a model was: only then can it fail
    if isinstance(exc, _Failed):
        exc = UsageError(str(exc))
    elif isinstance(exc, OSError):  # a full disk, a read-only checkout: an error, never "nothing found"
        from cortex.fsutil import folder_in_the_way

        exc = folder_in_the_way(exc) or CortexError(os_said(exc))
    elif embed is not None and isinstance(exc, embed.ModelError):
        exc = CortexError(str(exc))
    elif not isinstance(exc, CortexError):
        raise exc
    if exc.exit_code == 1:  # a broken taxonomy.yml: an error, not "nothing found"
        exc.exit_code = 2
    info(f"cortex: {exc}")
    emit_failure(exc)
    raise SystemExit(exc.exit_code) from None


MODEL = opt("--model", metavar="PATH", help=MODEL_HELP)


@command(
    flag("--rebuild", help="Rebuild from every note instead of updating what changed."),
    MODEL,
    flag("--json", dest="json_", help="Print the update report as JSON on stdout."),
)
def index(rebuild: bool, model: Optional[str], json_: bool) -> None:
    """Update the search index (in .git/cortex/search/; only added, changed, moved or deleted notes).

    While `cortex watch` runs, the watcher makes the update on the index it keeps loaded."""
    try:
        root, model = _target(model)
        from cortex.search.served import update

        served = None if rebuild else update(root, model)  # the watcher's own index, when one runs
        if served is not None:
            _tell(served["said"])
            report, summary, touched = served["report"], served["summary"], served["touched"]
        else:
            session, probe = _session(model, root)
            try:
                done = session.update(probe, rebuild=rebuild)
            finally:
                session.index.close()
                probe.close()
            report, summary, touched = done.as_dict(), done.summary(), done.touched
    except Exception as exc:
        _search_errors(exc)
    if json_:
        emit_json(report)
    else:
        what = "rebuilt" if report["rebuilt"] else "up to date" if not touched else "updated"
        info(f"search index {what}: {report['notes']} notes ({summary}) in {report['seconds']:.2f}s")
    if served is None:
        autowatch(root)


def _when(text: Optional[str], option: str) -> Optional[float]:
    from cortex.timefmt import parse_when

    try:
        return parse_when(text)
    except ValueError as exc:
        raise _Failed(f"{option} {exc}") from None


def _all_text(arguments: dict) -> None:
    """A byte that is not UTF-8 in an argument (Latin-1 text a script passes) reaches
    Python as a lone surrogate (U+DC80-U+DCFF, os.fsdecode), which neither the tokenizer
    nor the JSON output takes: said, where it was a crash."""
    import re

    for option, values in arguments.items():
        for value in [values] if isinstance(values, str) else values:
            bad = re.search("[\udc80-\udcff]", value)
            if bad:
                byte = ord(bad.group()) - 0xDC00
                raise _Failed(f"{option}: the byte 0x{byte:02X} at character {bad.start() + 1} is not UTF-8; pass the text as UTF-8")


@command(
    arg("text", optional=True, help="What to look for (optional with --recent, or with a filter to list its notes)."),
    opt("--limit", "-n", type=int, default=10, min=1, help="At most this many results."),
    flag("--json", dest="json_", help="Print {query, mode, count, results} as JSON (docs/query.md)."),
    flag("--jsonl", help="Print one JSON result per line."),
    flag("--paths", help="Print only the note paths, one per line."),
    opt("--type", "-t", dest="type_", repeat=True, help="Only notes of this type (repeat for any of several)."),
    opt("--category", repeat=True, help="Only this category: concept, entity, relation."),
    opt("--partition", repeat=True, help="Only this partition: mind or vault."),
    opt("--tag", repeat=True, help="Only notes with this tag or one nested in it (project: project/alpha too); "
                                   "repeat for any of several."),
    opt("--entity", repeat=True, help="Only notes mentioning this entity (by name)."),
    opt("--attribution", repeat=True, help="Only notes from this source."),
    opt("--since", help="Created at or after: a date, or a duration back (30d)."),
    opt("--until", help="Created before: a date, or a duration back."),
    flag("--archived", help="Include archived memories (mind/archive/)."),
    opt("--recent", metavar="DURATION", help="Notes of the last DURATION (7d), newest first; with TEXT, a --since filter."),
    flag("--lexical-only", help="BM25 only (for comparison)."),
    flag("--semantic-only", help="Embeddings only (for comparison)."),
    opt("--min-score", metavar="X", type=float, min=0.0, max=1.0,
        help="Drop results under this relevance, on its 0..1 scale (default: the calibrated floor; 0 keeps every "
             "candidate)."),
    MODEL,
)
def query(text: Optional[str], limit: int, json_: bool, jsonl: bool, paths: bool, type_: list[str], category: list[str],
          partition: list[str], tag: list[str], entity: list[str], attribution: list[str], since: Optional[str],
          until: Optional[str], archived: bool, recent: Optional[str], lexical_only: bool, semantic_only: bool,
          min_score: Optional[float], model: Optional[str]) -> int:
    """Search the memory: BM25 + embeddings fused, ranked by importance, confidence and recency.

    A time named in TEXT ("last week", "two days ago") puts the notes of that time
    first; "what happened yesterday?" lists that day's notes.

    Exit status: 0 found, 1 nothing found, 2 error.
    """
    try:
        if lexical_only and semantic_only:
            raise _Failed("--lexical-only and --semantic-only exclude each other")
        if sum((json_, jsonl, paths)) > 1:
            raise _Failed("choose one of --json, --jsonl, --paths")
        listing = bool(type_ or category or partition or tag or entity or attribution)
        if not (text and text.strip()) and recent is None and not listing:
            raise _Failed("give TEXT to search for, --recent DURATION (e.g. --recent 7d), "
                          "or a filter (--tag, --type, --entity, ...) to list its notes newest first")
        _all_text({"TEXT": text or "", "--type": type_, "--category": category, "--partition": partition,
                   "--tag": tag, "--entity": entity, "--attribution": attribution})
        mode = "lexical" if lexical_only else "semantic" if semantic_only else "hybrid"
        since_ts = _when(since, "--since")
        if recent is not None:
            recent_ts = _when(recent, "--recent")
            since_ts = recent_ts if since_ts is None else max(since_ts, recent_ts)
        until_ts = _when(until, "--until")
        from cortex.search.question import Filters, Question

        filters = Filters(
            types=tuple(type_), categories=tuple(category), partitions=tuple(partition), tags=tuple(tag),
            entities=tuple(entity), attributions=tuple(attribution), since=since_ts, until=until_ts, archived=archived,
        )
        question = Question(text=text or "", filters=filters, limit=limit, mode=mode, min_score=min_score)
        root, model = _target(model)
        from cortex.search.served import ask as ask_watcher

        served = ask_watcher(root, question, model)  # None: no watcher runs, or it declined
        if served is not None:
            _tell(served["said"])
            results, hidden, stats = served["results"], served["hidden"], served["index"]
        else:
            results, hidden, stats = _answer_here(root, question, model)
        if question.listing:
            mode = "recent" if recent is not None else "list"
    except Exception as exc:
        _search_errors(exc)
    if json_:
        emit_json({"query": text or "", "mode": mode, "count": len(results), "results": results, "index": stats})
    elif jsonl:
        emit_jsonl(results)
    elif paths:
        sys.stdout.write("".join(r["path"] + "\n" for r in results))
    else:
        _print_text(results, mode)
    if served is None:
        autowatch(root)
    if not results:
        if not (json_ or jsonl or paths):
            info("nothing found" + (f" ({hidden} archived memor{'y' if hidden == 1 else 'ies'} would match: add --archived)"
                                    if hidden else ""))
        return 1
    return 0


def _answer_here(root, question, model: Optional[str]) -> tuple[list, int, dict]:
    """The question answered in this process: (results, archived notes that would have
    answered an empty answer, the index's notes and whether this query updated it)."""
    from cortex.search.query import result_shape, unknown_values

    session, probe = _session(model, root)
    try:
        for field_, bad, allowed in unknown_values(question.filters, session.index.taxonomy):
            raise _Failed(f"--{field_} {', '.join(bad)}: not known here; use any of {', '.join(allowed)}")
        opened = session.open(vectors=question.needs_vectors)
        answer = session.ask(question, probe=None if opened.rebuilt else probe, count_hidden=True)
        report = opened if opened.rebuilt else answer.report
        return (result_shape(answer.hits), answer.hidden,
                {"notes": report.notes or session.index.lexical.doc_count(), "updated": report.touched})
    finally:  # not left to the collector (a ResourceWarning each): the index's files, git's status
        session.index.close()
        probe.close()


def _print_text(results: list, mode: str) -> None:
    out = []
    for r in results:
        why = r["why"]
        reasons = [f"{k} {why[k]:.2f}" for k in ("relevance", "lexical", "matched", "semantic", "effective_importance",
                                                 "confidence", "recency") if k in why]
        meta = " · ".join(x for x in (r["type"], (r["created"] or "")[:10], "archived" if r["archived"] else "") if x)
        where = f"{r['path']}  ({meta})" if meta else r["path"]  # a person's note may have neither type nor date
        if mode in ("recent", "list"):  # a listing, newest first: no relevance to show
            out.append(f"{r['rank']}. {r['title']}\n   {where}\n")
        else:
            out.append(f"{r['rank']}. {r['title']}\n   {where}\n   score {r['score']:.3f}: {', '.join(reasons)}\n")
            if r.get("via"):
                out.append(f"   reached through {r['via']['entity']}, named by {r['via']['path']}\n")
            if r.get("when"):
                out.append(f"   created in the time asked about ({r['when']})\n")
        snippet = r["snippet"]
        if snippet and snippet != r["title"]:
            out.append(f"   {snippet[:200]}{'…' if len(snippet) > 200 else ''}\n")
    sys.stdout.write("".join(out))
