"""``cortex dedup``: near-duplicate memories merged into the older note.

Candidates are notes of the same type (hence the same partition and folder), active
(not archived), with an id, not locked. A pair is a duplicate when the static-embedding
cosine of the bodies reaches the threshold *and* a lexical check finds nothing that
makes them different memories: other numbers or dates, opposite polarity ("prefers" /
"avoids", "always" / "never"), or a name one mentions and the other does not. Embedding
vectors catch paraphrase; the lexical check catches what a bag of tokens cannot see.

Merging rewrites the older note (``merged_from`` gains the newer id, ``reinforced`` (with
what the newer brought in ``merged_counts``: ``cortex.counts``) and
``last_reinforced`` take the newer one's) and moves the newer one to
``mind/archive/<folder>/`` with ``merged_into``. Only the mind partition is merged: the
vault partition holds permanent records, and the archive lives under ``mind/``.

Scale, near-linear in the number of notes: notes are compared only within a block of
the same type, the same numbers and dates and the same polarity, since the lexical check
refuses every pair across blocks (``--dry-run`` compares across blocks too, to show those
refusals). A block of up to ``EXACT_ROWS`` notes is compared exactly, one matrix product
per chunk of rows against the rows after it; a larger one by an inverted file: spherical
k-means cells of about ``CELL_ROWS`` notes, each note compared with the notes of its
``PROBES`` nearest cells (``bench/bench_scale.py`` prints the share of the exact pairs
found). Vectors are cached by content hash in ``maintain/vectors.npz`` of ``layout.cache_dir``.

The same job retires contradicted memories: when the newest memory of a subject states
another value than an older one — the same statement with other numbers, dates or times,
the opposite polarity, or one state swapped for its opposite (``dedup_check.changed_value``,
built for precision: ``bench/bench_contradiction.py``) — the older one moves to the
archive with ``archive_reason: superseded`` and ``superseded_by``, as a memory an agent
corrects with ``supersedes`` does. Notes are compared only within one subject key
(type, names, the words without values): linear, no embeddings.

A pair a person split — one of them brought back from the archive (``git revert`` of the
``dedup:`` commit, a move back) after cortex merged it into, or superseded it by, the
other — is neither merged nor superseded again (``restored.kept_apart``, asked about
tonight's pairs only); each of the two still pairs with any other note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from cortex.maintenance.base import JobContext, JobResult, archive_path, archived, fold_into, later
from cortex.maintenance.dedup_check import changed_value, lexical, overlap, subject_key, verdict
from cortex.maintenance.restored import Restoration, kept_apart
from cortex.maintenance.snapshot import NoteInfo, Snapshot
from cortex.notes import quote
from cortex.timefmt import format_time

if TYPE_CHECKING:  # pragma: no cover
    import numpy

    from cortex.vault import Vault

JOB = "dedup"
CHUNK_CELLS = 16_000_000  # float32 cells per block product (~64 MB)
EXACT_ROWS = 8_192  # a block this small is compared exactly (at most 3.4·10⁷ pairs)
CELL_ROWS = 512  # notes per inverted-file cell
PROBES = 8  # cells each note is compared with

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


def near_pairs(matrix: "numpy.ndarray", threshold: float) -> list[tuple[int, int, float]]:
    """The pairs of ``similar_pairs``, found by an inverted file in near-linear time: a pair
    is seen when one row lies in a cell among the other's ``PROBES`` nearest centroids.
    Deterministic (a fixed seed); a pair whose rows fall in far-apart cells can be missed."""
    import numpy as np

    n = matrix.shape[0]
    if n <= EXACT_ROWS:
        return similar_pairs(matrix, threshold)
    cells = max(2, n // CELL_ROWS)
    probes = min(PROBES, cells)
    rng = np.random.default_rng(0)
    sample = matrix[np.sort(rng.choice(n, size=min(n, cells * 32), replace=False))]
    centroids = sample[rng.choice(len(sample), size=cells, replace=False)].copy()
    for _ in range(8):  # spherical k-means on the sample
        nearest = np.argmax(sample @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, nearest, sample)
        norms = np.linalg.norm(sums, axis=1)
        used = norms > 0
        centroids[used] = sums[used] / norms[used, None]
    primary = np.empty(n, dtype=np.int64)
    probed = np.empty((n, probes), dtype=np.int64)
    step = max(1, CHUNK_CELLS // cells)
    for start in range(0, n, step):
        sims = matrix[start:start + step] @ centroids.T
        primary[start:start + step] = np.argmax(sims, axis=1)
        probed[start:start + step] = np.argpartition(-sims, probes - 1, axis=1)[:, :probes]
    by_cell = np.argsort(primary, kind="stable")
    member_bounds = np.searchsorted(primary[by_cell], np.arange(cells + 1))
    flat = probed.ravel()
    by_probe = np.argsort(flat, kind="stable")
    query_bounds = np.searchsorted(flat[by_probe], np.arange(cells + 1))
    queries_all = by_probe // probes
    found: dict[tuple[int, int], float] = {}
    for cell in range(cells):
        members = by_cell[member_bounds[cell]:member_bounds[cell + 1]]
        queries = queries_all[query_bounds[cell]:query_bounds[cell + 1]]
        if not len(members) or not len(queries):
            continue
        block = matrix[queries] @ matrix[members].T
        ii, jj = np.nonzero(block >= threshold)
        for q, m, score in zip(queries[ii].tolist(), members[jj].tolist(), block[ii, jj].tolist()):
            if q != m:
                found[(min(q, m), max(q, m))] = score
    return [(i, j, found[(i, j)]) for i, j in sorted(found)]


def eligible(note: NoteInfo) -> bool:
    return (note.partition == "mind" and not note.archived and not note.broken and not note.locked
            and bool(note.id) and bool(note.type) and bool(note.body))


def _sortable(when) -> str | None:
    """A timestamp in one sortable form; None when it cannot be read."""
    from cortex.timefmt import parse_time

    try:
        return format_time(parse_time(when))
    except (ValueError, TypeError):
        return None


def _age(note: NoteInfo) -> tuple[str, str, str]:
    """Creation, then id, then path (an unreadable time sorts last). A copy a person made
    of a memory keeps its ``created`` and is given a later id (UUIDv7 ids sort by the
    time they were given): the memory is the older, and keeps its id and place."""
    return _sortable(note.created) or "9999", note.id or "", note.path


@dataclass(frozen=True)
class Merge:
    keep: NoteInfo
    merge: NoteInfo
    cosine: float


@dataclass(frozen=True)
class DedupPlan:
    merges: tuple[Merge, ...]
    vetoed: tuple[tuple[NoteInfo, NoteInfo, float, str], ...]  # similar, but different memories


def _block(note: NoteInfo, explain: bool) -> tuple:
    """Notes in different blocks are never duplicates: ``lexical_veto`` refuses other
    numbers or dates and opposite polarity before anything else."""
    if explain:
        return (note.type,)
    lex = lexical(note.body)
    return note.type, tuple(sorted(lex.numbers)), lex.polarity


def plan_dedup(snapshot: Snapshot | Sequence[NoteInfo], embed: Callable[[list[NoteInfo]], "numpy.ndarray"],
               threshold: float, *, explain: bool = False) -> DedupPlan:
    """Pure over the snapshot: ``embed`` maps notes to L2-normalised rows. ``explain``
    compares across blocks too, so ``vetoed`` also lists the pairs refused for their
    numbers or polarity (quadratic: for ``--dry-run``)."""
    import numpy as np

    groups: dict[tuple, list[NoteInfo]] = {}
    for note in snapshot:
        if eligible(note):
            groups.setdefault(_block(note, explain), []).append(note)
    groups = {key: sorted(notes, key=_age) for key, notes in groups.items() if len(notes) > 1}
    every = [note for key in sorted(groups) for note in groups[key]]
    rows = np.ascontiguousarray(embed(every), dtype=np.float32) if every else None  # one call, one cache load
    merges, vetoed, offset = [], [], 0
    for key in sorted(groups):
        notes = groups[key]
        matrix = rows[offset:offset + len(notes)]
        offset += len(notes)
        parent = list(range(len(notes)))

        def root(i: int, parent: list[int] = parent) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i, j, score in (similar_pairs if explain else near_pairs)(matrix, threshold):
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
    merges.sort(key=lambda m: (m.merge.type, _age(m.merge)))  # by type, oldest first, whatever the blocks
    return DedupPlan(tuple(merges), tuple(vetoed))


def _stated(note: NoteInfo) -> tuple[str, str]:
    """When a memory was last said — its last reinforcement, else its creation — then
    its path: a repeat of an older value makes that value the current one again."""
    return _sortable(later(note.last_reinforced, note.created)) or _age(note)[0], note.path


@dataclass(frozen=True)
class Contradicted:
    older: NoteInfo
    newer: NoteInfo
    why: str


def plan_contradicted(snapshot: Snapshot | Sequence[NoteInfo], exclude: set[str] = frozenset()) -> list[Contradicted]:
    """Pure: each memory that the one of its subject said last contradicts."""
    groups: dict[tuple, list[NoteInfo]] = {}
    for note in snapshot:
        if eligible(note) and note.path not in exclude:
            groups.setdefault((note.type, *subject_key(note.body)), []).append(note)
    found = []
    for notes in groups.values():
        if len(notes) < 2:
            continue
        notes.sort(key=_stated)
        newest = notes[-1]  # the memory said last: made, or repeated, most recently
        for older in notes[:-1]:
            why = changed_value(older.body, newest.body)
            if why:
                found.append(Contradicted(older, newest, why))
    found.sort(key=lambda c: (c.older.type, _age(c.older)))
    return found


# --- embeddings, cached by content -----------------------------------------------------------

class VectorCache:
    def __init__(self, vault: Vault) -> None:
        self.path = vault.cache_dir / "maintain" / "vectors.npz"
        self.model_spec = vault.settings.embedding_model
        self._model = None

    def embed(self, notes: list[NoteInfo]) -> "numpy.ndarray":
        """Rows for ``notes``, from the cache where the body's hash is known: the hash of
        the words each note holds, not the ``source_hash`` it declares, which a person's
        edit leaves as it was and a note may copy from another's (both then got one vector:
        a pushed note claiming a memory's hash paired with it at cosine 1)."""
        import numpy as np

        from cortex.notes import source_hash

        model_name = str(self.model_spec or "shipped")
        keys, matrix = self._load(model_name)
        row = {k: i for i, k in enumerate(keys)}
        own = [source_hash(n.body) for n in notes]
        bodies = dict(zip(own, (n.body for n in notes)))
        missing = sorted(h for h in bodies if h not in row)
        if missing:
            if self._model is None:
                from cortex.embed import get_model

                self._model = get_model(self.model_spec)
            fresh = self._model.encode([bodies[h] for h in missing])
            matrix = fresh if matrix is None else np.concatenate([matrix, fresh])
            keys = keys + missing
            row = {k: i for i, k in enumerate(keys)}
            self._save(model_name, keys, matrix)
        return matrix[[row[h] for h in own]]

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
    plan = plan_dedup(snapshot, VectorCache(ctx.vault).embed, threshold, explain=dry_run)
    for keep, other, score, why in plan.vetoed:
        if dry_run:
            result.skipped.append({"keep": keep.path, "merge": other.path, "cosine": round(score, 4), "why": why})
    edited = False  # a pair left for the next run: the same notes must be compared again
    merges = []
    for m in plan.merges:
        if ctx.editing(m.keep.path) or ctx.editing(m.merge.path):
            result.skipped.append({"keep": m.keep.path, "merge": m.merge.path, "why": "being edited (uncommitted changes): next run"})
            edited = True
        else:
            merges.append(m)
    # only the pairs about to be merged are looked up in git's history
    split = kept_apart(ctx.repo, [(m.keep, m.merge) for m in merges])
    groups: dict[str, list[Merge]] = {}
    for m in merges:
        if (m.keep.path, m.merge.path) in split:
            result.skipped.append({"keep": m.keep.path, "merge": m.merge.path,
                                   **_apart(split[m.keep.path, m.merge.path])})
            continue
        groups.setdefault(m.keep.path, []).append(m)
        result.items.append({"keep": m.keep.path, "merge": m.merge.path, "cosine": round(m.cosine, 4),
                             "overlap": round(overlap(lexical(m.keep.body), lexical(m.merge.body)), 3),
                             "keep_title": m.keep.title, "merge_title": m.merge.title})
    merging = {m.keep.path for ms in groups.values() for m in ms} | {m.merge.path for ms in groups.values() for m in ms}
    found = []
    for c in plan_contradicted(snapshot, exclude=merging):
        if ctx.editing(c.older.path) or ctx.editing(c.newer.path):
            result.skipped.append({"superseded": c.older.path, "by": c.newer.path,
                                   "why": "being edited (uncommitted changes): next run"})
            edited = True
        else:
            found.append(c)
    split = kept_apart(ctx.repo, [(c.older, c.newer) for c in found])
    contradicted = []
    for c in found:
        if (c.older.path, c.newer.path) in split:
            result.skipped.append({"superseded": c.older.path, "by": c.newer.path,
                                   **_apart(split[c.older.path, c.newer.path])})
            continue
        contradicted.append(c)
        result.items.append({"superseded": c.older.path, "by": c.newer.path, "why": c.why,
                             "superseded_title": c.older.title, "by_title": c.newer.title})
    result.changed = len(result.items)
    if dry_run:
        return result
    changes: dict[str, str | None] = {}
    lines, taken = [], set()
    for merges in groups.values():
        keep = merges[0].keep
        folded, _ = fold_into(ctx, keep, [m.merge for m in merges], taken)
        changes.update(folded)
        lines += [f"{m.merge.path} → {keep.path} — {m.merge.title} ({m.cosine:.3f})" for m in merges]
    n = len(lines)
    for c in contradicted:
        target = ctx.free_path(archive_path(c.older.path), taken)
        taken.add(target)
        changes[target] = ctx.blob(archived(ctx.file_text(c.older), format_time(ctx.now), "superseded",
                                            superseded_by=quote(c.newer.id)))
        changes[c.older.path] = None
        lines.append(f"{c.older.path} → {target}: superseded by {c.newer.path} ({c.why})")
    if changes:
        head = (f"dedup: {n} near-duplicate{'' if n == 1 else 's'} merged into {len(groups)} note{'' if len(groups) == 1 else 's'}"
                if n else "dedup")
        if contradicted:
            k = len(contradicted)
            head += f"{',' if n else ':'} {k} contradicted memor{'y' if k == 1 else 'ies'} superseded"
        result.commit = ctx.commit(JOB, changes, head + "\n\n" + "\n".join(lines) + "\n")
        snapshot = ctx.snapshot()
    state = ctx.vault.load_state()
    if not edited:  # a pair being edited must be looked at again next time; one kept apart stays apart
        state.jobs.setdefault(JOB, {})["checked"] = f"{snapshot.signature}@{threshold:g}"
        ctx.vault.save_state(state)
    return result


def _apart(split: tuple[NoteInfo, Restoration]) -> dict[str, str]:
    """The skipped line of a pair a person split."""
    note, r = split
    return {"why": f"kept apart: a person brought it back in {r.commit[:10]}", "restored": note.path,
            "restored_in": r.commit, "restored_by": r.by}
