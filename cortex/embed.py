"""The one loader of cortex's static embedding model.

A model2vec model is a token table plus a tokenizer: a text's vector is the mean of its
tokens' rows, L2-normalised. Importing model2vec costs ~230 ms (and ~180 ms more for
huggingface_hub in `from_pretrained`), so this module reproduces `StaticModel.encode`
with numpy + tokenizers + safetensors, which load the shipped model in a few tens of ms.
The token table is read from a map of model.safetensors (`_mapped_tensors`): a query
reads the rows of its few tokens, never the whole table.
`tests/test_embed.py` checks the result against model2vec itself.

    get_model()            the model shipped in cortex/data/model
    get_model("path/dir")  any other model2vec folder (model.safetensors, tokenizer.json, config.json)
    get_model("org/name")  a hub id: only where model2vec is installed and the network allows
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import numpy

SHIPPED_MODEL = Path(__file__).resolve().parent / "data" / "model"
DEFAULT_MAX_LENGTH = 512  # model2vec's default when a config names none
BATCH = 256
SHORT_TEXT = 4096  # characters a call may hold for the Python WordPiece (cortex/wordpiece.py)
# safetensors' dtypes as numpy reads them (the format is little-endian); a file holding
# another (BF16, F8...) is read by the safetensors library.
SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
                      "I8": "i1", "U8": "u1", "BOOL": "?"}

_cache: dict[str, "Embedder"] = {}
_lock = threading.Lock()


class ModelError(Exception):
    """The model folder is missing, incomplete or unreadable."""


def get_model(path: str | os.PathLike | None = None) -> "Embedder":
    """Return the embedder for `path` (None: the shipped model), loading it once per path."""
    key = str(SHIPPED_MODEL if path is None else path)
    with _lock:
        model = _cache.get(key)
        if model is None:
            model = _cache[key] = _load(key)
    return model


class Embedder:
    """Encodes texts as L2-normalised float32 rows, exactly as model2vec's `encode` does."""

    def __init__(self, vectors, tokenizer, config: dict, *, weights=None, mapping=None, name: str = "",
                 wordpiece=None):
        """``tokenizer``: a tokenizers ``Tokenizer``, or a function that loads one when
        first needed; ``wordpiece``: the same tokenizer in Python for short ASCII texts
        (``cortex/wordpiece.py``), where the model's tokenizer is BERT's WordPiece."""
        self.name = name
        self.vectors = vectors
        self.weights = weights
        self.mapping = mapping
        self.config = config
        self.dim: int = int(vectors.shape[1])
        self.max_length: int | None = config.get("max_length", DEFAULT_MAX_LENGTH)
        self._tokenizer = tokenizer
        self._tokenizer_ready = False
        self._wordpiece = wordpiece
        self._unk_id: int | None = wordpiece.unk_id if wordpiece is not None else None
        self._char_cap: int | None = None
        self._vocabulary: dict | None | bool = False  # not read yet
        if wordpiece is None:
            self.tokenizer  # noqa: B018 (loaded now: every text needs it)

    @property
    def tokenizer(self):
        """The tokenizers library's tokenizer, loaded and set up on first use."""
        if not self._tokenizer_ready:
            if not hasattr(self._tokenizer, "encode_batch"):
                self._tokenizer = self._tokenizer()
            self._tokenizer.no_padding()
            if self.max_length is None:
                self._tokenizer.no_truncation()
            else:
                self._tokenizer.enable_truncation(self.max_length)
            if self._wordpiece is None:
                self._unk_id = _unk_token_id(self._tokenizer)
            self._tokenizer_ready = True
        return self._tokenizer

    @property
    def char_cap(self) -> int | None:
        """model2vec cuts each text to max_length × the median token length (characters)
        before tokenizing, so that a huge text cannot stall the tokenizer. Computed on
        first need: a short query never pays for a pass over the vocabulary."""
        if self._char_cap is None and self.max_length is not None:
            import numpy as np

            vocab = self._wordpiece.vocab if self._wordpiece is not None else self.tokenizer.get_vocab()
            lengths = np.fromiter((len(t) for t in vocab), dtype=np.int64)
            self._char_cap = self.max_length * int(np.median(lengths)) if lengths.size else 0
        return self._char_cap

    def has_word(self, word: str) -> bool:
        """Whether the model's vocabulary holds ``word`` (lower-cased; or its singular) as
        one token — for the shipped model, BERT's 30,000 WordPiece tokens, which hold the
        words of everyday English but not "sitar", "oolong" or "dLNs". A vocabulary that
        cannot be read holds every word."""
        vocab = self._vocab()
        if vocab is None:
            return True
        word = word.lower()
        forms = [word]
        if word.endswith("es"):
            forms.append(word[:-2])
        if word.endswith("s"):
            forms.append(word[:-1])
        return any(form in vocab or f"\u0120{form}" in vocab or f"\u2581{form}" in vocab for form in forms)

    def _vocab(self) -> dict | None:
        if self._wordpiece is not None:
            return self._wordpiece.vocab
        if self._vocabulary is False:  # the tokenizers library builds a new dict each call: once
            try:
                self._vocabulary = self.tokenizer.get_vocab()
            except Exception:  # a tokenizer without a vocabulary to show
                self._vocabulary = None
        return self._vocabulary

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        if self.max_length is not None and any(len(text) > self.max_length for text in texts):
            cap = self.char_cap  # at least max_length: a token is at least one character
            texts = [text[:cap] for text in texts]
        rows = self._short_ascii(texts)
        if rows is None:
            rows = [enc.ids for enc in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]
        unk = self._unk_id
        return rows if unk is None else [[i for i in row if i != unk] for row in rows]

    def _short_ascii(self, texts: Sequence[str]) -> list[list[int]] | None:
        """The texts' ids from the Python WordPiece, when there is one and the texts are
        few, short and ASCII (a query); None: the tokenizers library's turn."""
        if self._wordpiece is None or sum(map(len, texts)) > SHORT_TEXT:
            return None
        rows = []
        for text in texts:
            ids = self._wordpiece.ids(text)
            if ids is None:
                return None
            rows.append(ids if self.max_length is None else ids[: self.max_length])
        return rows

    def encode(self, texts: Sequence[str]) -> "numpy.ndarray":
        """Float32 array (len(texts), dim); rows L2-normalised; a text with no known token is a zero row."""
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # In batches, as model2vec does: the gathered token rows of a batch stay in cache.
        for start in range(0, len(texts), BATCH):
            self._encode_batch(texts[start : start + BATCH], out[start : start + BATCH])
        return out

    def _encode_batch(self, texts: Sequence[str], out) -> None:
        import numpy as np

        ids = self.token_ids(texts)
        counts = np.fromiter((len(row) for row in ids), dtype=np.int64, count=len(ids))
        filled = np.flatnonzero(counts)
        if filled.size == 0:
            return
        flat = np.fromiter((i for row in ids for i in row), dtype=np.int64, count=int(counts.sum()))
        rows = self.mapping[flat] if self.mapping is not None else flat
        table = self.vectors[rows].astype(np.float32)
        if self.weights is not None:
            table *= self.weights[flat].astype(np.float32)[:, None]
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))[filled]
        sums = np.add.reduceat(table, starts, axis=0)
        out[filled] = sums / counts[filled, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)


