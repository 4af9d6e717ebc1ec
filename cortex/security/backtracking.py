"""Which regular expressions can take exponential time: the check on a vault's own
injection patterns (``security.injection_patterns`` in the tracked, shared
``observer/config.yml``), which every teammate's cortex runs on every note and line.

Python's ``re`` backtracks. A repeat whose turns can split the same text in many ways
tries every split before it fails: ``(a|aa)+$x`` or ``(a+)+$x`` on forty ``a``s runs for
hours, holding the commit (the hook) or the vault lock (``cortex run``) as long. The
rule, on the expression as ``re`` parses it (its own parser, which already turns
``(a|b)`` into a class and ``(ab|ac)`` into ``a(b|c)``):

    a repeat whose max is unbounded or over ``LARGE`` is refused when its body holds
    - another such repeat that can take the first character of what follows it in the
      body (or of the next turn): ``(a+)+``, ``(\\w+\\s?)+``, ``(.*a){20}``; not
      ``((the|these)\\s+)*``, where the spaces cannot run into the next word;
    - or an alternation two of whose branches can begin to match the same text: the
      literal start of one is the start of the other, and what follows the shorter can
      be the longer's next character (``(a|aa)+``, ``(a|)+``; not ``(the|these)\\s``).

"Can start with" is decided one character at a time over ``SAMPLE`` (ASCII and a few
others that classes tell apart), and anything not understood (a lookaround, a
backreference) is taken to overlap: the rule errs on refusing. It looks for the
exponential kind only (a polynomial one, ``\\s*\\s*$``, slows a huge note but does not
stall it); every pattern is also capped in length and number (``MAX_PATTERN_CHARS``,
``MAX_PATTERNS``). The shipped patterns pass it (a test holds them to it).
"""

from __future__ import annotations

import functools

LARGE = 10  # a repeat of at most this many turns is bounded enough (2^10 tries)
MAX_PATTERNS = 100
MAX_PATTERN_CHARS = 1000


def exponential_risk(pattern: str, flags: int = 0) -> str | None:
    """Why ``pattern`` can take exponential time (the rule above), or None."""
    return _risk(list(_sre()[0].parse(pattern, flags)))


@functools.cache
def _sre():
    from cortex.security.gate import _sre as parser_and_constants

    return parser_and_constants()


@functools.cache
def _repeats(c) -> frozenset:
    return frozenset(op for op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)) if op is not None)


def _children(op, av, c) -> list[list]:
    """The sub-sequences of one parsed item."""
    if op in _repeats(c):
        return [list(av[2])]
    if op is c.SUBPATTERN:
        return [list(av[-1])]
    if op is c.BRANCH:
        return [list(branch) for branch in av[1]]
    if op in (c.ASSERT, c.ASSERT_NOT):
        return [list(av[1])]
    if op is getattr(c, "ATOMIC_GROUP", None):
        return [list(av)]
    if op is c.GROUPREF_EXISTS:
        return [list(part) for part in av[1:] if part is not None]
    return []


def _is_large(op, av, c) -> bool:
    return op in _repeats(c) and av[1] > LARGE  # MAXREPEAT, the unbounded max, is the largest


def _risk(items: list) -> str | None:
    c = _sre()[1]
    for op, av in items:
        if _is_large(op, av, c):
            body = list(av[2])
            why = _ambiguous(body, body)  # after a turn, the next one
            if why:
                return why
        for sub in _children(op, av, c):
            why = _risk(sub)
            if why:
                return why
    return None


def _ambiguous(items: list, after: list) -> str | None:
    """What in a large repeat's body (``items``, then ``after`` it within the body) lets
    its turns split a text many ways."""
    c = _sre()[1]
    for i, (op, av) in enumerate(items):
        rest = items[i + 1:] + after
        if _is_large(op, av, c) and _share_a_character(list(av[2]), rest):
            return (f"a repeat inside a repeat (both unbounded or over {LARGE} turns) that can take "
                    "what follows it")
        if op is c.BRANCH and _branches_overlap([list(b) for b in av[1]], rest):
            return "a repeat of an alternation two of whose branches can match the same text"
        for sub in _children(op, av, c):
            inner = _after_part(op, av, c, rest)
            why = _ambiguous(sub, inner)
            if why:
                return why
    return None


