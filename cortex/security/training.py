"""Fitting the injection classifier (used by scripts/train_classifier.py and the bench).

Never imported by ``cortex run``: numpy only, deterministic (no random state at all:
Newton's method on an L2-regularised logistic loss, folds by hash).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from cortex.security import classifier_main_view, normalise
from cortex.security.classifier import Encoder, Weights, addressed, design_matrix, judgeable, sigmoid

L2 = 0.3  # ridge strength on the embedding and feature weights (the bias is free)


@dataclass(frozen=True)
class Example:
    text: str
    label: int  # 1 attack, 0 benign
    source: str


def load_injection_rows(path: Path) -> list[Example]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    return [Example(r["text"], int(r["label"] == "attack"), r["source"]) for r in rows]


def load_lme_turns(path: Path, *, max_chars: int = 500) -> list[Example]:
    """LongMemEval user turns, cut to ``max_chars`` (the observation body cap)."""
    out, seen = [], set()
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("role", "user") != "user":
            continue
        text = r["text"][:max_chars].strip()
        if text and text not in seen:
            seen.add(text)
            out.append(Example(text, 0, "longmemeval"))
    return out


def load_note_bodies(roots: Iterable[Path]) -> list[Example]:
    """Bodies of markdown notes under ``roots`` (frontmatter dropped), as benign text."""
    out = []
    for root in roots:
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*.md")):
            text = p.read_text(encoding="utf-8", errors="replace")
            if text.startswith("---"):
                end = text.find("\n---", 3)
                text = text[end + 4 :] if end >= 0 else text
            text = text.strip()[:500]
            if text:
                out.append(Example(text, 0, "vault_notes"))
    return out


TRAINING_DIR = Path(__file__).resolve().parent.parent / "data" / "training"


def load_text_rows(path: Path, label: int, source: str) -> list[Example]:
    """``{"text": ..., "kind": ...}`` lines (cortex's own written sets) as examples."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    return [Example(r["text"], label, source) for r in rows]


def cortex_examples(vault_roots: Iterable[Path]) -> list[Example]:
    """The training text written for cortex, beside the public sets: the example vault's
    notes, imperative and technical sentences that use injection words in ordinary senses,
    agent memories of every type (accents, other languages, memories about the assistant
    itself), memory poisoning phrased as ordinary notes, mails and tool output, and
    e-mails, documents and tool output with and without an instruction planted for the
    assistant (``message_text.py``), and a working day's e-mails, meeting notes, tickets,
    documentation, tool output and web pages, clean and planted (``workday_text.py``)."""
    from cortex.security.benign_text import over_defence_sentences, technical_sentences

    out = load_note_bodies(vault_roots)
    out += [Example(text, 0, "cortex_over_defence") for text in over_defence_sentences()]
    out += [Example(text, 0, "cortex_technical") for text in technical_sentences()]
    out += load_text_rows(TRAINING_DIR / "memories_benign.jsonl", 0, "cortex_memories")
    out += load_text_rows(TRAINING_DIR / "memory_poisoning.jsonl", 1, "cortex_poisoning")
    from cortex.security.message_text import benign_messages, planted_messages

    out += [Example(text, 0, "cortex_messages") for text in benign_messages()]
    out += [Example(text, 1, "cortex_planted") for text in planted_messages()]
    from cortex.security.workday_text import workday_planted, workday_texts

    out += [Example(text, 0, "cortex_workday") for _, text in workday_texts()]
    out += [Example(text, 1, "cortex_workday_planted") for _, text in workday_planted()]
    return out


def stable_fold(text: str, k: int) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) % k


def training_encoder() -> Encoder:
    """cortex.embed's model; until that module exists, model2vec on the same folder
    (training only: the run-time path never imports model2vec)."""
    try:
        from cortex.embed import get_model
    except ImportError:
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(str(Path(__file__).resolve().parent.parent / "data" / "model"))
        return lambda texts: model.encode(texts)
    return get_model().encode


@dataclass
class Matrix:
    """One row per view; ``owner`` maps a row to its example."""

    emb: np.ndarray
    feats: np.ndarray
    owner: np.ndarray
    y: np.ndarray  # per example
    source: list[str]  # per example


