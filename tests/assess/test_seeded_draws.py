"""MADARA's seeded draws against their documented formulas, computed independently, over many
seeds and sizes: PDE's random subset (``pde-random:<seed>``) and the order of an item's documents
(score, then sha256 of ``<seed>:<item id> NUL title NUL text``)."""

from __future__ import annotations

import hashlib
import random
import struct

from bcas.assess.agents import AssessDocument
from bcas.assess.documents import order_documents
from bcas.assess.pde import random_subset


def test_pde_random_subset_is_the_documented_seeded_draw() -> None:
    for seed in (0, 1, 7, "0:it0", "3:hotpot-5ab3", "ünï"):
        digest = hashlib.sha256(f"pde-random:{seed}".encode()).digest()
        for m in (1, 2, 5, 10, 33):
            for k in sorted({0, 1, 2, m - 1, m, m + 3}):
                expected = random.Random(struct.unpack(">Q", digest[:8])[0]).sample(range(m), min(k, m))
                assert random_subset(m, k, seed) == expected, (seed, m, k)


def _key(seed: str, title: str, text: str) -> str:
    return hashlib.sha256(f"{seed}\x00{title}\x00{text}".encode()).hexdigest()


def _rank(d: AssessDocument, key: str) -> tuple[int, float, str]:
    s = d.retrieval_score
    scored = s is not None and s == s  # NaN: no score
    return (0 if scored else 1, -s if scored else 0.0, _key(key, d.title, d.text))  # type: ignore[operator]


def test_documents_are_ordered_by_score_then_the_documented_seeded_key() -> None:
    docs = [
        AssessDocument(f"d{i}", f"Title {i % 3}", f"text number {i}", retrieval_score=score)
        for i, score in enumerate([2.0, 1.0, 1.0, None, 1.0, 3.0, None, float("nan"), 1.0])
    ]
    for key in ("0:q1", "7:q1", "0:q2", "12345:hotpot-5ab3"):
        got = [d.doc_id for d in order_documents(docs, key)]
        for layout in (docs, list(reversed(docs)), docs[3:] + docs[:3]):
            assert [d.doc_id for d in order_documents(layout, key)] == got, key

        assert got == [d.doc_id for d in sorted(docs, key=lambda d, key=key: _rank(d, key))], key
        assert got[:2] == ["d5", "d0"]  # the scores first: 3.0, 2.0
        assert set(got[-3:]) == {"d3", "d6", "d7"}  # no score (None, NaN) last
    # the seed reorders the tied documents (four tied at 1.0: some seed puts another one first)
    firsts = {[d.doc_id for d in order_documents(docs, f"{s}:q1")][2] for s in range(12)}
    assert len(firsts) > 1
