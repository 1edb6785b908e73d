"""The retriever's phrase-boosted BM25 scores against the documented formula (BCAS §3.5,
bcas.retrieval.bm25): plain BM25 + ``bigram_boost`` × Σ idf of each matched two-term phrase +
``trigram_boost`` × Σ idf of each matched three-term phrase, with the lineage weights (×20, ×60);
and tied hits ordered by their text, never by where they sit in the file."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import numpy as np
import pytest

from bcas.config import RetrievalConfig
from bcas.data import Document
from bcas.retrieval import build_retriever

QUERY = "red apple tree orchard"
DOCS = [
    Document("d0", "One", "red apple tree orchard in the valley"),  # every bigram and both trigrams
    Document("d1", "Two", "a red apple beside a tall tree"),  # one bigram (red apple), no trigram
    Document("d2", "Three", "the apple tree stands near an orchard"),  # one bigram (apple tree)
    Document("d3", "Four", "orchard tree apple red, in reverse"),  # the terms, no phrase in order
    Document("d4", "Five", "red apple tree, then fields, then an orchard"),  # one trigram, two bigrams
    Document("d5", "Six", "nothing about fruit here, only stones and sand"),
]


def _phrases(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def _holds(stream: list[str], phrase: tuple[str, ...], slop: int) -> bool:
    """Brute force: positions j1 < j2 (< j3) holding the phrase's terms, each gap 1 .. slop + 1."""
    spots = [[j for j, t in enumerate(stream) if t == term] for term in phrase]
    return any(all(1 <= b - a <= slop + 1 for a, b in itertools.pairwise(combo)) for combo in itertools.product(*spots))


def test_phrase_boosted_scores_follow_the_documented_weights(tmp_path: Path) -> None:
    cfg = RetrievalConfig(mode="bm25", k=len(DOCS))
    assert (cfg.bigram_boost, cfg.trigram_boost) == (20.0, 60.0)  # the lineage weights (BCAS §3.5)
    plain = build_retriever(DOCS, RetrievalConfig(mode="bm25", k=len(DOCS), phrase_boost=False),
                            cache_dir=tmp_path / "plain", progress=False)  # fmt: skip
    index = plain.bm25
    assert index is not None
    query = [t for t in index.analyzer(QUERY) if t in index.vocab]
    idf = {t: float(index.idf[index.vocab[t]]) for t in query}
    base: dict[str, float] = {}
    matched: dict[str, tuple[float, float]] = {}  # doc -> (Σ idf of matched bigrams, of matched trigrams)
    for hit in plain.search(QUERY):
        doc = next(d for d in DOCS if d.id == hit.doc_id)
        stream = index.analyzer(f"{doc.title}\n{doc.text}")
        sums = [
            sum(sum(idf[t] for t in p) for p in _phrases(query, n) if _holds(stream, p, cfg.phrase_slop))
            for n in (2, 3)
        ]
        base[hit.doc_id], matched[hit.doc_id] = hit.score, (sums[0], sums[1])
    # the corpus tells the two weights apart: a chunk with bigrams only, one with a trigram too
    assert any(b > 0 and t == 0 for b, t in matched.values()) and any(t > 0 for _, t in matched.values())
    for n, (b2, b3) in enumerate([(cfg.bigram_boost, cfg.trigram_boost), (60.0, 20.0), (5.0, 0.0), (0.0, 7.0)]):
        boosted = build_retriever(
            DOCS, RetrievalConfig(mode="bm25", k=len(DOCS), bigram_boost=b2, trigram_boost=b3),
            cache_dir=tmp_path / str(n), progress=False,
        )  # fmt: skip
        expected = {d: base[d] + b2 * matched[d][0] + b3 * matched[d][1] for d in base}
        hits = boosted.search(QUERY)
        assert {h.doc_id for h in hits} == set(expected)
        for hit in hits:
            assert hit.score == pytest.approx(expected[hit.doc_id], rel=1e-5), (b2, b3, hit.doc_id)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # the default configuration is the lineage one: its scores are those of (20, 60)
    default = build_retriever(DOCS, cfg, cache_dir=tmp_path / "default", progress=False).search(QUERY)
    for hit in default:
        b, t = matched[hit.doc_id]
        assert hit.score == pytest.approx(base[hit.doc_id] + 20.0 * b + 60.0 * t, rel=1e-5)


def _content_key(title: str, text: str) -> str:
    """The documented tie-break, independently: sha256 of ``title NUL text``, hex, ascending."""
    return hashlib.sha256(f"{title}\x00{text}".encode()).hexdigest()


TIED = [
    Document("m1", "Claim", "the bridge opened in 1932"),
    Document("m2", "Claim", "the bridge opened in 1937"),
    Document("m3", "Claim", "the bridge opened in 1941"),
]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_tied_hits_follow_their_text_not_the_files_layout(tmp_path: Path, k: int) -> None:
    """Three passages that score the same for the query (it names none of their years): whatever
    order the file lists them in, the same ``k`` come first, in the order of the documented key."""
    expected = sorted(TIED, key=lambda d: _content_key(d.title, d.text))[:k]
    seen = []
    for n, layout in enumerate(itertools.permutations(TIED)):
        retriever = build_retriever(list(layout), RetrievalConfig(mode="bm25", k=k), cache_dir=tmp_path / str(n),
                                    progress=False)  # fmt: skip
        hits = retriever.search("when did the bridge open")
        assert len({h.score for h in hits}) == 1 and len(hits) == k
        seen.append([h.doc_id for h in hits])
    assert all(s == [d.id for d in expected] for s in seen), seen
    assert np.unique([str(s) for s in seen]).size == 1
