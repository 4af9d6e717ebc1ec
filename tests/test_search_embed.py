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
