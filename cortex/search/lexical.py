"""The lexical side: a Whoosh (BM25F) index of note text plus the stored fields that
filters, ranking and output read back. The only module that imports Whoosh; it
implements `backend.LexicalBackend`, so callers see paths, never Whoosh's docnums, and
`IndexDamaged`, never the many exceptions Whoosh raises on a damaged segment.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import importlib
import math
import re
import sys
import types
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import Callable, Iterable, Iterator

from cortex.search.backend import IndexDamaged, LexicalHits
from cortex.search.records import LIST_SEP, TS_PER_SECOND, NoteRecord, snippet_of

INDEX_NAME = "notes"
MAX_DF = 0.2
# A term in fewer notes than this is never pruned: in a small vault a fifth of the notes
# is a handful, and the words a person searches for are exactly those.
MIN_PRUNED_DF = 50
POSTINGS_BUDGET = 4000
# From this many notes the time order is read with numpy even by a command that has not
# loaded it (a `--recent` listing): the value-at-a-time read costs 3-5 µs a note.
FAST_TIME_ORDER = 20_000
# Words that shape a question but name no topic, as the analyzer leaves them (stemmed).
# Whoosh's stop list keeps them, and a vault of short statements rarely contains them:
# as unknown terms they would weigh most in the query's ceiling ("which database did we
# choose": "which", "did" and "choos" outweighing "databas"), as matched ones they are
# noise. A query made only of them keeps them. Each is written as the analyzer leaves it
# ("was" -> "wa", "they" -> "thei"): a plain "was" is never a term and matched nothing.
QUESTION_WORDS = frozenset("""
what which who whom whose where why how did do doe done me my mine our thei them
their he him hi she her there here wa were been ha had am could would
should shall must might ani some someth anyth about tell know rememb recal again
""".split())


def _import_whoosh():
    """Import Whoosh without its slow imports of what cortex never uses.

    `whoosh.compat` imports `urllib.request` (http.client, email, ssl: ~35 ms) only to
    re-export `urlretrieve`, and `html` (a table of 2,231 entities, ~8M instructions) for
    highlighting's `escape`; `whoosh.reading` imports the `cached_property` package,
    which imports asyncio (~25 ms), and `whoosh.query.terms` imports the English
    morphology table for `Variations` queries, which cortex never makes. A query command
    pays for every import, so for the duration of Whoosh's import those names resolve to
    light stand-ins, which import the real module if ever called; the real modules stay
    importable afterwards.
    """
    if "whoosh.index" in sys.modules:
        return
    stand_ins = {}
    if "urllib.request" not in sys.modules:
        mod = types.ModuleType("urllib.request")

        def urlretrieve(*args, **kwargs):  # never called by the parts cortex uses
            return _real("urllib.request").urlretrieve(*args, **kwargs)

        mod.urlretrieve = urlretrieve
        stand_ins["urllib.request"] = mod
    if "html" not in sys.modules:
        mod = types.ModuleType("html")

        def escape(*args, **kwargs):  # highlighting's, which cortex never asks for
            return _real("html").escape(*args, **kwargs)

        mod.escape = escape
        stand_ins["html"] = mod
    if "cached_property" not in sys.modules:
        mod = types.ModuleType("cached_property")
        mod.cached_property = functools.cached_property
        stand_ins["cached_property"] = mod
    if "whoosh.lang.morph_en" not in sys.modules:  # a large regex table (~7 ms), for Variations only
        mod = types.ModuleType("whoosh.lang.morph_en")

        def variations(word):
            return _real("whoosh.lang.morph_en").variations(word)

        mod.variations = variations
        stand_ins["whoosh.lang.morph_en"] = mod
    sys.modules.update(stand_ins)
    try:
        import whoosh.index  # noqa: F401
        import whoosh.query  # noqa: F401
        import whoosh.searching  # noqa: F401
    finally:
        for name, mod in stand_ins.items():
            if sys.modules.get(name) is mod:
                del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if parent in sys.modules and getattr(sys.modules[parent], child, None) is mod:
                delattr(sys.modules[parent], child)


def _real(name: str):
    """The real module behind a stand-in (imported on first use)."""
    if getattr(sys.modules.get(name), "__file__", None) is None:
        sys.modules.pop(name, None)
    return importlib.import_module(name)


@functools.lru_cache(maxsize=1)
def analyzer():
    _import_whoosh()
    from whoosh.analysis import LowercaseFilter, RegexTokenizer, StemFilter, StopFilter

    # Whoosh's StemmingAnalyzer, with accents folded before the stemmer sees a word, and
    # Chinese and Japanese, written without spaces, cut into pairs of characters (and, as
    # indexed, single characters too). The stop filter's rule that a term has two
    # characters at least is `CjkPairs`'s, which keeps a Chinese or Japanese character.
    return (RegexTokenizer() | LowercaseFilter() | _fold_accents()() | _cjk_pairs()() | StopFilter(minsize=1)
            | StemFilter())


# Letters that are not an ASCII letter plus a mark (NFKD leaves them whole).
_WHOLE_LETTERS = str.maketrans({"ø": "o", "ł": "l", "đ": "d", "ß": "ss", "æ": "ae", "œ": "oe", "þ": "th", "ı": "i"})


def fold_accents(text: str) -> str:
    """``text`` with its accents taken off ("Zürich", "café" -> "Zurich", "cafe")."""
    if text.isascii():
        return text
    import unicodedata

    decomposed = unicodedata.normalize("NFKD", text.translate(_WHOLE_LETTERS))
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    # NFKD takes a Hangul syllable apart into its letters (jamo), which are no marks:
    # put back together, so a Korean word stays the syllables it is searched by.
    return unicodedata.normalize("NFC", bare) if any("\u1100" <= ch <= "\u11ff" for ch in bare) else bare


@functools.cache
def _fold_accents():
    """A Whoosh filter taking accents off tokens (`fold_accents`: "café" matches "cafe").

    Built on first use (Whoosh is imported lazily) and published as a module attribute,
    because Whoosh pickles the analyzer into the index's table of contents and must find
    the class again by name when the index is opened."""
    from whoosh.analysis import Filter

    class FoldAccents(Filter):
        def __call__(self, tokens):
            for token in tokens:
                token.text = fold_accents(token.text)
                yield token

    FoldAccents.__module__ = __name__
    FoldAccents.__qualname__ = "FoldAccents"
    globals()["FoldAccents"] = FoldAccents
    return FoldAccents


# Han ideographs (and their extension A), hiragana and katakana: scripts written without
# spaces, where a sentence is one "word" to the tokenizer. And Hangul syllables: Korean is
# written with spaces, but a particle or an ending joins the word it follows
# ("데이터베이스를", the database as an object), so the word alone found no note; as pairs,
# "데이터베이스" is found in every form of it.
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff]+")


def cjk_pairs(text: str, *, singles: bool = False) -> list[str]:
    """``text`` as the terms it is searched by: itself, or where it holds Chinese,
    Japanese or Korean, its other parts and each run of those characters as overlapping pairs
    ("数据库" -> "数据", "据库"), the usual unit of search in those scripts; a lone
    character stays whole. ``singles`` (a note's text as indexed): each character of a
    run too, so that a word of one character ("猫") finds the notes holding it, while a
    query of two characters or more is still asked by its pairs."""
    if text.isascii() or not _CJK_RUN.search(text):
        return [text]
    out, at = [], 0
    for run in _CJK_RUN.finditer(text):
        if run.start() > at:
            out.append(text[at:run.start()])
        chars = run.group()
        out += [chars] if len(chars) == 1 else [chars[i:i + 2] for i in range(len(chars) - 1)]
        if singles and len(chars) > 1:
            out += chars
        at = run.end()
    if at < len(text):
        out.append(text[at:])
    return out


@functools.cache
def _cjk_pairs():
    """A Whoosh filter yielding `cjk_pairs` of each token, less those of one character
    other than a Chinese or Japanese one, as Whoosh's stop filter leaves them out
    (published as `_fold_accents` is)."""
    from whoosh.analysis import Filter

    class CjkPairs(Filter):
        def __call__(self, tokens):
            for token in tokens:
                parts = cjk_pairs(token.text, singles=token.mode == "index")
                if len(parts) == 1 and len(parts[0]) > 1:
                    yield token
                    continue
                for part in parts:
                    if len(part) > 1 or _CJK_RUN.match(part):  # a lone letter or digit is no term
                        token.text = part
                        yield token

    CjkPairs.__module__ = __name__
    CjkPairs.__qualname__ = "CjkPairs"
    globals()["CjkPairs"] = CjkPairs
    return CjkPairs


def __getattr__(name: str):
    # unpickling an index's analyzer, before any query built one
    if name == "FoldAccents":
        return _fold_accents()
    if name == "CjkPairs":
        return _cjk_pairs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=1)
def schema():
    _import_whoosh()
    from whoosh.fields import ID, NUMERIC, STORED, TEXT, Schema

    # Only `path`, `dir`, `text` and `ts` are searched in Whoosh; filters read the other
    # fields back from the stored document, so they cost no postings.
    return Schema(
        path=ID(stored=True, unique=True),
        dir=ID,
        text=TEXT(analyzer=analyzer(), phrase=False),
        ts=NUMERIC(int, bits=64, shift_step=16, stored=True, sortable=True),
        hash=STORED,
        title=STORED,
        snippet=STORED,
        id=STORED,
        type=STORED,
        category=STORED,
        partition=STORED,
        archived=STORED,
        tags=STORED,
        entities=STORED,
        attribution=STORED,
        created=STORED,
        reinforced_ts=STORED,
        importance=STORED,
        confidence=STORED,
        mtime=STORED,
        size=STORED,
    )


def codec():
    """Whoosh's default codec without zlib on postings blocks: a rebuildable cache need
    not be small, and compressing every block was a fifth of the build time. (Writers
    also keep segments as separate files: opening a compound segment copies each part
    into memory, ~120 ms on every cold query of a 50,000-note vault.)"""
    from whoosh.codec.whoosh3 import W3Codec

    return W3Codec(compression=0)


def fields_of(record: NoteRecord) -> dict:
    return {
        "path": record.path,
        "dir": record.folder,
        "hash": record.content_hash,
        "text": record.text,
        "title": record.title,
        "snippet": snippet_of(record.body),
        "id": record.id,
        "type": record.type,
        "category": record.category,
        "partition": record.partition,
        "archived": record.archived,
        "tags": LIST_SEP.join(record.tags),
        "entities": LIST_SEP.join(record.entities),
        "attribution": record.attribution,
        "created": record.created,
        "ts": round(record.created_ts * TS_PER_SECOND),
        "reinforced_ts": float(record.last_reinforced_ts),
        "importance": record.importance,
        "confidence": record.confidence,
        "mtime": record.mtime_ns,
        "size": record.size,
    }


@contextmanager
def _reading() -> Iterator[None]:
    """Whoosh reports a truncated or overwritten segment with whatever its reader trips
    on (a bare ``Exception("Block tag error")``, struct, value or EOF errors): at this
    boundary any of them reading the index becomes `IndexDamaged`."""
    try:
        yield
    except (IndexDamaged, MemoryError):
        raise
    except Exception as exc:
        raise IndexDamaged(f"{type(exc).__name__}: {exc}") from exc


def _engine(method):
    """A reading method whose failures are `_reading`'s."""

    @functools.wraps(method)
    def reading(self, *args, **kwargs):
        with _reading():
            return method(self, *args, **kwargs)

    return reading


class LexicalIndex:
    """`LexicalBackend` on Whoosh. Stored fields and path lookups are kept for as long as
    the searcher they came from: a long-lived server (and a query reading the same note
    from both sides) does not pay twice for a read (on a 50,000-note vault that was half
    of a warm query)."""

    FOLDER = "whoosh"

    def __init__(self, directory: Path, ix):
        self.directory = directory
        self._ix = ix
        self._searcher = None
        self._fields: dict[int, dict] = {}
        self._docnums: dict[str, int | None] = {}
        self._lengths = None
        self._lengths_for = None
        self._time: tuple[list[int], list[int]] = ([], [])
        self._time_for = None
        self._stored_of = None
        self._stored_for = None

    @classmethod
    def create(cls, directory: Path) -> "LexicalIndex":
        _import_whoosh()
        from whoosh import index

        directory.mkdir(parents=True, exist_ok=True)
        return cls(directory, index.create_in(str(directory), schema(), indexname=INDEX_NAME))

    @classmethod
    @_engine
    def open(cls, directory: Path) -> "LexicalIndex":
        _import_whoosh()
        from whoosh import index

        return cls(directory, index.open_dir(str(directory), indexname=INDEX_NAME))

    # --- reading --------------------------------------------------------------------

    @property
    def searcher(self):
        if self._searcher is None:
            self._searcher = self._ix.searcher()
            self._fields.clear()  # docnums may have moved with the new searcher
            self._docnums.clear()
        return self._searcher

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None

    def refresh(self) -> None:
        self.close()

    @_engine
    def doc_count(self) -> int:
        return self.searcher.doc_count()

    def _doc(self, docnum: int) -> dict:
        fields = self._fields.get(docnum)
        if fields is None:
            fields = self._fields[docnum] = self._stored_reader()(docnum)
            self._docnums[fields["path"]] = docnum
        return fields

    def _stored_reader(self) -> Callable[[int], dict]:
        """docnum -> its stored fields, as `searcher.stored_fields` gives them, set up once
        per searcher: each segment's stored column read directly, its fields kept when the
        schema has them by a set lookup (Whoosh's reader calls the schema's `__contains__`
        for every field of every note read: a third of a read's 18 µs, on 50,000 notes
        ~0.4 ms of each warm query). Whoosh's own call where its reader is not this one."""
        searcher = self.searcher
        if self._stored_for is not searcher:
            self._stored_of, self._stored_for = searcher.stored_fields, searcher
            try:
                from whoosh.codec.whoosh3 import STORED_COLUMN

                leaves = list(searcher.reader().leaf_readers())
                columns = [reader._perdoc._cached_reader("_stored", STORED_COLUMN) for reader, _ in leaves]
                if all(column is not None for column in columns):
                    names = frozenset(searcher.schema.names())
                    bases = [base for _, base in leaves]

                    def stored(docnum: int) -> dict:
                        i = bisect.bisect_right(bases, docnum) - 1
                        sfs = columns[i][docnum - bases[i]]
                        return {} if sfs is None else {k: v for k, v in sfs.items() if k in names}

                    self._stored_of = stored
            except (AttributeError, ImportError, TypeError):
                pass
        return self._stored_of

    @_engine
    def stored(self, path: str) -> dict | None:
        searcher = self.searcher
        try:
            docnum = self._docnums[path]
        except KeyError:
            docnum = self._docnums[path] = searcher.document_number(path=path)
        return None if docnum is None else self._doc(docnum)

    @_engine
    def query_terms(self, text: str, max_df: float = MAX_DF, budget: int = POSTINGS_BUDGET) -> list[str]:
        """The query's terms worth matching, rarest first: each in at most `max_df` of the
        notes, and together in at most `budget` notes (the rarest term is always kept).

        A term in a large share of the notes adds little to BM25 (its idf is small) but
        makes Whoosh score every note that has it, in Python: bounding the postings a query
        visits bounds its time whatever the vault's size. On ../shared/bench this pruning
        also raises recall (LongMemEval R@10 0.638 -> 0.660): common words were noise.
        """
        return self._terms(text, max_df, budget)[0]

    def _terms(self, text: str, max_df: float = MAX_DF, budget: int = POSTINGS_BUDGET) -> tuple[list[str], dict[str, str]]:
        """(terms to match, rarest first; {term no note has: the word of the query it
        came from, lower-cased and without accents}): see `query_terms`."""
        reader = self.searcher.reader()
        total = max(1, reader.doc_count_all())
        tokens: dict[str, str] = {}
        for tok in analyzer()(text, mode="query", keeporiginal=True):
            tokens.setdefault(tok.text, tok.original)
        topical = [t for t in tokens if t not in QUESTION_WORDS]
        dfs = sorted((reader.doc_frequency("text", t), t) for t in (topical or tokens))
        unknown = {t: fold_accents(tokens[t].lower()) for df, t in dfs if df == 0}
        keep, visited = [], 0
        for df, term in dfs:
            if df == 0:
                continue
            if keep and (df > max(max_df * total, MIN_PRUNED_DF) or visited + df > budget):
                break
            keep.append(term)
            visited += df
        return keep, unknown

    @_engine
    def search(self, text: str, limit: int, **prune) -> list[tuple[str, float]]:
        """(path, BM25F score) of the best `limit` notes for a free-text query."""
        return [(path, score) for path, score, _ in self.search_evidence(text, limit, **prune).hits]

    @_engine
    def search_evidence(self, text: str, limit: int, *, created: tuple[float | None, float | None] | None = None,
                        **prune) -> LexicalHits:
        """The best `limit` notes for a free-text query, each with its BM25F score and the
        share of the query it matches, and the query's ceiling (`LexicalHits`); only the
        notes created in [since, until) when `created` gives them (either end None: open;
        told apart by docnum on the time order: no note outside is read).

        Term at a time: each term's postings are scored with Whoosh's BM25F formula and
        parameters and summed per note, which is what an `Or` query computes, without
        walking Whoosh's tree of union matchers note by note; field lengths come from one
        read of the length column per segment instead of a lookup per posting. Same
        ranking and scores as the `Or` query (a test compares them), a fraction of the time.
        """
        from whoosh.query import Term

        searcher = self.searcher
        if not searcher.doc_count_all():  # an empty vault: no idf to take (Whoosh's log(0) would raise)
            return LexicalHits(hits=[], ceiling=0.0)
        lengths, decode = self._field_lengths()
        weighting = searcher.weighting
        b = getattr(weighting, "_field_B", {}).get("text", getattr(weighting, "B", 0.75))
        k1 = getattr(weighting, "K1", 1.2)
        avgfl = searcher.avg_field_length("text") or 1
        scores: dict[int, float] = {}
        matched: dict[int, float] = {}
        get, got = scores.get, matched.get
        terms, unknown = self._terms(text, **prune)
        weight = sum(searcher.idf("text", t) for t in (*terms, *unknown))
        allowed = None if created is None else set(self._created_docnums(*created))
        # Whoosh's bm25(idf, tf, fl, avgfl, B, K1) is idf * ((tf * (K1 + 1)) / (tf + K1 * ((1 - B) + B * fl / avgfl))):
        # its length part taken once for each of the 256 encoded lengths instead of once
        # per posting (no call a posting either), the same operations on the same values
        k1_1 = k1 + 1
        norm = None if lengths is None else [k1 * ((1 - b) + b * fl / avgfl) for fl in decode]
        for term in terms:
            idf = searcher.idf("text", term)
            blocks = _posting_blocks(searcher, term) if lengths is not None else None
            if blocks is None:  # unknown codec: let Whoosh score each posting
                m = Term("text", term).matcher(searcher)
                while m.is_active():
                    docnum = m.id()
                    scores[docnum] = get(docnum, 0.0) + m.score()
                    matched[docnum] = got(docnum, 0.0) + idf
                    m.next()
                continue
            for base, ids, tfs, deleted in blocks:
                for docnum, tf in zip(ids, tfs):
                    if deleted and docnum in deleted:
                        continue
                    docnum += base
                    scores[docnum] = get(docnum, 0.0) + idf * ((tf * k1_1) / (tf + norm[lengths[docnum]]))
                    matched[docnum] = got(docnum, 0.0) + idf
        if allowed is not None:
            scores = {d: score for d, score in scores.items() if d in allowed}
        best = heapq.nlargest(limit, scores.items(), key=itemgetter(1))
        return LexicalHits(hits=[(self._doc(d)["path"], score, matched[d] / weight) for d, score in best],
                           ceiling=weight * (k1 + 1), unknown=tuple(unknown.values()))

    @_engine
    def naming(self, name: str, limit: int, budget: int = POSTINGS_BUDGET) -> list[str] | None:
        """The best `limit` notes (by BM25F) holding every word of `name` — an entity, a
        link's target — best first; [] when some word is in no note. None when the name's
        words are in more than `budget` notes together: which of so many notes is about it
        the words cannot say, and visiting them would cost in proportion to the vault (a
        query's own terms are bounded the same way, `query_terms`)."""
        reader = self.searcher.reader()
        words = list(dict.fromkeys(tok.text for tok in analyzer()(name, mode="query")))
        dfs = [reader.doc_frequency("text", w) for w in words]
        if not words or 0 in dfs:
            return []
        if sum(dfs) > budget:
            return None
        found = self.search_evidence(name, limit, max_df=1.0, budget=budget)
        return [path for path, _, matched in found.hits if matched >= 0.999]

    def _field_lengths(self):
        """(encoded `text` length of every docnum as one bytes object over all segments,
        the table decoding a byte to a length), read once per searcher; (None, None)
        where the codec is not the one this reads (then Whoosh scores itself)."""
        searcher = self.searcher
        if self._lengths_for is not searcher:
            self._lengths, self._lengths_for = (None, None), searcher
            try:
                from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield
                from whoosh.util.numeric import byte_to_length

                table = [byte_to_length(i) for i in range(256)]
                table[0] = 1  # as Whoosh's scorer: a missing length counts as 1
                parts = []
                for reader, _base in searcher.reader().leaf_readers():
                    n = reader.doc_count_all()
                    col = reader._perdoc._cached_reader(_lenfield("text"), LENGTHS_COLUMN)
                    data = b"" if col is None else bytes(col._dbfile.get(col._basepos, min(col._count, n)))
                    parts.append(data + bytes(n - len(data)))
                self._lengths = (b"".join(parts), table)
            except (AttributeError, ImportError, TypeError):
                pass
        return self._lengths

    def newest(self, since_ts: float | None = None) -> Iterator[str]:
        """Paths newest first (by `created`), optionally only those created since a time;
        each note's stored fields are read only when the caller gets that far."""
        with _reading():
            negated, docnums = self._time_order()
            if since_ts is not None:
                docnums = docnums[: bisect.bisect_right(negated, -math.ceil(since_ts * TS_PER_SECOND))]
            for docnum in docnums:
                yield self._doc(docnum)["path"]

    @_engine
    def created_between(self, since_ts: float | None, until_ts: float | None, at_most: int) -> list[str] | None:
        """Paths of the notes created in [since_ts, until_ts) (either end None: open),
        newest first; None when there are more than `at_most` (counted on the time
        order, none read)."""
        docnums = self._created_docnums(since_ts, until_ts)
        return None if len(docnums) > at_most else [self._doc(d)["path"] for d in docnums]

    def _created_docnums(self, since_ts: float | None, until_ts: float | None) -> list[int]:
        """Docnums of the notes created in [since_ts, until_ts), newest first."""
        negated, docnums = self._time_order()
        # ts < until_ts and ts >= since_ts, in whole milliseconds as stored
        first = 0 if until_ts is None else bisect.bisect_left(negated, 1 - math.ceil(until_ts * TS_PER_SECOND))
        last = len(negated) if since_ts is None else bisect.bisect_right(negated, -math.ceil(since_ts * TS_PER_SECOND))
        return docnums[first:last]

    def _time_order(self) -> tuple[list[int], list[int]]:
        """(negated `ts`, docnum) of the live notes, newest first, kept for the searcher's
        lifetime. Read from the sortable `ts` column in one pass (`_time_order_fast`: 10 ms
        on 50,000 notes): a `NumericRange` over a wide window expands into a union of
        thousands of terms (4 s)."""
        searcher = self.searcher
        if self._time_for is not searcher:
            reader = searcher.reader()
            # numpy's import (60-110 ms) pays only where the slow read costs as much, or
            # where another part of the command has loaded it already
            fast = "numpy" in sys.modules or reader.doc_count_all() >= FAST_TIME_ORDER
            self._time = (fast and _time_order_fast(reader)) or _time_order_slow(reader)
            self._time_for = searcher
        return self._time

    @_engine
    def paths_in(self, folder: str) -> dict[str, dict]:
        """Stored fields of every indexed note directly in `folder`."""
        from whoosh.query import Term

        s = self.searcher
        return {f["path"]: f for f in (s.stored_fields(d) for d in s.docs_for_query(Term("dir", folder)))}

    def paths_below(self, folder: str) -> dict[str, dict]:
        """Stored fields of every indexed note in `folder` or any folder below it."""
        from whoosh.query import Or, Prefix, Term

        s = self.searcher
        query = Or([Term("dir", folder), Prefix("dir", folder + "/")])
        return {f["path"]: f for f in (s.stored_fields(d) for d in query.docs(s))}

    # --- writing --------------------------------------------------------------------

    @contextmanager
    def writer(self, *, bulk: bool = False) -> Iterator[Callable[[NoteRecord], None]]:
        """A function adding one record (bulk: to a new index, no uniqueness check); the
        batch commits when the block ends, or is cancelled on an exception."""
        self.close()
        writer = self._ix.writer(limitmb=256 if bulk else 64, codec=codec(), compound=False)
        add = writer.add_document if bulk else writer.update_document
        try:
            yield lambda record: add(**fields_of(record))
        except BaseException:
            writer.cancel()
            raise
        writer.commit(optimize=False)

    def write(self, upserts: Iterable[NoteRecord], deletes: Iterable[str] = ()) -> None:
        self.close()
        writer = self._ix.writer(limitmb=64, codec=codec(), compound=False)
        try:
            for path in deletes:
                writer.delete_by_term("path", path)
            for record in upserts:
                writer.update_document(**fields_of(record))
        except BaseException:
            writer.cancel()
            raise
        writer.commit(optimize=False)


def _posting_blocks(searcher, term: str):
    """A term's postings a block at a time: (docnum base, ids, weights, deleted ids) per
    block of each segment, read from Whoosh's on-disk blocks (one decode per block of up
    to 128 postings, not a chain of wrapper calls per posting: a common word in a
    200,000-note vault has tens of thousands). None where the codec is not Whoosh's
    own (the caller then lets Whoosh's matchers walk the postings)."""
    from whoosh.codec.whoosh3 import W3LeafMatcher
    from whoosh.matching.wrappers import FilterMatcher
    from whoosh.reading import TermNotFound

    leaves = []
    for sub, base in searcher.leaf_searchers():
        try:
            m = sub.reader().postings("text", term)
        except TermNotFound:
            continue
        deleted = None
        if isinstance(m, FilterMatcher):  # the segment's deletions: filtered here instead
            # (built before any posting was read past a fully deleted leading block)
            m, deleted = m.child, m._ids
        if not isinstance(m, W3LeafMatcher):
            return None
        leaves.append((base, m, deleted))
    return _walk_blocks(leaves)


def _walk_blocks(leaves):
    for base, m, deleted in leaves:
        while m.is_active():
            m._read_ids()
            m._read_weights()
            yield base, m._ids, m._weights, deleted
            m._next_block()


def _time_order_slow(reader) -> tuple[list[int], list[int]]:
    """`LexicalIndex._time_order` through Whoosh's column reader, a value at a time."""
    deleted = reader.is_deleted if reader.has_deletions() else None
    # An empty index has no column at all (Whoosh's EmptyReader raises).
    column = reader.column_reader("ts") if reader.doc_count_all() else ()
    pairs = [(-ts, d) for d, ts in enumerate(column) if not (deleted and deleted(d))]
    pairs.sort(key=lambda pair: pair[0])  # stable: equal times keep index order
    return [n for n, _ in pairs], [d for _, d in pairs]


def _time_order_fast(reader) -> tuple[list[int], list[int]] | None:
    """`_time_order_slow`'s result from each segment's `ts` column read as one array
    (the 64-bit column of a signed NUMERIC: big-endian, offset by 2**63) and sorted by
    numpy: 10 ms instead of 150 ms on 50,000 notes. None where the codec or the field is
    not the one this reads (the slow path then reads it)."""
    import numpy as np

    try:
        parts = []
        for sub, base in reader.leaf_readers():
            n = sub.doc_count_all()
            if not n:
                continue
            col = sub.column_reader("ts", translate=False)
            if getattr(col, "_typecode", None) != "Q" or col._count > n:
                return None
            raw = np.frombuffer(col._dbfile.get(col._basepos, col._count * 8), dtype=">u8").astype(np.uint64)
            if col._count < n:  # documents past the column's end have the default
                raw = np.concatenate([raw, np.full(n - col._count, col._default, dtype=np.uint64)])
            ts = (raw - np.uint64(1 << 63)).view(np.int64)
            docnums = np.arange(base, base + n, dtype=np.int64)
            if sub.has_deletions():
                live = np.fromiter((not sub.is_deleted(d) for d in range(n)), dtype=bool, count=n)
                ts, docnums = ts[live], docnums[live]
            parts.append((ts, docnums))
    except (AttributeError, TypeError, ValueError):
        return None
    if not parts:
        return [], []
    ts = np.concatenate([t for t, _ in parts])
    docnums = np.concatenate([d for _, d in parts])
    order = np.argsort(-ts, kind="stable")  # newest first; equal times keep index order
    return (-ts[order]).tolist(), docnums[order].tolist()
