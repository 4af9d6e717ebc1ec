"""Encoded content a note carries as text: random-looking, yet no credential.

A generated key is short (tens of characters) and stands alone or after a name; encoded
content says what it is, by its syntax or by what its bytes begin with:

- a ``data:`` URI (RFC 2397), the inline image a web clipper pastes;
- an armored block whose label names no private key (``-----BEGIN CERTIFICATE-----``,
  ``PUBLIC KEY``, ``PGP PUBLIC KEY BLOCK``, ``---- BEGIN SSH2 PUBLIC KEY ----``);
- a fenced block whose info string declares an encoding (```` ```compressed-json ````,
  the Obsidian Excalidraw plugin's drawings; ```` ```base64 ````);
- a wrapped run: three or more lines of base64 of one width (60 or more), then maybe a
  shorter last line, as encoders cut their output (PEM, MIME, Excalidraw's 256);
- base64 whose decoded bytes are an SSH public key (the wire format starts with the
  length-prefixed algorithm name: ``ssh-ed25519 AAAAC3NzaC1lZDI1NTE5…``), a file (PNG,
  JPEG, PDF, gzip, zip…) or a DER certificate or public key.

A private key is a credential however it is encoded: base64 whose bytes are a DER
private key (PKCS#1, PKCS#8, SEC1, PKCS#12), an ``openssh-key-v1`` blob or a PEM private
key block is found here too, and its whole block goes (``private_key``).
"""

from __future__ import annotations

import base64
import binascii
import re
from functools import lru_cache

_URLSAFE = str.maketrans("-_", "+/")


def decoded_prefix(token: str, chars: int = 96) -> bytes | None:
    """The bytes the first ``chars`` characters of base64 ``token`` decode to, or None."""
    body = token.rstrip("=")[:chars].translate(_URLSAFE)
    body = body[: len(body) - len(body) % 4]
    if not body:
        return None
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return None


def _der_first(raw: bytes) -> tuple[int, int] | None:
    """(tag, offset) of the first element inside a DER SEQUENCE, or None."""
    if len(raw) < 4 or raw[0] != 0x30:
        return None
    if raw[1] < 0x80:
        at = 2
    elif 0x81 <= raw[1] <= 0x83:
        at = 2 + (raw[1] & 0x7F)
    else:
        return None
    return (raw[at], at) if at < len(raw) else None


def private_key(token: str) -> bool:
    """Base64 that decodes to a private key or a key store."""
    raw = decoded_prefix(token)
    if raw is None:
        return False
    if raw.startswith((b"openssh-key-v1\0", b"PuTTY-User-Key-File")):
        return True
    if raw.startswith(b"-----BEGIN") and b"PRIVATE KEY" in raw:
        return True
    first = _der_first(raw)
    if first is None:
        return False
    at = first[1]
    # A key's SEQUENCE opens with a one-byte version INTEGER (0, 1 or 3); a certificate,
    # a public key or a request opens with another SEQUENCE, and so does an encrypted
    # key, whose algorithm is a PKCS#5 or PKCS#12 password-based one.
    if raw[at : at + 2] == b"\x02\x01" and raw[at + 2 : at + 3] in (b"\0", b"\1", b"\3"):
        return True
    return any(oid in raw[at : at + 24] for oid in _PBE_OIDS)


_PBE_OIDS = (b"\x2a\x86\x48\x86\xf7\x0d\x01\x05", b"\x2a\x86\x48\x86\xf7\x0d\x01\x0c")  # 1.2.840.113549.1.5 / .1.12


_SSH_NAME = rb"(?:[a-z0-9]+-)+[a-z0-9]+(?:@[a-z0-9.\-]+)?"
_MAGIC = (b"\x89PNG\r\n", b"\xff\xd8\xff", b"GIF8", b"%PDF-", b"PK\x03\x04", b"\x1f\x8b\x08", b"RIFF", b"wOFF", b"wOF2",
          b"OggS", b"fLaC", b"ID3", b"\x00\x00\x01\x00", b"BZh", b"7z\xbc\xaf", b"\xfd7zXZ")


