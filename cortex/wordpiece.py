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
"""

from __future__ import annotations

import re
from typing import Any

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
