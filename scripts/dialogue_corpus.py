"""The dialogue half of the static model's training text, built from two public datasets
(maintainers only; `scripts/distill_model.py` reads the result).

Both datasets are Google Research's, under CC BY 4.0, and are not kept in this repository:
clone them first (the model trained on them is a derivative, credited in MODEL_CARD.md).

    git clone https://github.com/google-research-datasets/Taskmaster build/Taskmaster
    git clone https://github.com/google-research-datasets/Synthetic-Persona-Chat build/Synthetic-Persona-Chat
    python scripts/dialogue_corpus.py [--taskmaster DIR] [--persona DIR] [--out FILE]

Each conversation is cut into windows of four turns (speaker prefixes removed); each
Persona-Chat speaker's persona lines are one text more. One JSON object a line
(`src`, `text`), gzip-compressed.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WINDOW = 4
PERSONA_FILES = ("data/Synthetic-Persona-Chat_valid.csv", "data/Synthetic-Persona-Chat_test.csv")


def _tracked(repo: Path) -> list[str]:
    return subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True, check=True).stdout.split("\n")


def windows(turns: list[str]) -> list[str]:
    return [" ".join(turns[i:i + WINDOW]) for i in range(0, len(turns), WINDOW)]


def taskmaster(repo: Path) -> list[str]:
    out = []
    for name in _tracked(repo):
        if not name.endswith(".json") or "/data/" not in name:
            continue
        try:
            dialogs = json.loads((repo / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for d in dialogs if isinstance(dialogs, list) else ():
            out += windows([u["text"].strip() for u in d.get("utterances", []) if u.get("text", "").strip()])
    return out


def persona_chat(repo: Path) -> list[str]:
    out = []
    for name in PERSONA_FILES:
        with open(repo / name, encoding="utf-8", newline="") as fh:
            for row in csv.reader(fh):
                if len(row) < 3 or row[0].startswith("user 1 personas"):
                    continue
                out += [" ".join(persona.split("\n")).strip() for persona in row[:2]]
                out += windows([re.sub(r"^User \d: ", "", t).strip() for t in row[2].split("\n") if t.strip()])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--taskmaster", type=Path, default=REPO / "build" / "Taskmaster")
    parser.add_argument("--persona", type=Path, default=REPO / "build" / "Synthetic-Persona-Chat")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "dialogue_corpus.jsonl.gz")
    args = parser.parse_args(argv)
    rows = [("persona", t) for t in persona_chat(args.persona)] + [("taskmaster", t) for t in taskmaster(args.taskmaster)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt", encoding="utf-8") as fh:
        for src, text in rows:
            fh.write(json.dumps({"src": src, "text": text}, ensure_ascii=False) + "\n")
    print(f"{len(rows)} texts written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
