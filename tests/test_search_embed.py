"""The static-model loader: same vectors as model2vec, without importing it."""

import subprocess
import sys

import numpy as np
import pytest

from cortex.embed import SHIPPED_MODEL, ModelError, get_model

TEXTS = [
    "Use local git only — no remote push in daemon.",
    "",
    "zzzqqqxx ☃",
    "I love hiking in the Alps, but I hate crowded trails.",
    "The quick brown fox jumps over the lazy dog. " * 300,  # past the 512-token cap
    "[UNK] [CLS] édition spéciale",
]


def test_matches_model2vec_encode():
    model2vec = pytest.importorskip("model2vec")
    reference = model2vec.StaticModel.from_pretrained(str(SHIPPED_MODEL)).encode(TEXTS)
    mine = get_model().encode(TEXTS)
    assert mine.dtype == np.float32
    assert mine.shape == (len(TEXTS), get_model().dim)
    np.testing.assert_allclose(mine, reference.astype(np.float32), atol=1e-5)


def test_rows_are_unit_or_zero():
    vectors = get_model().encode(TEXTS)
    norms = np.linalg.norm(vectors, axis=1)
    assert norms[1] == 0.0  # an empty text has no tokens
    np.testing.assert_allclose(np.delete(norms, 1), 1.0, atol=1e-5)
    assert get_model().encode([]).shape == (0, get_model().dim)


def test_cached_per_path_and_folder_configurable(tmp_path):
    assert get_model() is get_model(None)
    assert get_model(SHIPPED_MODEL) is get_model(str(SHIPPED_MODEL))
    with pytest.raises(ModelError):
        get_model(tmp_path)  # an empty folder is not a model
    with pytest.raises(ModelError):
        get_model(tmp_path / "missing" / "deeper")


def test_loading_does_not_import_model2vec():
    code = "import sys; from cortex.embed import get_model; get_model().encode(['x']); print('model2vec' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_shipped_artefacts_match_the_checksums_their_cards_record():
    """A retrained or re-distilled file must come with its card updated (source, command,
    figures, checksum): the card is how a reader knows what the package ships."""
    import hashlib
    import re

    data = SHIPPED_MODEL.parent
    cards = {
        SHIPPED_MODEL / "MODEL_CARD.md": ("model.safetensors", "tokenizer.json", "config.json"),
        data / "INJECTION_CLASSIFIER_CARD.md": ("injection_classifier.npz",),
    }
    for card, names in cards.items():
        text = card.read_text(encoding="utf-8")
        for name in names:
            recorded = re.search(re.escape(name) + r"`[^`\n]*`([0-9a-f]{64})`", text)
            assert recorded, f"{card.name} records no sha256 for {name}"
            actual = hashlib.sha256((card.parent / name).read_bytes()).hexdigest()
            assert recorded.group(1) == actual, f"{name}: {card.name} says {recorded.group(1)}, file is {actual}"


def _ascii_texts() -> list[str]:
    """Texts of every kind a query or a note holds, in ASCII: the repository's own prose,
    edge cases of BERT's normaliser and WordPiece, and random strings over all of ASCII
    (control characters, punctuation runs, words past 100 characters)."""
    import random
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    lines = [line for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
             for line in path.read_text(encoding="utf-8").splitlines() if line.isascii()]
    edge = ["don't", "e-mail", "U.S.A.", "C++ & C#", "snake_case_word", "CamelCaseWord", "1,000.50 EUR", "a\x0bb\x0cc",
            "tab\tnew\nline\rreturn", "x" * 100, "y" * 101, "unbelievably-unhelpful", "ZZZQQQXX", "  ", "\x00\x7f",
            "how are station files cached", "[unk] is lowercase", "##hash ##tags", "`code` ~tilde~ {brace}"]
    rng = random.Random(5)
    noise = ["".join(chr(rng.randrange(128)) for _ in range(rng.randrange(1, 200))) for _ in range(300)]
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzABC0123456789") for _ in range(rng.randrange(1, 130)))
             for _ in range(300)]
    return lines + edge + noise + words


