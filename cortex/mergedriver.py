"""The git merge driver for notes: what two machines did to one note, combined.

``cortex init`` registers it for every markdown file (``*.md``: a memory may be moved
anywhere) in ``.gitattributes`` and in ``.git/config`` (``merge.cortex-note.driver``), so
``cortex sync`` and a plain ``git pull`` or ``git merge`` settle the same way. A note with
no cortex fields (a person's own) gets git's text merge, as without the driver; a memory:

- the same observation memorized on both sides (an add/add of one path: same day, same
  hash) is one note (the one a person edited, else the older id's) plus a reinforcement:
  ``reinforced`` is the sum of both plus one, ``merged_from`` keeps the other id and
  ``merged_counts`` what it brought; bodies a person edited on both sides (no common
  ancestor to merge them with) keep both, with conflict markers where they differ; a
  note two sides each folded into a note of their own (a third machine's, on three or
  more) folds the same way, the two merged from the note both absorbed;
- ``reinforced`` adds up: each side's own increments once, and every note absorbed on
  either side (``merged_counts``, by id) once, so overlapping folds are not counted twice
  (``cortex.counts``); ``last_reinforced`` takes the later, ``merged_from`` is the union;
- archived (faded or merged) on one side, alive on the other (reinforced or its body
  edited): a reinforced or edited memory is not archived, so the archive fields go and
  ``cortex sync`` moves the file back out of ``mind/archive/``; one forgotten or replaced
  (``taxonomy.DELIBERATE_ARCHIVE``) stays archived with the other side's count: someone
  said it is wrong, and a repeat elsewhere does not make it right; but a person's edit of
  its words on the other side brings it back (their words now, not hidden in the archive);
- any other field or the body changed on one side only takes that side; both bodies
  edited merge line by line when the edits do not overlap, and the ``title`` and
  ``aliases`` the hook derived from each side's body are derived again from the merged
  body (a title a person wrote wins over a derived one).

What is left (both sides rewrote the same lines, or one field two ways) gets git's
conflict markers and a non-zero exit: a person decides. The core, ``merge_note``, is
pure (three texts in, text and a clean flag out); ``main`` is the thin file layer.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from cortex import counts, gitcli
from cortex.notes import NoteSyntaxError, quote, source_hash, split_frontmatter
from cortex.taxonomy import ARCHIVE_FIELDS as ARCHIVE_KEYS, DELIBERATE_ARCHIVE
_KEY_RE = re.compile(r"^([A-Za-z_][\w-]*)\s*:")


class _Unmergeable(Exception):
    pass


# --- the note as blocks ---------------------------------------------------------------------


def _split(text: str) -> tuple[list[tuple[str, str]], str, str]:
    """(frontmatter blocks as (name, raw lines), body, opening) — raises _Unmergeable."""
    try:
        split = split_frontmatter(text)
    except NoteSyntaxError:
        raise _Unmergeable from None
    if split is None:
        raise _Unmergeable
    fm, body, _ = split
    blocks: list[tuple[str, str]] = []
    for line in fm.splitlines(keepends=True):
        m = _KEY_RE.match(line)
        if m:
            blocks.append((m.group(1), line))
        elif blocks and line[:1] in (" ", "\t", "-") and not blocks[-1][0].startswith("#"):
            blocks[-1] = (blocks[-1][0], blocks[-1][1] + line)  # a key's continuation lines
        else:
            blocks.append(("#" + line.strip(), line))  # a comment (the `# ---` separator)
    opening = text[: text.index("\n") + 1]
    return blocks, body, opening


def _value(raw: str | None) -> str | None:
    if raw is None:
        return None
    return raw.split(":", 1)[1].strip().strip("\"'")


def _count(raw: str | None) -> int:
    try:
        return int(_value(raw) or 0)
    except ValueError:
        raise _Unmergeable from None


def _note_count(blocks: dict) -> counts.Count:
    """``reinforced`` and ``merged_counts`` of a note's blocks (``cortex.counts``)."""
    raw = blocks.get(counts.KEY)
    merged = {}
    if raw is not None:
        import yaml

        try:
            merged = counts.parse_merged(yaml.safe_load(raw.split(":", 1)[1]))
        except yaml.YAMLError:
            raise _Unmergeable from None
    return counts.Count(_count(blocks.get("reinforced")), merged)


