"""What hostile input costs: each case run once as the real command in a subprocess, with
its wall time and peak memory (the child's ru_maxrss from wait4). Figures, not pass/fail.

- `cortex run` over a buffer whose first line is 60 MB (one huge body), then a good line:
  the line is quarantined from its first 4 KiB, never read whole;
- `cortex run` over 1,000 lines, half of them hostile (100,000-deep nesting, 400-digit
  numbers, lone surrogates, invalid UTF-8, truncated JSON);
- the git hook's validator (`python -m cortex.hooks validate FILE`) on a note holding a
  YAML alias bomb (nine levels of nine: 387 million values if expanded) and on a 49 MB note.

Run: `.venv/bin/python bench/bench_hostile.py` (or `make bench`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
CORTEX = str(Path(PY).with_name("cortex"))


def measure(argv, cwd) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def observation(n: int) -> dict:
    return {"timestamp": "2026-02-16T15:23:14Z", "bucket": "explicit", "type": "fact", "attribution": "owner",
            "session_id": "cli", "body": f"Fact {n}: the ledger job runs at {n % 24:02d}:00.", "importance": 0.9}


def hostile(n: int) -> bytes:
    good = json.dumps(observation(n))
    kinds = [
        "[" * 100_000 + "]" * 100_000,
        good[:-1] + ', "confidence": 1' + "0" * 400 + "}",
        good.replace("the ledger", "the \\ud800 ledger"),
        good[: len(good) // 2],
    ]
    if n % 5 == 4:
        return good.encode().replace(b"ledger", b"l\xffdger")
    return kinds[n % 4].encode()


def note(body: str, extra: str = "") -> str:
    from cortex.notes import source_hash

    return (f"---\nid: 019c7a1e-5b40-7a2c-9d3e-4f1a2b3c4d5e\ntype: fact\ncategory: concept\n"
            f"created: 2026-02-19T21:14:03.207Z\nsource_hash: {source_hash(body)}\n{extra}# ---\n---\n{body}\n")


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="cortex-bench-hostile-") as tmp:
        root = Path(tmp) / "vault"
        subprocess.run([CORTEX, "init", str(root)], check=True, capture_output=True)
        buf = root / "observer" / "observations.jsonl"
        # Written in pieces: the bench process stays small, so the children's peak memory
        # (which Linux carries across fork and exec) is theirs alone.
        head = json.dumps({k: v for k, v in observation(0).items() if k != "body"})[:-1] + ', "body": "'
        with open(buf, "w") as fh:
            fh.write(head)
            for _ in range(60):
                fh.write("x" * 1_000_000)
            fh.write('"}\n' + json.dumps(observation(1)) + "\n")
        rows.append(("cortex run: a 60 MB line, then a good one", *measure([CORTEX, "run"], root)))
        with open(buf, "wb") as fh:
            for n in range(1000):
                fh.write((hostile(n) if n % 2 else json.dumps(observation(n + 10)).encode()) + b"\n")
        rows.append(("cortex run: 1,000 lines, half hostile", *measure([CORTEX, "run"], root)))
        laughs, prev = 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n', "l0"
        for n in range(1, 10):
            laughs += f"l{n}: &l{n} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
            prev = f"l{n}"
        (root / "mind" / "facts" / "laughs.md").write_text(note("A fact.", laughs))
        with open(root / "vault" / "big.md", "w") as fh:
            fh.write(note("word"))
            for _ in range(98):
                fh.write("word " * 100_000)
        for label, rel in (("hook validate: a YAML alias bomb", "mind/facts/laughs.md"), ("hook validate: a 49 MB note", "vault/big.md")):
            rows.append((label, *measure([PY, "-m", "cortex.hooks", "validate", rel], root)))
    print(f"{'case':<46} {'seconds':>8} {'peak MB':>8} {'exit':>5}")
    for label, seconds, peak, code in rows:
        print(f"{label:<46} {seconds:>8.2f} {peak:>8.0f} {code:>5}")


if __name__ == "__main__":
    main()
