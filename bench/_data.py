"""Shared loading of ../shared/bench data for the benchmark scripts."""

from __future__ import annotations

import gzip
import json
import os
from datetime import datetime, timezone
from pathlib import Path

DATA = Path(os.environ.get("CORTEX_BENCH_DATA", Path(__file__).resolve().parents[2] / "shared" / "bench" / "data"))


def _lines(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def lme_date(text: str | None) -> float:
    """'2023/05/21 (Sun) 19:50' -> epoch seconds (0.0 when absent)."""
    if not text:
        return 0.0
    day, _, clock = text.partition(" (")
    clock = clock.split(") ", 1)[-1] if ") " in clock else "00:00"
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc).timestamp()


def data_files(name: str) -> tuple[Path, Path]:
    """(docs file, queries file) of 'lme' or 'scifact'."""
    if name == "lme":
        return DATA / "lme_oracle_docs.jsonl", DATA / "lme_oracle_queries.jsonl"
    return DATA / "scifact_docs.jsonl.gz", DATA / "scifact_queries.jsonl"


def load(name: str):
    """(docs, queries) for 'lme' or 'scifact'."""
    docs, queries = data_files(name)
    return list(_lines(docs)), list(_lines(queries))
