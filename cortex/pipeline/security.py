"""Stage 3: injection hold, credential redaction, source trust (DESIGN §3.3).

The scanning itself lives in ``cortex.security``; this stage decides what a finding
means for the line. Texts are scanned in one batch so the classifier embeds once.
"""

from __future__ import annotations

from dataclasses import replace

from cortex.model import Observation, Rejection
from cortex.pipeline.context import Context

SCANNED_FIELDS = ("body", "context", "source_quote")
# Attribution and entity names reach the note (and entity names its wikilinks) too: an
# instruction planted there is held like one in the body.
NAMES = "names"


def _names(obs: Observation) -> str:
    return "\n".join([obs.attribution, *(name for name, _ in obs.entities), *obs.tags])


def screen(observations: list[Observation], ctx: Context) -> list[Observation | Rejection]:
    fields = (*SCANNED_FIELDS, NAMES)
    texts: list[str] = []
    for obs in observations:
        texts += [getattr(obs, name) or "" for name in SCANNED_FIELDS] + [_names(obs)]
    classify = [name != NAMES for name in fields] * len(observations)
    results = ctx.scanner.scan_many(texts, classify=classify)
    out: list[Observation | Rejection] = []
    n = len(fields)
    for i, obs in enumerate(observations):
        scans = dict(zip(fields, results[n * i : n * i + n]))
        out.append(_judge(obs, scans, ctx))
    return out


def _judge(obs: Observation, scans: dict, ctx: Context) -> Observation | Rejection:
    if not ctx.skip_injection:
        for name, scan in scans.items():
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
    if scans[NAMES].redactions:  # a credential pasted as a name or a tag
        redactions += scans[NAMES].redactions
        changes["attribution"] = ctx.scanner.redact(obs.attribution)[0]
        changes["entities"] = tuple((ctx.scanner.redact(name)[0], kind) for name, kind in obs.entities)
        # A tag cannot hold "[REDACTED]" (lowercase segments): one that carries a
        # credential is left out of the note.
        changes["tags"] = tuple(tag for tag in obs.tags if not ctx.scanner.redact(tag)[1])
    for name, scan in scans.items():
        if name == NAMES:
            continue
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
