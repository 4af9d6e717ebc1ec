"""The shipped model's tokenizer for short ASCII text, in Python: a cold query skips
loading the tokenizers library (import and `Tokenizer.from_file`: ~29 ms of a ~260 ms
query, against ~11 ms to read tokenizer.json as JSON).

BERT's uncased WordPiece, as the model's tokenizer.json describes it — BertNormalizer
(control characters dropped, whitespace made spaces, accents stripped, lowercase),
BertPreTokenizer (split on whitespace; each punctuation character a word of its own),
WordPiece (the longest vocabulary piece first, continuations prefixed ``##``; a word
longer than ``max_input_chars_per_word``, or with a piece the vocabulary lacks, is the
unknown token). On ASCII text each step is exact without Unicode tables: no accents, no
CJK, and ASCII's punctuation and whitespace are fixed sets. Any other text, or text that
holds one of the tokenizer's added tokens (matched before normalising), is left to the
tokenizers library: ``ids`` returns None. ``tests/test_search_embed.py`` holds it to the
library's ids.

Reading the vocabulary out of tokenizer.json (``json.loads`` of 445 KB, 30,000 entries)
was the most of loading the model for a query. ``make model`` writes beside it
``wordpiece.txt`` (``compact_form``): a header naming the tokenizer.json it was made from
by its SHA-256, then the tokens grouped by length with their ids. A query looks its few
words up in that text (``CompactVocab``) and never builds the dict; a tokenizer.json the header does not
name (another model, one edited or replaced) is read as JSON, as before.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator

COMPACT = "wordpiece.txt"  # beside tokenizer.json, written by `make model`

# BertNormalizer's clean_text on ASCII: every control character goes but tab, newline
# and carriage return, which (with the space) become spaces — here simply separators.
_DROP = {c: None for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F]}
# BertPreTokenizer on ASCII: runs of letters and digits, and each punctuation character.
_WORDS = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")


class AsciiWordPiece:
    def __init__(self, vocab: dict[str, int], unk: str, prefix: str, max_chars: int, added: list[str]):
        self.vocab = vocab
        self.unk_id = vocab[unk]
        self.prefix = prefix
        self.max_chars = max_chars
        self.added = [token for token in added if token]

    @classmethod
    def from_tokenizer_json(cls, data: dict[str, Any]) -> "AsciiWordPiece | None":
        """The tokenizer for ``data`` (a parsed tokenizer.json) when it is exactly BERT's
        uncased WordPiece; None for any other."""
        normalizer = data.get("normalizer") or {}
        model = data.get("model") or {}
        if not (normalizer.get("type") == "BertNormalizer" and normalizer.get("clean_text") is True
                and normalizer.get("lowercase") is True and normalizer.get("strip_accents") in (None, True)
                and (data.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
                and model.get("type") == "WordPiece" and isinstance(model.get("vocab"), dict)
                and model.get("unk_token") in model["vocab"]):
            return None
        added = [t.get("content", "") for t in data.get("added_tokens") or [] if isinstance(t, dict)]
        return cls(model["vocab"], model["unk_token"], model.get("continuing_subword_prefix", "##"),
                   int(model.get("max_input_chars_per_word", 100)), added)

    @classmethod
    def from_compact(cls, path: Path, tokenizer_json: bytes) -> "AsciiWordPiece | None":
        """The tokenizer of the compact form at ``path`` when it was made from exactly
        ``tokenizer_json`` (the file's bytes); None when it is absent, damaged, or made
        from another tokenizer.json: the caller reads that as JSON."""
        try:
            head, *lines = path.read_bytes().decode("utf-8").split("\n")
            header = json.loads(head)
            if header.get("tokenizer.json") != _digest(tokenizer_json):
                return None
            lengths, width = [int(k) for k in header["lengths"]], int(header["id_width"])
            blocks = {k: (lines[2 * i], lines[2 * i + 1]) for i, k in enumerate(lengths)}
            if any(k < 1 or len(tokens) % k or len(ids) != len(tokens) // k * width for k, (tokens, ids) in blocks.items()):
                return None
            return cls(CompactVocab(blocks, width), header["unk_token"], header["prefix"], int(header["max_chars"]),
                       list(header["added"]))
        except (OSError, UnicodeError, ValueError, AttributeError, KeyError, TypeError, IndexError):
            return None

    def ids(self, text: str) -> list[int] | None:
        """The token ids of ``text`` (no special tokens added), or None when the text is
        not ASCII or holds an added token: the tokenizers library's then."""
        if not text.isascii() or any(token in text for token in self.added):
            return None
        out: list[int] = []
        for word in _WORDS.findall(text.translate(_DROP).lower()):
            out += self._pieces(word)
        return out

    def _pieces(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.unk_id]
        vocab, pieces, start = self.vocab, [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = vocab.get(piece)
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return [self.unk_id]
            start = end
        return pieces


class CompactVocab(Mapping):
    """A vocabulary kept as ``compact_form`` writes it: for each token length, the tokens
    of that length side by side (a token's place is its offset over the length) and their
    ids in fixed-width hex. A query looks up a few dozen pieces, each a scan of the tokens
    of its length, against building a dict of 30,000 entries (and freeing it at exit);
    past ``LOOKUPS`` lookups (a long text) it builds the dict."""

    LOOKUPS = 256

    def __init__(self, blocks: dict[int, tuple[str, str]], width: int):
        self._blocks = blocks  # length: (its tokens side by side, their ids)
        self._width = width
        self._dict: dict[str, int] | None = None
        self._left = self.LOOKUPS

    def __getitem__(self, token: str) -> int:
        if self._dict is not None or self._left <= 0:
            return self._as_dict()[token]
        self._left -= 1
        k, w = len(token), self._width
        tokens, ids = self._blocks.get(k, ("", ""))
        at = tokens.find(token) if k else -1
        while at > 0 and at % k:  # a match across two tokens
            at = tokens.find(token, at + 1)
        if at < 0:
            raise KeyError(token)
        place = at // k
        return int(ids[place * w:(place + 1) * w], 16)

    def __iter__(self) -> Iterator[str]:
        return iter(self._as_dict())

    def __len__(self) -> int:
        return len(self._as_dict())

    def _as_dict(self) -> dict[str, int]:
        if self._dict is None:
            w, found = self._width, []
            for k, (tokens, ids) in self._blocks.items():
                found += ((int(ids[i * w:(i + 1) * w], 16), tokens[i * k:(i + 1) * k]) for i in range(len(tokens) // k))
            self._dict = {token: i for i, token in sorted(found)}
        return self._dict


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compact_form(tokenizer_json: bytes) -> str | None:
    """The compact form of a tokenizer.json (its bytes) for ``from_compact``; None when it
    is no tokenizer the Python WordPiece reads, or its ids are not one token a line can
    hold (0 to n-1, no empty token, no line break in one)."""
    wordpiece = AsciiWordPiece.from_tokenizer_json(json.loads(tokenizer_json))
    if wordpiece is None:
        return None
    vocab = wordpiece.vocab
    if any(not t or "\n" in t for t in vocab) or sorted(vocab.values()) != list(range(len(vocab))):
        return None
    width = len(f"{len(vocab) - 1:x}")
    by_length: dict[int, list[str]] = {}
    for token in sorted(vocab, key=vocab.__getitem__):
        by_length.setdefault(len(token), []).append(token)
    unk = next(t for t, i in vocab.items() if i == wordpiece.unk_id)
    header = {"tokenizer.json": _digest(tokenizer_json), "unk_token": unk, "prefix": wordpiece.prefix,
              "max_chars": wordpiece.max_chars, "added": wordpiece.added, "id_width": width, "lengths": sorted(by_length)}
    lines = [json.dumps(header, ensure_ascii=False)]
    for k in sorted(by_length):
        lines += ["".join(by_length[k]), "".join(f"{vocab[t]:0{width}x}" for t in by_length[k])]
    return "\n".join(lines) + "\n"