def _ids(raw: str | None) -> list[str]:
    text = _value(raw) or ""
    return [i.strip().strip("\"'") for i in text.strip("[]").split(",") if i.strip().strip("\"'")]


def _later(a: str | None, b: str | None) -> str | None:
    from cortex.timefmt import parse_time

    if not a or not b:
        return a or b
    try:
        return a if parse_time(a) >= parse_time(b) else b
    except ValueError:
        return max(a, b)


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text[:200] else "\n"


# What cortex's jobs write on a note: a repeat counted, a twin folded in, an archive.
MAINTAINED = ("reinforced", "last_reinforced", "reinforced_tally", "merged_from", counts.KEY, *ARCHIVE_KEYS)


def maintained_only(base: str, side: str) -> bool:
    """Whether ``side`` differs from ``base`` only in what cortex's jobs maintain: nobody
    changed what the note says (``cortex sync``: a note a person deleted on one side and
    only counted on the other stays deleted)."""
    try:
        (ob, obody, _), (sb, sbody, _) = _split(base), _split(side)
    except _Unmergeable:
        return False
    o, s = dict(ob), dict(sb)
    return obody == sbody and all(o.get(k) == s.get(k) for k in {*o, *s} if k not in MAINTAINED)


IDENTITY = ("id", "created")  # what two notes of one memory differ in from birth


def same_words(a: str, b: str) -> bool:
    """Whether two notes of one memory say the same: the body and every field but what
    cortex maintains and each note's own identity (``cortex sync`` folds such a twin)."""
    try:
        (ab, abody, _), (bb, bbody, _) = _split(a), _split(b)
    except _Unmergeable:
        return False
    x, y = dict(ab), dict(bb)
    ignored = {*MAINTAINED, *IDENTITY}
    return _same(abody, bbody) and all(_same(x.get(k), y.get(k)) for k in {*x, *y} if k not in ignored)


# --- the merge ----------------------------------------------------------------------------


def merge_note(base: str, ours: str, theirs: str) -> tuple[str, bool]:
    """The merged note and whether it merged cleanly (else it carries conflict markers)."""
    if ours == theirs:
        return ours, True
    if base == ours:
        return theirs, True
    if base == theirs:
        return ours, True
    if not base.strip() and _is_brief(ours) and _is_brief(theirs):
        # A digest each machine wrote of what it saw (`cortex brief --write` scheduled on
        # two of them), remade from the history at will: one is kept, the same one on
        # either side, so the syncs converge instead of stopping for a person every night.
        # Only when both added it: a brief a person edited since is merged as any note.
        return max(ours, theirs, key=lambda text: (len(text), text)), True
    try:
        if not base.strip():
            return _fold(ours, theirs)
        if _absorbed_on_both_sides(base, ours, theirs):
            return _fold(ours, theirs, base)
        return _three_way(base, ours, theirs), True
    except _Unmergeable:
        return _line_merge(base, ours, theirs)


def _absorbed_on_both_sides(base: str, ours: str, theirs: str) -> bool:
    """Each side folded the base note into a note of its own (three machines memorized one
    observation the same day; two folded the third's before hearing of each other): both
    changed the id, each to another, and both name the base's id in ``merged_from``. Two
    notes of one memory, to fold as an add/add is — a three-way merge of their ids and
    counts would stop for a person, or count the base's repeats twice."""
    try:
        o, a, b = (dict(_split(text)[0]) for text in (base, ours, theirs))
    except _Unmergeable:
        return False
    base_id, ids = _value(o.get("id")), {_value(a.get("id")), _value(b.get("id"))}
    return (bool(base_id) and len(ids - {base_id, None}) == 2
            and all(base_id in _ids(side.get("merged_from")) for side in (a, b)))


