"""Answering a query: retrieve from both sides, filter, fuse, and order by memory priors.

`search()` and `recent()` take a loaded `SearchIndex` and return `Hit` values; the CLI
only renders them. Filters and ranking read the fields the index stored, never the
note files.
"""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from datetime import datetime, timezone
from typing import NamedTuple, Sequence

from cortex.notes import tag_name, tag_within
from cortex.search import fusion, when
from cortex.search.question import Filters
from cortex.search.records import LIST_SEP, TS_PER_SECOND

MODES = ("hybrid", "lexical", "semantic")
ARCHIVE_PREFIX = "mind/archive/"
FIRST_K = 100  # candidates per side; widened when filters reject too many
# The second hop (docs/query.md, "How a query ranks"): the best results' entities lead to
# the other notes that name them, each at a share of the relevance of the note it was
# reached from, so it ranks below that note and takes a place only a weak direct match held.
HOP_FROM = 3  # results whose entities are followed
HOP_SHARE = 0.5  # of the relevance of the note a hop starts from
HOP_NOTES = 5  # notes reached per entity, at most
# A time filter (`--since`/`--until`, or a time named in the question: `when.span`): the
# embedding side scores a span of at most this many notes note by note (their stored
# fields and vectors read: ~80 µs a note); a wider one filters its search, whose widening
# finds enough of them within a few rounds.
SPAN_SCORED = 100
# Pseudo-relevance feedback (docs/query.md, "How a query ranks", step 9): once a query is
# answered, its embedding is moved toward its FEEDBACK_FROM best results' (Rocchio: the
# query plus FEEDBACK_STRENGTH times their mean) and each result's cosine with the moved
# query takes FEEDBACK_SHARE of the order. The best results name the topic in the vault's
# own words, which a short question lacks ("meal prep ideas" -> the notes on recipes).
# Chosen on half A of bench/bench_retrieval.py (share 0.05-0.3, strength 0.5-2, 2-5
# results): LongMemEval R@10 0.729 -> 0.740, SciFact nDCG@10 0.672 -> 0.674; on the
# held-out half B 0.682 -> 0.699 and 0.701 -> 0.705. A larger share drifts toward whatever
# the best results are about: LongMemEval's requests for suggestions, whose best results
# are other requests of the same form, lose their answer from the top 10 at 0.15.
# In a vault under fusion.SHARE_LARGE notes the order already weighs the cosine more
# (fusion.semantic_share) and feedback is left out: on the calibration halves of
# bench/bench_floor_scoped.py and bench_floor.py --fraction 0.1 it added nothing.
FEEDBACK_FROM = 3
FEEDBACK_STRENGTH = 1.0
FEEDBACK_SHARE = 0.1


def unknown_values(filters: Filters, taxonomy) -> list[tuple[str, list[str], list[str]]]:
    """(field, values no note can have, the values allowed) for each filter that has such:
    a folder name given as a type, a capital letter. A mistake to report, not a search to
    run and find nothing."""
    from cortex.layout import PARTITIONS
    from cortex.taxonomy import CATEGORIES

    out = []
    for field_, values, allowed in (("type", filters.types, sorted(taxonomy.types) if filters.types else []),
                                    ("category", filters.categories, list(CATEGORIES)),
                                    ("partition", filters.partitions, list(PARTITIONS))):
        bad = [v for v in values if v not in allowed]
        if bad:
            out.append((field_, bad, allowed))
    return out


def _items(value: str | None) -> list[str]:
    return [v for v in (value or "").split(LIST_SEP) if v]


def _split(value: str | None) -> set[str]:
    return {v.strip().lower() for v in _items(value) if v.strip()}


BRIEF_TAG = "brief"  # the daily brief `cortex brief --write` commits: found only when asked for


def is_brief(doc: dict) -> bool:
    return doc.get("attribution") == "cortex" and BRIEF_TAG in _split(doc.get("tags"))


def matches(doc: dict, f: Filters) -> bool:
    if doc.get("archived") and not f.archived:
        return False
    if BRIEF_TAG in (doc.get("tags") or "") and is_brief(doc) and BRIEF_TAG not in {tag_name(t) for t in f.tags}:
        return False  # a digest of other notes would outrank them in ordinary searches
    if f.types and doc.get("type") not in f.types:
        return False
    if f.categories and doc.get("category") not in f.categories:
        return False
    if f.partitions and doc.get("partition") not in f.partitions:
        return False
    if f.attributions and doc.get("attribution") not in f.attributions:
        return False
    if f.tags and not _tagged(_split(doc.get("tags")), f.tags):
        return False
    if f.entities and not _split(doc.get("entities")) & {unicodedata.normalize("NFC", e).lower() for e in f.entities}:
        return False
    ts = (doc.get("ts") or 0) / TS_PER_SECOND
    if f.since is not None and ts < f.since:
        return False
    if f.until is not None and ts >= f.until:
        return False
    return True


