"""Per-Document answer Extraction (MADARA §4.4, Algorithm 2 lines 31-33) and PDE-Random (§6.1).

PDE: (1) the three agents score the documents, (2) the generator answers from
each of the top-k documents *alone*, (3) candidates are grouped by normalised
string match (``bcas.grading.normalize_answer``) and the group with the highest
summed document score wins (score-weighted vote).

PDE-Random: k documents drawn uniformly at random (seeded), one answer per
document, uniform vote (every candidate weighs 1) — no assessment calls at all.
Unif. (Table 1): PDE's assessment-guided top-k documents with the uniform vote.

Vote details: an empty candidate (nothing left after normalisation) casts no
vote; exact ties between groups go to the group whose first member came first
in the candidate order (best-ranked document for PDE, draw order for
PDE-Random); the winning group's answer is the surface form of that first
member.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bcas.assess.generate import generate_answer
from bcas.assess.usage import Ledger
from bcas.config import AssessConfig
from bcas.grading import normalize_answer
from bcas.llm.base import ChatModel


@dataclass(frozen=True)
class VoteGroup:
    key: str  # normalised answer
    answer: str  # surface form of the first member
    weight: float
    members: tuple[int, ...]  # positions in the candidate list


def vote(candidates: Sequence[str], weights: Sequence[float] | None = None) -> tuple[str, list[VoteGroup]]:
    """Score-weighted vote over candidate answers; returns ``(winner, groups best first)``.

    ``weights`` default to 1 each (uniform vote).  With no non-empty candidate
    the winner is ``""``.
    """
    if weights is None:
        weights = [1.0] * len(candidates)
    if len(weights) != len(candidates):
        raise ValueError(f"{len(candidates)} candidates but {len(weights)} weights")
    order: list[str] = []
    acc: dict[str, tuple[str, float, list[int]]] = {}
    for pos, (cand, w) in enumerate(zip(candidates, weights, strict=True)):
        key = normalize_answer(cand)
        if not key:
            continue
        if key not in acc:
            order.append(key)
            acc[key] = (cand.strip(), 0.0, [])
        surface, total, members = acc[key]
        members.append(pos)
        acc[key] = (surface, total + float(w), members)
    groups = [VoteGroup(k, acc[k][0], acc[k][1], tuple(acc[k][2])) for k in order]
    # order is first-appearance order; a stable sort keeps it for equal weights
    groups.sort(key=lambda g: -g.weight)
    return (groups[0].answer if groups else ""), groups


def random_subset(m: int, k: int, seed: int | str) -> list[int]:
    """``min(k, m)`` distinct indices of ``range(m)`` drawn uniformly, reproducibly from ``seed``."""
    digest = hashlib.sha256(f"pde-random:{seed}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return rng.sample(range(m), min(k, m))


async def extract_per_document(
    model: ChatModel,
    question: str,
    documents: Sequence[Any],
    task: str,
    config: AssessConfig,
    ledger: Ledger,
) -> list[tuple[str, str]]:
    """One generation call per document (concurrently); ``[(answer, raw reply)]`` in input order."""
    calls = [
        generate_answer(model, question, [doc], task, config, ledger, tag=f"pde:{i}") for i, doc in enumerate(documents)
    ]
    return list(await asyncio.gather(*calls))
