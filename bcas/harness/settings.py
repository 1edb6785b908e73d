"""The bcas options and what they resolve to: ``Settings``, model specs, grid cases.

Every option is a command-line flag ``--bcas-NAME`` and an ini option ``bcas_NAME``
(command line first, then ini, then the default).  ``read_settings`` validates them
all at configure time; ``expand_cases`` turns the chosen grids, models and datasets
into cases.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bcas.harness.options import OPTIONS  # noqa: E402  (the table lives in its own module)
from bcas.llm import BACKENDS, backend_meta

DEFAULT_LIMIT = 20


REQUIREMENT_MARKERS = {
    "gpu": "needs a CUDA GPU",
    "slow": "heavy case or test (the repository's conftest.py skips it unless --runslow)",
    "judge": "uses an LLM judge",
    "vllm": "needs the vllm engine",
}
# Runner kinds are markers of their own, apart from grid names: -m madara is the madara
# grid, -m kind_madara every MADARA treatment case (the smoke grid has some too).


KIND_MARKER = "kind_{}"


def _opt_name(name: str) -> str:
    return "bcas_" + name.replace("-", "_")


def _get(config: pytest.Config, name: str) -> Any:
    """Command line first, then the ini option, then the default."""
    for opt_name, kind, default, _ in OPTIONS:
        if opt_name != name:
            continue
        dest = _opt_name(name)
        value = config.getoption(dest, default=None)
        if value is None or value == []:
            value = config.getini(dest)
            if value in (None, "", []):
                value = default
        if value is None:
            return None
        try:
            if kind == "int":
                return int(value)
            if kind == "float":
                return float(value)
            if kind == "bool":
                return bool(value) if not isinstance(value, str) else value.lower() in ("1", "true", "yes")
        except ValueError:
            expected = {"int": "a whole number", "float": "a number"}.get(kind, kind)
            raise pytest.UsageError(f"--bcas-{name}: expected {expected}, got {value!r}") from None
        return value
    raise KeyError(name)


@dataclass(frozen=True)
class ModelSpec:
    """One evaluated model: its backend, its name for that backend and where it is served.

    ``name`` overrides the derived label (set when two models of a run would share one).
    """

    backend: str
    model: str | None
    base_url: str | None = None
    api_key_env: str | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.model is None:
            return str(backend_meta(self.backend, "label") or self.backend)
        stem = Path(self.model).name if os.sep in self.model or self.model.endswith(".gguf") else self.model
        stem = re.sub(r"\.gguf$", "", stem.split("/")[-1])
        stem = re.sub(r"[^A-Za-z0-9_.+-]+", "-", stem).lower()
        return str(backend_meta(self.backend, "label_prefix", "")) + stem


def parse_model_spec(value: str | None, default_backend: str, backends: Any) -> tuple[str, str | None]:
    """``BACKEND:MODEL``, a bare backend name (its default model) or a plain model of ``default_backend``.

    ``embedded:path.gguf``, ``openai:qwen3-8b``, ``mock:gold``, ``embedded`` -> (backend, model);
    ``path.gguf`` or ``Qwen/Qwen3-8B`` -> (default_backend, value).
    """
    if value is None:
        return default_backend, None
    text = value.strip()
    if text in backends:
        return text, None
    head, sep, rest = text.partition(":")
    if sep and head in backends:
        return head, (rest or None)
    return default_backend, text


def _model_specs(config: pytest.Config, backend: str, base_url: str | None) -> list[ModelSpec]:
    from bcas.harness.startup import check_backend_prefix, check_key_env, check_model

    key_env = _get(config, "api-key-env")
    check_key_env(key_env)
    specs: list[ModelSpec] = []
    for raw in _get(config, "model") or [None]:
        chosen, model = parse_model_spec(raw, backend, BACKENDS)
        check_backend_prefix("model", raw, chosen)  # nosuch:foo is an unknown backend, not a file name
        check_model("model", raw, chosen, model)
        served = bool(backend_meta(chosen, "needs_base_url"))
        if served and not base_url:
            raise pytest.UsageError(
                f"--bcas-model {raw}: the {chosen} backend needs --bcas-base-url (e.g. http://127.0.0.1:8000/v1)"
            )
        if served and not model:
            raise pytest.UsageError(f"--bcas-model {raw}: the {chosen} backend needs a model name ({chosen}:NAME)")
        specs.append(ModelSpec(chosen, model, base_url if served else None, key_env if served else None))
    if len(set(specs)) != len(specs):
        raise pytest.UsageError(f"--bcas-model: a model is given twice: {[s.model for s in specs]}")
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):  # e.g. one GGUF embedded and behind a server: say which is which
        specs = [ModelSpec(s.backend, s.model, s.base_url, s.api_key_env, f"{s.label}@{s.backend}") for s in specs]
        labels = [s.label for s in specs]
        if len(set(labels)) != len(labels):
            raise pytest.UsageError(f"--bcas-model: two models would share the label(s) {sorted(labels)}")
    return specs


@dataclass(frozen=True, repr=False)
class Case:
    """One grid case: a model x dataset x grid entry; ``repr`` is its id (a failing case's
    traceback names it in one short line, not the whole model spec and configuration)."""

    model: ModelSpec
    dataset: str
    grid: str
    entry: Any  # GridEntry

    def __repr__(self) -> str:
        return f"Case({self.id!r})"

    @property
    def dataset_label(self) -> str:
        from bcas.data import dataset_label

        return dataset_label(self.dataset)

    @property
    def id(self) -> str:
        return f"{self.model.label}-{self.dataset_label}-{self.entry.label}"


@dataclass
class Settings:
    models: list[ModelSpec]
    grids: list[str]
    datasets: list[str] | None
    limit: int | None
    seed: int
    concurrency: int
    judge: str
    judge_base_url: str | None
    judge_repeats: int
    prices: Path | None  # None: --bcas-prices none, nothing is priced
    baseline: str | None
    min_accuracy: float | None
    run_dir: Path
    allow_errors: bool
    cache: bool
    preflight: bool = True
    require_prices: bool = False
    epochs: int = 1
    corpus: str | None = None
    price_sheet: str | None = None  # the sheet inside ``prices`` (None: the file's default)
    shard: Any = None  # bcas.shard.Shard: this process runs only the items of one shard
    embedder: str | None = None  # --bcas-embedder: replaces the grids' embedder where a case uses one
    reranker: str | None = None  # --bcas-reranker: replaces the grids' reranker where a case uses one
    retriever: str | None = None  # a search engine's URL (bcas.retrieval.engine) for BM25 cases
    holm_scope: str | None = None  # --bcas-holm-scope: overrides every grid's Holm scope in the summaries
    gate_metric: str | None = None  # --bcas-gate-metric: the gate's metric instead of each grid's primary one
    calibration_n: int | None = None  # --bcas-calibration-n: replaces calibration_n where a case uses it
    judge_three_way: bool = False  # --bcas-judge-three-way: SimpleQA's three grades (bcas.grading.judge)
    extra: dict[str, Any] = field(default_factory=dict)


def judge_endpoint(settings: Any) -> tuple[str | None, str | None]:
    """(base URL, API key variable) of a served judge: where it is loaded from *and* fingerprinted.

    ``--bcas-judge-base-url`` when given, else the servers of the first evaluated model
    that is served (an embedded model listed first has none: the served one after it is
    used); the key variable is that of the evaluated model served there, if any.  ``(None,
    None)`` when neither exists: ``check_judge`` has then refused a judge that needs a URL.
    """
    base = settings.judge_base_url or next((m.base_url for m in settings.models if m.base_url), None)
    key_env = next((m.api_key_env for m in settings.models if m.base_url and m.base_url == base), None)
    return base, key_env


def _positive(value: int, name: str) -> int:
    if value < 1:
        raise pytest.UsageError(f"--bcas-{name}: expected an integer >= 1, got {value}")
    return value


def _optional_positive(value: int | None, name: str) -> int | None:
    return None if value is None else _positive(value, name)


def read_settings(config: pytest.Config) -> Settings:
    backend = _get(config, "backend")

    from bcas.harness import startup

    if backend not in BACKENDS:
        raise startup.unknown_backend("backend", str(backend))

    base_url = _base_urls(config)
    if backend_meta(backend, "needs_base_url") and not base_url:
        raise pytest.UsageError(f"--bcas-backend {backend} needs --bcas-base-url (e.g. http://127.0.0.1:8000/v1)")
    models = _model_specs(config, backend, base_url)
    grids = [g.strip() for g in str(_get(config, "grid")).split(",") if g.strip()]
    from bcas.grids import GRIDS

    for g in grids:
        if g not in GRIDS:
            raise pytest.UsageError(f"--bcas-grid: unknown grid {g!r}; available: {', '.join(sorted(GRIDS))}")
    # Every option is checked here, before any model loads or anything is written (bcas.harness.startup).
    limit = startup.parse_limit(_get(config, "limit"))
    seed = startup.check_seed(_get(config, "seed"))
    judge, judge_base_url = _get(config, "judge"), startup.check_url("judge-base-url", _get(config, "judge-base-url"))
    startup.check_judge(judge, [m.base_url for m in models], judge_base_url)
    if _get(config, "require-judge"):
        startup.check_judge_required(judge, grids)
    concurrency = _get(config, "concurrency")
    prices, price_sheet = startup.resolve_prices(_get(config, "prices"))
    baseline = _get(config, "baseline")
    startup.check_baseline(baseline)
    raw_ds = _get(config, "datasets")
    from bcas.data import unique_specs

    # Files named alike get NAME= from their folders, so each keeps its own rows and marker.
    datasets = unique_specs([d.strip() for d in raw_ds.split(",") if d.strip()]) if raw_ds else None
    corpus = _get(config, "corpus")
    if datasets or corpus:
        from bcas.corpus import InputError, check_inputs

        # Validate every line now, so a malformed file stops the session before any
        # case runs (the parsed items are cached for the cases that load it later).
        try:
            check_inputs(datasets, corpus)
        except InputError as exc:
            raise pytest.UsageError(str(exc)) from None
    rootdir = Path(str(config.rootpath))
    report = _get(config, "report")
    run_dir = Path(report) if report else rootdir / "reports" / "+".join(grids)
    shard = _shard(config)
    if shard is not None and shard.source is not None and run_dir.name != shard.folder:
        # --bcas-shard auto: every task of an array is given one run folder; each writes its own part.
        run_dir = run_dir / shard.folder
    startup.check_report_dir(run_dir)
    settings = Settings(
        models=models,
        grids=grids,
        datasets=datasets,
        limit=limit,
        seed=seed,
        epochs=_positive(_get(config, "epochs"), "epochs"),
        calibration_n=_optional_positive(_get(config, "calibration-n"), "calibration-n"),
        concurrency=_positive(concurrency, "concurrency")
        if concurrency is not None
        else min(int(backend_meta(m.backend, "concurrency", 8)) for m in models),
        judge=judge,
        judge_base_url=judge_base_url,
        judge_repeats=_positive(_get(config, "judge-repeats"), "judge-repeats"),
        judge_three_way=bool(_get(config, "judge-three-way")),
        prices=prices,
        price_sheet=price_sheet,
        baseline=baseline,
        min_accuracy=startup.check_fraction("min-accuracy", _get(config, "min-accuracy")),
        run_dir=run_dir,
        allow_errors=bool(_get(config, "allow-errors")),
        cache=not bool(_get(config, "no-cache")),
        preflight=not bool(_get(config, "no-preflight")),
        require_prices=bool(_get(config, "require-prices")),
        corpus=corpus,
        shard=shard,
        embedder=_retrieval_model(config, "embedder"),
        reranker=_retrieval_model(config, "reranker"),
        retriever=_engine_url(config),
        holm_scope=startup.check_holm_scope(_get(config, "holm-scope")),
        gate_metric=_gate_metric(config),
    )
    _check_prices(settings)
    return settings


def _base_urls(config: pytest.Config) -> str | None:
    """Every ``--bcas-base-url`` (repeated or comma lists) as one comma list: the model's servers."""
    given = _get(config, "base-url")
    if not given:
        return None
    from bcas.llm.multi_endpoint import split_base_urls

    urls = split_base_urls(given)
    bad = [url for url in urls if not url.startswith(("http://", "https://"))]
    if bad:
        raise pytest.UsageError(
            f"--bcas-base-url: expected an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1), got {bad[0]!r}"
        )
    return ",".join(urls) or None


