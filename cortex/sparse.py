"""A non-cone sparse checkout's patterns (``git sparse-checkout set --no-cone``), matched
as git matches them, to know whether a new note belongs in the working tree.

git decides only for paths already in its index (the skip-worktree bit); a note cortex
is about to commit is not there yet. Asking git per note would cost a process each (and
``git sparse-checkout check-rules`` needs git 2.42), so the rules of git's ``dir.c``
are followed here: the patterns of ``info/sparse-checkout`` in gitignore syntax, the
last one that matches deciding (``!`` excludes), the file's own path first, then each
folder above it until one decides; none deciding leaves the path out. Wildcards follow
git's ``wildmatch`` with ``WM_PATHNAME``: ``*``, ``?`` and ``[...]`` never match a
slash, ``**`` between slashes matches any number of folders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_CLASSES = {  # POSIX classes inside brackets, as wildmatch knows them (ASCII)
    "alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "blank": " \\t", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "\\x21-\\x7e", "lower": "a-z", "print": "\\x20-\\x7e",
    "punct": "!-/:-@\\[-`{-~", "space": " \\t\\n\\r\\f\\v", "upper": "A-Z", "xdigit": "0-9a-fA-F",
}


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str] | None  # None: a pattern git can never match (an unclosed [)
    negative: bool
    dir_only: bool
    basename: bool  # no slash in it: matched against the last component only


def _bracket(pat: str, i: int) -> tuple[str, int] | None:
    """The regex of the bracket expression opening at ``pat[i] == '['`` and the index
    past it; None when it never closes (git then matches nothing)."""
    i += 1
    negated = i < len(pat) and pat[i] in "!^"
    if negated:
        i += 1
    items: list[str] = []
    prev: str | None = None  # the last single character, which a '-' makes a range from
    first = True
    while True:
        if i >= len(pat):
            return None
        ch = pat[i]
        if ch == "]" and not first:
            break
        first = False
        if ch == "\\":
            i += 1
            if i >= len(pat):
                return None
            items.append(re.escape(pat[i]))
            prev = pat[i]
        elif ch == "[" and pat.startswith("[:", i):
            end = pat.find(":]", i + 2)
            if end < 0:  # git reads it as a plain '['
                items.append(re.escape("["))
                prev = "["
            else:
                name = pat[i + 2:end]
                if name not in _CLASSES:
                    return None
                items.append(_CLASSES[name])
                i, prev = end + 1, None
        elif ch == "-" and prev is not None and i + 1 < len(pat) and pat[i + 1] != "]":
            i += 1
            hi = pat[i]
            if hi == "\\":
                i += 1
                if i >= len(pat):
                    return None
                hi = pat[i]
            if prev <= hi:  # reversed, only its first character (met on its own before the '-'), as in git
                items.append(f"{re.escape(prev)}-{re.escape(hi)}")
            prev = None
        else:
            items.append(re.escape(ch))
            prev = ch
        i += 1
    body = "".join(items)
    return ("(?!/)" + (f"[^{body}]" if negated else f"[{body}]")), i + 1


def _wild_regex(pat: str) -> str | None:
    """git's ``wildmatch(pat, path, WM_PATHNAME)`` as a regular expression."""
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        ch = pat[i]
        if ch == "*":
            j = i
            while j < n and pat[j] == "*":
                j += 1
            at_start = i == 0 or pat[i - 1] == "/"
            if j - i >= 2 and at_start and (j == n or pat[j] == "/" or pat.startswith("\\/", j)):
                if j == n:
                    out.append(".*")
                    i = j
                else:  # "**/": no folder, or any number of them
                    out.append("(?:.*/)?")
                    i = j + (2 if pat[j] == "\\" else 1)
                continue
            out.append("[^/]*")
            i = j
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            got = _bracket(pat, i)
            if got is None:
                return None
            part, i = got
            out.append(part)
        elif ch == "\\":
            if i + 1 >= n:
                return None  # a lone trailing backslash matches nothing in git
            out.append(re.escape(pat[i + 1]))
            i += 2
        else:
            out.append(re.escape(ch))
            i += 1
    return "".join(out)


def _trim(line: str) -> str:
    """Trailing spaces go, unless escaped with a backslash (git's trim_trailing_spaces)."""
    end = len(line)
    while end and line[end - 1] == " ":
        k, slashes = end - 1, 0
        while k and line[k - 1] == "\\":
            k, slashes = k - 1, slashes + 1
        if slashes % 2:
            break
        end -= 1
    return line[:end]


def parse(text: str, ignore_case: bool = False) -> list[Pattern]:
    """The patterns of a sparse-checkout file: blank lines and ``#`` comments skipped."""
    flags = re.IGNORECASE if ignore_case else 0
    out = []
    for raw in text.split("\n"):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line or line.startswith("#"):
            continue
        line = _trim(line)
        negative = line.startswith("!")
        if negative:
            line = line[1:]
        dir_only = line.endswith("/")
        if dir_only:
            line = line[:-1]
        basename = "/" not in line
        if not basename and line.startswith("/"):
            line = line[1:]
        source = _wild_regex(line)
        try:
            regex = re.compile(source + r"\Z", flags | re.DOTALL) if source is not None else None
        except re.error:  # nothing git would match either: never let a pattern stop a run
            regex = None
        out.append(Pattern(regex, negative, dir_only, basename))
    return out


def _decide(patterns: list[Pattern], path: str, is_dir: bool) -> bool | None:
    base = path.rpartition("/")[2]
    for pattern in reversed(patterns):
        if pattern.regex is None or (pattern.dir_only and not is_dir):
            continue
        if pattern.regex.match(base if pattern.basename else path):
            return not pattern.negative
    return None


def included(path: str, patterns: list[Pattern]) -> bool:
    """Whether a non-cone sparse checkout of ``patterns`` has ``path`` in the working tree."""
    is_dir = False
    while path:
        decided = _decide(patterns, path, is_dir)
        if decided is not None:
            return decided
        path, is_dir = path.rpartition("/")[0], True
    return False


def read_patterns(git_dir: Path, ignore_case: bool = False) -> list[Pattern] | None:
    """The patterns of this worktree's sparse checkout (``info/sparse-checkout`` in its
    own git directory); None when there is none, or no pattern in it (git then leaves
    the working tree whole, and so does cortex)."""
    try:
        text = (git_dir / "info" / "sparse-checkout").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    return parse(text, ignore_case) or None