def build_matrix(examples: Sequence[Example], encode: Encoder, *, batch: int = 512) -> Matrix:
    views, owner = [], []
    for i, ex in enumerate(examples):
        vs = normalise.views(ex.text)
        vs[0] = classifier_main_view(ex.text)  # exactly what Scanner gives the classifier
        for v in vs:
            if not judgeable(v):
                continue  # scored 0 at run time; training on it would teach "foreign = attack"
            views.append(v)
            owner.append(i)
    embs, feats = [], []
    for start in range(0, len(views), batch):
        e, f = design_matrix(views[start : start + batch], encode)
        embs.append(e)
        feats.append(f)
    return Matrix(
        emb=np.vstack(embs),
        feats=np.vstack(feats),
        owner=np.asarray(owner, dtype=np.int64),
        y=np.array([ex.label for ex in examples], dtype=np.float64),
        source=[ex.source for ex in examples],
    )


def example_weights(y: np.ndarray, source: Sequence[str]) -> np.ndarray:
    """Each source counts by the square root of its size, and the two classes weigh the
    same in total, so 579 in-the-wild jailbreaks do not drown 6 short injections."""
    src = np.array(source)
    w = np.zeros(len(y))
    for s in set(source):
        mask = src == s
        w[mask] = 1.0 / np.sqrt(mask.sum())
    for label in (0, 1):
        m = y == label
        if m.any():
            w[m] *= 0.5 * len(y) / w[m].sum()
    return w


def fit(m: Matrix, rows: np.ndarray, *, l2: float = L2, iters: int = 25) -> Weights:
    """L2 logistic regression by Newton's method over the views of the chosen examples."""
    rows = np.asarray(rows)
    sel = np.isin(m.owner, rows)
    own = m.owner[sel]
    feats = m.feats[sel]
    mean = feats.mean(axis=0)
    std = feats.std(axis=0) + 1e-3
    x = np.hstack([m.emb[sel], (feats - mean) / std, np.ones((sel.sum(), 1), np.float32)]).astype(np.float64)
    ex_w = np.zeros(len(m.y))
    ex_w[rows] = example_weights(m.y[rows], [m.source[i] for i in rows])
    # An example's weight is shared by its views.
    counts = np.bincount(own, minlength=len(m.y)).astype(np.float64)
    w = ex_w[own] / counts[own]
    y = m.y[own]
    d = x.shape[1]
    reg = np.full(d, l2)
    reg[-1] = 0.0
    beta = np.zeros(d)
    for _ in range(iters):
        p = sigmoid(x @ beta)
        grad = x.T @ (w * (p - y)) + reg * beta
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(reg) + 1e-6 * np.eye(d)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-6:
            break
    return Weights(
        coef=beta[:-1].astype(np.float32),
        bias=float(beta[-1]),
        feat_mean=mean.astype(np.float32),
        feat_std=std.astype(np.float32),
        threshold=0.5,
    )


def predict(m: Matrix, weights: Weights, rows: np.ndarray) -> np.ndarray:
    """Highest view probability for each chosen example."""
    rows = np.asarray(rows)
    sel = np.isin(m.owner, rows)
    x = np.hstack([m.emb[sel], (m.feats[sel] - weights.feat_mean) / weights.feat_std])
    p = sigmoid(x @ weights.coef + weights.bias) * addressed(m.feats[sel])  # as InjectionClassifier scores
    best = np.zeros(len(m.y))  # an example with no judgeable view scores 0
    np.maximum.at(best, m.owner[sel], p)
    return best[rows]


def out_of_fold(m: Matrix, rows: np.ndarray, *, k: int = 5, texts: Sequence[str]) -> np.ndarray:
    """Probabilities for ``rows`` from models that did not see them (k folds by hash)."""
    rows = np.asarray(rows)
    folds = np.array([stable_fold(texts[i], k) for i in rows])
    out = np.zeros(len(rows))
    for f in range(k):
        test = rows[folds == f]
        if len(test) == 0:
            continue
        model = fit(m, rows[folds != f])
        out[folds == f] = predict(m, model, test)
    return out


def pick_threshold(probs: np.ndarray, y: np.ndarray, *, max_benign_rate: float) -> float:
    """The lowest threshold that holds at most ``max_benign_rate`` of benign texts."""
    benign = np.sort(probs[y == 0])[::-1]
    if len(benign) == 0:
        return 0.5
    allowed = int(np.floor(max_benign_rate * len(benign)))
    # Strictly above the (allowed+1)-th highest benign score.
    cut = benign[min(allowed, len(benign) - 1)]
    return float(min(max(cut + 1e-6, 0.05), 0.99))
