"""Security layers, measured (figures, not pass/fail).

    .venv/bin/python bench/bench_security.py

1. Injection: cross-validation grouped by `source` on ../shared/bench/security/
   injection_dev.jsonl. Each fold trains the classifier on every source but one (plus
   half of the LongMemEval user turns, the example vault's notes and cortex's
   over-defence sentences), picks its threshold out of fold on that training data
   alone, and tests on the source left out. A written set of cortex's and its planted
   twin (the same carriers with an instruction added) leave training together. Public
   sets found in $CORTEX_SECURITY_PUBLIC or ../shared/bench/security/public/ are test
   folds only, never trained on (see load_public_eval). Printed per fold and as the mean over folds:
   share of attacks held and share of benign texts wrongly held, for the patterns alone,
   the classifier alone, and both; the other half of the LongMemEval turns is a further
   benign test in every fold.
2. Credentials: ../shared/bench/security/secrets_dev.jsonl per provider and
   tests/secret_phrasings.py per phrasing family (assigned, export, config file, said in a
   sentence, URL, Kubernetes Secret, PEM, JWT): share redacted; per kind of near-miss:
   share altered; side by side with detect-secrets' keyword + entropy plugins and all of
   its plugins where it is installed (`pip install .[bench]`).
3. Held-out sets: the shipped scanner (patterns + classifier, as `cortex run` uses it)
   on sets written for cortex that no training ever saw, bench/data/
   memories_benign_eval.jsonl (ordinary memories of every type: imperatives, notes about
   the assistant's own behaviour, accents and other languages) and bench/data/
   memory_poisoning_eval.jsonl (instructions planted as notes, mails, tool output), and
   bench/data/workday_benign_eval.jsonl (e-mails, meeting notes, tickets, docs, tool
   output and web pages written by hand, full of imperatives to people) with
   bench/data/workday_planted_eval.jsonl (the same kinds with an instruction for the
   model planted): share wrongly held, share held, per kind.
4. Time per observation of the classifier (amortised over a batch) and of a full scan.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # secret_phrasings: credentials built at run time

from cortex.security import Scanner, normalise  # noqa: E402
from cortex.security import training as T  # noqa: E402
from cortex.security.injection import default_patterns, match_patterns  # noqa: E402
from cortex.security.secrets import redact  # noqa: E402

# The shared bench data sits beside the repository (or beside its worktrees' folder).
SHARED = next((p for p in (ROOT.parent / "shared" / "bench", ROOT.parents[1] / "shared" / "bench") if p.is_dir()),
              ROOT.parent / "shared" / "bench")
INJECTION = SHARED / "security" / "injection_dev.jsonl"
SECRETS = SHARED / "security" / "secrets_dev.jsonl"
LME = SHARED / "data" / "lme_oracle_docs.jsonl"
BENCH_DATA = ROOT / "bench" / "data"
MAX_BENIGN_RATE = 0.002  # the same rule the shipped model's threshold follows


def _rate(mask: np.ndarray, sel: np.ndarray) -> float:
    return float(mask[sel].mean()) if sel.any() else float("nan")


def _fmt(x: float) -> str:
    return "    -" if np.isnan(x) else f"{x:5.3f}"


# cortex's written sets come in pairs: the planted texts are the clean ones with an
# instruction added, so a fold that leaves one out leaves its twin out of training too
# (else the carriers are trained on as attacks and the clean fold measures that leak).
FAMILY = {"cortex_planted": "cortex_messages", "cortex_workday_planted": "cortex_workday"}


def _family(source: str) -> str:
    return FAMILY.get(source, source)


def load_public_eval() -> list:
    """Public sets used only as test folds, never trained on: ``*.jsonl`` rows of
    {"text", "label": "attack"|"benign", "source"} in $CORTEX_SECURITY_PUBLIC or
    ../shared/bench/security/public/ (absent: skipped). What they hold and their
    licences: that folder's README."""
    root = Path(os.environ.get("CORTEX_SECURITY_PUBLIC") or SHARED / "security" / "public")
    out = []
    for f in sorted(root.glob("*.jsonl")) if root.is_dir() else []:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                out.append(T.Example(r["text"][:500], int(r["label"] == "attack"), r["source"]))
    return out