def _tagged(tags: set[str], wanted: tuple[str, ...]) -> bool:
    """A wanted tag as Obsidian searches it: `--tag #Jam` is jam; `--tag project` finds
    project/alpha too."""
    return any(tag_within(tag, tag_name(w)) for w in wanted for tag in tags)


class Hit(NamedTuple):  # not a dataclass: one is ~8M instructions of every cold query to create, this ~1M
    path: str
    id: str
    title: str
    type: str
    category: str
    partition: str
    archived: bool
    tags: list[str]
    entities: list[str]
    attribution: str
    created: str
    snippet: str
    score: float
    why: dict
    via: dict | None = None  # reached by the second hop: {"path": the result it came from, "entity": the name they share}
    when: str | None = None  # created in the time the question names ("last month"): such notes come first

    def as_dict(self, rank: int) -> dict:
        return {"rank": rank, **self._asdict()}


def _priors(doc: dict, taxonomy, now: datetime) -> dict:
    from cortex.importance import effective_importance

    created = (doc.get("ts") or 0) / TS_PER_SECOND
    reinforced = doc.get("reinforced_ts") or 0.0
    meta = {"importance": doc.get("importance", 0.5), "type": doc.get("type", "")}
    if reinforced:
        meta["last_reinforced"] = datetime.fromtimestamp(reinforced, timezone.utc)
    if created:
        meta["created"] = datetime.fromtimestamp(created, timezone.utc)
    eff = effective_importance(meta, taxonomy, now)
    rec = fusion.recency(max(created, reinforced), now.timestamp())
    conf = float(doc.get("confidence", 0.5))
    return {"effective_importance": round(eff, 4), "confidence": round(conf, 4), "recency": round(rec, 4),
            "prior": round(fusion.prior(eff, conf, rec), 4)}


def _names_in(root, path: str, doc: dict) -> list[str]:
    """A note's entities and the targets of its links (a target's file name, as Obsidian
    shows it), each once."""
    from cortex.layout import UnreadableNote, read_note_bytes
    from cortex.notes import REDACTED, wikilinks

    names = _items(doc.get("entities"))
    try:
        text = read_note_bytes(root, path).decode("utf-8", errors="replace")
    except (OSError, UnreadableNote):
        text = ""
    for target in wikilinks(text):
        name = target.rsplit("/", 1)[-1].removesuffix(".md").strip()
        if name:
            names.append(name)
    return list(dict.fromkeys(n for n in names if REDACTED not in n))  # a redacted name names nothing


def _hit(doc: dict, score: float, why: dict, via: dict | None = None) -> Hit:
    title = doc.get("title") or doc.get("snippet", "")[:80]
    return Hit(
        path=doc["path"], id=doc.get("id", ""), title=title, type=doc.get("type", ""),
        category=doc.get("category", ""), partition=doc.get("partition", ""), archived=bool(doc.get("archived")),
        tags=_items(doc.get("tags")),
        entities=_items(doc.get("entities")),
        attribution=doc.get("attribution", ""), created=doc.get("created", ""), snippet=doc.get("snippet", ""),
        score=round(score, 6), why=why, via=via,
    )


