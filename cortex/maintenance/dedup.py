"""``cortex dedup``: near-duplicate memories merged into the older note.

Candidates are notes of the same type (hence the same partition and folder), active
(not archived), with an id, not locked. A pair is a duplicate when the static-embedding
cosine of the bodies reaches the threshold *and* a lexical check finds nothing that
makes them different memories: other numbers or dates, opposite polarity ("prefers" /
"avoids", "always" / "never"), or a name one mentions and the other does not. Embedding
vectors catch paraphrase; the lexical check catches what a bag of tokens cannot see.

Merging rewrites the older note (``merged_from`` gains the newer id, ``reinforced`` and
``last_reinforced`` take the newer one's) and moves the newer one to
``mind/archive/<folder>/`` with ``merged_into``. Only the mind partition is merged: the
vault partition holds permanent records, and the archive lives under ``mind/``.

Scale: per type, one matrix product per chunk of rows against the rows after it, so a
50,000-note vault costs a few seconds of BLAS, not 10⁹ Python comparisons; vectors are
cached by content hash in ``.cortex/maintain/vectors.npz``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Sequence

from cortex.maintenance.base import JobContext, JobResult, archive_path, later
from cortex.maintenance.snapshot import NoteInfo, Snapshot
from cortex.notes import quote, set_fields
from cortex.timefmt import format_time

if TYPE_CHECKING:  # pragma: no cover
    import numpy

JOB = "dedup"
CHUNK_CELLS = 16_000_000  # float32 cells per block product (~64 MB)

# --- the lexical check ------------------------------------------------------------------

_TOKEN_RE = re.compile(r"\d+(?:[.,:/-]\d+)*(?:st|nd|rd|th|am|pm|k|m|%)?|[^\W\d_]+(?:['’][^\W\d_]+)?")
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15", "twenty": "20",
    "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "once": "1", "twice": "2", "single": "1",
    "first": "1", "second": "2", "third": "3", "half": "0.5", "double": "2", "dozen": "12",
}
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february",
             "march", "april", "june", "july", "august", "september", "october", "november", "december",
             "morning", "evening", "afternoon", "night", "weekend", "weekly", "daily", "monthly", "nightly", "hourly"}
# Words that turn a statement around. Their count's parity is the statement's polarity.
_NEGATIVE = {
    "not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot", "can't", "won't",
    "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "shouldn't", "mustn't", "hasn't",
    "haven't", "stop", "stopped", "stops", "avoid", "avoids", "avoided", "hate", "hates", "hated", "dislike",
    "dislikes", "disliked", "against", "refuse", "refuses", "dropped", "drop", "removed", "remove", "forbid",
    "forbidden", "banned", "rejects", "rejected", "reject", "less", "fewer", "worse", "slower", "disabled",
    "disable", "unless", "no longer",
}
_STOP = {
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "at", "by", "is", "are", "was", "be",
    "it", "its", "that", "this", "as", "from", "we", "i", "our", "their", "they", "he", "she", "his", "her",
    "has", "have", "had", "should", "must", "will", "would", "can", "so", "than", "then", "them", "all", "any",
    "every", "each", "there", "which", "who", "what", "when", "always", "just", "only", "very", "also",
}


# Capitalised words that start sentences without naming anything: a capitalised word
# outside this list that the other text lacks is taken for a name (Maya vs Jonas).
_COMMON_STARTS = set("""
a about add after all also always an and any as at avoid back backfill be before bring build but by
caching can check close configure consider cut deploy do document double during each ensure every expand
failing failed feature finish fix follow for from get give go grow have if in invoices invoice keep launch
let logging make members merge migrations mocking move never no not on once one our payments pin plan
please prefer production pull put read reduce remove replace reproduce request resolve retire review run
secrets set ship since small start stop switch take test testing that the their then there these this
those to today try turn two upgrade use we when while with within write writing customer hosting
""".split())
_COMPARATIVES = {"over", "than", "versus", "vs"}
_TO_VERBS = {"be", "have", "get", "keep", "stay", "use", "do", "make", "run", "go"}
_PREFER_MARK = {"prefer"}  # stems: "prefers x to y" is a comparison, "wants x to be" is not
_ANTONYMS = [
    ("dark", "light"), ("long", "short"), ("slow", "fast"), ("slow", "speed"), ("high", "low"),
    ("early", "late"), ("more", "less"), ("increase", "decrease"), ("enable", "disable"), ("allow", "forbid"),
    ("include", "exclude"), ("before", "after"), ("start", "stop"), ("accept", "reject"), ("good", "bad"),
    ("like", "dislike"), ("love", "hate"), ("hid", "caught"), ("hide", "catch"), ("overkill", "fit"),
    ("easy", "hard"), ("small", "large"), ("small", "big"), ("cheap", "expensive"), ("old", "new"),
    ("always", "never"), ("win", "lose"), ("success", "failure"), ("on", "off"), ("open", "closed"),
    ("public", "private"), ("sync", "async"), ("online", "offline"), ("manual", "automatic"),
]


@dataclass(frozen=True)
class Lexical:
    words: frozenset[str]  # content-word stems
    numbers: frozenset[str]  # digits, number words, dates and times, weekdays and months
    polarity: int  # parity of negative words
    names: frozenset[str]  # capitalised words that are not common sentence starts (lowercased)
    order: tuple[tuple[str, str], ...]  # (x, y) of "x over y", "x than y", "prefer x to y"
    raw: frozenset[str]  # every lowercased word
    sequence: tuple[str, ...]  # content-word stems and comparison markers, in order


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=100_000)
def lexical(text: str) -> Lexical:
    text = unicodedata.normalize("NFKC", text).replace("’", "'")
    words, numbers, names, negative = set(), set(), set(), 0
    sequence: list[str] = []  # content words and comparison markers, in order
    prev_end = 0
    for m in _TOKEN_RE.finditer(text):
        token = m.group(0)
        low = token.lower()
        if low.endswith("'s"):
            low, token = low[:-2], token[:-2]
        sentence_start = prev_end == 0 or any(c in ".!?:;\n—(\"" for c in text[prev_end : m.start()])
        prev_end = m.end()
        if sequence and sequence[-1] == "<to" and low in _TO_VERBS:
            sequence.pop()  # "prefers standups to be short" compares nothing
        if token[0].isdigit():
            numbers.add(low.rstrip("%").replace(",", ""))
        elif low in _NUMBER_WORDS:
            numbers.add(_NUMBER_WORDS[low])
        elif low in _WEEKDAYS:
            numbers.add(low)
        else:
            if low in _NEGATIVE or low.endswith("n't"):
                negative += 1
            elif low in _COMPARATIVES or low == "to" and any(w in _PREFER_MARK for w in sequence[-3:]):
                sequence.append("<" + low)
            elif low not in _STOP:
                words.add(_stem(low))
                sequence.append(_stem(low))
            if token[0].isupper() and low not in _STOP and not (sentence_start and low in _COMMON_STARTS):
                names.add(low)
    order = []
    for k, item in enumerate(sequence):
        if item.startswith("<") and 0 < k < len(sequence) - 1 and not sequence[k + 1].startswith("<"):
            order.append((sequence[k - 1], sequence[k + 1]))
    raw = frozenset(t.lower() for t in _TOKEN_RE.findall(text))
    return Lexical(frozenset(words), frozenset(numbers), negative % 2, frozenset(names), tuple(order), raw, tuple(sequence))


def _mentions(name: str, lex: Lexical, text_lower: str) -> bool:
    return name in text_lower or _stem(name) in lex.words


def lexical_veto(a: Lexical, b: Lexical, a_text: str, b_text: str) -> str | None:
    """Why two similar texts are different memories (None: nothing found)."""
    if a.numbers != b.numbers:
        return "different numbers or dates"
    if a.polarity != b.polarity:
        return "opposite polarity"
    a_low, b_low = a_text.lower(), b_text.lower()
    for name in sorted(a.names):
        if not _mentions(name, b, b_low):
            return f"names differ ({name})"
    for name in sorted(b.names):
        if not _mentions(name, a, a_low):
            return f"names differ ({name})"
    for first, second in ((a, b), (b, a)):
        for x, y in first.order:  # "x over y" against a text with y before x
            if x in second.sequence and y in second.sequence and second.sequence.index(y) < second.sequence.index(x):
                return f"reversed comparison ({x} / {y})"
    for x, y in _ANTONYMS:
        if (x in a.raw and y in b.raw and y not in a.raw and x not in b.raw) or (
            y in a.raw and x in b.raw and x not in a.raw and y not in b.raw
        ):
            return f"opposite words ({x} / {y})"
    return None


def overlap(a: Lexical, b: Lexical) -> float:
    union = a.words | b.words
    return len(a.words & b.words) / len(union) if union else 1.0


def verdict(cosine: float, a_text: str, b_text: str, threshold: float) -> tuple[bool, str]:
    """(duplicate?, why) for two bodies of the same type."""
    if cosine < threshold:
        return False, f"cosine {cosine:.3f} below {threshold:g}"
    a, b = lexical(a_text), lexical(b_text)
    veto = lexical_veto(a, b, a_text, b_text)
    if veto:
        return False, veto
    return True, "near-duplicate"


# --- candidates ---------------------------------------------------------------------------

def similar_pairs(matrix: "numpy.ndarray", threshold: float) -> list[tuple[int, int, float]]:
    """Index pairs (i < j) whose rows' dot product reaches ``threshold``, blockwise."""
    import numpy as np

    n = matrix.shape[0]
    out: list[tuple[int, int, float]] = []
    if n < 2:
        return out
    rows = max(16, min(n, CHUNK_CELLS // n))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = matrix[start:stop] @ matrix[start:].T  # (rows, n - start)
        width = stop - start
        block[:, :width] = np.triu(block[:, :width], k=1) - np.tril(np.ones((width, width), dtype=block.dtype))
        ii, jj = np.nonzero(block >= threshold)
        for i, j in zip(ii.tolist(), jj.tolist()):
            out.append((start + i, start + j, float(block[i, j])))
    return out


def eligible(note: NoteInfo) -> bool:
    return (note.partition == "mind" and not note.archived and not note.broken and not note.locked
            and bool(note.id) and bool(note.type) and bool(note.body))


def _age(note: NoteInfo) -> tuple[str, str]:
    from cortex.timefmt import parse_time

    try:
        created = format_time(parse_time(note.created))
    except (ValueError, TypeError):
        created = "9999"
    return created, note.path


@dataclass(frozen=True)
class Merge:
    keep: NoteInfo
    merge: NoteInfo
    cosine: float


@dataclass(frozen=True)
class DedupPlan:
    merges: tuple[Merge, ...]
    vetoed: tuple[tuple[NoteInfo, NoteInfo, float, str], ...]  # similar, but different memories


def plan_dedup(snapshot: Snapshot | Sequence[NoteInfo], embed: Callable[[list[NoteInfo]], "numpy.ndarray"],
               threshold: float) -> DedupPlan:
    """Pure over the snapshot: ``embed`` maps notes to L2-normalised rows."""
    import numpy as np

    groups: dict[str, list[NoteInfo]] = {}
    for note in snapshot:
        if eligible(note):
            groups.setdefault(note.type, []).append(note)
    merges, vetoed = [], []
    for type_name in sorted(groups):
        notes = sorted(groups[type_name], key=_age)
        if len(notes) < 2:
            continue
        matrix = np.ascontiguousarray(embed(notes), dtype=np.float32)
        parent = list(range(len(notes)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i, j, score in similar_pairs(matrix, threshold):
            ok, why = verdict(score, notes[i].body, notes[j].body, threshold)
            if not ok:
                vetoed.append((notes[i], notes[j], score, why))
                continue
            ri, rj = root(i), root(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)  # notes are sorted oldest first: the older root wins
        for j in range(len(notes)):
            keep = root(j)
            if keep == j:
                continue
            # a chain a~b~c merges c into a only when c is itself a duplicate of a
            score = float(matrix[keep] @ matrix[j])
            ok, why = verdict(score, notes[keep].body, notes[j].body, threshold)
            if ok:
                merges.append(Merge(notes[keep], notes[j], score))
            else:
                vetoed.append((notes[keep], notes[j], score, f"only similar through another note ({why})"))
    return DedupPlan(tuple(merges), tuple(vetoed))


# --- embeddings, cached by content -----------------------------------------------------------

class VectorCache:
    def __init__(self, vault) -> None:
        self.path = vault.cache_dir / "maintain" / "vectors.npz"
        self.model_spec = vault.settings.embedding_model
        self._model = None

    def embed(self, notes: list[NoteInfo]) -> "numpy.ndarray":
        """Rows for ``notes``, from the cache where the body's hash is known."""
        import numpy as np

        model_name = str(self.model_spec or "shipped")
        keys, matrix = self._load(model_name)
        row = {k: i for i, k in enumerate(keys)}
        missing = sorted({n.source_hash for n in notes if n.source_hash not in row})
        if missing:
            if self._model is None:
                from cortex.embed import get_model

                self._model = get_model(self.model_spec)
            bodies = {n.source_hash: n.body for n in notes}
            fresh = self._model.encode([bodies[h] for h in missing])
            matrix = fresh if matrix is None else np.concatenate([matrix, fresh])
            keys = keys + missing
            row = {k: i for i, k in enumerate(keys)}
            self._save(model_name, keys, matrix)
        return matrix[[row[n.source_hash] for n in notes]]

    def _load(self, model_name: str):
        import numpy as np

        try:
            with np.load(self.path, allow_pickle=False) as data:
                if str(data["model"]) != model_name:
                    return [], None
                return [str(k) for k in data["keys"]], data["matrix"].astype(np.float32)
        except (OSError, KeyError, ValueError):
            return [], None

    def _save(self, model_name: str, keys: list[str], matrix) -> None:
        import io

        import numpy as np

        from cortex.fsutil import atomic_write

        buf = io.BytesIO()
        np.savez(buf, model=np.array(model_name), keys=np.array(keys), matrix=matrix)
        atomic_write(self.path, buf.getvalue())


# --- apply ------------------------------------------------------------------------------------

def _flow_ids(ids: Sequence[str]) -> str:
    return "[" + ", ".join(quote(i) for i in ids) + "]"


def run(ctx: JobContext, *, dry_run: bool = False) -> JobResult:
    result = JobResult(JOB, dry_run=dry_run)
    if not dry_run:
        ctx.recover(JOB)
    snapshot = ctx.snapshot()
    threshold = ctx.settings.dedup_threshold
    state = ctx.vault.load_state()
    seen = (state.jobs.get(JOB) or {}).get("checked")
    if not dry_run and seen == f"{snapshot.signature}@{threshold:g}":
        return result  # the same notes were compared with the same threshold: nothing new
    plan = plan_dedup(snapshot, VectorCache(ctx.vault).embed, threshold)
    for keep, other, score, why in plan.vetoed:
        if dry_run:
            result.skipped.append({"keep": keep.path, "merge": other.path, "cosine": round(score, 4), "why": why})
    groups: dict[str, list[Merge]] = {}
    for m in plan.merges:
        if ctx.editing(m.keep.path) or ctx.editing(m.merge.path):
            result.skipped.append({"keep": m.keep.path, "merge": m.merge.path, "why": "being edited (uncommitted changes): next run"})
            continue
        groups.setdefault(m.keep.path, []).append(m)
        result.items.append({"keep": m.keep.path, "merge": m.merge.path, "cosine": round(m.cosine, 4),
                             "overlap": round(overlap(lexical(m.keep.body), lexical(m.merge.body)), 3),
                             "keep_title": m.keep.title, "merge_title": m.merge.title})
    result.changed = len(result.items)
    if dry_run:
        return result
    changes: dict[str, str | None] = {}
    lines, taken = [], set()
    for keep_path, merges in groups.items():
        keep = merges[0].keep
        ids = list(keep.merged_from) + [m.merge.id for m in merges if m.merge.id not in keep.merged_from]
        count = keep.reinforced + sum(1 + m.merge.reinforced for m in merges)
        last = keep.last_reinforced
        for m in merges:
            last = later(last, m.merge.last_reinforced or m.merge.created)
        updates = {"merged_from": _flow_ids(ids), "reinforced": str(count)}
        if last:
            updates["last_reinforced"] = last
        changes[keep.path] = ctx.blob(set_fields(ctx.file_text(keep), updates, after="last_reinforced"))
        for m in merges:
            target = ctx.free_path(archive_path(m.merge.path), taken)
            taken.add(target)
            text = set_fields(ctx.file_text(m.merge), {"merged_into": quote(keep.id), "archived": format_time(ctx.now),
                                                            "archive_reason": "merged"})
            changes[target] = ctx.blob(text)
            changes[m.merge.path] = None
            lines.append(f"{m.merge.path} → {keep.path} — {m.merge.title} ({m.cosine:.3f})")
    if changes:
        n = len(lines)
        head = f"dedup: {n} near-duplicate{'' if n == 1 else 's'} merged into {len(groups)} note{'' if len(groups) == 1 else 's'}"
        result.commit = ctx.commit(JOB, changes, head + "\n\n" + "\n".join(lines) + "\n")
        snapshot = ctx.snapshot()
    state = ctx.vault.load_state()
    if not result.skipped:  # skipped pairs must be looked at again next time
        state.jobs.setdefault(JOB, {})["checked"] = f"{snapshot.signature}@{threshold:g}"
        ctx.vault.save_state(state)
    return result