def bench_injection() -> None:
    started = time.perf_counter()
    injection = T.load_injection_rows(INJECTION)
    lme = T.load_lme_turns(LME)
    extra = T.cortex_examples([ROOT / "vault", ROOT / "mind"])
    public = load_public_eval()
    # Technical text never trained on: the credential set's sentences (keys, hashes, URLs,
    # placeholders) are all benign as far as injection goes.
    tech = [json.loads(line) for line in SECRETS.read_text(encoding="utf-8").split("\n") if line.strip()]
    tech = [T.Example(r["text"], 0, "secrets_dev_texts") for r in tech]
    examples = injection + lme + extra + public + tech
    texts = [e.text for e in examples]
    m = T.build_matrix(examples, T.training_encoder())
    src = np.array(m.source)
    fam = np.array([_family(s) for s in m.source])
    n_inj, n_lme = len(injection), len(lme)
    lme_idx = np.arange(n_inj, n_inj + n_lme)
    half = np.array([T.stable_fold(texts[i], 2) for i in lme_idx])
    lme_train, lme_test = lme_idx[half == 0], lme_idx[half == 1]
    extra_idx = np.arange(n_inj + n_lme, n_inj + n_lme + len(extra))
    trainable = np.concatenate([np.arange(n_inj), lme_train, extra_idx])
    tech_idx = np.arange(len(examples) - len(tech), len(examples))

    patterns = default_patterns()
    pat = np.array([match_patterns(t, patterns) is not None for t in texts])

    print("Injection: leave one source out (train on the rest; threshold chosen out of fold on the training part)")
    print(f"{'held-out source':26s} {'n':>5s} {'thr':>5s} | {'attacks held':^23s} | {'benign wrongly held':^23s} | {'LME turns held':^11s} | tech")
    print(f"{'':26s} {'':5s} {'':5s} | {'pat':>5s} {'clf':>5s} {'both':>5s}     | {'pat':>5s} {'clf':>5s} {'both':>5s}     | {'clf':>5s} {'both':>5s} | {'both':>5s}")
    rows = []
    # Every public source, each of cortex's own written sets (with its twin), and the
    # public sets kept for testing only, left out in turn.
    own = [s for s in sorted(set(e.source for e in extra)) if s != "vault_notes"]
    held_only = sorted(set(e.source for e in public))
    for s in sorted(set(e.source for e in injection)) + own + held_only:
        test = np.where(src == s)[0]
        test = test[np.isin(test, trainable) | (s in held_only)]
        train = trainable[fam[trainable] != _family(s)]
        oof = T.out_of_fold(m, train, texts=texts)
        thr = T.pick_threshold(oof, m.y[train], max_benign_rate=MAX_BENIGN_RATE)
        w = T.fit(m, train)
        clf = T.predict(m, w, test) >= thr
        clf_lme = T.predict(m, w, lme_test) >= thr
        clf_tech = T.predict(m, w, tech_idx) >= thr
        y = m.y[test]
        p = pat[test]
        both = clf | p
        att, ben = y == 1, y == 0
        r = (
            _rate(p, att), _rate(clf, att), _rate(both, att),
            _rate(p, ben), _rate(clf, ben), _rate(both, ben),
            float(clf_lme.mean()), float((clf_lme | pat[lme_test]).mean()),
            float((clf_tech | pat[tech_idx]).mean()),
        )
        rows.append((s, r))
        mark = " (test only)" if s in held_only else ""
        print(f"{s + mark:26s} {len(test):5d} {thr:5.3f} | {_fmt(r[0])} {_fmt(r[1])} {_fmt(r[2])}     | "
              f"{_fmt(r[3])} {_fmt(r[4])} {_fmt(r[5])}     | {_fmt(r[6])} {_fmt(r[7])} | {_fmt(r[8])}")
    for label, chosen in (("mean over folds", [r for _, r in rows]),
                          ("mean, public folds", [r for s, r in rows if not s.startswith("cortex_")]),
                          ("mean, cortex's own folds", [r for s, r in rows if s.startswith("cortex_")])):
        mean = np.nanmean(np.array(chosen, dtype=float), axis=0)
        print(f"{label:26s} {'':5s} {'':5s} | {_fmt(mean[0])} {_fmt(mean[1])} {_fmt(mean[2])}     | "
              f"{_fmt(mean[3])} {_fmt(mean[4])} {_fmt(mean[5])}     | {_fmt(mean[6])} {_fmt(mean[7])} | {_fmt(mean[8])}")
    print("(attack means over folds with attacks; benign means over folds with benign texts;"
          " targets for both: attacks >= 0.80, benign <= 0.02)")
    print("(a written set's planted twin is left out with it; 'test only' sets are never trained on:"
          f" {', '.join(held_only) or 'none found, see load_public_eval'})")
    print(f"(tech: the {len(tech)} sentences of secrets_dev.jsonl - keys, hashes, URLs, placeholders -"
          " as benign text no fold trained on)")
    # Benign overall in the pooled sense too, since two benign folds are large.
    print(f"patterns on all {n_lme} LongMemEval turns: {pat[lme_idx].mean():.4f} held")
    print(f"[{time.perf_counter() - started:.0f} s]\n")


