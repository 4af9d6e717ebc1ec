"""What a merge of two machines' vaults leaves for cortex to settle across files.

The merge driver (``cortex.mergedriver``) sees one path at a time. Two things it cannot:

- the same observation memorized on two machines on different days: two paths, one
  ``source_hash``. They fold into one note, the older id's (the driver's choice for the
  same day too), which gains ``reinforced`` (1 + the other's count,
  recorded by the other's id in ``merged_counts``, so that machines folding overlapping
  sets count each note once: ``cortex.counts``), the later ``last_reinforced`` and the
  other id in ``merged_from``; the other goes where dedup
  sends a duplicate (``mind/archive/`` with ``merged_into``), or, in the permanent
  ``vault/`` partition that has no archive, is removed (its id lives on in ``merged_from``).
  Only notes whose body is still the observation their ``source_hash`` names fold: one
  a person edited, or one written to claim another memory's hash (a teammate's push),
  stays beside it (``SettlePlan.apart``), since a fold would remove or hide one side's
  words, or archive a memory in favour of other words; so does a twin with fields a
  person changed;
- a memory reinforced on one machine and archived on the other: the driver drops the
  archive fields, and the file comes back out of ``mind/archive/`` to its folder (a
  memory a person moved into the archive themselves never had those fields: it stays);
- a memory forgotten or replaced on one machine (``taxonomy.DELIBERATE_ARCHIVE``) and
  memorized anew on another before it heard: the new note folds into the archived one,
  which stays archived — unless a person edited the new note since it was memorized: it
  stays current (``SettlePlan.edited_forgotten``), their words are not hidden; an archived
  note whose words are not its hash's observation takes no twin in;
- a memory a person deleted on one machine and memorized anew on another before it heard
  (``memorized_anew``): the new note goes, whoever merged (``cortex sync`` or a person's
  plain ``git pull``); so does the archived copy a person's pull leaves of a memory they
  deleted and the other side archived (a rename/delete they concluded with ``git add -A``);
- a memory a person deleted on one side and cortex only counted on the other, brought
  back by a person's merge or rebase that no hook saw conclude (``git rebase --continue``
  runs none; ``cortex.keepdeleted.concluded``): it goes again.

``plan_settle`` is pure over a HEAD snapshot; ``settle`` applies it in one crash-safe
commit (``settle:``), for ``cortex sync`` after every merge, and after a person's plain
``git pull`` at the next ``cortex sync``. A note being edited or maintained by a person
is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, TYPE_CHECKING

from cortex import counts, gitcli
from cortex.maintenance.snapshot import NoteInfo, Snapshot
from cortex.taxonomy import DELIBERATE_ARCHIVE

if TYPE_CHECKING:
    from cortex.maintenance.base import JobContext
    from cortex.vault import Vault

JOB = "sync"
FIRST_MERGES = 20  # merges a machine's first settle looks back on (a person's pulls before it)
_ARCHIVED_RE = re.compile(r"^(archived|merged_into):", re.M)


@dataclass(frozen=True)
class Fold:
    keep: NoteInfo
    others: tuple[NoteInfo, ...]  # live notes of the same memory: archived (or removed) into keep
    # Notes already archived into keep (``merged_into``, directly or through one another)
    # whose repeats keep's count does not hold yet: a machine that folded or reinforced
    # one of them before hearing it was merged here.
    absorbed: tuple[NoteInfo, ...] = ()


@dataclass(frozen=True)
class SettlePlan:
    folds: tuple[Fold, ...]
    revived: tuple[NoteInfo, ...]  # in mind/archive/ without the fields that put it there
    # Twins left beside their note: words not the observation's (an edit, a claim) or a
    # person's fields, which a fold would drop or hide.
    apart: tuple[Fold, ...] = ()
    # Twins of a memory forgotten or replaced on one side, left current: a person edited
    # them since they were memorized (their words now, theirs to forget), as ``keep`` is
    # the archived note.
    edited_forgotten: tuple[Fold, ...] = ()


def _eligible(note: NoteInfo) -> bool:
    return not note.archived and not note.broken and bool(note.id) and bool(note.body)


def plan_settle(snapshot: Snapshot | Iterable[NoteInfo], changed: set[str] | None,
                note_text, first_text=lambda note: None) -> SettlePlan:
    """``changed``: the paths a merge touched (None: look at every note);
    ``note_text(note)``: a note's committed text; ``first_text(note)``: the text it was
    added with (None: unknown), to tell a twin a person edited."""
    groups: dict[str, list[NoteInfo]] = {}
    revived = []
    forgotten: dict[str, NoteInfo] = {}  # source_hash -> a note someone forgot or replaced
    for note in snapshot:
        if note.archived:
            if (changed is None or note.path in changed) and not note.broken \
                    and not _ARCHIVED_RE.search(note_text(note)):
                revived.append(note)
            elif note.archive_reason in DELIBERATE_ARCHIVE and note.id and not note.broken and note.as_memorized:
                forgotten.setdefault(note.source_hash, note)
        elif _eligible(note):
            groups.setdefault(note.source_hash, []).append(note)
    folds: dict[str, Fold] = {}
    apart: list[Fold] = []
    edited_forgotten: list[Fold] = []
    for source, notes in groups.items():
        meant = forgotten.get(source)
        if meant is not None:
            # Memorized on another machine too, before it heard: the twin joins the note
            # forgotten here, which stays archived (a person's own note stays apart, and
            # so does one a person edited since it was memorized: their words now).
            twins = tuple(n for n in notes if not n.locked and n.partition == "mind")
            if not twins or (changed is not None and not any(n.path in changed for n in (meant, *twins))):
                continue
            edited = tuple(n for n in twins if changed_since_memorized(first_text(n), note_text(n)))
            if edited:
                edited_forgotten.append(Fold(meant, edited))
            if len(twins) > len(edited):
                folds[meant.path] = Fold(meant, tuple(n for n in twins if n not in edited))
            continue
        if len(notes) < 2 or (changed is not None and not any(n.path in changed for n in notes)):
            continue
        if any(n.locked for n in notes):
            continue  # a person keeps these apart on purpose
        # A fold is for one observation memorized on two machines: only notes whose words
        # are still that observation's fold, into the older id. A note whose body is not
        # the one its source_hash names — a person's edit, or a note pushed to claim
        # another's memory — stays beside it: a fold would hide one side's words, or
        # archive a memory in favour of other words and give them its repeats.
        notes.sort(key=lambda n: (not n.as_memorized, n.id or ""))
        keep, kept_text = notes[0], note_text(notes[0])
        own = tuple(n for n in notes[1:] if not (keep.as_memorized and n.as_memorized)
                    or _own_words(n, kept_text, note_text, first_text))
        if own:
            apart.append(Fold(keep, own))
        if len(notes) - 1 > len(own):
            folds[keep.path] = Fold(keep, tuple(n for n in notes[1:] if n not in own))
    for keep, absorbed in _uncounted(snapshot, changed):
        fold = folds.get(keep.path)
        folds[keep.path] = Fold(keep, fold.others if fold else (), absorbed)
    return SettlePlan(tuple(folds.values()), tuple(revived), tuple(apart), tuple(edited_forgotten))


def _own_words(twin: NoteInfo, kept_text: str, note_text, first_text) -> bool:
    """Whether ``twin`` holds words of a person's that the kept note lacks: a fold would
    remove them (in ``vault/``) or hide them in the archive (repro: both machines'
    people edited their own copy of one decision before a sync)."""
    from cortex.mergedriver import same_words

    text = note_text(twin)
    return not same_words(kept_text, text) and changed_since_memorized(first_text(twin), text)


def changed_since_memorized(first: str | None, text: str) -> bool:
    """Whether a note whose text is ``text`` says more than it did when memorized
    (``first``; None: not found, so it may): more than cortex's maintained fields."""
    from cortex.mergedriver import maintained_only

    return first is None or not maintained_only(first, text)


