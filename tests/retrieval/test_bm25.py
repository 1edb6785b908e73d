"""Phrase-boosted BM25: parity with the Lucene BM25 formula and plain bm25s, phrase
semantics against a brute-force reference, and real HotpotQA retrieval."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.data import load_dataset
from bcas.retrieval.bm25 import BM25_B, BM25_K1, Analyzer, BM25Index, PhraseIndex, top_k
from bcas.retrieval.chunking import chunk_documents


@pytest.fixture(scope="module")
def hotpot():
    return load_dataset("hotpotqa")


@pytest.fixture(scope="module")
def hotpot_index(hotpot):
    chunks = chunk_documents(hotpot.documents)
    return chunks, BM25Index.build([c.indexed_text for c in chunks], progress=False)


def test_analyzer_drops_stopwords_and_stems():
    analyse = Analyzer()
    assert analyse("The Kiss and Tell films are running") == ["kiss", "tell", "film", "run"]
    assert Analyzer(stemmer=None)("The films") == ["films"]


def test_unigram_scores_match_lucene_bm25_formula():
    texts = [
        "apple banana apple cherry",
        "banana banana date",
        "cherry apple elderberry fig grape",
        "date fig",
        "apple",
    ]
    index = BM25Index.build(texts, stemmer=None, progress=False)
    docs = [t.split() for t in texts]
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    for query in ["apple", "banana cherry", "fig date apple", "zebra apple", "apple date apple"]:
        expected = []
        for doc in docs:
            tf = Counter(doc)
            s = 0.0
            for term in query.split():
                df = sum(term in d for d in docs)
                if df == 0:
                    continue
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf[term] / (tf[term] + BM25_K1 * (1 - BM25_B + BM25_B * len(doc) / avgdl))
            expected.append(s)
        np.testing.assert_allclose(index.scores(query), expected, rtol=1e-5)


def test_boosts_off_is_plain_bm25s(hotpot_index):
    chunks, index = hotpot_index
    query = "Which magazine was started first Arthur's Magazine or First for Women?"
    ours = index.scores(query)
    plain = index.bm25.get_scores(index.analyzer(query))
    np.testing.assert_allclose(ours, plain, rtol=1e-6)
    # bm25s's own top-k agrees with ours on the same index
    docs, scores = index.bm25.retrieve([index.analyzer(query)], k=5, show_progress=False)
    ids, our_scores = index.search(query, 5)
    np.testing.assert_allclose(our_scores, scores[0], rtol=1e-5)
    assert set(ids.tolist()) == set(docs[0].tolist())


def test_phrase_boost_prefers_exact_phrase_over_scattered_terms():
    texts = [
        # same terms, scattered far apart
        "The river runs north. Many people bank on the weather. A red barn stands near the hill.",
        # the exact phrase "red river bank"
        "Tourists walk along the red river bank every morning before the weather changes.",
        "An unrelated passage about astronomy and distant galaxies.",
    ]
    index = BM25Index.build(texts, progress=False)
    query = "red river bank"
    plain, _ = index.search(query, 3)
    boosted, boosted_scores = index.search(query, 3, bigram_boost=20.0, trigram_boost=60.0)
    assert boosted[0] == 1
    assert boosted_scores[0] > boosted_scores[1]
    # the boost is what separates them: the phrase chunk's margin grows with the boost
    margin_plain = index.scores(query)[1] - index.scores(query)[0]
    margin_boosted = index.scores(query, 20.0, 60.0)[1] - index.scores(query, 20.0, 60.0)[0]
    assert margin_boosted > margin_plain + 1.0
    assert 2 not in plain.tolist()  # shares no term with the query


def test_slop_allows_intervening_tokens():
    texts = ["alpha beta gamma", "alpha zeta beta", "alpha zeta eta beta"]
    strict = BM25Index.build(texts, stemmer=None, phrase_slop=0, progress=False)
    loose = BM25Index.build(texts, stemmer=None, phrase_slop=1, progress=False)
    q = strict.query_ids("alpha beta")
    assert strict.phrases.boost(q, strict.idf, 3, 1.0, 0.0) is not None
    matched_strict = strict.phrases.boost(q, strict.idf, 3, 1.0, 0.0) > 0
    matched_loose = loose.phrases.boost(loose.query_ids("alpha beta"), loose.idf, 3, 1.0, 0.0) > 0
    assert matched_strict.tolist() == [True, False, False]
    assert matched_loose.tolist() == [True, True, False]


def _reference_boost(streams, query, idf, vocab_size, slop, b2, b3):
    """Brute force of the module-docstring formula's phrase term."""
    out = np.zeros(len(streams))
    for order, beta in ((2, b2), (3, b3)):
        if not beta:
            continue
        phrases = {tuple(query[i : i + order]) for i in range(len(query) - order + 1)}
        phrases = {p for p in phrases if all(t >= 0 for t in p)}
        for c, stream in enumerate(streams):
            for p in phrases:
                present = False
                for j1, t1 in enumerate(stream):
                    if t1 != p[0]:
                        continue
                    frontier = [j1]
                    for term in p[1:]:
                        frontier = [
                            j2
                            for j in frontier
                            for j2 in range(j + 1, min(j + slop + 2, len(stream)))
                            if stream[j2] == term
                        ]
                    if frontier:
                        present = True
                        break
                if present:
                    out[c] += beta * sum(idf[t] for t in p)
    return out


@settings(max_examples=60, deadline=None)
@given(
    streams=st.lists(st.lists(st.integers(0, 5), max_size=12), min_size=1, max_size=6),
    query=st.lists(st.integers(-1, 5), min_size=0, max_size=6),
    slop=st.integers(0, 2),
)
def test_phrase_index_matches_brute_force(streams, query, slop):
    vocab_size = 6
    idf = np.linspace(0.5, 3.0, vocab_size)
    index = PhraseIndex.build(streams, vocab_size, slop)
    got = index.boost(np.asarray(query, dtype=np.int64), idf, len(streams), 2.0, 7.0)
    expected = _reference_boost(streams, query, idf, vocab_size, slop, 2.0, 7.0)
    got = np.zeros(len(streams)) if got is None else got
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def test_top_k_orders_and_excludes():
    scores = np.array([0.0, 3.0, 1.0, 3.0, 2.0])
    assert top_k(scores, 3).tolist() == [1, 3, 4]
    assert top_k(scores, 3, exclude=np.array([1])).tolist() == [3, 4, 2]
    assert top_k(scores, 10, positive_only=True).tolist() == [1, 3, 4, 2]


@pytest.mark.parametrize("boosts", [(0.0, 0.0), (20.0, 60.0)], ids=["plain", "phrase"])
def test_hotpotqa_question_finds_a_supporting_paragraph_in_top5(hotpot, hotpot_index, boosts):
    chunks, index = hotpot_index
    item = next(it for it in hotpot.items if it.id == "5a8c7595554299585d9e36b6")  # Corliss Archer / Kiss and Tell
    supporting_titles = {d.title for d in item.documents if d.id in item.supporting}
    ids, _ = index.search(item.question, 5, bigram_boost=boosts[0], trigram_boost=boosts[1])
    assert supporting_titles & {chunks[i].title for i in ids}


def test_save_and_load_round_trip(tmp_path, hotpot_index):
    _, index = hotpot_index
    index.save(tmp_path / "bm25")
    again = BM25Index.load(tmp_path / "bm25")
    q = "Were Scott Derrickson and Ed Wood of the same nationality?"
    np.testing.assert_array_equal(index.scores(q, 20, 60), again.scores(q, 20, 60))
