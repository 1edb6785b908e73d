"""The plan of a run: the chosen grids x models x datasets as cases, computed once.

Each case's answer identity (:class:`CaseIdentity`: seeded configuration and its id, model
fingerprint, prompt hash) is computed here, by :func:`case_identity`, for the engine and
for the gate's plan alike.  Both front doors run the same plan: the pytest plugin makes one test item per case
(``pytest_generate_tests``), :func:`bcas.evaluate` runs the cases in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from bcas.config import RunConfig
from bcas.run.pipelines import run_kind
from bcas.run.settings import DEFAULT_LIMIT, Case, ModelSpec, Settings


@dataclass(frozen=True)
class CaseIdentity:
    """What identifies every answer of a case but its item and epoch (:mod:`bcas.identity`).

    ``config``: the grid entry's configuration under the run's seed (the seed picks the item
    subset and seeds sampling, so it is part of ``config_id``); ``fingerprint``: the
    model's (:mod:`bcas.llm.fingerprint`); ``prompt_hash``: the run kind's prompt templates.
    The dataset hash is the loaded item subset's (``Dataset.hash``).
    """

    config: RunConfig
    config_id: str
    fingerprint: str
    prompt_hash: str


def case_config(case: Case, seed: int, corpus: bool = False) -> RunConfig:
    """The configuration ``case`` runs under a run seeded with ``seed``.

    ``corpus``: the run searches a ``--bcas-corpus``.  A case whose kind would read each
    item's own documents then retrieves them from the corpus instead, the top
    ``AssessConfig.n_docs`` (10) for the question, as MADARA's pipeline does (§5.5): a
    questions-only dataset has no documents of its own, and its items would otherwise
    be answered from none.  The configuration, and so the case's identity, says so.
    """
    config = replace(case.entry.config, seed=seed)
    kind = run_kind(case.entry.kind)
    if corpus and not kind.needs_retriever(config):
        retrieving = replace(config, assess=replace(config.assess, doc_source="retrieval"))
        if kind.needs_retriever(retrieving):
            return retrieving
    return config


def model_identity(spec: ModelSpec, *, verify: bool, loaded: object = None) -> str:
    """The fingerprint of model ``spec`` (``verify``: ask a server; ``loaded``: the model object, if any)."""
    from bcas.llm.fingerprint import model_fingerprint

    return model_fingerprint(
        spec.backend, spec.model, base_url=spec.base_url, api_key_env=spec.api_key_env, verify=verify, loaded=loaded
    )


def case_identity(case: Case, seed: int, fingerprint: str, corpus: bool = False) -> CaseIdentity:
    """The identity of ``case``'s answers under ``seed`` for a model of ``fingerprint``: computed once per case."""
    from bcas.identity import prompt_hash

    config = case_config(case, seed, corpus)
    return CaseIdentity(config, config.config_id, fingerprint, prompt_hash(case.entry.kind))


@dataclass(frozen=True)
class Plan:
    """The run's cases, in order, for its settings."""

    settings: Settings
    cases: tuple[Case, ...]
    _fingerprints: dict[ModelSpec, str] = field(default_factory=dict, compare=False, repr=False)

    def limit_for(self, case: Case) -> int:
        """Items per dataset of ``case``: the run's limit, else its grid's, else :data:`DEFAULT_LIMIT`."""
        from bcas.grids import get_grid

        return self.settings.limit if self.settings.limit is not None else get_grid(case.grid).limit or DEFAULT_LIMIT

    def identity(self, case: Case, fingerprint: str | None = None) -> CaseIdentity:
        """``case``'s :class:`CaseIdentity`; ``fingerprint``: its model's, if known (else computed
        once per model, verified as the settings' ``preflight`` says)."""
        if fingerprint is None:
            if case.model not in self._fingerprints:
                self._fingerprints[case.model] = model_identity(case.model, verify=self.settings.preflight)
            fingerprint = self._fingerprints[case.model]
        return case_identity(case, self.settings.seed, fingerprint, bool(self.settings.corpus))

    def with_served(self, served: Mapping[str, str]) -> Plan:
        """This plan with each case of a model whose label is in ``served`` (label -> the name of
        what its server serves, :func:`bcas.run.served.served_names`) naming it in its id."""
        if not served:
            return self
        cases = tuple(replace(c, served=served.get(c.model.label)) for c in self.cases)
        return Plan(self.settings, cases, self._fingerprints)


def make_plan(settings: Settings) -> Plan:
    """The plan of ``settings`` (:func:`expand_cases`)."""
    return Plan(settings, tuple(expand_cases(settings)))


def expand_cases(settings: Settings) -> list[Case]:
    from bcas.grids import get_grid, with_calibration_n, with_retrieval_models
    from bcas.run.pipelines import run_kind

    embedder, reranker, calibration_n = settings.embedder, settings.reranker, settings.calibration_n
    candidates = settings.rerank_candidates
    cases = []
    for grid_name in settings.grids:
        grid = get_grid(grid_name)
        chosen = tuple(settings.datasets) if settings.datasets else None
        for model in settings.models:
            for dataset, entry in grid.cases(chosen):
                # The chosen retrieval models and calibration size are part of the configuration (and its id).
                entry = with_retrieval_models(entry, embedder, reranker, candidates)
                if calibration_n is not None and run_kind(entry.kind).calibrates(entry.config):
                    entry = with_calibration_n(entry, calibration_n)
                cases.append(Case(model, dataset, grid_name, entry))
    return cases
