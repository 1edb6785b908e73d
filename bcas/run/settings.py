"""The run's options and what they resolve to: ``Settings``, model specs, grid cases.

One typed settings object, built by :func:`build_settings` from raw option values
(:data:`bcas.run.options.OPTIONS`): the pytest front door passes command line, ini and
defaults (:mod:`bcas.harness.settings`), the Python API its keyword arguments
(:func:`bcas.evaluate`).  Every value is checked here, once, before any model loads or
anything is written; a bad one is an :class:`~bcas.run.options.OptionError`.
:mod:`bcas.run.plan` turns the chosen grids, models and datasets into cases.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bcas.grids import GridEntry
from bcas.identity import name_stem
from bcas.llm import BACKENDS, backend_meta
from bcas.registry import did_you_mean
from bcas.run import checks
from bcas.run.checks import usage
from bcas.run.options import DEFAULTS, OptionError, RawValue, coerce
from bcas.shard import Shard

DEFAULT_LIMIT = 20


class Values:
    """Raw option values by name, coerced to their kind on reading (a name not given: its default)."""

    def __init__(self, values: Mapping[str, RawValue]) -> None:
        self.values = values

    def raw(self, name: str) -> RawValue:
        value = self.values.get(name)
        if value is None or value == []:
            value = DEFAULTS[name]
        return coerce(name, value)

    def text(self, name: str) -> str | None:
        value = self.raw(name)
        if isinstance(value, list):
            return ",".join(value) if value else None
        return None if value is None else str(value)

    def texts(self, name: str) -> list[str]:
        value = self.raw(name)
        if value is None:
            return []
        return [str(v) for v in value] if isinstance(value, list) else [str(value)]

    def integer(self, name: str) -> int | None:
        value = self.raw(name)
        return None if value is None else int(value) if isinstance(value, int | float) else int(str(value))

    def number(self, name: str) -> float | None:
        value = self.raw(name)
        return None if value is None else float(value) if isinstance(value, int | float) else float(str(value))

    def flag(self, name: str) -> bool:
        return bool(self.raw(name))


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
        return str(backend_meta(self.backend, "label_prefix", "")) + name_stem(self.model)


def parse_model_spec(value: str | None, default_backend: str, backends: Collection[str]) -> tuple[str, str | None]:
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


def _model_specs(values: Values, backend: str, base_url: str | None) -> list[ModelSpec]:
    from bcas.keys import key_name_problem
    from bcas.run.checks import check_backend_prefix, check_key_env, check_model

    key_env = values.text("api-key-env")
    problem = key_name_problem(key_env)
    if problem is not None:  # a key pasted where its variable's name goes: refused, never echoed
        raise OptionError(f"the value {problem}", "api-key-env")
    check_key_env(key_env)
    specs: list[ModelSpec] = []
    raws: list[str | None] = [*values.texts("model")] or [None]
    for raw in raws:
        chosen, model = parse_model_spec(raw, backend, BACKENDS)
        check_backend_prefix("model", raw, chosen)  # nosuch:foo is an unknown backend, not a file name
        check_model("model", raw, chosen, model)
        served = bool(backend_meta(chosen, "needs_base_url"))
        if served and not base_url:
            raise OptionError(
                f"--bcas-model {raw}: the {chosen} backend needs --bcas-base-url (e.g. http://127.0.0.1:8000/v1)"
            )
        if served and not model:
            raise OptionError(f"--bcas-model {raw}: the {chosen} backend needs a model name ({chosen}:NAME)")
        specs.append(ModelSpec(chosen, model, base_url if served else None, key_env if served else None))
    if len(set(specs)) != len(specs):
        raise usage("model", f"a model is given twice: {[s.model for s in specs]}")
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):  # e.g. one GGUF embedded and behind a server: say which is which
        specs = [ModelSpec(s.backend, s.model, s.base_url, s.api_key_env, f"{s.label}@{s.backend}") for s in specs]
        labels = [s.label for s in specs]
        if len(set(labels)) != len(labels):
            raise usage("model", f"two models would share the label(s) {sorted(labels)}")
    return specs


@dataclass(frozen=True, repr=False)
class Case:
    """One grid case: a model x dataset x grid entry; ``repr`` is its id (a failing case's
    traceback names it in one short line, not the whole model spec and configuration)."""

    model: ModelSpec
    dataset: str
    grid: str
    entry: GridEntry
    # What the model's server serves when it is not what was asked for (bcas.run.served): shown in the id.
    served: str | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return f"Case({self.id!r})"

    @property
    def dataset_label(self) -> str:
        from bcas.data import dataset_label

        return dataset_label(self.dataset)

    @property
    def id(self) -> str:
        model = f"{self.model.label}~{name_stem(self.served)}" if self.served else self.model.label
        return f"{model}-{self.dataset_label}-{self.entry.label}"


@dataclass(frozen=True)
class Settings:
    """Every option of a run, checked and typed (:func:`build_settings`)."""

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
    shard: Shard | None = None  # this process runs only the items of one shard
    embedder: str | None = None  # --bcas-embedder: replaces the grids' embedder where a case uses one
    reranker: str | None = None  # --bcas-reranker: replaces the grids' reranker where a case uses one
    rerank_candidates: int | None = None  # --bcas-rerank-candidates: the pool a case's reranker re-scores
    retriever: str | None = None  # a search engine's URL (bcas.retrieval.engine) for BM25 cases
    holm_scope: str | None = None  # --bcas-holm-scope: overrides every grid's Holm scope in the summaries
    gate_metric: str | None = None  # --bcas-gate-metric: the gate's metric instead of each grid's primary one
    calibration_n: int | None = None  # --bcas-calibration-n: replaces calibration_n where a case uses it
    max_cost: float | None = None  # --bcas-max-cost: the session's spend cap in US dollars
    judge_three_way: bool = False  # --bcas-judge-three-way: SimpleQA's three grades (bcas.grading.judge)


def judge_endpoint(settings: Settings) -> tuple[str | None, str | None]:
    """(base URL, API key variable) of a served judge: where it is loaded from *and* fingerprinted.

    ``--bcas-judge-base-url`` when given, else the servers of the first evaluated model
    that is served (an embedded model listed first has none: the served one after it is
    used); the key variable is that of the evaluated model served there, if any.  ``(None,
    None)`` when neither exists: ``check_judge`` has then refused a judge that needs a URL.
    """
    base = settings.judge_base_url or next((m.base_url for m in settings.models if m.base_url), None)
    key_env = next((m.api_key_env for m in settings.models if m.base_url and m.base_url == base), None)
    return base, key_env


def _positive(value: int | None, name: str) -> int:
    if value is None or value < 1:
        raise usage(name, f"expected an integer >= 1, got {value}")
    return value


def _optional_positive(value: int | None, name: str) -> int | None:
    return None if value is None else _positive(value, name)


def build_settings(given: Mapping[str, RawValue], root: Path) -> Settings:
    """The run's settings from raw option values (name -> value; a missing one: its default).

    ``root``: the folder a default run folder goes under (``ROOT/reports/<grids>``).
    Raises :class:`~bcas.run.options.OptionError` on the first bad value.
    """
    values = Values(given)
    backend = str(values.text("backend"))
    if backend not in BACKENDS:
        raise checks.unknown_backend("backend", backend)

    base_url = _base_urls(values)
    if backend_meta(backend, "needs_base_url") and not base_url:
        raise usage("backend", f"{backend} needs --bcas-base-url (e.g. http://127.0.0.1:8000/v1)")
    models = _model_specs(values, backend, base_url)
    grids = [g.strip() for g in str(values.text("grid")).split(",") if g.strip()]
    from bcas.grids import GRIDS

    for g in grids:
        if g not in GRIDS:
            raise usage("grid", f"unknown grid {g!r}{did_you_mean(g, GRIDS)}; available: {', '.join(sorted(GRIDS))}")
    # Every option is checked here, before any model loads or anything is written (bcas.run.checks).
    limit = checks.parse_limit(values.raw("limit"))
    seed = checks.check_seed(values.integer("seed") or 0)
    judge = str(values.text("judge"))
    judge_base_url = checks.check_url("judge-base-url", values.text("judge-base-url"))
    checks.check_judge(judge, [m.base_url for m in models], judge_base_url)
    if values.flag("require-judge"):
        checks.check_judge_required(judge, grids)
    concurrency = values.integer("concurrency")
    prices, price_sheet = checks.resolve_prices(values.text("prices"))
    baseline = values.text("baseline")  # read by the gate (check_baseline, below)
    raw_ds = values.text("datasets")
    from bcas.data import unique_specs

    # Files named alike get NAME= from their folders, so each keeps its own rows and marker.
    datasets = unique_specs([d.strip() for d in raw_ds.split(",") if d.strip()]) if raw_ds else None
    corpus = values.text("corpus")
    if datasets or corpus:
        from bcas.corpus import InputError, check_inputs

        # Validate every line now, so a malformed file stops the session before any
        # case runs (the parsed items are cached for the cases that load it later).
        try:
            check_inputs(datasets, corpus)
        except InputError as exc:
            raise OptionError(str(exc)) from None
    report = values.text("report")
    run_dir = Path(report) if report else Path(root) / "reports" / "+".join(grids)
    shard = _shard(values)
    if shard is not None and shard.source is not None and run_dir.name != shard.folder:
        # --bcas-shard auto: every task of an array is given one run folder; each writes its own part.
        run_dir = run_dir / shard.folder
    checks.check_report_dir(run_dir)
    settings = Settings(
        models=models,
        grids=grids,
        datasets=datasets,
        limit=limit,
        seed=seed,
        epochs=_positive(values.integer("epochs"), "epochs"),
        calibration_n=_optional_positive(values.integer("calibration-n"), "calibration-n"),
        concurrency=_positive(concurrency, "concurrency")
        if concurrency is not None
        else min(int(backend_meta(m.backend, "concurrency", 8)) for m in models),
        judge=judge,
        judge_base_url=judge_base_url,
        judge_repeats=_positive(values.integer("judge-repeats"), "judge-repeats"),
        judge_three_way=values.flag("judge-three-way"),
        prices=prices,
        price_sheet=price_sheet,
        baseline=baseline,
        min_accuracy=checks.check_fraction("min-accuracy", values.number("min-accuracy")),
        run_dir=run_dir,
        allow_errors=values.flag("allow-errors"),
        cache=not values.flag("no-cache"),
        preflight=not values.flag("no-preflight"),
        require_prices=values.flag("require-prices"),
        corpus=corpus,
        shard=shard,
        embedder=_retrieval_model(values, "embedder"),
        reranker=_retrieval_model(values, "reranker"),
        rerank_candidates=_optional_positive(values.integer("rerank-candidates"), "rerank-candidates"),
        retriever=_engine_url(values),
        holm_scope=checks.check_holm_scope(values.text("holm-scope")),
        gate_metric=_gate_metric(values),
        max_cost=checks.check_max_cost(values.number("max-cost"), prices),
    )
    _check_prices(settings)
    return settings


def _base_urls(values: Values) -> str | None:
    """Every ``--bcas-base-url`` (repeated or comma lists) as one comma list: the model's servers."""
    given = values.texts("base-url")
    if not given:
        return None
    from bcas.llm.multi_endpoint import split_base_urls

    urls = split_base_urls(given)
    bad = [url for url in urls if not url.startswith(("http://", "https://"))]
    if bad:
        raise usage("base-url", f"expected an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1), got {bad[0]!r}")
    return ",".join(urls) or None


