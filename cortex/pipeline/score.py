"""Stage 4: confidence and importance.

Bucket defaults, then structural signals (imperative words and emphasis each add 0.1
importance once per kind; a hedge takes 0.1 confidence), then calibration rules, each
step clamped to [0, 1]. Below the threshold a line is counted, not memorized.
"""

from __future__ import annotations

import re

from cortex.config import Calibration
from cortex.model import Observation, Rejection, Scored
from cortex.pipeline.context import Context

DEFAULTS = {"explicit": (0.9, 0.5), "ambient": (0.7, 0.4)}  # bucket -> (confidence, importance)

SIGNALS = (
    # (name, pattern, field, delta)
    ("imperative", re.compile(r"\b(must|always|never|don'?t|don’t|do not)\b", re.I), "importance", 0.1),
    ("emphasis", re.compile(r"\b(critical|urgent|hat(?:e|es|ed)|lov(?:e|es|ed))\b", re.I), "importance", 0.1),
    ("hedge", re.compile(r"\b(maybe|might|i think)\b", re.I), "confidence", -0.1),
)


def _clamp(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 4)


def score(obs: Observation, ctx: Context) -> Scored | Rejection:
    default_conf, default_imp = DEFAULTS[obs.bucket]
    values = {
        "confidence": obs.confidence if obs.confidence is not None else default_conf,
        "importance": obs.importance if obs.importance is not None else default_imp,
    }
    fired = []
    for name, pattern, field, delta in SIGNALS:
        if pattern.search(obs.body):
            values[field] = _clamp(values[field] + delta)
            fired.append(name)
    values = calibrate(values, obs, ctx)
    if values["importance"] < ctx.settings.threshold:
        return Rejection(
            "below_threshold",
            f"importance {values['importance']:.2f} is below the threshold {ctx.settings.threshold:.2f}",
            {"importance": values["importance"]},
        )
    return Scored(obs, values["confidence"], values["importance"], tuple(fired))


def calibrate(values: dict[str, float], obs: Observation, ctx: Context) -> dict[str, float]:
    calibration: Calibration = ctx.calibration
    spec = ctx.taxonomy.get(obs.type)
    fields = {
        "type": obs.type,
        "bucket": obs.bucket,
        "attribution": obs.attribution,
        "category": spec.category if spec else "",
    }
    values = dict(values)
    for rule in calibration.rules:
        if rule.matches(fields):
            for name, delta in rule.adjust:
                values[name] = _clamp(values[name] + delta)
    return {k: _clamp(v) for k, v in values.items()}
