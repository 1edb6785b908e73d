"""The three RSC perturbation levels (MADARA §3.1, Appendix F.1): shuffled sentences,
contradicted polarity, a random other chain."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(steps: Sequence[str]) -> list[str]:
    """A reasoning chain as sentences: every step split at sentence boundaries."""
    out: list[str] = []
    for step in steps:
        out.extend(s.strip() for s in _SENTENCE_END.split(step.strip()) if s.strip())
    return out


def _rng(seed: int | str, *key: Hashable) -> random.Random:
    digest = hashlib.sha256(repr((seed, *key)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def shuffle_sentences(steps: Sequence[str], seed: int | str = 0, key: Hashable = ()) -> list[str]:
    """Level 1 (Appendix F.1): the chain's sentences permuted with a fixed seed.

    The permutation depends only on ``seed`` and ``key`` (e.g. the (query,
    document, agent) triple), so a probe is reproducible.  The multiset of
    sentences is preserved.
    """
    sentences = split_sentences(steps)
    _rng(seed, "shuffle", key).shuffle(sentences)
    return sentences


POLARITY_PAIRS: tuple[tuple[str, str], ...] = (
    ("relevant", "irrelevant"),
    ("relevance", "irrelevance"),
    ("consistent", "inconsistent"),
    ("consistency", "inconsistency"),
    ("supports", "contradicts"),
    ("support", "contradict"),
    ("supported", "contradicted"),
    ("supporting", "contradicting"),
    ("accurate", "inaccurate"),
    ("accuracy", "inaccuracy"),
    ("reliable", "unreliable"),
    ("reliability", "unreliability"),
    ("correct", "incorrect"),
    ("trustworthy", "untrustworthy"),
    ("agrees", "disagrees"),
    ("agree", "disagree"),
    ("confirms", "denies"),
    ("useful", "useless"),
    ("strong", "weak"),
    ("strongly", "weakly"),
)
"""Polarity words of the Contradicted perturbation; each is replaced by its partner, both directions."""

ANTONYMS: dict[str, str] = {**{a: b for a, b in POLARITY_PAIRS}, **{b: a for a, b in POLARITY_PAIRS}}

_POLARITY_RE = re.compile(
    r"\b(" + "|".join(sorted(map(re.escape, ANTONYMS), key=len, reverse=True)) + r")\b", re.IGNORECASE
)
_QUALITY_RE = re.compile(r"\b(high|low)(?=[\s-]+(?:quality|relevance|confidence|reliability|score)\b)", re.IGNORECASE)
_SCORE_OF_RE = re.compile(r"\b(score\s+of\s+)([0-5])\b", re.IGNORECASE)
_OUT_OF_RE = re.compile(r"(?<![\d.])([0-5])(\s*(?:/|out of)\s*5)\b", re.IGNORECASE)


def _match_case(template: str, word: str) -> str:
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def contradict(text: str) -> str:
    """Level 2 (Appendix F.1): antonym substitution and inverted numeric quality phrases.

    Every listed polarity word (``POLARITY_PAIRS``, whole words, any case) is
    replaced by its partner in one pass, keeping its case pattern; "high"/"low"
    before quality/relevance/confidence/reliability/score swap; "score of N" and
    "N/5" become 5 - N.
    """
    out = _POLARITY_RE.sub(lambda m: _match_case(m.group(1), ANTONYMS[m.group(1).lower()]), text)
    out = _QUALITY_RE.sub(lambda m: _match_case(m.group(1), "low" if m.group(1).lower() == "high" else "high"), out)
    out = _SCORE_OF_RE.sub(lambda m: f"{m.group(1)}{5 - int(m.group(2))}", out)
    out = _OUT_OF_RE.sub(lambda m: f"{5 - int(m.group(1))}{m.group(2)}", out)
    return out


def contradict_steps(steps: Sequence[str]) -> list[str]:
    return [contradict(s) for s in steps]


def random_chain(
    chains: Mapping[Any, Sequence[str]], key: Hashable, seed: int | str = 0
) -> tuple[Hashable, list[str]] | None:
    """Level 3 (Appendix F.1): the chain of a different (query, document) pair, drawn uniformly.

    ``chains`` maps (query, document) keys to reasoning chains; the returned key
    is never ``key``.  ``None`` when no other pair exists.
    """
    others = sorted((k for k in chains if k != key), key=repr)
    if not others:
        return None
    other = _rng(seed, "random", key).choice(others)
    return other, list(chains[other])
