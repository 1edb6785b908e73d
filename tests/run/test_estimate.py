"""``--bcas-estimate`` / :func:`bcas.estimate`: each case's calls from its declared call structure,
calibration apart, no model loaded and no index built; checked against mock runs of the same
cases (``bcas.evaluate``), whose records the estimate then takes as its basis."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import bcas
from bcas.grids import register_grid
from bcas.grids.baselines import BASELINE_MODES, baselines_grid
from bcas.grids.table import GRIDS
from bcas.testing.project import read_records


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def bm25_baselines() -> Any:
    """The baselines grid on BM25 and one dataset (no dense index to build)."""
    saved = GRIDS.snapshot()
    register_grid(baselines_grid(name="est-baselines", datasets=("hotpotqa",), modes=BASELINE_MODES[:1]))
    yield "est-baselines"
    GRIDS.restore(saved)


def _no_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any model load or index build fails the test."""
    import bcas.llm
    import bcas.retrieval
    from bcas.run.session import BcasSession

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the estimate loaded a model or built an index")

    monkeypatch.setattr(bcas.llm, "load_model", refuse)
    monkeypatch.setattr(bcas.retrieval, "build_retriever", refuse)
    monkeypatch.setattr(BcasSession, "model", refuse)
    monkeypatch.setattr(BcasSession, "retriever", refuse)
    monkeypatch.setattr(BcasSession, "judge", refuse)


def test_the_estimate_loads_no_model_builds_no_index_and_counts_each_method_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_loading(monkeypatch)
    rows = bcas.estimate("baselines", "embedded", limit=50, out=str(tmp_path / "run"), root=str(tmp_path))
    assert not (tmp_path / "run").exists(), "the estimate wrote a run folder"
    closed = next(r for r in rows if r.case_id.endswith("hotpotqa-closed_book"))
    assert (closed.items, closed.calls, closed.calls_min, closed.calls_max, closed.searches) == (50, 50, 50, 50, 0)
    read = next(r for r in rows if r.case_id.endswith("hotpotqa-retrieve_read/bm25"))
    assert (read.calls, read.searches) == (50, 50)
    # the re-ranking mode adds the llm reranker's calls, one per candidate of each search
    reranked = next(r for r in rows if r.case_id.endswith("hotpotqa-retrieve_read/hs+r"))
    assert reranked.calls == 50 * (1 + 100) and reranked.rerank == 100
    assert len({r.calls / r.items for r in rows if r.items}) > 3  # not one count for every method
    assert closed.dataset_items > 50


def test_madara_treatments_differ_and_calibration_is_a_row_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_loading(monkeypatch)
    rows = bcas.estimate(
        "madara", "mock:gold", ["conflictqa"], limit=5, out=str(tmp_path / "run"), root=str(tmp_path), calibration_n=7
    )
    per_item = {r.case_id.rsplit("madara/", 1)[-1]: r.calls / r.items for r in rows if not r.calibration}
    assert per_item["nf"] == 1 and per_item["sda"] == per_item["atf"] == 3 * 10 + 1 and per_item["pde"] == 3 * 10 + 5
    calibration = [r for r in rows if r.calibration]
    assert len(calibration) == 1 and calibration[0].items == 7 and calibration[0].calls > 0
    assert calibration[0].case_id.startswith("calibration: RSC probe")
    evaluated = next(r for r in rows if not r.calibration)
    assert evaluated.held_out == 7 and evaluated.dataset_items > evaluated.items
    assert all(r.wall is not None and r.wall[1] < 60 for r in rows)  # the mock: near zero