def search(index, text: str, *, filters: Filters = Filters(), limit: int = 10, mode: str = "hybrid",
           now: datetime | None = None, weights: fusion.FusionWeights = fusion.DEFAULT_WEIGHTS,
           use_priors: bool = True, min_score: float | None = None, hops: bool = True) -> list[Hit]:
    """The best `limit` notes for `text` whose relevance reaches the floor (`min_score`,
    else the mode's default: `fusion.floor_for`), filtered, fused and ordered by memory
    priors. Nothing over the floor is an empty list: the query found nothing; so is, by
    default, a list none of whose notes answers the query (`fusion.answers`).

    A question that names a time ("last month", "two weeks ago": `when.span`) and sets
    no time filter of its own is asked twice: of the notes created in that span, whose
    results come first (`Hit.when`), and of every note, whose results follow, both
    without the phrase (`when.topic`). One that asks about that time and nothing else
    ("what happened yesterday?") lists its notes, newest first."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    now = now or datetime.now(timezone.utc)
    named = when.span(text, now.timestamp()) if filters.since is None and filters.until is None else None
    if when.only_time(text, named):
        listed = recent(index, named.since, filters=replace(filters, until=named.until), limit=limit, now=now)
        return [hit._replace(when=named.phrase) for hit in listed]
    ask = dict(limit=limit, mode=mode, now=now, weights=weights, use_priors=use_priors, min_score=min_score, hops=hops)
    text = when.topic(text, named)  # the question less its time: "two days ago" is no topic
    hits = _search(index, text, filters=filters, **ask)
    if named is None:
        return hits
    # Once the whole vault answers the question, a note of that time needs only the floor;
    # a note weaker than the default floor may follow in the vault's list, never lead it.
    if min_score is not None:
        ask["min_score"] = max(min_score, fusion.floor_for(mode, None))
    timely = _search(index, text, filters=replace(filters, since=named.since, until=named.until), answered=bool(hits),
                     **ask)
    first = [hit._replace(when=named.phrase) for hit in timely]
    seen = {hit.path for hit in first}
    return (first + [hit for hit in hits if hit.path not in seen])[:limit]


def _search(index, text: str, *, filters: Filters, limit: int, mode: str, now: datetime,
            weights: fusion.FusionWeights, use_priors: bool, min_score: float | None, hops: bool,
            answered: bool = False) -> list[Hit]:
    """`search` through the filters, its answer gate skipped when `answered`. A time
    filter (`since`, `until`) is met on the index's time order: the lexical side scores
    only the notes created then, and the embedding side scores a span of at most
    SPAN_SCORED notes note by note (`among`) and filters its own search by a wider one."""
    floor = fusion.floor_for(mode, min_score)
    lexical = index.lexical
    span = None if filters.since is None and filters.until is None else (filters.since, filters.until)
    among = None if span is None else lexical.created_between(*span, SPAN_SCORED)
    if among == []:
        return []  # no note was created then
    total = lexical.doc_count()
    k = max(FIRST_K, limit * 3)
    # Without narrowing filters only the archive rule applies, and a path shows it: the
    # stored fields of embedding-side candidates are then read only for those that rank.
    lazy = not filters.narrowing
    query_vec = None
    # A small vault trusts meaning more (fusion.semantic_share): the order weighs the
    # cosine more, and a note only the embedding finds, close enough, is returned too.
    order = fusion.order_weights(total) if mode == "hybrid" and weights == fusion.DEFAULT_WEIGHTS else weights
    trusting = order.semantic > weights.semantic
    admit = fusion.MIN_COSINE if trusting and min_score is None and model_reads(index, text) else None
    while True:
        docs: dict[str, dict] = {}
        lex_hits: list[tuple[str, float]] = []
        coverage: dict[str, float] = {}
        sem_hits: list[tuple[str, float]] = []
        ceiling = 0.0
        unknown: tuple[str, ...] = ()  # the query's words no note has
        filtered = False  # a candidate the filters rejected: a wider search may find others
        more = False  # whether a wider search could bring another candidate
        if mode in ("hybrid", "lexical"):
            found = lexical.search_evidence(text, k, created=span)
            ceiling, unknown = found.ceiling, found.unknown
            more = len(found.hits) >= k  # else every note holding a word of the query is here
            for path, score, matched in found.hits:
                doc = lexical.stored(path)
                if doc is not None and matches(doc, filters):
                    docs[doc["path"]] = doc
                    lex_hits.append((doc["path"], score))
                    coverage[doc["path"]] = matched
                else:
                    filtered = True
        if mode in ("hybrid", "semantic"):
            index.ensure_vectors()
            if query_vec is None:
                query_vec = index.embedder.encode([text])[0]
            # a note only this side finds scores weights.semantic * cosine at most
            least = floor if mode == "semantic" else floor / weights.semantic if weights.semantic > 0 else 2.0
            if admit is not None:
                least = min(least, admit)
            more = more or least <= 1.0  # a note only this side finds can pass: further down, maybe
            nearest = index.vectors.top(query_vec, k) if among is None else index.vectors.among(query_vec, among)[:k]
            for path, cosine in nearest:
                if cosine < least and path not in docs:
                    continue
                doc = docs.get(path)
                if doc is None and lazy:
                    if filters.archived or not path.startswith(ARCHIVE_PREFIX):
                        sem_hits.append((path, cosine))  # read back only if it ranks high enough
                    else:
                        filtered = True
                    continue
                if doc is None:
                    doc = lexical.stored(path)
                    if doc is None or not matches(doc, filters):
                        filtered = True
                        continue
                    docs[path] = doc
                sem_hits.append((path, cosine))
        if not filtered or not more or len(docs) + len(sem_hits) >= limit or k >= total or among is not None:
            break
        k *= 5
    lex = fusion.scale_lexical(lex_hits, ceiling)
    if mode == "hybrid":
        fused = fusion.fuse(lex, fusion.scale_semantic(sem_hits), weights)
    elif mode == "lexical":
        fused = sorted(((p, s, {"lexical": s}) for p, s in lex.items()), key=lambda item: -item[1])
    else:
        fused = [(p, s, {"semantic": s}) for p, s in fusion.scale_semantic(sem_hits).items()]
    taxonomy = index.taxonomy if use_priors else None
    ranked = []
    wanted = max(limit * 3, 30)
    for path, relevance, parts in fused:
        if relevance < floor and (admit is None or (parts.get("semantic") or 0.0) < admit):
            if trusting:
                continue  # a note found by meaning alone may come later in this order
            break  # best first: the rest are under the floor too
        if len(ranked) >= wanted and not trusting:
            break
        if path not in docs:
            doc = lexical.stored(path)
            if doc is None or not matches(doc, filters):
                continue
            docs[path] = doc
        why = {name: round(v, 4) for name, v in parts.items() if v is not None}
        if path in coverage:
            why["matched"] = round(coverage[path], 4)
        why["relevance"] = round(relevance, 4)
        score = fusion.fit(parts, order) if trusting else relevance
        if use_priors:
            pri = _priors(docs[path], taxonomy, now)
            why.update(pri)
            score = fusion.ranked(score, pri["prior"])
        ranked.append((score, path, why))
    if not answered:
        meaning_of = meaning_lookup(index, query_vec, ranked) if mode == "hybrid" else None
        unseen = rare_unseen(index, unknown) if mode == "hybrid" else 0
        if not fusion.answers(mode, min_score, [why for _, _, why in ranked], notes=total, meaning_of=meaning_of,
                              unseen=unseen):
            return []  # notes sharing a word or two with the query, none an answer, or none about it
    ranked.sort(key=lambda item: -item[0])
    if mode == "hybrid" and query_vec is not None and not trusting:
        # after the gate and on the same results: feedback reorders an answer, it never
        # makes one (the floor and the gate were decided on the first pass above). Not
        # where the order already trusts meaning more (a small vault): it added nothing there
        ranked = _feedback(index, query_vec, ranked, limit)
    via: dict[str, dict] = {}
    if hops:
        ranked += _second_hop(index, ranked, docs, filters, taxonomy, now, via)
        ranked.sort(key=lambda item: -item[0])
    return [_hit(docs[path], score, why, via.get(path)) for score, path, why in ranked[:limit]]


def _feedback(index, query_vec, ranked: list, limit: int) -> list:
    """`ranked` (score, path, why), best first, reordered by pseudo-relevance feedback
    (FEEDBACK_SHARE): each score mixed with the note's cosine with the query moved toward
    the best results' vectors (`why.feedback`). Only the vectors of the results that can
    still reach the first `limit` are read (a few row lookups, no pass over the matrix)."""
    import numpy as np

    if len(ranked) < 2 or FEEDBACK_SHARE <= 0:
        return ranked  # one result has no order to change
    best = [vec for _, path, _ in ranked[:FEEDBACK_FROM] if (vec := index.vectors.vector(path)) is not None]
    if not best:
        return ranked
    moved = query_vec + FEEDBACK_STRENGTH * np.mean(best, axis=0)
    norm = float(np.linalg.norm(moved))
    if norm == 0:
        return ranked
    keep = 1.0 - FEEDBACK_SHARE
    # A cosine adds at most FEEDBACK_SHARE: a result further than that under the
    # limit-th cannot pass any of the first `limit` and is not looked up (cosine 0).
    reach = ranked[limit - 1][0] - FEEDBACK_SHARE / keep if len(ranked) > limit else float("-inf")
    near = [path for score, path, _ in ranked if score >= reach]
    cosines = dict(index.vectors.among(moved / norm, near))
    out = []
    for score, path, why in ranked:
        cosine = max(0.0, cosines.get(path, 0.0))
        if path in cosines:
            why["feedback"] = round(cosine, 4)
        out.append((keep * score + FEEDBACK_SHARE * cosine, path, why))
    out.sort(key=lambda item: -item[0])
    return out


def model_reads(index, text: str) -> bool:
    """Whether the embedding model knows a word of the question as a word of its own
    (`Embedder.has_word`), a question word such as "what" aside. One it reads only as
    letters — Korean, whose every text the model takes for the same few jamo (a cosine of
    0.96 between any two), or a run of names and codes — has no meaning it can place, so
    no note is returned for its meaning alone (step 5 of docs/query.md)."""
    words = [w for w in "".join(ch if ch.isalpha() else " " for ch in text).lower().split()
             if len(w) > 1 and w not in QUESTION_WORDS]
    if not words:
        return False
    index.ensure_vectors()
    return any(index.embedder.has_word(word) for word in words)


# Words of a question's form, which the model knows whatever the question is about.
QUESTION_WORDS = frozenset(
    "a an the what which who whom whose when where why how is are was were be been do does did can could "
    "would should will shall may might must have has had i me my we our you your it its of in on at to for "
    "from with about and or not no tell show me any some there this that these those".split())


def rare_unseen(index, words: Sequence[str]) -> int:
    """How many of the query's words no note has are rare words as well, not whole in
    the embedding model's vocabulary (`Embedder.has_word`): a word neither the vault nor
    everyday English holds ("sitar", "oolong") names a topic the vault never spoke of,
    where a common word the vault happens not to use ("size", "total", "previously") does
    not (`fusion.ANSWER_UNSEEN_MEANING`)."""
    if not words:
        return 0
    index.ensure_vectors()
    return sum(not index.embedder.has_word(word) for word in words)


def _second_hop(index, ranked: list, docs: dict, filters: Filters, taxonomy, now: datetime,
                via: dict[str, dict]) -> list[tuple[float, str, dict]]:
    """The notes that name an entity of one of the best results — one of its ``entities``
    or a ``[[link]]`` in it, as a person links in Obsidian — by the name's every word,
    each at ``HOP_SHARE`` of that result's relevance: a question that joins two memories
    ("what does the project Priya leads run on") finds the second through the name the
    first gives it. Recorded in ``via``. Not held to the floor: the note it comes from
    passed it and the answer gate, and it ranks below that note. A name whose words are in
    more notes than a query's postings budget is not followed (``LexicalIndex.naming``):
    it cannot say which of them matter, and the hop's cost stays flat as the vault grows."""
    lexical = index.lexical
    seen = {path for _, path, _ in ranked}
    out = []
    for _, path, why in ranked[:HOP_FROM]:
        relevance = why["relevance"] * HOP_SHARE
        for name in _names_in(index.root, path, docs[path]):
            reached = 0
            for other in lexical.naming(name, HOP_NOTES * 4) or ():  # the whole name, not one of its words
                if reached >= HOP_NOTES:
                    break
                if other in seen:
                    continue
                doc = lexical.stored(other)
                if doc is None or not matches(doc, filters):
                    continue
                seen.add(other)
                reached += 1
                docs[other] = doc
                hop_why = {"relevance": round(relevance, 4), "hop": HOP_SHARE}
                score = relevance
                if taxonomy is not None:
                    pri = _priors(doc, taxonomy, now)
                    hop_why.update(pri)
                    score = fusion.ranked(relevance, pri["prior"])
                via[other] = {"path": path, "entity": name}
                out.append((score, other, hop_why))
    return out