def _fold(ours: str, theirs: str, base: str | None = None) -> tuple[str, bool]:
    """Two notes of one memory (same hash) at one path fold into one, with both bodies'
    words. Added on both sides (no ``base``), a body a person edited on both has no
    common ancestor to merge with, so what differs gets conflict markers for a person
    (git's own add/add). With the ``base`` note both absorbed, bodies and fields merge
    from it; a field each note was born with its own value of (a session) is the kept
    note's, as in an add/add."""
    a, b = dict(_split(ours)[0]), dict(_split(theirs)[0])
    if _value(a.get("source_hash")) != _value(b.get("source_hash")) or not _value(a.get("id")) or not _value(b.get("id")):
        raise _Unmergeable
    # A person's edit keeps its note; else the older id does (settle chooses alike).
    rank = {side: (not _edited(text), _value(meta["id"])) for side, text, meta in (("a", ours, a), ("b", theirs, b))}
    keep_text, keep, other = (ours, a, b) if rank["a"] <= rank["b"] else (theirs, b, a)
    blocks, body, opening = _split(keep_text)
    other_text = theirs if keep_text is ours else ours
    other_body = _split(other_text)[1]
    clean = True
    base_blocks, base_body, _ = _split(base) if base else ([], "", "")
    if not _same(body, other_body) and (base or _edited(other_text)):
        # Both edited (keep ranks an edited note first): keep's words and the other's.
        first, second = (body, other_body) if keep_text is ours else (other_body, body)
        body, clean = _merge_file(base_body, first, second)
    nl = _newline(keep_text)
    ids = _ids(keep.get("merged_from")) + [i for i in [*_ids(other.get("merged_from")), _value(other["id"])]
                                            if i not in _ids(keep.get("merged_from"))]
    count = counts.fold(_note_count(keep), [(_value(other["id"]), _note_count(other))])
    fields = {
        "reinforced": str(count.total),
        counts.KEY: counts.render_merged(count.merged),
        "last_reinforced": _later(_value(keep.get("last_reinforced")) or _value(keep.get("created")),
                                  _value(other.get("last_reinforced")) or _value(other.get("created"))),
        "merged_from": "[" + ", ".join(quote(i) for i in ids) + "]",
        "reinforced_tally": _tally(keep, other) if keep.get("reinforced_tally") or other.get("reinforced_tally") else None,
    }
    out = dict(blocks)
    for key, value in fields.items():
        if value is not None:
            out[key] = f"{key}: {value}{nl}"
    # A field only the other note has (a person's `tags`, say) comes along; from a base,
    # any field changed on the other side only.
    added = [n for n in other if n not in out and n not in MAINTAINED and not n.startswith("#")]
    out.update({n: other[n] for n in added})
    if base:
        out.update(_changed_on_one_side(dict(base_blocks), keep, other))
    return _render(_order([n for n, _ in blocks], [*fields, *added]), out, body, opening), clean


def _changed_on_one_side(base: dict, keep: dict, other: dict) -> dict[str, str | None]:
    """The fields (not cortex's counts, nor a note's identity) one of two folded notes
    changed from the ``base`` both absorbed: a person's edit on either side is kept."""
    out = {}
    for name in {*keep, *other} - {*MAINTAINED, *IDENTITY}:
        picked = _pick(base.get(name), keep.get(name), other.get(name))
        if not name.startswith("#") and picked is not _CONFLICT:
            out[name] = picked
    return out


def _edited(text: str) -> bool:
    """The body is no longer the observation's text (a person edited it)."""
    blocks, body, _ = _split(text)
    return source_hash(body) != _value(dict(blocks).get("source_hash"))


def _tally(a: dict, b: dict) -> str:
    """The tally of a merged count, quoted (hex digits alone would read as a number): the
    same two tallies always give the same one, so two machines merging the same two counts
    write the same bytes (git keeps one: right). Each is taken as the text written, quoted
    or not (an older cortex wrote it plain)."""
    import hashlib

    pair = sorted(_value(x.get("reinforced_tally")) or "" for x in (a, b))
    return quote(hashlib.sha256("+".join(pair).encode()).hexdigest()[:8])


def _alive(base: dict, side: dict, base_body: str, side_body: str) -> bool:
    """The side shows the memory in use: reinforced, or its body edited."""
    return (_count(side.get("reinforced")) > _count(base.get("reinforced"))
            or (_value(side.get("last_reinforced")) or "") > (_value(base.get("last_reinforced")) or "")
            or side_body != base_body)