def _uncounted(snapshot: Snapshot | Iterable[NoteInfo], changed: set[str] | None) -> Iterator[tuple[NoteInfo, tuple]]:
    """Each live note with the archived notes merged into it (through one another too)
    whose repeats its ``merged_counts`` does not hold yet. A note named in
    ``merged_from`` without a ``merged_counts`` entry was folded before counts were kept
    by id: its repeats are in ``reinforced`` already."""
    notes = list(snapshot)
    into: dict[str, list[NoteInfo]] = {}
    for note in notes:
        if note.archived and note.merged_into and note.id and not note.broken:
            into.setdefault(note.merged_into, []).append(note)
    if not into:
        return
    for keep in notes:
        if keep.archived or keep.broken or keep.locked or not keep.id or keep.id not in into:
            continue
        absorbed, seen, stack = [], {keep.id}, list(into[keep.id])
        while stack:
            note = stack.pop()
            if note.id in seen:
                continue
            seen.add(note.id)
            absorbed.append(note)
            stack += into.get(note.id, ())
        if changed is not None and keep.path not in changed and not any(n.path in changed for n in absorbed):
            continue
        known = dict(keep.merged_counts)
        absorbed = [n for n in absorbed if n.id in known or n.id not in keep.merged_from]
        if absorbed and counts.fold(keep.count, [(n.id, n.count) for n in absorbed]) != keep.count:
            yield keep, tuple(sorted(absorbed, key=lambda n: n.path))


