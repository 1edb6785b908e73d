"""Calibration items are never evaluated items (MADARA Algorithm 2: C and Q apart).

Before, seeded subsets were nested: the 20 evaluated items lay inside the 100
calibration items, so EM_NF and the RSC probe saw the test items and their labels.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcas.data import Dataset, DatasetError, load_calibration, load_evaluation
from bcas.grids import GRIDS, MADARA
from bcas.items import Document, Item, content_hash


def _dataset(n: int) -> Dataset:
    items = tuple(
        Item(f"q{i}", f"question {i}?", (f"answer {i}",), (Document(f"d{i}", f"t{i}", f"text {i}"),), ())
        for i in range(n)
    )
    return Dataset("synthetic", "synthetic.jsonl", "factoid", "qa", items, content_hash(items))


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=300),
    calibration_n=st.integers(min_value=1, max_value=150),
    limit=st.one_of(st.none(), st.integers(min_value=1, max_value=300)),
    seed=st.integers(min_value=0, max_value=2**31),
)
def test_calibration_and_evaluated_ids_never_intersect(
    n: int, calibration_n: int, limit: int | None, seed: int
) -> None:
    ds = _dataset(n)
    if n < calibration_n:
        with pytest.raises(DatasetError, match=f"{n} items, fewer than the {calibration_n} calibration"):
            ds.calibration_split(calibration_n, seed)
        return
    calibration, rest = ds.calibration_split(calibration_n, seed)
    evaluated = rest.subset(limit, seed)
    cal_ids = {it.id for it in calibration.items}
    eval_ids = {it.id for it in evaluated.items}
    assert len(cal_ids) == calibration_n
    assert not cal_ids & eval_ids
    assert cal_ids | {it.id for it in rest.items} == {it.id for it in ds.items}
    assert len(eval_ids) == min(n - calibration_n, limit if limit is not None else n)
    # The calibration set is the permutation's head: the same set whatever the evaluation limit,
    # and the same items as the plain seeded subset of that size.
    assert cal_ids == {it.id for it in ds.subset(calibration_n, seed).items}


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10_000), limit=st.integers(min_value=1, max_value=400))
def test_registered_datasets_split_apart(seed: int, limit: int) -> None:
    for name in ("conflictqa", "fever"):
        calibration = load_calibration(name, MADARA.holdout, seed)
        evaluated = load_evaluation(name, limit, seed, holdout=MADARA.holdout)
        assert len(calibration) == MADARA.holdout and len(evaluated) >= 1
        assert not {it.id for it in calibration.items} & {it.id for it in evaluated.items}


def test_too_few_items_is_a_clear_error() -> None:
    # The shipped TriviaQA sample has 50 items: fewer than 100 calibration queries.
    with pytest.raises(DatasetError, match=r"triviaqa\.jsonl: dataset 'triviaqa' has 50 items, fewer than the 100"):
        load_calibration("triviaqa", 100)
    with pytest.raises(DatasetError, match="none left to evaluate"):
        load_evaluation("triviaqa", 20, holdout=50)


def test_grids_that_route_hold_out_their_calibration_items() -> None:
    routed = [g for g in GRIDS.values() for e in g.entries if e.kind == "madara" and e.config.assess.method == "madara"]
    assert routed and all(
        g.holdout >= e.config.assess.calibration_n for g in routed for e in g.entries if e.kind == "madara"
    )


def test_session_probe_items_are_the_calibration_split_and_never_evaluated(tmp_path: Path) -> None:
    """The runner's calibration set (RSC probe, EM_NF, router) and a routed case's items are disjoint."""
    from bcas.resources import resource_path
    from bcas.run.session import BcasSession

    settings_ = SimpleNamespace(
        run_dir=tmp_path / "run",
        prices=resource_path("prices.toml"),
        price_sheet=None,
        seed=3,
        corpus=None,
        max_cost=None,
    )
    session = BcasSession(settings_)
    try:
        calibration = session.calibration("conflictqa", MADARA.holdout)
        evaluated = session.dataset("conflictqa", 20, MADARA.holdout)
        assert len(calibration) == 100 and len(evaluated) == 20
        assert not {it.id for it in calibration.items} & {it.id for it in evaluated.items}
        # the same evaluated items as the gate plan derives (bcas.data.load_evaluation)
        assert evaluated.hash == load_evaluation("conflictqa", 20, 3, holdout=MADARA.holdout).hash
    finally:
        session.close()


def _documented_order(ds: Dataset, seed: int) -> list[str]:
    """The documented permutation, computed independently: ids by sha256("<seed>:<id>") hex, ascending."""
    return sorted((it.id for it in ds.items), key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())


def test_subsets_and_calibration_follow_the_documented_permutation() -> None:
    """``subset(limit, seed)`` keeps the first ``limit`` ids of the permutation by sha256("<seed>:<id>")
    in file order; the calibration split takes its head and leaves the rest, for several seeds and
    sizes on both sides of the dataset's size."""
    ds = _dataset(40)
    file_order = [it.id for it in ds.items]
    for seed in (0, 1, 7, 12345, 2**31 - 1):
        order = _documented_order(ds, seed)
        for limit in (1, 2, 5, 17, 39, 40, 41):
            kept = [it.id for it in ds.subset(limit, seed).items]
            expected = set(order[:limit])
            assert kept == [i for i in file_order if i in expected], (seed, limit)
        for calibration_n in (1, 3, 20, 40):
            calibration, rest = ds.calibration_split(calibration_n, seed)
            assert [it.id for it in calibration.items] == [i for i in file_order if i in set(order[:calibration_n])]
            assert [it.id for it in rest.items] == [i for i in file_order if i in set(order[calibration_n:])]
            # the evaluated items are the next ones of the same permutation
            if calibration_n < 40:
                evaluated = {it.id for it in rest.subset(2, seed).items}
                assert evaluated == set(order[calibration_n : calibration_n + 2])