def _three_way(base: str, ours: str, theirs: str) -> str:
    ob, obody, _ = _split(base)
    ab, abody, opening = _split(ours)
    bb, bbody, _ = _split(theirs)
    o, a, b = dict(ob), dict(ab), dict(bb)
    for blocks in (ob, ab, bb):
        keys = [n for n, _ in blocks if not n.startswith("#")]
        if len(keys) != len(set(keys)):
            raise _Unmergeable  # a repeated key: only a person knows which one is meant
    nl = _newline(ours)

    body = _merge_body(obody, abody, bbody)
    names = [n for n, _ in ab] + [n for n, _ in bb if n not in a]
    out: dict[str, str | None] = {}
    for name in dict.fromkeys([*names, *o]):
        out[name] = _pick(o.get(name), a.get(name), b.get(name))
    out.update(_derived(base, ours, theirs, body, o, a, b, nl))

    count = counts.merge3(_note_count(o), _note_count(a), _note_count(b))
    if count.total > 0 or out.get("reinforced") is not None:
        out["reinforced"] = f"reinforced: {count.total}{nl}"
    if count.merged:
        out[counts.KEY] = f"{counts.KEY}: {counts.render_merged(count.merged)}{nl}"
    last = _later(_value(a.get("last_reinforced")), _value(b.get("last_reinforced")))
    if last:
        out["last_reinforced"] = f"last_reinforced: {last}{nl}"
    if out.get("reinforced_tally") is _CONFLICT:
        out["reinforced_tally"] = f"reinforced_tally: {_tally(a, b)}{nl}"
    merged = list(dict.fromkeys([*_ids(a.get("merged_from")), *_ids(b.get("merged_from"))]))
    if merged:
        out["merged_from"] = "merged_from: [" + ", ".join(quote(i) for i in merged) + "]" + nl

    a_archived, b_archived = "archived" in a, "archived" in b
    if "archived" not in o and a_archived != b_archived:
        other, other_body = (b, bbody) if a_archived else (a, abody)
        keeper = a if a_archived else b
        # Merged into another note, the memory lives on there; forgotten or replaced, it was
        # meant, and a repeat elsewhere does not make it right: only a person's edit of the
        # words brings it back (their words now, not to be hidden in the archive).
        if _value(keeper.get("archive_reason")) in DELIBERATE_ARCHIVE or "merged_into" in keeper:
            alive = other_body != obody
        else:
            alive = _alive(o, other, obody, other_body)
        for key in ARCHIVE_KEYS:
            out[key] = None if alive else keeper.get(key)
    elif a_archived and b_archived and "archived" not in o:
        first = a if (_value(a.get("archived")) or "") <= (_value(b.get("archived")) or "") else b
        for key in ARCHIVE_KEYS:
            out[key] = first.get(key)
    elif any(out.get(k) is _CONFLICT for k in ARCHIVE_KEYS):
        raise _Unmergeable

    if any(v is _CONFLICT for v in out.values()):
        raise _Unmergeable
    order = _order([n for n, _ in ab], [n for n, _ in bb if n not in a])
    order += [n for n in out if n not in order]
    return _render(order, out, body, opening)


_CONFLICT: str = "\0conflict"

DERIVED = ("title", "aliases")  # what the hook derives from the body while no person wrote them


