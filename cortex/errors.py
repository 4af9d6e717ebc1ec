"""The error family. A ``CortexError`` is a known, fixable problem: the CLI prints its
message and hint and exits 1. Anything else is a bug: exit 3 with a report file."""

from __future__ import annotations


class CortexError(Exception):
    """A problem the person can fix; ``hint`` says how."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class VaultNotFound(CortexError):
    exit_code = 2  # the same in every command, `cortex query` (1 = nothing found) included


class InvalidObservation(CortexError):
    """An observation refused by ``cortex write`` (the caller decides what to do)."""


class LockBusy(CortexError):
    exit_code = 75  # EX_TEMPFAIL: try again later


class ConfigError(CortexError):
    pass
