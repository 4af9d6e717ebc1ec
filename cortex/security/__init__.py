"""Write-time security: hidden characters, credentials and instruction injection.

    scanner = Scanner()
    result = scanner.scan(text)      # ScanResult(text, redactions, injection)
    results = scanner.scan_many(texts)  # one batch: the classifier embeds all at once
    clean, kinds = scanner.redact(text)  # credentials only (the git hook uses this)

``result.text`` is what may be stored: the original with hidden characters removed and
each credential replaced by ``[REDACTED]``. ``result.injection`` is the first finding of
the pattern layer (patterns as data, over normalised and decoded views) or, failing
that, of the learned classifier, or None.

Constructing a Scanner is cheap; the classifier (numpy and the embedding model) loads on
first use, and the pattern layer needs neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from cortex.security import normalise, secrets
from cortex.security.injection import Verdict, vault_patterns

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["Scanner", "ScanResult", "Verdict"]


@dataclass(frozen=True)
class ScanResult:
    text: str  # what may be stored: hidden chars removed, secrets -> [REDACTED]
    redactions: tuple[str, ...]  # kinds/providers redacted, one per secret
    injection: Verdict | None


class Scanner:
    def __init__(
        self,
        *,
        extra_patterns: Sequence[str | dict] = (),
        classifier_threshold: float | None = None,
        use_classifier: bool = True,
        cache_dir: Path | None = None,
        save_cache: Callable[[Path, dict], None] | None = None,
    ):
        """``cache_dir`` and ``save_cache(path, obj)``: where the pattern layer keeps the
        words each pattern needs (``cortex.security.gate``), so a process compiles only
        the patterns a text could match; without them the words are worked out here."""
        # Check the vault's own patterns now so a bad one fails at start, with its name.
        vault_patterns(extra_patterns)
        self._extra_patterns = list(extra_patterns)
        self._threshold = classifier_threshold
        self._use_classifier = use_classifier
        self._classifier = None
        self._cache = (cache_dir, save_cache)
        self._gate = None

    @property
    def gate(self):
        """The pattern layer: ``gate.check(text)`` is the verdict of every injection
        pattern, compiling only those whose required words occur in the text."""
        if self._gate is None:
            from cortex.security.gate import PatternGate

            cache_dir, save = self._cache
            self._gate = PatternGate(cache_dir, self._extra_patterns, save=save)
        return self._gate

    @property
    def classifier(self):
        if self._classifier is None:
            from cortex.security.classifier import InjectionClassifier

            self._classifier = InjectionClassifier()
        return self._classifier

    @property
    def threshold(self) -> float:
        return self._threshold if self._threshold is not None else self.classifier.threshold

    def _match(self, text: str, views: list[str]) -> Verdict | None:
        return self.gate.check_views(text, views)

    def redact(self, text: str) -> tuple[str, tuple[str, ...]]:
        """Hidden characters removed and credentials replaced; the providers found."""
        return secrets.redact(normalise.storable(text))

    def scan(self, text: str) -> ScanResult:
        return self.scan_many([text])[0]

    def scan_many(self, texts: Sequence[str], *, classify: Sequence[bool] | None = None) -> list[ScanResult]:
        """Scan each text; ``classify[i]`` False keeps text i from the classifier (names
        and labels: the learned layer judges prose, the patterns judge anything)."""
        stored, verdicts, pending = [], [], []
        all_views: list[list[str]] = []
        for i, text in enumerate(texts):
            stored.append(self.redact(text))
            views = normalise.views(text) if text.strip() else []
            all_views.append(views)
            verdict = self._match(text, views) if views else None
            verdicts.append(verdict)
            if verdict is None and views and self._use_classifier and (classify is None or classify[i]):
                pending.append(i)
        if pending:
            # The classifier reads the text with credentials already replaced: a random
            # key looks like an encoded payload to the embedding, and the credential is
            # handled by redaction anyway. Decoded payloads come from the original.
            clf_views = [[classifier_main_view(texts[i], stored[i])] + all_views[i][1:] for i in pending]
            self._classify(pending, clf_views, verdicts)
        # An excerpt lands in the quarantine file: it must not carry a credential.
        verdicts = [v if v is None else _without_secrets(v) for v in verdicts]
        return [ScanResult(text=s, redactions=r, injection=v) for (s, r), v in zip(stored, verdicts)]

    def _classify(self, pending: list[int], clf_views: list[list[str]], verdicts: list[Verdict | None]) -> None:
        """The learned layer's verdict on each pending text. Most texts speak to no model
        (``may_hold``) and score 0, below any threshold the weights or a vault give: when
        no view of the batch may be held, neither numpy nor the model is loaded."""
        from cortex.security.classifier import cheap_features, may_hold_view

        flat = [view for views in clf_views for view in views]
        nothing_held = not any(may_hold_view(view) for view in flat)
        if nothing_held and (self._threshold is None or self._threshold > 0):  # a threshold of 0 holds every text
            return
        features = [cheap_features(view) for view in flat]
        probs = self.classifier.predict_proba(clf_views, features)
        threshold = self.threshold
        for i, views, p in zip(pending, clf_views, probs):
            if p >= threshold:
                verdicts[i] = Verdict("classifier", round(float(p), 4), "classifier", _excerpt(views[0]))


def classifier_main_view(text: str, redacted: tuple[str, tuple[str, ...]] | None = None) -> str:
    """The main view the classifier judges: hidden characters and credentials removed,
    then canonical. "[REDACTED]" itself is dropped: it reads like an exfiltration
    placeholder ("[DATA]"), and the credential is redaction's business."""
    clean, found = redacted if redacted is not None else secrets.redact(normalise.storable(text))
    return normalise.canonical(clean.replace(secrets.REDACTED, "") if found else clean)


def _without_secrets(v: Verdict) -> Verdict:
    clean, found = secrets.redact(v.excerpt)
    return v if not found else Verdict(v.layer, v.score, v.rule, clean)


def _excerpt(s: str, limit: int = 80) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