def _after_part(op, av, c, rest: list) -> list:
    """What can follow a part of item ``(op, av)``, itself followed by ``rest``."""
    if op in (c.SUBPATTERN, c.BRANCH) or op is getattr(c, "ATOMIC_GROUP", None):
        return rest
    if op in _repeats(c):  # another turn, or what follows the repeat
        return rest if av[1] <= 1 else [(c.BRANCH, (None, [list(av[2]) + rest, rest]))]
    return []  # a lookaround: anything (taken to overlap)


def _branches_overlap(branches: list[list], after: list) -> bool:
    """Whether two branches (each followed by ``after``) can begin to match the same
    text: their literal beginnings agree as far as the shorter goes, and what follows
    the shorter can be the longer's next character (or the two are the same)."""
    heads = [_literal_head(b) for b in branches]
    for i, (one, one_rest) in enumerate(heads):
        for other, other_rest in heads[i + 1:]:
            (short, short_rest), (long, long_rest) = sorted(((one, one_rest), (other, other_rest)),
                                                            key=lambda head: len(head[0]))
            if not long.startswith(short):
                continue
            if len(long) == len(short):
                if _share_a_character(short_rest + after, long_rest + after):
                    return True
            elif _can_start(short_rest + after, long[len(short)]):
                return True
    return False


def _literal_head(items: list) -> tuple[str, list]:
    """The literal characters a branch begins with (lowercased), and what follows them."""
    c = _sre()[1]
    head = []
    for n, (op, av) in enumerate(items):
        if op is not c.LITERAL:
            return "".join(head), items[n:]
        head.append(chr(av).lower())
    return "".join(head), []


# The characters tried when asking whether two parts can start alike: ASCII, and a few
# that classes treat apart (a non-ASCII letter and digit, spaces of other kinds).
SAMPLE = [chr(n) for n in range(9, 14)] + [chr(n) for n in range(32, 127)] + list("éıſ\u00a0\u2028中٣")


def _share_a_character(one: list, other: list) -> bool:
    """Whether a match of ``one`` and one of ``other`` can begin with the same character
    (of ``SAMPLE``); True when either can match nothing."""
    return any(_can_start(one, ch) and _can_start(other, ch) for ch in SAMPLE)


def _can_start(items: list, ch: str) -> bool:
    """Whether a match of ``items`` can begin with ``ch`` (in either case); True when unsure,
    or when ``items`` can match nothing (what comes next is not known here)."""
    c = _sre()[1]
    for n, (op, av) in enumerate(items):
        rest = items[n + 1:]
        if op is c.AT:  # an anchor (^, \b) takes no character
            continue
        if op is c.LITERAL:
            return chr(av).lower() == ch.lower()
        if op is c.NOT_LITERAL:
            return chr(av).lower() != ch.lower()
        if op is c.IN:
            return _in_class(av, ch, c)
        if op in _repeats(c):
            return _can_start(list(av[2]) + rest, ch) or (av[0] == 0 and _can_start(rest, ch))
        if op in (c.SUBPATTERN, c.BRANCH) or op is getattr(c, "ATOMIC_GROUP", None):
            return any(_can_start(sub + rest, ch) for sub in _children(op, av, c))
        return True  # any character, a backreference, a lookaround: unsure
    return True


_CATEGORIES = {"DIGIT": str.isdigit, "SPACE": str.isspace, "WORD": lambda ch: ch.isalnum() or ch == "_"}


def _in_class(av, ch: str, c) -> bool:
    found, negated = False, False
    for op, value in av:
        if op is c.NEGATE:
            negated = True
        elif op is c.LITERAL:
            found = found or chr(value).lower() == ch.lower()
        elif op is c.RANGE:
            found = found or any(value[0] <= ord(x) <= value[1] for x in (ch, ch.upper(), ch.lower()))
        elif op is c.CATEGORY:
            kind = str(value).removeprefix("CATEGORY_")
            test = _CATEGORIES.get(kind.removeprefix("NOT_"))
            if test is None:
                return True  # a category not known here: unsure
            found = found or (test(ch) != kind.startswith("NOT_"))
        else:
            return True
    return found != negated
