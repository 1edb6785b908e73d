"""Hybrid fusion (RRF and convex combination): properties over random rankings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.retrieval.hybrid import convex_fuse, minmax_normalise, rrf_fuse

ids = st.integers(0, 30)
ranking = st.lists(ids, max_size=20, unique=True)
scored = st.lists(st.tuples(ids, st.floats(-50, 50, allow_nan=False)), max_size=20, unique_by=lambda t: t[0])


@settings(max_examples=200, deadline=None)
@given(a=ranking, b=ranking, rrf_k=st.integers(0, 100))
def test_rrf_output_is_a_duplicate_free_subset_of_the_union(a, b, rrf_k):
    fused = rrf_fuse([a, b], rrf_k)
    keys = [key for key, _ in fused]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(a) | set(b)
    scores = [s for _, s in fused]
    assert scores == sorted(scores, reverse=True)


@settings(max_examples=200, deadline=None)
@given(a=st.lists(ids, min_size=2, max_size=20, unique=True), b=ranking, data=st.data())
def test_rrf_is_monotone_in_each_rank(a, b, data):
    """Moving an item up in one list never lowers its fused score."""
    pos = data.draw(st.integers(1, len(a) - 1))
    new_pos = data.draw(st.integers(0, pos - 1))
    item = a[pos]
    improved = a[:pos] + a[pos + 1 :]
    improved.insert(new_pos, item)
    before = dict(rrf_fuse([a, b]))[item]
    after = dict(rrf_fuse([improved, b]))[item]
    assert after > before


@settings(max_examples=200, deadline=None)
@given(a=ranking, b=ranking)
def test_rrf_item_in_both_lists_beats_item_at_same_rank_in_one(a, b):
    fused = dict(rrf_fuse([a, b], 60))
    for key in set(a) & set(b):
        assert fused[key] == pytest.approx(1 / (61 + a.index(key)) + 1 / (61 + b.index(key)))
    for key in set(a) - set(b):
        assert fused[key] == pytest.approx(1 / (61 + a.index(key)))


@settings(max_examples=200, deadline=None)
@given(lex=scored, dense=scored, alpha=st.floats(0, 1))
def test_convex_fusion_is_a_bounded_subset_of_the_union(lex, dense, alpha):
    fused = convex_fuse(lex, dense, alpha)
    keys = [key for key, _ in fused]
    assert len(keys) == len(set(keys))
    assert set(keys) == {k for k, _ in lex} | {k for k, _ in dense}
    assert all(-1e-12 <= s <= 1 + 1e-12 for _, s in fused)


def test_convex_fusion_weights_the_lexical_list_by_alpha():
    lex = [("a", 10.0), ("b", 0.0)]
    dense = [("b", 0.9), ("a", 0.1)]
    assert convex_fuse(lex, dense, 1.0)[0][0] == "a"
    assert convex_fuse(lex, dense, 0.0)[0][0] == "b"
    assert dict(convex_fuse(lex, dense, 0.25)) == pytest.approx({"a": 0.25, "b": 0.75})


def test_minmax_normalise_edges():
    assert minmax_normalise([]) == []
    assert minmax_normalise([3.0, 3.0]) == [1.0, 1.0]
    assert minmax_normalise([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="rrf_k"):
        rrf_fuse([[1]], -1)
    with pytest.raises(ValueError, match="fusion_alpha"):
        convex_fuse([], [], 1.5)


def _rrf_reference(rankings: list[list[str]], rrf_k: int) -> dict[str, float]:
    """Cormack et al. 2009, independently: Σ over lists of 1 / (k + rank), rank counted from 1."""
    out: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(dict.fromkeys(ranking), start=1):
            out[key] = out.get(key, 0.0) + 1.0 / (rrf_k + rank)
    return out


@pytest.mark.parametrize("rrf_k", [0, 1, 60, 100])
def test_rrf_scores_follow_the_formula_and_ties_keep_the_lexical_order(rrf_k: int) -> None:
    lexical = ["a", "b", "c", "d"]
    dense = ["b", "a", "e", "d", "b"]  # a and b tie (ranks 1+2 each); c and e tie (rank 3 in one list)
    fused = rrf_fuse([lexical, dense], rrf_k)
    assert dict(fused) == pytest.approx(_rrf_reference([lexical, dense], rrf_k))
    # ties broken by first appearance, the lexical list first: a before b, c before e
    assert [key for key, _ in fused] == ["a", "b", "d", "c", "e"]  # d: 2 / (k + 4) beats c's 1 / (k + 3)
    swapped = rrf_fuse([dense, lexical], rrf_k)
    assert [key for key, _ in swapped][:2] == ["b", "a"]  # the first list's order decides a tie


def test_convex_fusion_ties_keep_the_lexical_order() -> None:
    lex = [("x", 2.0), ("y", 1.0)]
    dense = [("y", 5.0), ("x", 1.0)]  # at α = 0.5 both fuse to 0.5
    assert [key for key, _ in convex_fuse(lex, dense, 0.5)] == ["x", "y"]
    assert [key for key, _ in convex_fuse(dense, lex, 0.5)] == ["y", "x"]
    assert dict(convex_fuse(lex, dense, 0.5)) == pytest.approx({"x": 0.5, "y": 0.5})