def _unk_token_id(tokenizer) -> int | None:
    model = tokenizer.model
    if hasattr(model, "unk_token"):  # WordPiece, BPE, WordLevel
        token = model.unk_token
        return None if token is None else tokenizer.token_to_id(token)
    return json.loads(tokenizer.to_str())["model"].get("unk_id")  # Unigram


def _load(spec: str) -> Embedder:
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return _load_folder(folder)
    if folder.exists() or spec.startswith((".", "/", "~")) or spec.count("/") != 1:
        raise ModelError(f"no model2vec model folder at {spec}: expected a folder with model.safetensors, tokenizer.json and config.json")
    return _load_hub(spec)


def _load_folder(folder: Path) -> Embedder:
    from cortex.wordpiece import COMPACT, AsciiWordPiece

    tensors = folder / "model.safetensors"
    tokenizer_file = folder / "tokenizer.json"
    config_file = folder / "config.json"
    missing = [p.name for p in (tensors, tokenizer_file, config_file) if not p.is_file()]
    if missing:
        raise ModelError(f"model folder {folder} lacks {', '.join(missing)}")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        mapped = _mapped_tensors(tensors)
        if mapped is not None and "embeddings" in mapped:
            vectors, weights, mapping = mapped["embeddings"], mapped.get("weights"), mapped.get("mapping")
        else:
            from safetensors import safe_open

            with safe_open(str(tensors), framework="numpy") as fh:
                names = set(fh.keys())
                vectors = fh.get_tensor("embeddings")
                weights = fh.get_tensor("weights") if "weights" in names else None
                mapping = fh.get_tensor("mapping") if "mapping" in names else None
        raw = tokenizer_file.read_bytes()
        wordpiece = AsciiWordPiece.from_compact(folder / COMPACT, raw)  # the shipped model's: no JSON to parse
        if wordpiece is None:
            wordpiece = AsciiWordPiece.from_tokenizer_json(json.loads(raw.decode("utf-8")))
        tokenizer = _tokenizer_from(raw, folder)
    except ModelError:
        raise
    except Exception as exc:  # safetensors and tokenizers raise their own, unexported error types
        raise ModelError(f"cannot read the model in {folder}: {exc}") from exc
    return Embedder(vectors, tokenizer, config, weights=weights, mapping=mapping, name=str(folder), wordpiece=wordpiece)