def test_the_estimate_holds_the_mock_runs_calls_and_then_takes_its_records_as_basis(
    tmp_path: Path, bm25_baselines: str
) -> None:
    out = str(tmp_path / "run")
    before = bcas.estimate(bm25_baselines, "mock:gold", limit=2, out=out, root=str(tmp_path))
    bcas.evaluate(bm25_baselines, "mock:gold", limit=2, out=out, root=str(tmp_path), no_cache=True)
    records = read_records(Path(out))
    calls: dict[str, list[int]] = {}
    for r in records:
        calls.setdefault(f"{r['model']}-{r['dataset']}-{r['label']}", []).append(r["llm_calls"])
        # every method's searches are timed, as the loop's are
        assert r["timing"]["searches"] == r["searches_used"], r["label"]
    for est in before:
        got = calls[est.case_id]
        assert est.items == len(got) == 2
        assert est.calls_min <= sum(got) <= est.calls_max, est.case_id
        if est.calls_min == est.calls_max:  # a fixed structure: exactly the run's calls
            assert est.calls == sum(got), est.case_id
    # Nothing left to run: nothing to spend.  Two more items: the recorded items are the basis.
    assert all(e.items == 0 and e.calls == 0 for e in bcas.estimate(bm25_baselines, "mock:gold", limit=2, out=out,
                                                                  root=str(tmp_path)))  # fmt: skip
    more = bcas.estimate(bm25_baselines, "mock:gold", limit=4, out=out, root=str(tmp_path))
    for est in more:
        got = calls[est.case_id]  # the items not yet recorded, at the recorded items' mean
        assert est.items >= 2 and est.calls == pytest.approx(est.items * sum(got) / len(got)), est.case_id
        assert est.wall is not None and est.wall[0] <= est.wall[1]
    loop = next(e for e in more if e.kind == "bcas")
    assert loop.basis == "2 recorded item(s) of the case" and loop.calls < loop.calls_max


def test_the_terminal_table_names_calibration_the_held_out_items_and_the_wall_range(tmp_path: Path) -> None:
    from bcas.testing.project import grid_project
    from tests.support.mockruns import run_pytest

    folder = grid_project(tmp_path / "p", "")
    out = run_pytest(
        folder, "--bcas-grid", "madara", "--bcas-model", "mock:gold", "--bcas-datasets", "conflictqa",
        "--bcas-limit", "5", "--bcas-calibration-n", "7", "--bcas-estimate", "--bcas-report", str(tmp_path / "never"),
    )  # fmt: skip
    text = out.stdout
    assert out.returncode == 0, text[-3000:] + out.stderr[-2000:]
    assert "calibration: RSC probe mock-gold-conflictqa" in text and re.search(r"^calibration: 7 items", text, re.M)
    assert "(5 of " in text and "; 7 held for calibration)" in text
    assert "wall time from mock-gold: mock: instant" in text
    assert not (tmp_path / "never").exists()


def test_measured_speed_widens_a_few_measurements_and_not_many() -> None:
    """Calls: 10th-90th percentile, or half the fastest to twice the slowest below FEW_CALLS; the
    per-item harness time: none to the slowest, twice the slowest below FEW_CALLS items."""
    from types import SimpleNamespace

    from bcas.run.estimate import FEW_CALLS, speed_of_records

    def rec(calls: list[float], harness: float, source: str = "live") -> Any:
        timing = {"source": source, "calls": [{"wall_s": c} for c in calls], "harness_s": harness}
        return SimpleNamespace(timing=timing)

    few = speed_of_records([rec([1.0, 3.0], 0.2), rec([2.0], 0.5)], "few")
    assert few is not None
    assert few.call == (0.5, 6.0) and few.harness == (0.0, 1.0)
    # a cache replay measures nothing: its slow harness time is not the basis
    assert speed_of_records([rec([1.0], 0.2), rec([9.0], 9.0, "cache")], "c").harness == (0.0, 0.4)  # type: ignore[union-attr]
    many = [rec([float(i)], i / 100) for i in range(1, FEW_CALLS + 1)]
    speed = speed_of_records(many, "many")
    assert speed is not None
    assert speed.harness == (0.0, FEW_CALLS / 100)
    assert FEW_CALLS / 10 < speed.call[1] < FEW_CALLS and 1.0 < speed.call[0] < FEW_CALLS / 5
    # four calls of 2 s made at once in an item served in 2 s: each costs the item 0.5 s; calls one
    # after another (8 s served) keep their own times
    overlapped = {"source": "live", "calls": [{"wall_s": 2.0}] * 4, "harness_s": 0.0, "service_s": 2.0}
    at_once = speed_of_records([SimpleNamespace(timing=overlapped)], "at once")
    in_turn = speed_of_records([SimpleNamespace(timing={**overlapped, "service_s": 8.0})], "in turn")
    assert at_once is not None and at_once.call == (0.25, 1.0)
    assert in_turn is not None and in_turn.call == (1.0, 4.0)
    short = speed_of_records(many[:-1], "one short")
    assert short is not None and short.harness == (0.0, 2 * (FEW_CALLS - 1) / 100)
    assert short.call == (0.5, 2.0 * (FEW_CALLS - 1))