def memorized_anew(root: Path, head: str, tip: str) -> dict[str, str]:
    """{note added on one side of a merge of ``head`` and ``tip``: the path its memory was
    deleted from on the other}: an agent that had not heard of a person's deletion said
    it again and memorized it anew (the same ``source_hash``). The deletion stands, as a
    forgotten memory stays archived; a note memorized after its side heard (a person's
    ``quarantine promote``) is not in this merge's two sides, and stays."""
    from cortex import gitcli
    from cortex.headcache import added, deletions
    from cortex.layout import PARTITIONS

    base = gitcli.run(root, "merge-base", head, tip).out.strip()
    if not base:
        return {}
    twins: dict[str, str] = {}
    sides = {head: tip, tip: head}
    gone = {side: deletions(root, f"{base}..{side}") for side in sides}
    if not any(gone.values()):
        return {}
    new = {side: added(root, base, side) for side in sides}
    for side, other in sides.items():
        said = {h: path for h, path in new[side].items() if h in gone[other]}
        if said:  # rare: read the other side's tree for the hashes, which a move keeps
            found = gitcli.run(root, "grep", "-h", "-o", "-F", *(a for h in said for a in ("-e", h)), other, "--",
                               *PARTITIONS)
            said = {h: path for h, path in said.items() if h not in found.out}
        twins.update({path: gone[other][h] for h, path in said.items()})
    return twins


def settle(vault: Vault, now: datetime) -> list[dict[str, Any]]:
    """Apply what HEAD needs settling (since the last settle); the items done."""
    if _settled(vault):
        return []  # nearly always: no repository to open (pygit2's import) for nothing to do
    from cortex.maintenance.base import JobContext

    ctx = JobContext(vault, now)
    return ctx.replanned(lambda: _settle(ctx))


def _settled(vault: Vault) -> bool:
    """HEAD is settled already (or unborn): asked of git, not pygit2. ``_settle`` asks
    again with the repository open, so a commit landing in between is seen there."""
    head = gitcli.rev(vault.root, "HEAD")
    return head is None or vault.load_state().extra.get(JOB, {}).get("settled") == head