def _mapped_tensors(path: Path) -> dict | None:
    """The tensors of a safetensors file as read-only arrays over a map of the file, or
    None where this does not read it exactly as the safetensors library would (a dtype
    numpy lacks, a header out of bounds): the library reads it then. The library's
    `get_tensor` copies the whole table, 7.5 MB for the shipped model (~2,000 page faults,
    ~5 ms of a cold query's CPU), of which a query uses the rows of its few tokens."""
    import math
    import mmap

    import numpy as np

    try:
        with open(path, "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        size = int.from_bytes(mapped[:8], "little")
        header = json.loads(mapped[8:8 + size])
        start, tensors = 8 + size, {}
        for name, spec in header.items():
            if name == "__metadata__":
                continue
            dtype = np.dtype(SAFETENSORS_DTYPES[spec["dtype"]])
            shape = [int(n) for n in spec["shape"]]
            begin, end = (int(n) for n in spec["data_offsets"])
            count = math.prod(shape)
            if not 0 <= begin <= end <= len(mapped) - start or end - begin != count * dtype.itemsize or not count:
                return None
            tensors[name] = np.frombuffer(mapped, dtype=dtype, count=count, offset=start + begin).reshape(shape)
        return tensors
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # ValueError: an empty file, bad JSON
        return None


def _tokenizer_from(raw: bytes, folder: Path):
    """A function that builds the tokenizers library's tokenizer from tokenizer.json's bytes."""
    def load():
        from tokenizers import Tokenizer

        try:
            return Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as exc:  # tokenizers raises its own, unexported error type
            raise ModelError(f"cannot read the tokenizer in {folder}: {exc}") from exc
    return load


def _load_hub(repo_id: str) -> Embedder:
    try:
        from model2vec import StaticModel  # slow import: only for hub ids
    except ImportError as exc:
        raise ModelError(f"{repo_id} is not a local folder, and loading a hub id needs model2vec installed") from exc
    try:
        model = StaticModel.from_pretrained(repo_id, force_download=False)
    except Exception as exc:  # network, hub and format errors all mean the same to the caller
        raise ModelError(f"cannot load model {repo_id} from the hub: {exc}") from exc
    config = dict(model.config)
    config["max_length"] = model.max_length
    return Embedder(model.embedding, model.tokenizer, config, weights=model.weights, mapping=model.token_mapping, name=repo_id)
