"""The error family. A ``CortexError`` is a known, fixable problem: the CLI prints its
message and hint and exits 1. Anything else is a bug: exit 3 with a report file."""

from __future__ import annotations

# Why a buffer line is held in the quarantine (with the line). Here, not in `cortex.model`
# with the records that carry it: every command's CLI reads it, and the model's dataclasses
# cost ~10 ms to create.
HELD_REASONS = ("parse", "schema", "injection", "untrusted", "unsafe_path", "deleted")


class CortexError(Exception):
    """A problem the person can fix; ``hint`` says how. ``kind`` and ``paths`` are its
    ``error`` and ``paths`` in the failure every command's ``--json`` prints (README,
    "Exit codes"; ``cortex sync``'s own kinds: docs/sync.md)."""

    exit_code = 1
    kind = "vault"  # a problem of this vault, or of what was asked of it: the message says which
    paths: tuple = ()  # the files it concerns (a sync's conflict names them)

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class RepositoryDamaged(CortexError):
    """git cannot read an object the vault's history holds (removed, or corrupted on
    disk): no cortex command can mend that, so each says what is wrong and stops."""

    def __init__(self, oid: str) -> None:
        super().__init__(
            f"the repository is damaged: git cannot read object {oid} (missing or corrupt; `git fsck` lists "
            "every damaged object)",
            "bring the object back from another clone of the vault (`git fetch` from it, or copy its "
            ".git/objects), or clone the vault anew and move your uncommitted files over; nothing was changed")

class VaultNotFound(CortexError):
    kind = "no_vault"
    exit_code = 2  # the same in every command, `cortex query` (1 = nothing found) included


class NotFound(CortexError):
    """A name that names nothing here (a note, a quarantine entry): exit 1, as "nothing
    found" is in every command that looks a name up."""

    kind = "not_found"


class InvalidObservation(CortexError):
    """An observation refused by ``cortex write`` (the caller decides what to do)."""

    kind = "invalid"


class BatchRefused(InvalidObservation):
    """A batch with invalid observations: nothing of it was appended (all or none)."""

    def __init__(self, refused: list[tuple[int, str]], total: int, what: str = "observation") -> None:
        self.refused, self.total = refused, total
        named = total > 1 or what != "observation"  # a lone observation needs no number
        shown = "; ".join(f"{what} {n}: {why}" if named else why for n, why in refused[:5])
        more = f"; and {len(refused) - 5} more" if len(refused) > 5 else ""
        valid = total - len(refused)
        prefix = f"nothing appended: {len(refused)} of {total} {what}s invalid — " if total > 1 else ""
        super().__init__(
            f"{prefix}{shown}{more}",
            (f"all or nothing: the {valid} valid one{'s were' if valid != 1 else ' was'} not appended either; "
             "fix the invalid ones and send the whole batch again") if total > 1 else "fix the field and write it again",
        )


class UsageError(CortexError):
    kind = "usage"
    exit_code = 2  # a wrong argument: what to pass instead is in the hint


class LockBusy(CortexError):
    kind = "busy"
    exit_code = 75  # EX_TEMPFAIL: try again later


class ConfigError(CortexError):
    pass


class Bug(CortexError):
    """Never raised: an unexpected error (a bug, exit 3), said the way the others are
    (its report's path in the hint), so ``--json`` prints it in their shape."""

    kind = "bug"
    exit_code = 3


def os_said(exc: OSError) -> str:
    """What the file system said, with the path it said it of ("No space left on device:
    .git/index"): a full disk or a folder not writable is the person's to fix, not a bug."""
    return f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc.strerror or exc)