def _derived(base: str, ours: str, theirs: str, body: str, o: dict, a: dict, b: dict, nl: str) -> dict[str, str | None]:
    """``title`` and ``aliases`` of the merged note, where they are still what the hook
    derived from each side's body: derived from the merged body by the hook's own rule
    (``fixer.followed_title``), never merged line by line — two edits to different lines
    of a body each re-derived them, and would conflict where the bodies do not. A title
    a person wrote on one side (not what that side's body gives) is theirs and wins over
    a derived one; written on both sides, it is merged as any field."""
    if all(_same(o.get(key), a.get(key)) and _same(o.get(key), b.get(key)) for key in DERIVED):
        return {}  # neither side touched them (a count, a field): nothing to derive
    from cortex.fixer import followed_title, render_followed
    from cortex.notes import parse_note

    try:
        (om, obody), (am, abody), (bm, bbody) = ((n.meta, n.body) for n in map(parse_note, (base, ours, theirs)))
    except NoteSyntaxError:
        return {}
    sides = ((am, abody, a), (bm, bbody, b))
    follows = [followed_title(om, side_body, base) for _, side_body, _ in sides]
    merged = render_followed(followed_title(om, body, base))
    out: dict[str, str | None] = {}
    for key in DERIVED:
        derived = [meta.get(key) in (om.get(key), follow.get(key, om.get(key)))
                   for (meta, _, _), follow in zip(sides, follows)]
        if all(derived):
            out[key] = f"{key}: {merged[key]}{nl}" if key in merged else o.get(key)
        elif any(derived):
            out[key] = (b if derived[0] else a).get(key)  # the side a person wrote it on
    return out


def _same(x: str | None, y: str | None) -> bool:
    if x is None or y is None:
        return x is y
    return [line.rstrip() for line in x.splitlines()] == [line.rstrip() for line in y.splitlines()]


def _pick(o: str | None, a: str | None, b: str | None) -> str | None:
    if _same(a, b) or _same(o, b):
        return a
    if _same(o, a):
        return b
    return _CONFLICT


def _merge_body(o: str, a: str, b: str) -> str:
    """Both bodies' edits, when they touch different lines. ``source_hash`` stays: it
    names the observation the note came from, not the text it has become."""
    if a == b or o == b:
        return a
    if o == a:
        return b
    merged, clean = _merge_file(o, a, b)
    if not clean:
        raise _Unmergeable
    return merged


def _order(names: list[str], added: list[str]) -> list[str]:
    """``names`` with ``added`` ones placed as cortex places them (reinforced after
    last_reinforced, others before the closing fence)."""
    order = list(names)
    for name in added:
        if name in order:
            continue
        if name == "reinforced" and "last_reinforced" in order:
            order.insert(order.index("last_reinforced") + 1, name)
        elif name in ("reinforced_tally", counts.KEY) and "reinforced" in order:
            order.insert(order.index("reinforced") + 1, name)
        else:
            order.append(name)
    return order


def _render(order: list[str], blocks: dict[str, str | None], body: str, opening: str) -> str:
    nl = "\r\n" if opening.endswith("\r\n") else "\n"
    lines = [opening]
    for name in order:
        raw = blocks.get(name)
        if raw is not None:
            lines.append(raw if raw.endswith("\n") else raw + nl)
    return "".join(lines) + "---" + nl + body


# --- line merge (git's own), for what is not a note or cannot be settled ------------------


DEFAULT_LABELS = ("ours", "base", "theirs")
# What git passed ``main`` (the marker size, %L, and the versions' names %X %S %Y, looked
# up only for a merge that conflicts: ``_git_labels``)
_marker_size = 7
_given_labels: list[str] | None = None


def _merge_file(base: str, ours: str, theirs: str, labels=None) -> tuple[str, bool]:
    """git's own text merge of three texts (``git merge-file``), with the names git gives
    the versions in conflict markers."""
    with tempfile.TemporaryDirectory(prefix="cortex-merge-") as tmp:
        paths = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_text(text, encoding="utf-8", newline="")
            paths.append(str(path))

        def merge(names):
            return gitcli.run_bytes(None, "merge-file", "-p", f"--marker-size={_marker_size}",
                                    "-L", names[0], "-L", names[1], "-L", names[2], *paths)

        proc = merge(labels or DEFAULT_LABELS)
        if proc is not None and proc.code > 0 and labels is None and _given_labels is not None:
            named = _git_labels(_given_labels)
            if named != DEFAULT_LABELS:
                proc = merge(named)
    if proc is None or proc.code < 0 or proc.code > 127:
        raise OSError("git merge-file failed: " + (proc.err.decode(errors="replace").strip() if proc else "no git"))
    return proc.out.decode("utf-8", errors="replace"), proc.code == 0