def _engine_url(values: Values) -> str | None:
    url = values.text("retriever")
    if url and not str(url).startswith(("http://", "https://")):
        raise usage(
            "retriever",
            f"expected the search engine's http:// or https:// URL (e.g. http://127.0.0.1:19530), got {url!r}",
        )
    return url or None


def _shard(values: Values) -> Shard | None:
    from bcas.shard import ShardError, parse_shard

    try:
        return parse_shard(values.text("shard"))
    except ShardError as exc:
        raise usage("shard", str(exc)) from None


def _gate_metric(values: Values) -> str | None:
    """``--bcas-gate-metric``: a registered pass/fail metric (a usage error names the registered ones)."""
    from bcas.grading.outcomes import METRICS

    name = values.text("gate-metric")
    if name in (None, ""):
        return None
    if str(name) not in METRICS:
        raise usage("gate-metric", f"unknown metric {name!r}; registered: {', '.join(METRICS.names())}")
    return str(name)


def _retrieval_model(values: Values, role: str) -> str | None:
    """``--bcas-embedder`` / ``--bcas-reranker``, checked (names and local folders) before anything loads."""
    name = values.text(role)
    if not name:
        return None
    from bcas.retrieval.retriever import check_model_choice

    try:
        return check_model_choice(role, str(name).strip())
    except ValueError as exc:
        raise usage(role, str(exc)) from None


def _check_prices(settings: Settings) -> None:
    """``--bcas-require-prices``: every evaluated model must have a price in the sheet."""
    if not settings.require_prices:
        return
    if settings.prices is None:
        raise usage("require-prices", "pricing is off (--bcas-prices none); name a price sheet")
    from bcas.records import PriceError, load_price_sheet

    try:
        sheet = load_price_sheet(settings.prices, settings.price_sheet)
    except PriceError as exc:
        raise usage("prices", str(exc)) from None
    for spec in settings.models:
        try:
            sheet.price_for(spec.label)
        except PriceError as exc:
            raise usage("require-prices", str(exc)) from None


def check_baseline(value: str | None) -> None:
    """``--bcas-baseline`` / ``baseline=`` is a readable run folder, records JSONL or baseline
    JSON (read, not written); a bad one is an ``OptionError`` naming the option."""
    if not value:
        return
    from bcas.gating.baseline import check_baseline as check_file
    from bcas.gating.errors import BaselineError

    try:
        check_file(value)
    except BaselineError as exc:
        raise OptionError(str(exc), "baseline") from None
