"""Refusals that say what differs, and labels that show it: a case label names every option
that departs from the grid's own value (``bcas/hs+r/rc10``), the answer identity does not
move because of a label, and ``bcas compare`` / ``bcas compare --report`` / ``bcas merge``
name the differing configuration field with both values."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bcas.cli import main as bcas_main
from bcas.grids import GRIDS, get_grid, with_calibration_n, with_retrieval_models
from bcas.harness.merge_checks import mismatches
from bcas.records import Record, ResultStore
from bcas.report.summary import build_summaries
from bcas.run.combine import MismatchError, combine_runs

HS_R = "bcas/hs+r"


def _entry(label: str) -> Any:
    return next(e for e in get_grid("baselines").entries if e.label == label)


def test_a_label_shows_each_departure_from_the_grid_and_the_identity_is_the_configurations() -> None:
    loop = _entry(HS_R)
    assert loop.config.retrieval.candidates == 100  # the grid's own value
    ten = with_retrieval_models(loop, candidates=10)
    assert ten.label == "bcas/hs+r/rc10"
    assert with_retrieval_models(loop, candidates=100).label == HS_R  # the grid's value: nothing departs
    assert with_retrieval_models(_entry("bcas/bm25"), candidates=10).label == "bcas/bm25"  # BM25 re-ranks nothing
    both = with_retrieval_models(loop, reranker="org/my-reranker", candidates=10)
    assert both.label == "bcas/hs+r/rr-my-reranker/rc10"
    # The answer identity is the configuration's: the label adds nothing to it (resume is unchanged).
    assert (
        ten.config.config_id == replace(loop.config, retrieval=replace(loop.config.retrieval, candidates=10)).config_id
    )
    assert replace(ten, departures=()).config.config_id == ten.config.config_id
    rsc = next(e for g in GRIDS.values() for e in g.entries if e.kind == "rsc")
    assert with_calibration_n(rsc, 7).label == f"{rsc.label}/cal7"


def _records(candidates: int, *, right: set[int], n: int = 4) -> list[Record]:
    """Answers of the baselines grid's hybrid+rerank loop and retrieve-then-read at ``candidates``."""
    out = []
    for label in (HS_R, "retrieve_read/hs+r"):
        entry = with_retrieval_models(_entry(label), candidates=candidates)
        config = replace(entry.config, seed=0)
        for i in range(n):
            out.append(
                Record(
                    run_id=f"rc{candidates}", config_id=config.config_id, model="m", dataset="hotpotqa",
                    dataset_hash="d" * 64, item_id=f"q{i}", question=f"q{i}?", answers=["a"],
                    prediction="a" if i in right else "b", correct_em=i in right, f1=float(i in right),
                    config=config.to_dict(), label=entry.label, method="bcas" if label == HS_R else "retrieve_read",
                    model_fingerprint="mock:m", prompt_hash="p" * 16, extra={"grid": "baselines"}, seed=0,
                )
            )  # fmt: skip
    return out


def test_the_summary_shows_the_departure_and_still_compares_each_method_with_its_loop() -> None:
    recs = [r.to_dict() for r in _records(10, right={0, 1})]
    summaries = build_summaries(recs, grids=dict(GRIDS.items()), only=["baselines"])
    assert sorted(r.label for r in summaries.rows) == ["bcas/hs+r/rc10", "retrieve_read/hs+r/rc10"]
    (comparison,) = summaries.comparisons
    assert (comparison.label, comparison.reference) == ("retrieve_read/hs+r/rc10", "bcas/hs+r/rc10")


@pytest.fixture
def runs(tmp_path: Path) -> dict[int, Path]:
    out = {}
    for candidates in (10, 100):
        run = tmp_path / f"rc{candidates}"
        ResultStore(run).extend(_records(candidates, right={0, 1}))
        out[candidates] = run
    return out


def test_compare_of_a_10_and_a_100_candidate_run_names_rerank_candidates(
    runs: dict[int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bcas_main(["compare", str(runs[10]), str(runs[100])]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "rerank_candidates (retrieval.candidates) differs: A 10 vs B 100" in err
    assert "bcas/hs+r/rc10 vs bcas/hs+r" in err  # the labels say it too
    # Allowed anyway, the difference is printed in the same words.
    assert bcas_main(["compare", str(runs[10]), str(runs[100]), "--allow-mismatch"]) == 0
    assert "MISMATCH ALLOWED (--allow-mismatch): m / hotpotqa / bcas/hs+r/rc10 vs bcas/hs+r: configuration id" in (
        capsys.readouterr().out
    )
    with pytest.raises(
        MismatchError, match=r"rerank_candidates \(retrieval\.candidates\) differs: rc10 10 vs rc100 100"
    ):
        combine_runs([runs[10], runs[100]], tmp_path / "combined")


def test_merge_names_the_differing_field_of_two_inputs() -> None:
    found = mismatches(
        [Path("rc10"), Path("rc100")],
        [None, None],
        [None, None],
        [_records(10, right=set()), _records(100, right=set())],
    )
    lines = [m.line() for m in found]
    assert any(
        "rerank_candidates (retrieval.candidates) of 'bcas/hs+r' is [100]" in line and "has [10]" in line
        for line in lines
    ), lines