def _line_merge(base: str, ours: str, theirs: str) -> tuple[str, bool]:
    return _merge_file(base, ours, theirs)


def _is_brief(text: str) -> bool:
    """The day's brief as `cortex brief --write` commits it (attributed to cortex, tagged brief)."""
    try:
        meta = dict(_split(text)[0])
    except _Unmergeable:
        return False
    return (_value(meta.get("attribution")) == "cortex" and _value(meta.get("type")) == "event"
            and "brief" in _ids(meta.get("tags")))


def is_memory(text: str) -> bool:
    """A note cortex made or completed (it has cortex's ``source_hash``), wherever it lives."""
    try:
        return any(name == "source_hash" for name, _ in _split(text)[0])
    except _Unmergeable:
        return False


def _git_labels(given: list[str]) -> tuple[str, str, str]:
    """(ours, base, theirs): the names git gives the versions in conflict markers. git
    2.44 and later pass them (%X %S %Y); older git passes the placeholders as written, so
    they are found as git finds them: ``git merge``/``git pull`` names the merged commit
    in ``GITHEAD_<oid>``; a rebase picks the commit its ``done`` list ends with."""
    import os

    base, ours, theirs = (given + ["%S", "%X", "%Y"][len(given):])[:3]
    if ours != "%X" and theirs != "%Y":
        return ours, base if base != "%S" else DEFAULT_LABELS[1], theirs
    heads = [(k[len("GITHEAD_"):], v) for k, v in os.environ.items() if k.startswith("GITHEAD_")]
    if len(heads) == 1:
        oid, name = heads[0]
        found = (_git("merge-base", "--all", "HEAD", oid) or "").split()
        ancestor = _git("rev-parse", "--short", found[0]) if len(found) == 1 else None
        return "HEAD", ancestor or "merged common ancestors", name
    picked = _rebase_pick()
    if picked:
        return "HEAD", f"parent of {picked}", picked
    return DEFAULT_LABELS


def _git(*args: str) -> str | None:
    # git runs a merge driver at the top of the working tree (cortex sync: in a folder of
    # its own, GIT_DIR naming the repository)
    res = gitcli.run(Path.cwd(), *args)
    return res.out.strip() if res.ok else None


def _rebase_pick() -> str | None:
    """``<short id> (<subject>)`` of the commit a rebase is applying, as git labels it."""
    git_dir = _git("rev-parse", "--absolute-git-dir")
    try:
        done = (Path(git_dir) / "rebase-merge" / "done").read_text(encoding="utf-8").splitlines() if git_dir else []
    except OSError:
        return None
    parts = done[-1].split(None, 2) if done else []
    if len(parts) < 2:
        return None
    short, subject = _git("rev-parse", "--short", parts[1]), _git("log", "-1", "--format=%s", parts[1])
    return f"{short} ({subject})" if short and subject is not None else None


# --- one memory renamed two ways --------------------------------------------------------------


def renamed_two_ways(messages: list[str]) -> list[tuple[str, str, str]]:
    """(the old path, ours, theirs) of each ``CONFLICT (rename/rename)`` among ``git
    merge-tree -z``'s messages (``<n> NUL <path>... NUL <type> NUL <message> NUL``)."""
    out, i = [], 0
    while i < len(messages) and messages[i].isdigit():
        n = int(messages[i])
        paths, kind = messages[i + 1:i + 1 + n], messages[i + 1 + n] if i + 1 + n < len(messages) else ""
        if kind == "CONFLICT (rename/rename)" and len(paths) == 3:
            out.append((paths[0], paths[1], paths[2]))
        i += n + 3
    return out