def meaning_lookup(index, query_vec, ranked: Sequence[tuple]):
    """For the answer gate: result i's cosine with the query, from the embedding side's
    score when it ranked the note, else from the note's vector (one lookup, only for the
    results the gate asks about); None where a note has no vector."""
    def meaning_of(i: int) -> float | None:
        _, path, why = ranked[i]
        if "semantic" in why:
            return why["semantic"]
        vec = None if query_vec is None else index.vectors.vector(path)
        if vec is None:
            return None
        import numpy as np

        norms = float(np.linalg.norm(vec)) * float(np.linalg.norm(query_vec))
        return float(np.dot(vec, query_vec)) / norms if norms else 0.0

    return meaning_of


def recent(index, since_ts: float | None, *, filters: Filters = Filters(), limit: int = 10,
           now: datetime | None = None) -> list[Hit]:
    """The temporal view: notes created since `since_ts` (all when None), newest first.
    Its score is the note's recency (1.0 now, halving with age; docs/query.md), the
    order is by creation time: a listing has no relevance to rank by."""
    now = now or datetime.now(timezone.utc)
    out = []
    for path in index.lexical.newest(since_ts):
        doc = index.lexical.stored(path)
        if doc is not None and matches(doc, filters):
            why = _priors(doc, index.taxonomy, now)
            out.append(_hit(doc, why["recency"], why))
            if len(out) >= limit:
                break
    return out


def result_shape(hits: Sequence[Hit]) -> list[dict]:
    return [h.as_dict(rank) for rank, h in enumerate(hits, start=1)]
