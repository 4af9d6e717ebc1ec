"""What cortex prints on a terminal cannot drive it.

Note names, titles and snippets come from files anyone with push access wrote. On a
terminal, an escape sequence in them is acted out (a new window title, a cleared screen,
text hidden or rewritten) and a bidi override reorders what follows it (``retro\\u202etxt.md``
shows as ``retrodm.txt``). git quotes such names in its output; cortex writes each such
character as its ``\\uXXXX`` escape when stdout or stderr is a terminal. Piped output, the
data a script reads (``--json`` above all), is left as it is.
"""

from __future__ import annotations

import re
import sys

# C0 controls but tab and line feed, DEL and the C1 controls (ESC, CSI, OSC …), and the
# characters that reorder text (the bidi embeddings, overrides, isolates and marks)
_ACTED_OUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escaped(text: str) -> str:
    return _ACTED_OUT.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _Shown:
    """A text stream that writes what it is given with ``escaped`` applied; everything
    else (flush, fileno, encoding, isatty, the binary buffer) is the stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(escaped(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def guard_terminals() -> None:
    """Wrap stdout and stderr where they are terminals."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            on_terminal = stream is not None and stream.isatty()
        except (ValueError, OSError):  # closed
            on_terminal = False
        if on_terminal and not isinstance(stream, _Shown):
            setattr(sys, name, _Shown(stream))
