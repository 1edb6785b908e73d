"""RSC statistics and perturbations (MADARA §3, Appendix F, G.2) — pure parts."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from bcas.assess.rsc import (
    ANTONYMS,
    POLARITY_PAIRS,
    TREND_VALUES,
    RSCProfile,
    Triple,
    classify,
    contradict,
    coupling_state,
    pooled_rhos,
    profile_from_triples,
    random_chain,
    shuffle_sentences,
    spearman,
    trend_coefficient,
)

# ---------------------------------------------------------------- Spearman / trend


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=2, max_size=40))
def test_spearman_matches_scipy_with_average_ranks(pairs):
    x = [p[0] for p in pairs]
    y = [p[1] for p in pairs]
    ours = spearman(x, y)
    if len(set(x)) < 2 or len(set(y)) < 2:
        assert ours == 0.0  # undefined -> 0, never NaN
    else:
        assert ours == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)


def test_spearman_undefined_cases():
    assert spearman([1], [2]) == 0.0
    assert spearman([3, 3, 3], [1, 2, 3]) == 0.0
    assert np.isnan(spearman([3, 3], [1, 2], undefined=float("nan")))


@settings(deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3))
def test_trend_coefficient_takes_one_of_five_values(r):
    assert trend_coefficient(r) in TREND_VALUES


@settings(deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3, unique=True))
def test_trend_coefficient_equals_scipy_without_ties(r):
    assert trend_coefficient(r) == pytest.approx(spearmanr([1, 2, 3], r).statistic)


@pytest.mark.parametrize(
    ("rhos", "expected"),
    [
        ((0.72, 0.38, -0.01), -1.0),  # Llama (Appendix F.2): strict degradation
        ((0.30, 0.03, 0.16), -0.5),  # Qwen3 (Appendix F.2)
        ((0.6, 0.2, 0.2), -0.5),  # rho_2 == rho_3: a tie is not degradation (Gemma-2 note, Table 13)
        ((0.2, 0.2, 0.6), 1.0),
        ((0.1, 0.5, 0.3), 0.5),
        ((0.4, 0.4, 0.4), 0.0),  # constant: no trend information
        ((0.1, 0.2, 0.3), 1.0),
    ],
)
def test_trend_coefficient_examples(rhos, expected):
    assert trend_coefficient(rhos) == expected


def test_trend_coefficient_rejects_bad_input():
    with pytest.raises(ValueError):
        trend_coefficient([0.1, 0.2])
    with pytest.raises(ValueError):
        trend_coefficient([0.1, float("nan"), 0.2])


def test_classification_and_coupling_state():
    assert classify(-1.0) == "quality-ordered"
    assert classify(-0.5) == "stochastic"
    assert coupling_state(-1.0, 0.49) == "weakly-coupled"
    assert coupling_state(-1.0, 0.5) == "strongly-coupled"
    assert coupling_state(0.0, 0.9) == "stochastic"


# ---------------------------------------------------------------- perturbations

sentence = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu")), min_size=1, max_size=8).map(
    lambda w: w + "."
)


def check_shuffle(shuffle, sentences_per_step: list[list[str]], seed: int) -> None:
    """Level 1 contract against an independent oracle: the sentences the steps were built from.

    The output must be exactly the generated sentences (as a multiset), one per entry,
    and the same for the same seed.  ``split_sentences`` is not consulted.
    """
    steps = [" ".join(ss) for ss in sentences_per_step]
    shuffled = shuffle(steps, seed, key=("q", 1))
    assert Counter(shuffled) == Counter(s for ss in sentences_per_step for s in ss)
    assert shuffled == shuffle(steps, seed, key=("q", 1))  # fixed seed: reproducible


@settings(deadline=None)
@given(st.lists(st.lists(sentence, min_size=1, max_size=4), min_size=1, max_size=5), st.integers(0, 10**6))
def test_shuffle_preserves_the_multiset_of_sentences(steps_as_sentences, seed):
    """Catches a shuffle that permutes whole steps (no sentence splitting), drops or
    duplicates a sentence, or depends on anything but the seed and key."""
    check_shuffle(shuffle_sentences, steps_as_sentences, seed)


FIVE = ["One is here.", "Two is there.", "Three follows.", "Four ends.", "Five."]
FIVE_STEPS = ["One is here. Two is there.", "Three follows. Four ends.", "Five."]


def test_shuffle_changes_order_for_some_seed():
    """Every order is a permutation of the five sentences, and some seed moves a sentence
    across a step boundary (impossible if only whole steps were permuted)."""
    orders = {tuple(shuffle_sentences(FIVE_STEPS, s)) for s in range(10)}
    assert all(sorted(order) == sorted(FIVE) for order in orders)
    assert any(order.index("Two is there.") != order.index("One is here.") + 1 for order in orders)


def test_shuffle_checks_fail_without_sentence_splitting(monkeypatch):
    """Mutation check: with sentence splitting removed (whole steps permuted), both shuffle
    properties above fail."""
    import bcas.assess.rsc as rsc
    import bcas.assess.rsc.perturb as perturb

    monkeypatch.setattr(perturb, "split_sentences", lambda steps: [s.strip() for s in steps if s.strip()])
    with pytest.raises(AssertionError):
        check_shuffle(rsc.shuffle_sentences, [["One is here.", "Two is there."], ["Three."]], 3)
    with pytest.raises(AssertionError):
        test_shuffle_changes_order_for_some_seed()


filler = st.sampled_from(["the", "document", "is", "about", "Paris", "and", "mentions", "dates", "it"])
polarity_word = st.sampled_from(sorted(ANTONYMS))
casing = st.sampled_from([str.lower, str.capitalize, str.upper])


@settings(deadline=None)
@given(st.lists(st.tuples(st.booleans(), filler, polarity_word, casing), min_size=1, max_size=25))
def test_contradict_flips_every_listed_polarity_word(spec):
    tokens, expected = [], []
    for use_polarity, f, p, case in spec:
        if use_polarity:
            tokens.append(case(p))
            expected.append(case(ANTONYMS[p]))
        else:
            tokens.append(f)
            expected.append(f)
    text = " ".join(tokens) + "."
    assert contradict(text) == " ".join(expected) + "."


def test_contradict_is_an_involution_on_polarity_words_and_inverts_numbers():
    text = "The document is relevant and supports the claim; high quality, a score of 4 (4/5)."
    out = contradict(text)
    assert out == "The document is irrelevant and contradicts the claim; low quality, a score of 1 (1/5)."
    assert contradict(out) == text
    # whole words only: no change inside other words
    assert contradict("supportsX relevantly") == "supportsX relevantly"


def test_polarity_list_contains_the_paper_words():
    for pos, neg in [
        ("relevant", "irrelevant"),
        ("consistent", "inconsistent"),
        ("supports", "contradicts"),
        ("accurate", "inaccurate"),
        ("reliable", "unreliable"),
    ]:
        assert (pos, neg) in POLARITY_PAIRS


keys = st.tuples(st.integers(0, 5), st.integers(0, 9))


@settings(deadline=None)
@given(
    st.dictionaries(keys, st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=3), min_size=1), st.integers()
)
def test_random_chain_never_returns_the_same_pair(chains, seed):
    for key in chains:
        picked = random_chain(chains, key, seed)
        if len(chains) == 1:
            assert picked is None
        else:
            assert picked is not None
            other, chain = picked
            assert other != key and other in chains
            assert chain == chains[other]


def test_random_chain_draws_across_pairs():
    chains = {(q, d): [f"chain {q} {d}"] for q in range(3) for d in range(3)}
    drawn = {random_chain(chains, (0, 0), seed)[0] for seed in range(60)}
    assert len(drawn) >= 5 and (0, 0) not in drawn


# ---------------------------------------------------------------- profile statistics


def _triples(n_queries: int, noise: tuple[float, float, float], seed: int = 0) -> list[Triple]:
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_queries):
        for d in range(6):
            s = float(rng.integers(0, 6))
            pert = tuple(float(np.clip(round(s + rng.normal(0, n)), 0, 5)) for n in noise)
            out.append(Triple(q, d, "relevance", s, pert))  # type: ignore[arg-type]
    return out


def test_profile_of_a_quality_ordered_model():
    triples = _triples(40, (0.3, 1.2, 6.0))
    prof = profile_from_triples(triples, model="m", profile_id="rsc-1", em_nf=0.7, n_bootstrap=200, seed=1)
    r1, r2, r3 = prof.rho_hat
    assert r1 > r2 > r3
    assert prof.rho_star == -1.0
    assert prof.classification == "quality-ordered"
    assert prof.state == "strongly-coupled" and prof.coupling == "strong"
    assert prof.rho_bar == pytest.approx((r1 + r2 + r3) / 3)
    assert prof.n_queries == 40 and prof.n_triples == 240
    boot = prof.bootstrap
    assert boot["n_resamples"] == 200
    for (lo, hi), r in zip(boot["rho_hat_ci"], prof.rho_hat, strict=True):
        assert lo <= r <= hi
    assert 0.5 < boot["classification_stability"] <= 1.0
    assert prof.split_half["same_classification"] is True
    assert all(m is not None for m in prof.per_query_mean)
    d = prof.decision()
    assert d.mode == "ATF" and d.profile_id == "rsc-1"


def test_profile_of_a_stochastic_model_routes_to_sda():
    triples = _triples(30, (5.0, 0.3, 5.0), seed=3)
    prof = profile_from_triples(triples, em_nf=0.9, n_bootstrap=50)
    assert prof.rho_star > -1.0
    assert prof.classification == "stochastic" and prof.coupling is None
    assert prof.decision().mode == "SDA"


def test_pooled_rhos_skip_missing_and_profile_counts_them():
    triples = [
        Triple(0, 0, "relevance", 5.0, (5.0, 0.0, None)),
        Triple(0, 1, "relevance", 1.0, (1.0, 4.0, 2.0)),
        Triple(1, 0, "relevance", 3.0, (3.0, 3.0, 3.0)),
        Triple(1, 1, "relevance", None, (None, None, None)),
    ]
    r = pooled_rhos(triples)
    assert r[0] == pytest.approx(1.0)
    assert r[1] == pytest.approx(spearmanr([5, 1, 3], [0, 4, 3]).statistic)
    assert r[2] == pytest.approx(spearmanr([1, 3], [2, 3]).statistic)
    prof = profile_from_triples(triples, n_bootstrap=0)
    assert prof.missing == {"normal": 1, "shuffled": 0, "contradicted": 0, "random": 1}
    assert prof.extreme_fraction == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        prof.decision()  # no EM_NF


def test_profile_round_trips_through_json(tmp_path):
    prof = profile_from_triples(_triples(5, (0.5, 1, 3)), model="m", profile_id="rsc-2", em_nf=0.4, n_bootstrap=20)
    path = prof.save(tmp_path / "p.json")
    back = RSCProfile.load(path)
    assert back == prof
    assert re.fullmatch(r"rsc-2", back.id)
