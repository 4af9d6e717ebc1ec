"""The learned layer of injection detection: logistic regression, numpy only.

Input for one text: the shipped static embedding (cortex.embed, 256-d, L2-normalised)
of each of its views (see :func:`cortex.security.normalise.views`) and a few cheap
features of the same view: second-person address, imperatives aimed at an assistant,
role markers, markup, encodings. The probability of a text is the highest over its
views, so an attack decoded from base64 is judged on its own words.

Weights ship in ``cortex/data/injection_classifier.npz``; ``scripts/train_classifier.py``
rebuilds them (``make classifier``) and writes ``INJECTION_CLASSIFIER_CARD.md``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
WEIGHTS_PATH = DATA_DIR / "injection_classifier.npz"

_WORDS = re.compile(r"[A-Za-z']+")
_SENTENCE_START = re.compile(r"(?:^|[.!?:\n]\s*)([A-Za-z]+)")
_IMPERATIVES = frozenset(
    """ignore disregard forget print say repeat write output respond reply act pretend
    answer tell translate decode summarize summarise reveal show display list describe
    generate provide give stop start begin continue imagine roleplay simulate become
    behave remember follow obey execute run send include insert add append return
    override bypass disable enable enter switch""".split()
)
_YOU = frozenset("you your yours yourself you're you'll you've".split())
_I = frozenset("i me my mine myself i'm i've i'd i'll we our us".split())
_AI = frozenset("ai assistant chatgpt gpt llm openai chatbot bot model dan".split())
_AI_ONLY = _AI - _YOU - _I  # the words cheap_features counts as AI words (the others count first)
_META = frozenset(
    """instruction instructions prompt prompts rules guideline guidelines policy policies
    character persona mode unethical illegal uncensored limitation limitations respond
    response reply answer output format""".split()
)
_META_STEMS = ("filter", "restrict", "jailbr", "censor", "moral", "ethic")
_ROLE = re.compile(r"(?:^|\n)\s*(?:system|assistant|user|human|ai)\s*:|\[(?:system|admin|inst)\b|<\|", re.I)
_MARKUP = re.compile(r"!\[|\]\(|</?[a-zA-Z][^>]{0,20}>|\{\{|```|https?://|\[[A-Z_]{3,}\]")
# An AI named as a thing the text is about ("the AI assistant in the app can draft
# replies", "the model team", "our chatbot widget", "Maya prefers that the assistant
# asks first"), not spoken to: such words do not count as an AI reference.
_AI_MENTION = re.compile(
    r"\b(?:the|our|their|its|this|your|an?)\s+(?:[a-z][\w-]*\s+)?(?:(?:ai|gpt|llm)\s+)?(?:assistant|model|chatbot|bot|agent|ai)s?"
    r"(?:'s)?\s+(?:in|on|of|for|from|team|teams|feature|features|panel|widget|card|lets|can|may|helps|answers|drafts|suggests|"
    r"settings|integration|button)\b"
    # what a person prefers, wants or said of the assistant is a report about it
    r"|\b(?:prefers?|wants?|likes?|asked|expects?|said|says|decided|agreed) (?:that )?(?:the|her|his|their|our) "
    r"(?:ai )?(?:assistant|model|agent|bot)s?\b"
)
# An AI word that is a name in code ("model.eval()", "llm = ChatOpenAI(...)", "bot =
# telebot.TeleBot(...)", "assistant_id", "self.model"): the developer's object, spoken to
# by nobody. Memories about building AI features are full of them, and counted as an AI
# addressed they let the embedding hold each one. A model's name ("GPT-4") is not code:
# it can be spoken to.
_AI_CODE = re.compile(
    r"(?<![a-z'])(?:ai|assistant|chatgpt|gpt|llm|openai|chatbot|bot|model)(?=\s?=(?!=)|\.[a-z_]|\(|_[a-z0-9])"
    r"|(?<=\bself\.|\bthis\.)(?:ai|assistant|chatgpt|gpt|llm|openai|chatbot|bot|model)(?![a-z'])"
)
_MUST = re.compile(r"\byou\s+(?:must|will|should|shall|are\s+going\s+to|have\s+to|can|cannot|can't|are)\b")

# Intent, not vocabulary: whom an instruction is for and what it asks, over the lowercase
# view. Each fires on a kind of request an attack makes of the model reading the text.
_AI_NOUN = r"(?:ai|assistant|model|llm|chatbot|agent|bot|gpt|chatgpt|claude|gemini|copilot|language model)"
_SENSITIVE = (r"(?:password|passcode|credential|api[ _-]?key|keys?\b|tokens?\b|secret|ssh|\.env\b|cookie|session|"
              r"conversation|chat history|history|inbox|e-?mails|messages|contacts|address book|calendar|memor(?:y|ies)|"
              r"system prompt|instructions|personal|private|home address|phone number|card number|bank|account details|"
              r"(?:the )?user'?s|their (?:data|files|details|information)|all (?:the )?(?:data|files|records))")
_INTENT = {
    "override": re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass|skip|drop)\b[^.\n]{0,40}\b(?:previous|prior|above|earlier|"
        r"preceding|all|any|your|original|system|existing)\b[^.\n]{0,30}\b(?:instruction|direction|rule|guideline|"
        r"prompt|context|task|constraint|polic)"
        r"|\b(?:previous|prior|earlier|original|above) (?:instructions|guidelines|rules|directives) (?:no longer|do not|don't) apply"
        r"|\b(?:(?:the )?user'?s (?:earlier |original |previous )?(?:request|question|task) is (?:obsolete|cancelled|void)"
        r"|your (?:real|actual|true|new) (?:task|goal|instructions?|job) (?:is|are))"
    ),
    "addressed_to_ai": re.compile(
        rf"(?:\b(?:dear|hey|hi|attention|note to|note for|message to|message for|instructions? (?:for|to)|directive for|"
        rf"if you are|to any|for any)\s+(?:the\s+|an?\s+|any\s+)?(?:\w+\s+)?{_AI_NOUN}\b"
        rf"|\b{_AI_NOUN}\s*(?:,|:)\s*(?:when|before|after|please|you|ignore|send|do|from now|your)"
        rf"|\b{_AI_NOUN}s? (?:reading|processing|summari[sz]ing|parsing|analy[sz]ing|reviewing) (?:this|these|the following)"
        rf"|\b(?:automated|digital|virtual) (?:assistant|agent|tool)s?\b[^.\n]{{0,30}}\b(?:must|should|shall|will|please)"
        rf"|\b(?:you are|you're) no longer (?:a |an |the )?)"
    ),
    "exfiltration": re.compile(
        # a user's data or secrets sent somewhere, or data appended to a link: not "send your comments to x@y"
        rf"\b(?:send|forward|email|e-mail|upload|post|transmit|leak|share|copy|exfiltrate|paste|append|include)\b[^.\n]{{0,60}}"
        rf"\b{_SENSITIVE}[^.\n]{{0,60}}\b(?:to|at|into|in)\s+(?:\S+@\S+\.\w+|https?://|\d+\.\d+\.\d+\.\d+|your (?:reply|answer|response|summary|output))"
        r"|https?://\S*[?&/](?:q|data|d|info|u|user|name|msg|p)=(?:\s|$|\{|\[|<|\()"
    ),
    "tool_coercion": re.compile(
        r"\b(?:call|invoke|execute|trigger|use|run)\s+(?:the\s+|your\s+)?[a-z]+_[a-z_]+(?:\s+(?:tool|function|action))?"
        r"|\b(?:call|invoke|execute|trigger|use)\s+(?:the\s+|your\s+)?(?:\w+\s+)?(?:tool|function|plugin)\b[^.\n]{0,40}"
        r"\b(?:to|and|with|on)\b"
        r"|\busing your (?:\w+ )?(?:tool|browsing|plugin|functions?)\b"
    ),
    "secrecy": re.compile(
        r"\b(?:do not|don't|never|without)\s+(?:mention|tell|telling|inform|informing|reveal|revealing|notify|"
        r"alert|say|saying|asking)\b[^.\n]{0,30}\b(?:user|anyone|human|owner|this instruction|these instructions)\b"
        r"|\bkeep (?:this|it) (?:hidden|secret) from (?:the )?(?:user|human)"
    ),
    "hidden_text": re.compile(r"<!--|\bhidden (?:text|instruction)|white on white|font-size:\s*0|display:\s*none|\[//\]"),
    # a role to play, or another model to become
    "role_play": re.compile(
        r"\b(?:pretend|act|behave|roleplay|role-play)\s+(?:to be|as if|as|like)\s+(?:you\s+(?:are|were)\s+)?(?:an?\s+|the\s+)?"
        r"(?:\w+\s+){0,3}?(?:ai|assistant|model|bot|chatbot|gpt|character|persona|hacker|dan|version|entity)\b"
        r"|\byou (?:are|will be|will act as|will play|must act as) (?:now )?(?:an?\s+|the\s+)?(?:\w+\s+){0,3}?"
        r"(?:ai|assistant|model|bot|chatbot|character|persona|version|entity|role)\b"
        r"|\b(?:stay|remain|break) (?:in|out of) character\b|\bfrom now on,? (?:you|your)\b"
    ),
    # the model's own instructions, or secrets it holds, revealed
    "reveal_prompt": re.compile(
        r"\b(?:reveal|print|repeat|show|output|display|leak|dump|list|recite|tell me)\b[^.\n]{0,30}"
        r"\b(?:system prompt|initial prompt|hidden prompt|(?:your|the) (?:original |initial |hidden |secret )?"
        r"(?:instructions|rules|prompt|configuration)|(?:api )?keys? and tokens|passwords? you)"
    ),
    # a third party dictates what the model answers, or what it remembers
    "output_control": re.compile(
        r"\b(?:start|begin|end|prefix|sign)\s+(?:your|every|each|all)\s+(?:\w+\s+)?(?:reply|replies|response|responses|"
        r"answer|answers|summary|output|message)"
        r"|\b(?:in|to) (?:your|every|each) (?:next |later )?(?:reply|response|answer|summary|output)\b"
        r"|\b(?:tell|inform|convince|persuade|ask) the user (?:that|to)\b"
        r"|\b(?:reply|respond|answer) (?:to the user )?(?:only )?(?:in|with) (?:french|german|spanish|chinese|a pirate|pirate|emoji)"
        r"|\b(?:save|store|write|add|commit) (?:this|it|a)? ?(?:as )?(?:a |an )?(?:new |permanent )?(?:memory|instruction|rule)\b"
        r"|\b(?:every|each|all) (?:later|future|subsequent) (?:questions?|requests?|conversations?|sessions?)"
    ),
}
# Words each intent's every match contains one of: most views hold none, and a substring
# test is a tenth of a regex search.
_INTENT_NEEDS = {
    "override": ("ignore", "disregard", "forget", "override", "bypass", "skip", "drop", "apply", "obsolete", "cancelled",
                 "void", "your real", "your actual", "your true", "your new"),
    "addressed_to_ai": ("dear", "hey", "hi", "attention", "note", "message", "instruction", "for", "if you are", "to any",
                        "no longer", "ai", "assistant", "model", "llm", "bot", "agent", "gpt", "claude", "gemini", "copilot",
                        "automated", "digital", "virtual"),
    "exfiltration": ("send", "forward", "mail", "upload", "post", "transmit", "leak", "share", "copy", "exfiltrate",
                     "paste", "append", "include", "http"),
    "tool_coercion": ("call", "run", "invoke", "execute", "trigger", "use"),
    "secrecy": ("not", "don't", "never", "without", "keep"),
    "hidden_text": ("<!--", "hidden", "white on white", "font-size", "display", "[//]"),
    "role_play": ("pretend", "act", "behave", "role", "you are", "you will", "you must", "character", "from now on"),
    "reveal_prompt": ("prompt", "instructions", "rules", "configuration", "keys", "password"),
    "output_control": ("start", "begin", "end", "prefix", "sign", "in your", "to your", "in every", "to every", "in each",
                       "to each", "the user", "reply", "respond", "answer", "memory", "instruction", "rule", "later",
                       "future", "subsequent"),
}

# Word lists as sets over one lowercase pass, and C-level counts, keep the features
# near 0.05 ms a text (case-insensitive alternations cost twice that).
_UPPER = re.compile(r"[A-Z]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_LETTER = re.compile(r"[^\W\d_]")
_NON_LATIN_LETTER = re.compile(r"[^\W\d_\x00-\u024f]")

FEATURE_NAMES = (
    "log_length",
    "second_person",
    "first_person",
    "you_must",
    "imperative_starts",
    "ai_reference",
    "meta_words",
    "role_marker",
    "markup",
    "quotes",
    "upper_ratio",
    "non_ascii",
    "newlines",
    "brackets",
    "question",
    *(f"intent_{name}" for name in _INTENT),
)


# A view the learned layer may hold speaks to a model: an AI addressed (not merely
# mentioned, see _AI_MENTION), a role marker, or one of the intents. Imperatives, "you
# must" and words like "reply" or "policy" are not enough: e-mails, tickets, docs and
# tool output give people orders all day, and with them as the way in the embedding
# judged style. Left out of training whole (with its planted twin), the working-day set
# was wrongly held 0.072 with those in the rule, 0.000 without them and with mentions
# not counted; the tldr pages (public docs, never trained on) 0.074 and 0.018; attacks
# held, with the patterns, 0.857 and 0.856 over all folds (bench/bench_security.py).
ADDRESS_FEATURES = ("role_marker", "ai_reference")
# Markup that hides text says how a text is shown, not whom it speaks to: HTML comments
# and CSS rules are in every README, PR template, changelog and stylesheet an agent
# writes about ("the PR template opens with <!-- fill in below -->", ".banner { display:
# none }"), and with them as a way in the embedding held each such memory (16 of 16
# comment-bearing notes, 5 of 6 about CSS). Only text hidden from a reader on purpose
# opens the door by its hiding: an element styled out of sight, or a clipper's report
# of "hidden text" / "white on white". A bare comment or a rule is a half feature (0.5):
# the weights still read it, the door does not open for it (_DOOR_MIN).
_HIDDEN_ON_PURPOSE = re.compile(
    r"\bhidden (?:text|instruction)|white on white"
    r"|\bstyle\s*=\s*[\"']?[^\"'>]{0,80}?(?:display:\s*none|font-size:\s*0|visibility:\s*hidden)"
)


_ADDRESS_INDEX = [FEATURE_NAMES.index(n) for n in FEATURE_NAMES if n in ADDRESS_FEATURES or n.startswith("intent_")]
_DOOR_MIN = [1.0 if FEATURE_NAMES[i] == "intent_hidden_text" else 1e-6 for i in _ADDRESS_INDEX]


def addressed(feats: np.ndarray) -> np.ndarray:
    """Per row of raw cheap features: whether the view may be held by the classifier."""
    import numpy as np

    return (feats[:, _ADDRESS_INDEX] >= np.asarray(_DOOR_MIN, np.float32)).any(axis=1) if len(feats) else np.zeros(0, bool)


def may_hold(view: str, feats: Sequence[float]) -> bool:
    """Whether the classifier can hold ``view`` at all (``feats``: its cheap features,
    as ``cheap_features`` gives them): it speaks to a model and the embedding can judge
    it. Every other view scores 0 whatever its embedding, so most texts need neither
    numpy nor the model (``score_views``). In plain Python, the test ``addressed`` makes
    of the float32 row: each address feature is 0, 1 or a third or more."""
    return any(feats[i] >= m for i, m in zip(_ADDRESS_INDEX, _DOOR_MIN)) and judgeable(view)


def may_hold_view(view: str) -> bool:
    """``may_hold(view, cheap_features(view))``, from the address features alone: most
    views speak to no model, and the other features are most of ``cheap_features``'s
    ~50 µs a view, computed for nothing then (a run scans every line's body)."""
    if _ROLE.search(view) is None:  # role_marker
        low = view.lower()
        ai = sum(1 for w in _WORDS.findall(low) if w in _AI_ONLY)
        if _ai_reference(low, ai) <= 0 and not any(v >= 1.0 for v in _intents(low)):  # ai_reference, intent_*
            return False
    return judgeable(view)


def _ai_reference(low: str, ai: int) -> int:
    """AI words addressed, of the ``ai`` found in ``low``: one more for "language
    model", less those merely mentioned (``_AI_MENTION``)."""
    if "language model" in low:
        ai += 1
    if ai:
        ai -= sum(1 for m in _AI_MENTION.finditer(low) for w in _WORDS.findall(m.group(0)) if w in _AI)
    if ai > 0:
        ai = max(ai - sum(1 for _ in _AI_CODE.finditer(low)), 0)
    return ai


def _intents(low: str):
    """Each intent's feature of ``low``, in ``_INTENT``'s order (its words first: most
    views hold none, and a substring test is a tenth of a regex search). Hidden markup
    is 0.5 unless it hides on purpose (``_HIDDEN_ON_PURPOSE``)."""
    for name, rx in _INTENT.items():
        if not (any(w in low for w in _INTENT_NEEDS[name]) and rx.search(low)):
            yield 0.0
        elif name == "hidden_text" and not _HIDDEN_ON_PURPOSE.search(low):
            yield 0.5
        else:
            yield 1.0


def cheap_features(view: str) -> list[float]:
    """Hand features of one view, each roughly in [0, 1]."""
    n = max(len(view), 1)
    low = view.lower()
    words = _WORDS.findall(low)
    nw = max(len(words), 1)
    you = i_ = ai = meta = 0
    for w in words:
        if w in _YOU:
            you += 1
        elif w in _I:
            i_ += 1
        elif w in _AI:
            ai += 1
        elif w in _META or w.startswith(_META_STEMS):
            meta += 1
    ai = _ai_reference(low, ai)
    starts = _SENTENCE_START.findall(low)
    imperative = sum(1 for w in starts if w in _IMPERATIVES) / max(len(starts), 1)
    upper = len(_UPPER.findall(view))
    letters = sum(len(w) for w in words) - low.count("'")
    non_ascii = 0 if view.isascii() else len(_NON_ASCII.findall(view))
    return [
        min(math.log1p(len(view)) / 7.0, 1.0),
        min(you / nw * 5, 1.0),
        min(i_ / nw * 5, 1.0),
        min(len(_MUST.findall(low)) / 3, 1.0),
        imperative,
        min(ai / 3, 1.0),
        min(meta / nw * 10, 1.0),
        1.0 if _ROLE.search(view) else 0.0,
        min(len(_MARKUP.findall(view)) / 3, 1.0),
        min(sum(view.count(q) for q in "\"'“”«»<>") / n * 20, 1.0),
        min(upper / max(letters, 1), 1.0),
        non_ascii / n,
        min(view.count("\n") / 10, 1.0),
        min((view.count("[") + view.count("{")) / n * 50, 1.0),
        1.0 if view.rstrip().endswith("?") else 0.0,
        *_intents(low),
    ]


@dataclass(frozen=True)
class Weights:
    coef: np.ndarray  # (dim + n_features,)
    bias: float
    feat_mean: np.ndarray  # standardisation of the cheap features
    feat_std: np.ndarray
    threshold: float

    def save(self, path: Path) -> None:
        import numpy as np

        np.savez(
            path,
            coef=self.coef.astype(np.float32),
            bias=np.float32(self.bias),
            feat_mean=self.feat_mean.astype(np.float32),
            feat_std=self.feat_std.astype(np.float32),
            threshold=np.float32(self.threshold),
        )

    @classmethod
    def load(cls, path: Path) -> "Weights":
        import numpy as np

        with np.load(path) as z:
            return cls(
                coef=z["coef"].astype(np.float32),
                bias=float(z["bias"]),
                feat_mean=z["feat_mean"].astype(np.float32),
                feat_std=z["feat_std"].astype(np.float32),
                threshold=float(z["threshold"]),
            )


Encoder = Callable[[list[str]], "np.ndarray"]


def _default_encoder() -> Encoder:
    from cortex.embed import get_model

    return get_model().encode


def design_matrix(views: Sequence[str], encode: Encoder) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings and raw cheap features for a flat list of views.

    Whether a view was decoded, or its text carried hidden characters, is deliberately
    not a feature: the first made base64 of an ordinary sentence look like an attack, the
    second made a pasted sentence with a stray zero-width space (or an emoji joined with
    U+200D) look like smuggling. A payload's own words are judged, and a payload in an
    invisible channel is the pattern layer's finding.
    """
    import numpy as np

    emb = np.asarray(encode(list(views)), dtype=np.float32) if views else np.zeros((0, 0), np.float32)
    feats = np.array([cheap_features(v) for v in views], dtype=np.float32).reshape(len(views), len(FEATURE_NAMES))
    return emb, feats


def judgeable(view: str) -> bool:
    """Whether the English embedding can judge this view: most of its letters Latin.

    Chinese or Russian text is out of the model's reach (its WordPiece vocabulary is
    English); without this, a model that saw a few Chinese attacks flags every Chinese
    sentence. Such text is left to the pattern layer.
    """
    if view.isascii():
        return True
    letters = len(_LETTER.findall(view))
    return len(_NON_LATIN_LETTER.findall(view)) <= 0.5 * letters


def sigmoid(z: np.ndarray) -> np.ndarray:
    import numpy as np

    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


class InjectionClassifier:
    """Loads weights and the embedding model on first use."""

    def __init__(self, weights: Weights | None = None, encode: Encoder | None = None, path: Path = WEIGHTS_PATH):
        self._weights = weights
        self._encode = encode
        self._path = path

    @property
    def weights(self) -> Weights:
        if self._weights is None:
            self._weights = Weights.load(self._path)
        return self._weights

    @property
    def threshold(self) -> float:
        return self.weights.threshold

    def _encoder(self) -> Encoder:
        if self._encode is None:
            self._encode = _default_encoder()
        return self._encode

    def score_views(self, views: Sequence[str], features: Sequence[Sequence[float]] | None = None) -> np.ndarray:
        """Probability for each view (``features``: their ``cheap_features``, when known).
        Only the views the classifier may hold (``may_hold``) are embedded: the others
        score 0, and their rows of the design matrix stay zeros, so each held view's
        product is taken at its own row of a matrix of the same shape, as when all were
        embedded (a BLAS kernel may sum a row differently by its position)."""
        import numpy as np

        if not views:
            return np.zeros(0, np.float32)
        raw = [cheap_features(v) for v in views] if features is None else features
        held = [k for k, (view, f) in enumerate(zip(views, raw)) if may_hold(view, f)]
        if not held:
            return np.zeros(len(views), np.float32)
        w = self.weights
        feats = np.array(raw, dtype=np.float32).reshape(len(views), len(FEATURE_NAMES))
        some = np.asarray(self._encoder()([views[k] for k in held]), dtype=np.float32)
        emb = np.zeros((len(views), some.shape[1]), np.float32)
        emb[held] = some
        x = np.hstack([emb, (feats - w.feat_mean) / w.feat_std])
        ok = np.zeros(len(views), bool)
        ok[held] = True
        return np.where(ok, sigmoid(x @ w.coef + w.bias), 0.0)

    def predict_proba(self, texts_views: Sequence[Sequence[str]],
                      features: Sequence[Sequence[float]] | None = None) -> np.ndarray:
        """Highest view probability for each text. ``texts_views[i][0]`` is the main
        view; later ones are decoded payloads. ``features``: the ``cheap_features`` of
        every view, in that order, when the caller has them."""
        import numpy as np

        flat, owner = [], []
        for i, vs in enumerate(texts_views):
            flat.extend(vs)
            owner.extend([i] * len(vs))
        probs = self.score_views(flat, features)
        out = np.zeros(len(texts_views), np.float32)
        if flat:
            np.maximum.at(out, np.asarray(owner, dtype=np.int64), probs.astype(np.float32))
        return out