def _secret_sets() -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(group, text, secret) credentials and (group, text) near-misses: the shared set per
    provider, and tests/secret_phrasings.py per phrasing family (values built now)."""
    from secret_phrasings import families, near_misses

    rows = [json.loads(line) for line in SECRETS.read_text(encoding="utf-8").split("\n") if line.strip()]
    creds = [("provider " + r["provider"], r["text"], r["secret"]) for r in rows if r["label"] == "secret"]
    creds += [("phrasing " + f, text, secret) for f, _, text, secret in families()]
    near = [("dev " + r["kind"], r["text"]) for r in rows if r["label"] != "secret"]
    near += [("phrasing " + k, text) for k, text in near_misses()]
    return creds, near


def _detect_secrets_finders():
    """detect-secrets' keyword + entropy plugins, and all of its plugins, as functions
    text -> found strings; None where it is not installed (`pip install .[bench]`)."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.settings import transient_settings
    except ImportError:
        return None
    with transient_settings({"plugins_used": []}):
        every = [cls() for cls in get_mapping_from_secret_type_to_class().values()]
    keyword_entropy = [p for p in every if type(p).__name__ in ("KeywordDetector", "Base64HighEntropyString", "HexHighEntropyString")]

    def finder(plugins):
        def hits(text: str) -> set[str]:
            found: set[str] = set()
            with transient_settings({"plugins_used": []}):
                for line in text.split("\n"):
                    for p in plugins:
                        found |= set(p.analyze_string(line))
            return found
        return hits

    return {"detect-secrets keyword+entropy": finder(keyword_entropy), f"detect-secrets all {len(every)}": finder(every)}


def bench_secrets() -> None:
    creds, near = _secret_sets()
    cortex_found = lambda t, s: s not in redact(normalise.storable(t))[0]  # noqa: E731
    others = _detect_secrets_finders() or {}
    names = ["cortex", *others]

    def caught(name, text, secret):
        if name == "cortex":
            return cortex_found(text, secret)
        return any(x and (x in secret or secret in x) for x in others[name](text))

    def altered(name, text):
        if name == "cortex":
            clean = normalise.storable(text)  # hidden characters go too; only redaction counts here
            return redact(clean)[0] != clean
        return bool(others[name](text))

    print("Credentials redacted (found, for detect-secrets), per provider (shared set) and per phrasing family")
    print(f"{'group':34s} {'n':>4s} " + " ".join(f"{n[:22]:>22s}" for n in names))
    groups = sorted({g for g, _, _ in creds}, key=lambda g: (not g.startswith("provider"), g))
    totals = {n: [0, 0] for n in names}
    for g in groups:
        rows = [(t, s) for gg, t, s in creds if gg == g]
        cells = []
        for n in names:
            k = sum(caught(n, t, s) for t, s in rows)
            totals[n][0] += k
            totals[n][1] += len(rows)
            cells.append(f"{k / len(rows):22.3f}")
        print(f"{g:34s} {len(rows):4d} " + " ".join(cells))
    print(f"{'all':34s} {len(creds):4d} " + " ".join(f"{totals[n][0] / totals[n][1]:22.3f}" for n in names) + "   (target >= 0.95)")
    print("\nNear-misses altered (flagged, for detect-secrets), per kind")
    totals = {n: 0 for n in names}
    for g in sorted({g for g, _ in near}):
        rows = [t for gg, t in near if gg == g]
        cells = []
        for n in names:
            k = sum(altered(n, t) for t in rows)
            totals[n] += k
            cells.append(f"{k / len(rows):22.3f}")
        print(f"{g:34s} {len(rows):4d} " + " ".join(cells))
    print(f"{'all':34s} {len(near):4d} " + " ".join(f"{totals[n] / len(near):22.3f}" for n in names) + "   (target <= 0.02)")
    lme = [t.text for t in T.load_lme_turns(LME)][:1500]
    print(f"{'LongMemEval turns touched':34s} {len(lme):4d} " + " ".join(f"{sum(altered(n, t) for t in lme) / len(lme):22.3f}" for n in names))
    if not others:
        print("(detect-secrets not installed: `pip install .[bench]` to compare)")
    print()


