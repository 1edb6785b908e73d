"""The extremes of a grid's axes (``bcas.grids.axis_extremes``): which entries a quick run
across every grid takes, computed from the tables; and the ``-m``/``-k`` selection of
``tests/support/extremes.py`` collects exactly those cases."""

from __future__ import annotations

import pytest
from support.extremes import select

from bcas.config import AssessConfig, Budget, RetrievalConfig, RunConfig
from bcas.grids import GRIDS, Grid, GridEntry, axis_extremes, extreme_cases
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