@pytest.mark.parametrize(
    ("budget", "agent", "calls", "least", "most"),
    [
        # the guarded loop, 3 searches: 3 action turns and the answer; at most 3 + 3 unusable turns
        ({"max_searches": 3}, {"max_invalid_turns": 3}, 4, 2, 7),
        ({"max_searches": 3}, {"max_invalid_turns": 3, "planning": True}, 5, 3, 8),
        ({"max_searches": 5}, {"max_invalid_turns": 1}, 6, 2, 7),
        # a reflection before action turns 2 and 4 of 5 (4 // 2), before turns 2, 4, 6 of 6 at most
        ({"max_searches": 3}, {"max_invalid_turns": 3, "reflection": True}, 5, 2, 9),
        ({"max_searches": 4}, {"max_invalid_turns": 2, "reflection": True, "reflect_every": 3}, 6, 2, 8),
        # the paper's loop: only the token budget bounds the turns (one token a turn at least)
        ({"max_searches": 2, "max_total_tokens": 50}, {}, 3, 2, 51),
        ({"max_searches": 3}, {"max_turns": 4}, 4, 2, 5),
    ],
)
def test_the_loops_most_calls_count_every_action_turn_up_to_its_bound(
    budget: dict[str, Any], agent: dict[str, Any], calls: int, least: int, most: int
) -> None:
    """A reply that cannot be used takes a turn and a call: the loop's calls reach its turn bound,
    beyond the budgets' count (where a model that wastes turns lands, a recorded case shows)."""
    from bcas.agent.shape import loop_shape
    from bcas.config import AgentConfig, Budget, RunConfig

    shape = loop_shape(RunConfig(budget=Budget(**budget), agent=AgentConfig(**agent)))
    assert (shape.calls, shape.low, shape.high) == (calls, least, most)
    assert not shape.fixed


def test_recorded_items_that_wasted_turns_are_the_basis_beyond_the_budgets_count() -> None:
    """A case whose recorded items took 5 calls each where its budgets count 4 (an unusable reply
    each) is expected at 5 an item, not cut to 4; at most the structure's bound; its wall range
    counts the recorded calls."""
    from types import SimpleNamespace

    from bcas.callshape import CallShape
    from bcas.run.estimate import CaseEstimate, Speed, _fill, _observed, _wall

    shape = CallShape(calls=4.0, calls_min=2.0, calls_max=7.0, searches=3.0, searches_min=0.0)

    def case(calls: list[int]) -> CaseEstimate:
        est = CaseEstimate("c", "bcas", "m")
        _fill(est, shape, 10, 100.0, 400.0)
        recs = [SimpleNamespace(tokens_in=1000, tokens_out=50, llm_calls=c, searches_used=3) for c in calls]
        _observed(est, recs)
        return est

    assert (case([5, 5]).calls, case([5, 6]).calls, case([2, 3]).calls) == (50.0, 55.0, 25.0)
    assert case([9, 9]).calls == 70.0 and case([1]).calls == 20.0  # within [calls_min, calls_max]
    est = case([6, 6])
    _wall(est, Speed("s", (1.0, 2.0), (0.0, 0.0), (0.0, 0.0)), 1)
    assert est.wall == (20.0, 120.0)  # 10 items x (2 calls x 1 s, 6 calls x 2 s)
    fewer = case([3, 3])
    _wall(fewer, Speed("s", (1.0, 2.0), (0.0, 0.0), (0.0, 0.0)), 1)
    assert fewer.wall == (20.0, 80.0)  # the budgets' count (4) above the recorded 3