def _engine_url(config: pytest.Config) -> str | None:
    url = _get(config, "retriever")
    if url and not str(url).startswith(("http://", "https://")):
        raise pytest.UsageError(
            f"--bcas-retriever: expected the search engine's http:// or https:// URL "
            f"(e.g. http://127.0.0.1:19530), got {url!r}"
        )
    return url or None


def _shard(config: pytest.Config) -> Any:
    from bcas.shard import ShardError, parse_shard

    try:
        return parse_shard(_get(config, "shard"))
    except ShardError as exc:
        raise pytest.UsageError(f"--bcas-shard: {exc}") from None


def _gate_metric(config: pytest.Config) -> str | None:
    """``--bcas-gate-metric``: a registered pass/fail metric (a usage error names the registered ones)."""
    from bcas.grading.outcomes import METRICS

    name = _get(config, "gate-metric")
    if name in (None, ""):
        return None
    if str(name) not in METRICS:
        raise pytest.UsageError(
            f"--bcas-gate-metric: unknown metric {name!r}; registered: {', '.join(METRICS.names())}"
        )
    return str(name)


def _retrieval_model(config: pytest.Config, role: str) -> str | None:
    """``--bcas-embedder`` / ``--bcas-reranker``, checked (names and local folders) before anything loads."""
    name = _get(config, role)
    if not name:
        return None
    from bcas.retrieval.retriever import check_model_choice

    try:
        return check_model_choice(role, str(name).strip())
    except ValueError as exc:
        raise pytest.UsageError(f"--bcas-{role}: {exc}") from None


def expand_cases(settings: Settings) -> list[Case]:
    from bcas.grids import get_grid, with_calibration_n, with_retrieval_models
    from bcas.harness.pipelines import run_kind

    embedder, reranker = getattr(settings, "embedder", None), getattr(settings, "reranker", None)
    calibration_n = getattr(settings, "calibration_n", None)
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


def _check_prices(settings: Settings) -> None:
    """``--bcas-require-prices``: every evaluated model must have a price in the sheet."""
    if not settings.require_prices:
        return
    if settings.prices is None:
        raise pytest.UsageError("--bcas-require-prices: pricing is off (--bcas-prices none); name a price sheet")
    from bcas.records import PriceError, load_price_sheet

    try:
        sheet = load_price_sheet(settings.prices, settings.price_sheet)
    except PriceError as exc:
        raise pytest.UsageError(f"--bcas-prices: {exc}") from None
    for spec in settings.models:
        try:
            sheet.price_for(spec.label)
        except PriceError as exc:
            raise pytest.UsageError(f"--bcas-require-prices: {exc}") from None