def _settle(ctx: JobContext) -> list[dict[str, Any]]:
    from cortex.maintenance.base import fold_into, unarchive_path

    vault = ctx.vault
    head = ctx.repo.head_oid()
    state = vault.load_state()
    record = state.extra.setdefault("sync", {})
    if head is None or record.get("settled") == head:
        return []
    changed = _changed_since(ctx.repo, record.get("settled"), head)
    snapshot = ctx.snapshot()
    plan = plan_settle(snapshot, changed, ctx.file_text, lambda note: first_text(ctx.repo.root, note.path))
    changes: dict[str, str | None] = {}
    items: list[dict[str, Any]] = []
    lines: list[str] = []
    taken: set[str] = set()
    for note in plan.revived:
        why = _archived_as(ctx.repo.root, _last_change(ctx.repo.root, note.path), note.path)
        if why is None or ctx.editing(note.path):
            continue  # None: a person moved it into the archive (no merge dropped cortex's fields)
        target = ctx.free_path(unarchive_path(note.path), taken)
        taken.add(target)
        changes[target] = ctx.blob(ctx.file_text(note))
        changes[note.path] = None
        items.append({"revived": note.path, "to": target, "was": why})
        lines.append(f"{note.path} → {target} — {note.title} "
                     + (f"({why} on one machine, its words edited by a person on another: theirs now)"
                        if why in DELIBERATE_ARCHIVE else "(alive on another machine)"))
    for fold in plan.folds:
        if any(ctx.editing(n.path) for n in (fold.keep, *fold.others)):
            continue
        keep = fold.keep
        folded, count = fold_into(ctx, keep, fold.others, taken, absorbed=fold.absorbed)
        changes.update(folded)
        lines += [f"{keep.path} — {keep.title} (counts the repeats of {n.path}, merged into it elsewhere)"
                  for n in fold.absorbed]
        why = f"{keep.archive_reason} here: it stays archived" if keep.archived else "the same memory from another machine"
        lines += [f"{o.path} → {keep.path} — {o.title} ({why})" for o in fold.others]
        items.append({"kept": keep.path, "folded": [o.path for o in fold.others], "reinforced": count.total,
                      **({"counted": [n.path for n in fold.absorbed]} if fold.absorbed else {}),
                      **({"stays_archived": keep.archive_reason} if keep.archived else {})})
    present = {n.path for n in snapshot}
    # Twins kept apart are told once, by the settle that first finds them on this machine:
    # a later change to either (a repeat counted, another edit) leaves them as they were.
    told = {pair for pair in record.get("apart_told") or () if all(p in present for p in pair.split("\t"))}
    for fold in plan.apart:
        fresh = [o.path for o in fold.others if f"{fold.keep.path}\t{o.path}" not in told]
        told.update(f"{fold.keep.path}\t{path}" for path in fresh)
        if fresh:
            items.append({"apart": fresh, "beside": fold.keep.path})
    for fold in plan.edited_forgotten:
        for twin in fold.others:
            if f"{fold.keep.path}\t{twin.path}" not in told:
                told.add(f"{fold.keep.path}\t{twin.path}")
                items.append({"kept_edited": twin.path, fold.keep.archive_reason or "forgotten": fold.keep.path})
    for twin, path in _twins_merged(ctx.repo, record.get("settled"), head).items():
        if twin in present and twin not in changes and not ctx.editing(twin):
            if _edited_since_memorized(ctx, twin):  # a person's words now: theirs to delete, not cortex's
                items.append({"kept_edited": twin, "deleted": path})
                continue
            changes[twin] = None
            items.append(_twin_deleted(twin, path, snapshot.by_path()[twin]))
            lines.append(f"{twin} deleted ({_twin_why(items[-1])})")
    from cortex import gitcli
    from cortex.keepdeleted import concluded

    # A person's merge or rebase that brought back such a memory without the hook's say
    # (`git rebase --continue` runs none): the deletion stands, as in a sync's own merge.
    for kept in concluded(ctx.repo.root, record.get("settled"), head, gitcli.stdout_bytes):
        if kept.path in present and kept.path not in changes and not ctx.editing(kept.path):
            changes[kept.path] = None
            items.append({"kept_deleted": kept.path, "brought_back_by": kept.by})
            lines.append(f"{kept.path} deleted (deleted by a person on one side, only reinforced on the other; "
                         f"{kept.by[:12]} had brought it back)")
    if changes:
        head_line = f"settle: {len(lines)} note{'' if len(lines) == 1 else 's'} after a sync"
        ctx.commit(JOB, changes, head_line + "\n\n" + "\n".join(lines) + "\n")
        head = ctx.repo.head_oid()
    state = vault.load_state()
    state.extra.setdefault("sync", {})["settled"] = head
    state.extra["sync"]["apart_told"] = sorted(told)
    vault.save_state(state)
    return items


