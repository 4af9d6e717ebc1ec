"""Stage 3: injection hold, credential redaction, source trust.

The scanning itself lives in ``cortex.security``; this stage decides what a finding
means for the line. Texts are scanned in one batch so the classifier embeds once.
"""

from __future__ import annotations

from dataclasses import replace

from cortex.fields import SCANNED as SCANNED_FIELDS  # the prose fields (cortex/fields.py)
from cortex.model import Observation, Rejection
from cortex.pipeline.context import Context

# Attribution, entity names and tags reach the note (names also its wikilinks): an
# instruction planted there is held, a credential pasted there removed. Each is scanned
# on its own (joined, a secret could span two of them), by the pattern layer only (the
# classifier judges prose), tags also in the lowercase the note will give them.
NAMES = "names"


def _names(obs: Observation) -> list[str]:
    return [obs.attribution, *(name for name, _ in obs.entities), *obs.tags, *(t.lower() for t in obs.tags)]


def screen(observations: list[Observation], ctx: Context) -> list[Observation | Rejection]:
    prose = [getattr(obs, name) or "" for obs in observations for name in SCANNED_FIELDS]
    # Names repeat across a batch (the same attribution, entities and tags on many lines):
    # each distinct one is scanned once.
    unique = list(dict.fromkeys(name for obs in observations for name in _names(obs)))
    results = ctx.scanner.scan_many(prose + unique, classify=[True] * len(prose) + [False] * len(unique))
    by_name = dict(zip(unique, results[len(prose):]))
    out: list[Observation | Rejection] = []
    k = len(SCANNED_FIELDS)
    for i, obs in enumerate(observations):
        scans = dict(zip(SCANNED_FIELDS, results[k * i : k * i + k]))
        out.append(_judge(obs, scans, by_name, ctx))
    return out


def _judge(obs: Observation, scans: dict, by_name: dict, ctx: Context) -> Observation | Rejection:
    """``scans``: each prose field's scan; ``by_name``: the scan of each name and tag."""
    if not ctx.skip_injection:
        for name, scan in [*scans.items(), *((NAMES, by_name[n]) for n in _names(obs))]:
            verdict = scan.injection
            if verdict is not None:
                return Rejection(
                    "injection",
                    f"{name}: {verdict.layer} layer fired ({verdict.rule}, score {verdict.score:.2f}): {verdict.excerpt!r}",
                    {"layer": verdict.layer, "score": round(float(verdict.score), 4), "rule": verdict.rule, "field": name},
                )
    if not ctx.skip_trust:
        policy = ctx.settings.trust.policy_for(obs.attribution, obs.session_id)
        if policy == "quarantine":
            return Rejection("untrusted", f"source {obs.attribution!r} is held for review by the trust policy")
        if policy == "none":
            return Rejection("dropped", f"source {obs.attribution!r} is dropped by the trust policy")
    redactions: list[str] = []
    changes: dict = {}
    if any(by_name[n].redactions for n in _names(obs)):  # a credential pasted as a name or a tag

        def tag_secret(tag: str) -> tuple[str, ...]:  # as written, else as the note lowercases it
            return by_name[tag].redactions or by_name[tag.lower()].redactions

        redactions += [k for n in (obs.attribution, *(e for e, _ in obs.entities)) for k in by_name[n].redactions]
        redactions += [k for tag in obs.tags for k in tag_secret(tag)]
        changes["attribution"] = by_name[obs.attribution].text
        changes["entities"] = tuple((by_name[name].text, kind) for name, kind in obs.entities)
        # A tag cannot hold "[REDACTED]" (lowercase segments): one that carries a
        # credential is left out of the note.
        changes["tags"] = tuple(tag for tag in obs.tags if not tag_secret(tag))
    for name, scan in scans.items():
        original = getattr(obs, name)
        if original is None:
            continue
        redactions += scan.redactions
        if scan.text != original:
            changes[name] = scan.text
    if not (changes.get("body") or obs.body).strip():
        return Rejection("schema", "body: nothing left after removing hidden characters", {"rule": "minLength"})
    warnings = obs.warnings + tuple(f"redacted a credential ({kind})" for kind in redactions)
    return replace(obs, **changes, redactions=tuple(redactions), warnings=warnings)


def foresee(observations: list[dict], scanner, *, classify: bool) -> list[dict]:
    """What this stage will make of lines not yet run, said while the writer can still
    rephrase: one finding per field, ``{"line", "field", "held": rule | None,
    "redacted": [kinds]}``. ``classify`` False: patterns and credentials only (the learned
    layer needs the embedding model, which ``cortex write`` does not load). Each field is
    seen as the run's scan will see it, cut to its cap first (``schema.truncate``): words
    past the cap are never memorized, so they are neither scanned nor warned about (and a
    body of a megabyte is not scanned whole)."""
    from cortex.pipeline.schema import truncate

    fields, texts, prose = [], [], []
    for n, obs in enumerate(observations, start=1):
        obs, _ = truncate(obs)
        entities = [e.get("name") if isinstance(e, dict) else None for e in obs.get("entities") or ()]
        names = [obs.get("attribution"), *entities, *(obs.get("tags") or ())]
        for name in SCANNED_FIELDS:
            if isinstance(obs.get(name), str):
                fields.append((n, name)), texts.append(obs[name]), prose.append(classify)
        for value in names:
            if isinstance(value, str) and value:
                fields.append((n, NAMES)), texts.append(value), prose.append(False)
    out = []
    for (n, name), scan in zip(fields, scanner.scan_many(texts, classify=prose)):
        if scan.injection is not None or scan.redactions:
            held = scan.injection.rule if scan.injection is not None else None
            out.append({"line": n, "field": name, "held": held, "redacted": list(scan.redactions)})
    return out


def foresight_message(f: dict) -> str:
    if f["held"] is not None:
        return (f"{f['field']} reads like an instruction to an agent ({f['held']}): the run will hold it in "
                "quarantine. Write the fact itself (\"deploys need Maya's approval\"), not an order.")
    return f"{f['field']} holds a credential ({', '.join(f['redacted'])}): the note will show [REDACTED]"