def test_the_python_wordpiece_gives_the_tokenizers_librarys_ids():
    """The query path's WordPiece (cortex/wordpiece.py) is the tokenizers library's
    tokenizer on ASCII text, id for id; other text it leaves to the library."""
    import json

    from tokenizers import Tokenizer

    from cortex.wordpiece import AsciiWordPiece

    text = (SHIPPED_MODEL / "tokenizer.json").read_text(encoding="utf-8")
    wordpiece = AsciiWordPiece.from_tokenizer_json(json.loads(text))
    library = Tokenizer.from_str(text)
    library.no_truncation()
    texts = _ascii_texts()
    assert len(texts) > 1000
    for sample in texts:
        assert wordpiece.ids(sample) == library.encode(sample, add_special_tokens=False).ids, repr(sample)
    assert wordpiece.ids("édition spéciale") is None and wordpiece.ids("zzz ☃") is None  # not ASCII
    assert wordpiece.ids("a [UNK] b") is None  # an added token, matched before normalising
    cased = json.loads(text)
    cased["normalizer"]["lowercase"] = False
    assert AsciiWordPiece.from_tokenizer_json(cased) is None  # only the tokenizer it knows exactly


def test_a_query_embeds_the_same_through_either_tokenizer():
    from cortex.embed import Embedder, _load_folder

    fast = _load_folder(SHIPPED_MODEL)
    library = Embedder(fast.vectors, fast.tokenizer, fast.config, weights=fast.weights, mapping=fast.mapping)
    for text in ["how are station files cached", "Maya prefers small pull requests!", "zzzqqq", "x" * 3000, "a b " * 900]:
        np.testing.assert_array_equal(fast.encode([text]), library.encode([text]))