def bench_timing() -> None:
    texts = [t.text for t in T.load_lme_turns(LME)][:2000]
    scanner = Scanner()
    scanner.scan_many(texts[:10])  # load the model and weights outside the timing
    clf = scanner.classifier
    views = [normalise.views(t) for t in texts]
    wall, cpu = time.perf_counter(), time.process_time()
    clf.predict_proba(views)
    clf_wall = (time.perf_counter() - wall) / len(texts)
    clf_cpu = (time.process_time() - cpu) / len(texts)
    wall, cpu = time.perf_counter(), time.process_time()
    scanner.scan_many(texts)
    scan_wall = (time.perf_counter() - wall) / len(texts)
    scan_cpu = (time.process_time() - cpu) / len(texts)
    print(f"Time per observation ({len(texts)} LongMemEval turns in one batch, <= 500 chars; "
          f"wall and CPU, since a busy machine inflates wall time)")
    print(f"  classifier (embed + features + score): {clf_wall * 1000:.3f} ms wall, {clf_cpu * 1000:.3f} ms CPU   (target <= 0.5 ms)")
    print(f"  full scan (normalise, redact, patterns, classifier): {scan_wall * 1000:.3f} ms wall, {scan_cpu * 1000:.3f} ms CPU")


def bench_memories() -> None:

    scanner = Scanner()
    print("Held-out sets written for cortex that no training saw (the shipped scanner, patterns + classifier)")
    for name, what in (("memories_benign_eval.jsonl", "wrongly held"), ("memory_poisoning_eval.jsonl", "held"),
                       ("workday_benign_eval.jsonl", "wrongly held"), ("workday_planted_eval.jsonl", "held")):
        _held_out_report(scanner, name, what)
    print()



def _held_out_report(scanner, name: str, what: str) -> None:
    """One hand-written held-out file (`{"text", "kind"}` rows) through the shipped
    scanner: the share held, by layer and by kind (worst first)."""
    rows = [json.loads(line) for line in (BENCH_DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    results = scanner.scan_many([r["text"] for r in rows])
    layers: dict[str, int] = defaultdict(int)
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row, result in zip(rows, results):
        by_kind[row["kind"]][1] += 1
        if result.injection is not None:
            layers[result.injection.layer] += 1
            by_kind[row["kind"]][0] += 1
    print(f"  {name:28s} n={len(rows):4d}  {what} {sum(layers.values()) / len(rows):.3f}  "
          f"(patterns {layers['pattern']}, classifier {layers['classifier']})")
    sign = -1 if what == "wrongly held" else 1
    worst = sorted(by_kind.items(), key=lambda kv: sign * kv[1][0] / kv[1][1])
    print("    by kind: " + ", ".join(f"{k} {h}/{n}" for k, (h, n) in worst))

def main() -> int:
    missing = [p for p in (INJECTION, SECRETS, LME) if not p.is_file()]
    if missing:
        print(f"security bench skipped: {', '.join(map(str, missing))} not found (the shared bench data sits beside the repository)")
        return 0
    bench_secrets()
    bench_injection()
    bench_memories()
    bench_timing()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