def archived_under_new_name(old: str, ours: str, theirs: str, texts: tuple[str, str, str]) -> tuple[str, str] | None:
    """(path, text) of a memory a person renamed on one side and someone forgot (or
    replaced: ``DELIBERATE_ARCHIVE``) or decay let fade on the other — moved to
    ``mind/archive/`` — or None
    for any other rename on both sides. Both meant something: the memory stays archived,
    under the name the person gave it (where the forget would have put the renamed note),
    with both sides' changes merged (``merge_note``). ``texts``: the note at ``old`` in
    the merge base, at ``ours`` here, at ``theirs`` on the other side."""
    from cortex.maintenance.base import archive_path
    from cortex.taxonomy import ARCHIVE

    def in_mind(path: str) -> bool:
        return path.startswith("mind/") and not path.startswith(f"mind/{ARCHIVE}/")

    if not in_mind(old) or archive_path(old) not in (ours, theirs):
        return None
    renamed = theirs if ours == archive_path(old) else ours
    if not in_mind(renamed):  # moved out of mind/: cortex forgets nothing there; a person decides
        return None
    merged, clean = merge_note(*texts)
    try:
        reason = _value(dict(_split(merged)[0]).get("archive_reason")) if clean else None
    except _Unmergeable:
        return None
    # faded too: decay archives the renamed note the next night, as on one machine, so the
    # nightly job's sync is not stopped for a person by a rename made the same day
    if reason not in DELIBERATE_ARCHIVE | {"faded"}:
        return None
    return archive_path(renamed), merged


# --- registration ---------------------------------------------------------------------------

DRIVER = "cortex-note"
# Every markdown file: a memory a person moved into a folder of their own is still
# reinforced there. A person's own note (no cortex fields) gets git's own text merge.
ATTRIBUTES = (f"*.md merge={DRIVER}",)


def driver_command() -> str:
    import shlex

    # %S %X %Y: git's names of the versions (git 2.44 and later; older git passes them as
    # they are written, and ``main`` finds the names itself)
    return f"PYTHONSAFEPATH=1 {shlex.quote(sys.executable)} -m cortex.mergedriver %O %A %B %P %L %S %X %Y"


def ensure_driver(root) -> bool:
    """Define the driver in the repository's own config (``.gitattributes`` names it;
    git's config, which never travels with a clone, says what runs). True if changed."""
    from cortex import gitcli

    wanted = driver_command()
    if gitcli.config(root, f"merge.{DRIVER}.driver") == wanted:
        return False
    gitcli.out(root, "config", "--local", f"merge.{DRIVER}.name", "cortex: notes from two machines, combined")
    gitcli.out(root, "config", "--local", f"merge.{DRIVER}.driver", wanted)
    return True


# A folder of the vault is not renamed as a unit: decay moving every memory of
# mind/facts/2026-11/ into mind/archive/facts/2026-11/ is not a rename of the folder, and
# a memory another machine added to it meanwhile stays where it was memorized. git's
# directory-rename detection would move it into the archive (without archive fields) and
# stop the merge for a person ("CONFLICT (file location)").
DIRECTORY_RENAMES = ("merge.directoryRenames", "false")
NO_DIRECTORY_RENAMES = ("-c", "=".join(DIRECTORY_RENAMES))  # for every merge cortex runs


def ensure_no_directory_renames(root) -> bool:
    """Turn directory-rename detection off for a person's own ``git merge``, ``git pull``
    and rebase in this vault, in its own config, unless that config already says. True if
    changed."""
    key, value = DIRECTORY_RENAMES
    if gitcli.run(root, "config", "--local", "--get", key).ok:
        return False
    gitcli.out(root, "config", "--local", key, value)
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m cortex.mergedriver %O %A %B %P``: the result replaces %A (git's rule)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3:
        sys.stderr.write("usage: python -m cortex.mergedriver BASE OURS THEIRS [PATH]\n")
        return 2
    global _given_labels, _marker_size
    if len(args) > 4 and args[4].isdigit():
        _marker_size = int(args[4])
    _given_labels = list(args[5:8])
    base, ours, theirs = (Path(a).read_bytes().decode("utf-8", errors="surrogateescape") for a in args[:3])
    if any(map(is_memory, (base, ours, theirs))):
        merged, clean = merge_note(base, ours, theirs)
    else:  # a person's own note: git's text merge, byte for byte
        merged, clean = _merge_file(base, ours, theirs)
    Path(args[1]).write_bytes(merged.encode("utf-8", errors="surrogateescape"))
    if not clean:
        where = args[3] if len(args) > 3 else args[1]
        sys.stderr.write(f"cortex: {where}: both sides changed the same lines; settle it by hand\n")
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