def test_a_cold_query_embeds_without_the_tokenizers_library():
    code = ("import sys; from cortex.embed import get_model; get_model().encode(['how are station files cached']);"
            "print('tokenizers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_vocabulary_tells_an_everyday_word_from_a_rare_one():
    """`Embedder.has_word`, which the answer gate asks of the query's words no note has
    (`query.rare_unseen`): everyday English, plurals and capitals included, is in the
    shipped model's vocabulary; a rare topical word, an accented foreign one or an
    abbreviation is not."""
    model = get_model()
    for word in ("size", "total", "previously", "Tuesday", "aquariums", "batteries", "kettle"):
        assert model.has_word(word), word
    for word in ("sitar", "bagpipes", "pétanque", "oolong", "dLNs", "zzqqxx"):
        assert not model.has_word(word), word


def test_a_cold_query_reads_the_vocabulary_without_parsing_tokenizer_json():
    """The shipped model's vocabulary comes from its compact form (wordpiece.txt): a
    cold query parsed 445 KB of tokenizer.json, ~60M of its ~920M instructions."""
    code = ("import json, sys; parsed = []; loads = json.loads\n"
            "def spy(s, *a, **k):\n    parsed.append(len(s)); return loads(s, *a, **k)\n"
            "json.loads = spy\n"
            "from cortex.embed import get_model; get_model().encode(['what database do we use for billing'])\n"
            "print(max(parsed, default=0))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(out) < 10_000


def test_the_compact_vocabulary_gives_the_json_ones_ids(monkeypatch):
    import json

    from cortex.wordpiece import COMPACT, AsciiWordPiece, CompactVocab, compact_form

    raw = (SHIPPED_MODEL / "tokenizer.json").read_bytes()
    assert (SHIPPED_MODEL / COMPACT).read_text(encoding="utf-8") == compact_form(raw)  # `make model` wrote it
    from_json = AsciiWordPiece.from_tokenizer_json(json.loads(raw))
    compact = AsciiWordPiece.from_compact(SHIPPED_MODEL / COMPACT, raw)
    assert dict(compact.vocab) == from_json.vocab  # all of it, as a long text builds it
    monkeypatch.setattr(CompactVocab, "LOOKUPS", 10**9)  # every text through the lookups in the text
    compact = AsciiWordPiece.from_compact(SHIPPED_MODEL / COMPACT, raw)
    for sample in _ascii_texts():
        assert compact.ids(sample) == from_json.ids(sample), repr(sample)
    assert compact.vocab._dict is None
    assert compact.vocab.get("zzzqqq") is None and "##ing" in compact.vocab and compact.vocab["[UNK]"] == from_json.unk_id


def test_a_compact_vocabulary_made_from_another_tokenizer_json_is_not_read(tmp_path):
    """A tokenizer.json edited or replaced after wordpiece.txt was made: its own
    vocabulary counts, read as JSON."""
    import json
    import shutil

    from cortex.embed import _load_folder
    from cortex.wordpiece import COMPACT

    folder = tmp_path / "model"
    shutil.copytree(SHIPPED_MODEL, folder)
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    vocab["database"], vocab["billing"] = vocab["billing"], vocab["database"]
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    assert (folder / COMPACT).read_bytes() == (SHIPPED_MODEL / COMPACT).read_bytes()
    swapped = _load_folder(folder).token_ids(["database billing"])
    assert swapped == [[vocab["database"], vocab["billing"]]] == [list(reversed(_load_folder(SHIPPED_MODEL).token_ids(["database billing"])[0]))]
    (folder / COMPACT).write_text("damaged", encoding="utf-8")
    assert _load_folder(folder).token_ids(["database billing"]) == swapped


def test_the_token_table_is_read_from_a_map_of_the_model_file():
    """A cold query reads the rows of its few tokens from a map of model.safetensors: the
    safetensors library copied the whole 7.5 MB table (~2,000 page faults, ~5 ms of the
    query's CPU) and is not imported for the shipped model."""
    code = ("import sys; from cortex.embed import get_model; m = get_model(); m.encode(['what database do we use for billing']);"
            "print('safetensors' in sys.modules, m.vectors.flags.writeable, m.vectors.flags.owndata)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_a_mapped_table_encodes_as_the_safetensors_library_reads_it(tmp_path):
    """The same arrays as safetensors' `get_tensor`, bit for bit, for the shipped table and
    for a model with weights and a mapping in other dtypes (F16, I64), whose header holds
    metadata too; a table in a dtype numpy lacks (BF16) or a file cut short is left to the
    library, which reads the one and refuses the other as before."""
    import shutil

    from safetensors import safe_open
    from safetensors.numpy import save_file

    from cortex.embed import _load_folder, _mapped_tensors

    def library(path):
        with safe_open(str(path), framework="numpy") as fh:
            return {name: fh.get_tensor(name) for name in fh.keys()}

    shipped = SHIPPED_MODEL / "model.safetensors"
    mapped = _mapped_tensors(shipped)
    assert set(mapped) == set(library(shipped)) == {"embeddings"}
    np.testing.assert_array_equal(mapped["embeddings"], library(shipped)["embeddings"])
    assert mapped["embeddings"].dtype == library(shipped)["embeddings"].dtype

    folder = tmp_path / "model"
    shutil.copytree(SHIPPED_MODEL, folder)
    table = library(shipped)["embeddings"]
    rng = np.random.default_rng(7)
    tensors = {"embeddings": table.astype(np.float16) / 64, "weights": rng.random(len(table)).astype(np.float32),
               "mapping": rng.permutation(len(table)).astype(np.int64)}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"made by": "a test"})
    mapped = _mapped_tensors(folder / "model.safetensors")
    for name, array in library(folder / "model.safetensors").items():
        assert mapped[name].dtype == array.dtype and mapped[name].shape == array.shape
        np.testing.assert_array_equal(mapped[name], array)
    from cortex.embed import Embedder

    model = _load_folder(folder)
    copied = Embedder(tensors["embeddings"], model.tokenizer, model.config, weights=tensors["weights"],
                      mapping=tensors["mapping"], wordpiece=model._wordpiece)
    np.testing.assert_array_equal(model.encode(TEXTS), copied.encode(TEXTS))

    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert _mapped_tensors(folder / "model.safetensors") is None
    with pytest.raises(ModelError, match="cannot read the model"):
        _load_folder(folder)
