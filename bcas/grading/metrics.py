"""Answer metrics: normalisation, exact match, token F1, label match, scoring rules.

Exact match and token F1 follow the SQuAD v1.1 evaluation conventions that the
BCAS and MADARA papers report (BCAS §4.1, MADARA §5.1): lower-case, strip
punctuation, drop the articles *a*, *an*, *the*, collapse white space, and take
the maximum over the gold aliases.  Label tasks (FEVER, yes/no ConflictQA) are
graded by :func:`label_match`, which maps a free-text verdict onto the dataset's
label set.  :func:`score_prediction` dispatches on a dataset's scoring rule
(``Dataset.scoring``) through the :data:`SCORING_RULES` registry, so a new rule is
one :func:`register_scoring_rule` call.
"""

from __future__ import annotations

import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

ARTICLES = frozenset({"a", "an", "the"})
_ASCII_PUNCTUATION = frozenset(string.punctuation)

Golds = str | Sequence[str]


def _is_punctuation(ch: str) -> bool:
    # SQuAD strips ASCII string.punctuation; we also strip Unicode punctuation
    # (curly quotes, dashes, ellipses) so that typographic output of a model grades
    # like its ASCII equivalent.
    return ch in _ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and articles, collapse white space.

    Articles are removed as whole white-space tokens after punctuation removal, so
    ``"The Beatles."`` becomes ``"beatles"`` and the function is idempotent.
    """
    lowered = s.lower()
    no_punct = "".join(ch for ch in lowered if not _is_punctuation(ch))
    return " ".join(tok for tok in no_punct.split() if tok not in ARTICLES)


def _as_golds(golds: Golds) -> list[str]:
    if isinstance(golds, str):
        return [golds]
    gold_list = list(golds)
    if not gold_list:
        raise ValueError("golds must hold at least one gold answer")
    return gold_list


def exact_match(pred: str, golds: Golds) -> bool:
    """True when the normalised prediction equals any normalised gold alias."""
    norm_pred = normalize_answer(pred)
    return any(norm_pred == normalize_answer(g) for g in _as_golds(golds))


def _f1_tokens(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens or not gold_tokens:
        # SQuAD convention: two empty answers agree; one empty answer scores 0.
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(pred: str, golds: Golds) -> float:
    """SQuAD bag-of-tokens F1 of the normalised strings, maximised over gold aliases."""
    pred_tokens = normalize_answer(pred).split()
    return max(_f1_tokens(pred_tokens, normalize_answer(g).split()) for g in _as_golds(golds))


# --- strict matching (MADARA §5.4) ------------------------------------------------
#
# MADARA reports "Exact Match (EM; strictly matched after whitespace normalization and
# lowercasing) and Token F1".  Punctuation and articles stay: "The Beatles." does not
# match "Beatles" there, although SQuAD EM above accepts it.


def strict_normalize(s: str) -> str:
    """MADARA §5.4 normalisation: lower-case and collapse white space; nothing else."""
    return " ".join(s.lower().split())


def strict_exact_match(pred: str, golds: Golds) -> bool:
    """True when the strictly normalised prediction equals a strictly normalised gold alias.

    An empty prediction never matches (an empty gold is no answer to match).
    """
    norm_pred = strict_normalize(pred)
    return bool(norm_pred) and any(norm_pred == strict_normalize(g) for g in _as_golds(golds))


def strict_token_f1(pred: str, golds: Golds) -> float:
    """Token F1 over the strictly normalised white-space tokens, maximised over gold aliases.

    MADARA §5.4 names token F1 without a normalisation of its own; we tokenise as its EM
    normalises (lower-case, white space), so a trailing full stop costs a token.
    """
    pred_tokens = strict_normalize(pred).split()
    if not pred_tokens:
        return 0.0
    return max(_f1_tokens(pred_tokens, strict_normalize(g).split()) for g in _as_golds(golds))


# --- labels -------------------------------------------------------------------

# Canonical label -> surface forms (lower-case, possibly several words).  A label
# space is chosen by the golds: every gold must be one of its canonical labels.
LABEL_SPACES: dict[str, dict[str, tuple[str, ...]]] = {
    "fever": {
        "SUPPORTS": ("supports", "supported", "support", "true"),
        "REFUTES": ("refutes", "refuted", "refute", "false"),
        "NOT ENOUGH INFO": ("not enough info", "not enough information", "nei"),
    },
    "yes_no": {
        "yes": ("yes", "true"),
        "no": ("no", "false"),
    },
}

# A label word right after one of these (within two tokens) is negated ("not
# supported"); such a verdict is not mapped to any label.  The judge's replies are read
# with the same words (bcas.grading.judge.parse_verdict).
NEGATORS = frozenset(
    {"not", "never", "isnt", "arent", "wasnt", "werent", "doesnt", "dont", "didnt", "cannot", "cant", "wont"}
)


def _label_tokens(text: str) -> list[str]:
    lowered = text.lower()
    # Apostrophes join contractions ("isn't" -> "isnt"); other punctuation separates words.
    chars = []
    for ch in lowered:
        if ch in "'\u2019":
            continue
        chars.append(" " if _is_punctuation(ch) else ch)
    return "".join(chars).split()


def extract_label(text: str, labels: Mapping[str, Iterable[str]]) -> str | None:
    """The canonical label whose surface form occurs first in ``text``, or ``None``.

    ``labels`` maps each canonical label to its surface forms (case-insensitive;
    a form may span several words).  Words are compared after punctuation is
    split off, so ``"SUPPORTS."`` and ``"The claim is supported"`` both yield
    ``SUPPORTS``.  A first match negated by a preceding ``not``/``isn't``-style
    word yields ``None`` rather than a guess.  Longer forms win at the same
    position, so ``"not enough info"`` is not read as a negation.
    """
    forms: list[tuple[list[str], str]] = []
    for label, surface_forms in labels.items():
        for form in surface_forms:
            form_tokens = _label_tokens(form)
            if form_tokens:
                forms.append((form_tokens, label))
    forms.sort(key=lambda f: -len(f[0]))
    tokens = _label_tokens(text)
    for i in range(len(tokens)):
        for form_tokens, label in forms:
            if tokens[i : i + len(form_tokens)] == form_tokens:
                if any(t in NEGATORS for t in tokens[max(0, i - 2) : i]):
                    return None
                return label
    return None


def label_space_for(golds: Golds) -> dict[str, tuple[str, ...]]:
    """The registered label space whose canonical labels cover every gold label."""
    gold_keys = {g.strip().lower() for g in _as_golds(golds)}
    for space in LABEL_SPACES.values():
        if gold_keys <= {label.lower() for label in space}:
            return space
    known = {name: sorted(space) for name, space in LABEL_SPACES.items()}
    raise ValueError(f"no label space covers the golds {sorted(gold_keys)}; known spaces: {known}")


def label_match(pred: str, golds: Golds) -> bool:
    """True when the verdict in ``pred`` maps to one of the gold labels.

    FEVER golds (``SUPPORTS``/``REFUTES``) accept ``supported``, ``true``,
    ``REFUTES.``, ``The claim is refuted`` and similar; yes/no golds accept
    ``yes``/``no`` and ``true``/``false``.
    """
    space = label_space_for(golds)
    found = extract_label(pred, space)
    if found is None:
        return False
    return found.lower() in {g.strip().lower() for g in _as_golds(golds)}


# --- scoring rules --------------------------------------------------------------

ScoringRule = Callable[[str, Sequence[str]], tuple[bool, float]]
SCORING_RULES: dict[str, ScoringRule] = {}


def register_scoring_rule(name: str) -> Callable[[ScoringRule], ScoringRule]:
    """Register ``fn(pred, golds) -> (correct, f1)`` as the scoring rule ``name``."""

    def decorate(fn: ScoringRule) -> ScoringRule:
        SCORING_RULES[name] = fn
        return fn

    return decorate


@register_scoring_rule("qa")
def _score_qa(pred: str, golds: Sequence[str]) -> tuple[bool, float]:
    return exact_match(pred, golds), token_f1(pred, golds)


@register_scoring_rule("label")
def _score_label(pred: str, golds: Sequence[str]) -> tuple[bool, float]:
    correct = label_match(pred, golds)
    return correct, 1.0 if correct else 0.0


def score_prediction(pred: str, golds: Golds, scoring: str) -> tuple[bool, float]:
    """``(exact-match correctness, F1)`` of ``pred`` under the dataset scoring rule ``scoring``."""
    try:
        rule = SCORING_RULES[scoring]
    except KeyError:
        raise ValueError(f"unknown scoring rule {scoring!r}; registered rules: {sorted(SCORING_RULES)}") from None
    return rule(pred, _as_golds(golds))
