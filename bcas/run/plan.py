"""The plan of a run: the chosen grids x models x datasets as cases, computed once.

Both front doors run the same plan: the pytest plugin makes one test item per case
(``pytest_generate_tests``), :func:`bcas.evaluate` runs the cases in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from bcas.run.settings import DEFAULT_LIMIT, Case, Settings


@dataclass(frozen=True)
class Plan:
    """The run's cases, in order, for its settings."""

    settings: Settings
    cases: tuple[Case, ...]

    def limit_for(self, case: Case) -> int:
        """Items per dataset of ``case``: the run's limit, else its grid's, else :data:`DEFAULT_LIMIT`."""
        from bcas.grids import get_grid

        return self.settings.limit if self.settings.limit is not None else get_grid(case.grid).limit or DEFAULT_LIMIT


def make_plan(settings: Settings) -> Plan:
    """The plan of ``settings`` (:func:`expand_cases`)."""
    return Plan(settings, tuple(expand_cases(settings)))


def expand_cases(settings: Settings) -> list[Case]:
    from bcas.grids import get_grid, with_calibration_n, with_retrieval_models
    from bcas.run.pipelines import run_kind

    embedder, reranker, calibration_n = settings.embedder, settings.reranker, settings.calibration_n
    cases = []
    for grid_name in settings.grids:
        grid = get_grid(grid_name)
        chosen = tuple(settings.datasets) if settings.datasets else None
        for model in settings.models:
            for dataset, entry in grid.cases(chosen):
                # The chosen retrieval models and calibration size are part of the configuration (and its id).
                entry = with_retrieval_models(entry, embedder, reranker)
                if calibration_n is not None and run_kind(entry.kind).calibrates(entry.config):
                    entry = with_calibration_n(entry, calibration_n)
                cases.append(Case(model, dataset, grid_name, entry))
    return cases
