"""The extremes of a grid's axes (``bcas.grids.axis_extremes``): which entries a quick run
across every grid takes, computed from the tables; and the ``-m``/``-k`` selection of
``tests/support/extremes.py`` collects exactly those cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.extremes import refusal_args, select

from bcas.config import AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.grids import GRIDS, Grid, GridEntry, axis_extremes, extreme_cases
from bcas.run.options import OptionError
from bcas.run.plan_checks import check_cases, window_need
from bcas.run.settings import Case, ModelSpec, build_settings
from bcas.testing.project import grid_project, preload

pytest_plugins = ["pytester"]
preload()


def labels(grid: str) -> list[str]:
    return [e.label for e in axis_extremes(GRIDS.get(grid))]


def test_the_paper_grids_run_at_both_ends_of_every_axis() -> None:
    # search budget 1 and unlimited; planning and reflection on and off (16K is the only token budget)
    assert labels("search_scaling") == ["hs/s1/t16k", "hs/sinf/t16k", "hs/sinf/t16k/plan", "hs/sinf/t16k/plan/rf"]
    # token budget 500 and 16K; planning and reflection on and off
    assert labels("context_scaling") == ["hs/sinf/t500", "hs/sinf/t16k", "hs/sinf/t16k/plan", "hs/sinf/t16k/plan/rf"]
    # every retrieval mode; planning on; reflection on (each at its first entry)
    assert labels("ablation") == [
        "bm25/sinf/t16k",
        "bm25/sinf/t16k/plan",
        "bm25/sinf/t16k/rf",
        "hs/sinf/t16k",
        "hs+r/sinf/t16k",
    ]
    # every MADARA treatment and the routed pipeline; the RSC probe
    assert labels("madara") == [e.label for e in GRIDS.get("madara").entries]
    assert labels("madara_heldout") == ["madara/nf", "madara/pde-random", "madara/pde-unif", "madara/pde", "rsc"]
    assert labels("rsc") == ["rsc"]
    # searches 1 and 3, planning, both retrieval modes (the hybrid one on its own dataset), every treatment
    assert labels("smoke") == [
        "bm25/s1/t2k",
        "bm25/s3/t2k",
        "bm25/s3/t2k/plan",
        "hs/s2/t2k",
        "madara/nf",
        "madara/pde",
        "madara/sda",
    ]


def test_each_entry_runs_on_one_dataset_it_belongs_to() -> None:
    smoke = dict((e.label, ds) for ds, e in extreme_cases(GRIDS.get("smoke"), ("hotpotqa",)))
    assert smoke["hs/s2/t2k"] == "2wikimultihopqa" and smoke["madara/nf"] == "conflictqa"
    assert smoke["bm25/s1/t2k"] == "hotpotqa"
    assert {ds for ds, _ in extreme_cases(GRIDS.get("search_scaling"), ("hotpotqa",))} == {"hotpotqa"}
    assert {ds for ds, _ in extreme_cases(GRIDS.get("search_scaling"))} == {"triviaqa"}  # the grid's first


def _bcas(searches: int | None, tokens: int, candidates: int = 100, k: int = 5) -> GridEntry:
    return GridEntry(
        "bcas",
        RunConfig(
            budget=Budget(max_searches=searches, max_total_tokens=tokens),
            retrieval=RetrievalConfig(mode="bm25", candidates=candidates, k=k),
        ),
    )


def test_any_numeric_axis_gives_its_ends_and_none_is_the_largest() -> None:
    entries = (
        _bcas(2, 1000),
        _bcas(None, 1000),  # unlimited searches: the largest
        _bcas(5, 1000),
        _bcas(2, 1000, candidates=7),  # the smallest candidates
        _bcas(2, 1000, candidates=300),  # the largest
        _bcas(2, 1000, candidates=150),  # neither end of anything
        _bcas(2, 1000, k=3),
    )
    grid = Grid("synthetic", entries, datasets=("hotpotqa",))
    assert axis_extremes(grid) == (entries[0], entries[1], entries[3], entries[4], entries[6])


def test_a_kind_that_sweeps_nothing_gives_its_first_entry_and_kinds_are_apart() -> None:
    probe = RunConfig(assess=AssessConfig(doc_source="item"))
    entries = (_bcas(1, 500), GridEntry("rsc", probe, name="probe-a"), GridEntry("rsc", probe, name="probe-b"))
    # the rsc entries' (default) budget does not count as the BCAS entries' largest token budget
    assert axis_extremes(Grid("mixed", entries, datasets=("conflictqa",))) == entries[:2]


@pytest.mark.parametrize("grid", sorted(GRIDS.names()))
def test_the_command_line_selection_collects_exactly_the_extreme_cases(grid: str, pytester: pytest.Pytester) -> None:
    selection = select(grid)
    grid_project(pytester.path)  # the one-line grid test file of benchmarks/
    result = pytester.runpytest_inprocess(
        "--collect-only", "-q", "-p", "no:cacheprovider", "--bcas-model", "mock:gold", *selection.args()
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    collected = [line for line in result.stdout.lines if line.startswith("test_grids.py::")]
    assert len(collected) == len(selection.cases), result.stdout.str()
    for suffix in selection.suffixes:
        assert sum(line.endswith(suffix) for line in collected) == 1, (suffix, collected)


SMOLLM2_WINDOW = 8192  # the embedded default's declared window


def test_a_window_leaves_out_exactly_the_extremes_the_run_would_refuse(tmp_path: Path) -> None:
    """On SmolLM2's 8,192 tokens every t16k extreme is kept apart -- all of search_scaling and
    ablation, the 16K end of context_scaling -- and each kept apart is what the run refuses
    (bcas.run.plan_checks, naming --bcas-model) while each kept runs; no window keeps all."""
    model = ModelSpec("mock", "gold")
    settings = build_settings({"grid": "smoke", "model": ["mock:gold"]}, tmp_path)
    split = {grid: select(grid, window=SMOLLM2_WINDOW) for grid in sorted(GRIDS.names())}
    assert not split["search_scaling"].cases and not split["ablation"].cases
    assert [e.label for _, e in split["context_scaling"].cases] == ["hs/sinf/t500"]
    assert [e.label for _, e in split["context_scaling"].refused] == labels("context_scaling")[1:]
    assert not split["smoke"].refused and not split["madara"].refused  # 2K budgets; MADARA has no token budget
    for grid, selection in split.items():
        everything = extreme_cases(GRIDS.get(grid), ("hotpotqa",))
        assert sorted(map(id, [e for _, e in selection.cases + selection.refused])) == sorted(
            id(e) for _, e in everything
        )
        assert select(grid).cases == tuple(everything) and not select(grid).refused
        window = {model.label: SMOLLM2_WINDOW}
        budgeted = [Case(model, ds, grid, e) for ds, e in selection.cases if window_need(e.kind, e.config)]
        check_cases(settings, budgeted, window)  # (the others' calibration size is checked elsewhere)
        for ds, entry in selection.refused:
            with pytest.raises(OptionError) as caught:
                check_cases(settings, [Case(model, ds, grid, entry)], window)
            assert caught.value.option == "model", caught.value


def test_the_refusal_command_selects_the_one_case_it_names(pytester: pytest.Pytester) -> None:
    (case, *_) = select("context_scaling", window=SMOLLM2_WINDOW).refused
    grid_project(pytester.path)
    result = pytester.runpytest_inprocess(
        "--collect-only", "-q", "-p", "no:cacheprovider", "--bcas-model", "mock:gold",
        *refusal_args("context_scaling", case),
    )  # fmt: skip
    collected = [line for line in result.stdout.lines if line.startswith("test_grids.py::")]
    assert len(collected) == 1 and collected[0].endswith(f"hotpotqa-{case[1].label}]"), result.stdout.str()