def _twin_deleted(twin: str, path: str, note: NoteInfo) -> dict[str, Any]:
    """The settle's item for ``twin``, a copy of the memory a person deleted as ``path``:
    one memorized anew on the other side, or that memory archived there (decay moved it
    into ``mind/archive/``, a rename/delete git left for the person's pull to conclude)."""
    item: dict[str, Any] = {"kept_deleted": twin, "deleted": path}
    if note.archived:
        item["archived"] = note.archive_reason or "archived"
    return item


def _twin_why(item: dict[str, Any]) -> str:
    if "archived" in item:
        return f"the archived copy of {item['deleted']}, which a person deleted; archived on the other side: {item['archived']}"
    return f"the memory deleted as {item['deleted']} on the other side, memorized anew before it heard"


def _last_change(root: Path, path: str) -> str:
    """The newest commit that made ``path`` what it is at HEAD (git's default history
    simplification: a merge only when its result is neither side's)."""
    from cortex import gitcli

    return gitcli.run(root, "log", "-1", "--format=%H", "HEAD", "--", path).out.strip() or "HEAD"


def _archived_as(root: Path, head: str, path: str) -> str | None:
    """The ``archive_reason`` ``path`` had in a parent of ``head`` (the merge's sides;
    None: not archived there)."""
    from cortex import gitcli

    for parent in gitcli.run(root, "rev-parse", f"{head}^@").out.split():
        shown = gitcli.run(root, "show", f"{parent}:{path}")
        found = re.search(r"^archive_reason:\s*\"?([\w-]+)", shown.out, re.M) if shown.ok else None
        if found:
            return found.group(1)
    return None


def _edited_since_memorized(ctx: JobContext, path: str) -> bool:
    """Whether a person changed the note at ``path`` since it was memorized (more than
    cortex's maintained fields); when its first text cannot be found, it may have been."""
    now = ctx.repo.file_at_head(path)
    return now is None or changed_since_memorized(first_text(ctx.vault.root, path), now.decode("utf-8", "replace"))


def first_text(root: Path, path: str) -> str | None:
    """The text ``path`` was added with at HEAD's history (None: not found)."""
    from cortex import gitcli

    commit = gitcli.run(root, "log", "--diff-filter=A", "--format=%H", "-1", "--", path).out.strip()
    if not commit:
        return None
    shown = gitcli.run(root, "show", f"{commit}:{path}")
    return shown.out if shown.code == 0 else None


def _twins_merged(repo, old: str | None, new: str) -> dict[str, str]:
    """``memorized_anew`` of the merges since the last settle (before a first one, the
    last ``FIRST_MERGES``: a person's ``git pull`` before this machine's first sync)."""
    from cortex import gitcli

    since = [f"{old}..{new}"] if old is not None else [f"--max-count={FIRST_MERGES}", new]
    twins: dict[str, str] = {}
    for line in gitcli.run(repo.root, "rev-list", "--merges", "--parents", *since).out.splitlines():
        _, first, *others = line.split()
        for other in others:
            twins.update(memorized_anew(repo.root, first, other))
    return twins


def _changed_since(repo, old: str | None, new: str) -> set[str] | None:
    """Paths that differ between two commits (None: no earlier settle, look at all)."""
    if old is None:
        return None
    try:
        diff = repo.repo.diff(repo.repo.revparse_single(old), repo.repo.revparse_single(new))
    except (KeyError, ValueError):
        return None
    out: set[str] = set()
    for delta in diff.deltas:
        out.add(delta.new_file.path)
        out.add(delta.old_file.path)
    return out