def content(token: str) -> bool:
    """Base64 of something public: an SSH public key (or certificate, or signature) in
    its wire format, a file by its signature, a DER certificate or public key."""
    raw = decoded_prefix(token)
    if raw is None:
        return False
    if len(raw) > 8:
        n = int.from_bytes(raw[:4], "big")
        if 7 <= n <= 64 and _rx(_SSH_NAME).fullmatch(raw[4 : 4 + n]):
            return True
    if raw.startswith(_MAGIC) or (raw[4:8] == b"ftyp"):  # ftyp: MP4, HEIC, AVIF
        return True
    first = _der_first(raw)
    return first is not None and first[0] == 0x30


# --- blocks of encoded content ---------------------------------------------------------

# Compiled on first use (``_rx``): the git hook imports this module for every commit.
_DATA_URI = r"(?i)\bdata:(?:[\w.+\-]+/[\w.+\-]+)?(?:;[\w.+\-]+(?:=[^;,\s]*)?)*,[^\s)\"'<>\]]*"
_ARMOR_BEGIN = r"(?m)^[ \t]*(-{4,5}) ?BEGIN ([A-Z0-9 ]+?) ?-{4,5}[ \t]*$"
_FENCE = r"(?m)^[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]+)[^\n]*\n"
_DATA_WORDS = frozenset({"base64", "b64", "compressed", "encoded", "binary", "lzstring", "gzip", "zlib", "deflate"})
_B64_LINE = r"(?m)^[ \t]*[A-Za-z0-9+/_\-]{16,}={0,2}[ \t]*$"
_WRAP_MIN_WIDTH = 60
_WRAP_MIN_LINES = 3


@lru_cache(maxsize=None)
def _rx(pattern):
    return re.compile(pattern)


def blocks(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are encoded content (data URIs, public armored blocks,
    fences declared as data, wrapped base64 runs), in no particular order."""
    spans = [m.span() for m in _rx(_DATA_URI).finditer(text)] if "data:" in text.lower() else []
    if "BEGIN" in text:
        spans += _armored(text)
    if "``" in text or "~~~" in text:
        spans += _declared_fences(text)
    spans += _wrapped_runs(text)
    return spans


def _armored(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _rx(_ARMOR_BEGIN).finditer(text):
        label = m.group(2)
        if "PRIVATE" in label or "SECRET" in label:
            continue  # a key: the rules before the generic pass redact it
        end = re.compile(rf"^[ \t]*{m.group(1)} ?END {re.escape(label)} ?-{{4,5}}[ \t]*$", re.MULTILINE).search(text, m.end())
        if end is not None:
            spans.append((m.start(), end.end()))
        else:  # cut short: its base64 lines
            stop = m.end()
            for line in _rx(_B64_LINE).finditer(text, m.end() + 1):
                if line.start() > stop + 1:
                    break
                stop = line.end()
            spans.append((m.start(), stop))
    return spans


def _declared_fences(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _rx(_FENCE).finditer(text):
        if not _DATA_WORDS.intersection(re.split(r"[^a-z0-9]+", m.group(2).lower())):
            continue
        fence = re.escape(m.group(1))
        close = re.compile(rf"^[ \t]*{fence}[ \t]*$", re.MULTILINE).search(text, m.end())
        spans.append((m.end(), close.start() if close else len(text)))  # unclosed: to the end, as Markdown reads it
    return spans


def _wrapped_runs(text: str) -> list[tuple[int, int]]:
    """Runs of base64 lines of one width (blank lines between allowed), then maybe a
    shorter last line: what an encoder writes, not keys listed one per line."""
    lines = []  # (start, end, width) of each base64 line, a group per stretch without other text
    spans = []

    def close_group() -> None:
        i = 0
        while i < len(lines):
            j = i
            width = lines[i][2]
            while j + 1 < len(lines) and lines[j + 1][2] == width:
                j += 1
            full = j - i + 1
            if width >= _WRAP_MIN_WIDTH and full >= _WRAP_MIN_LINES:
                last = j + 1 if j + 1 < len(lines) and lines[j + 1][2] < width else j
                spans.append((lines[i][0], lines[last][1]))
                i = last + 1
            else:
                i += 1
        lines.clear()

    pos = 0
    for m in _rx(_B64_LINE).finditer(text):
        between = text[pos : m.start()]
        if between.strip():
            close_group()
        token = m.group(0).strip()
        lines.append((m.start(), m.end(), len(token)))
        pos = m.end()
    close_group()
    return spans
