"""The bcas pytest plugin: options, grid parametrisation, markers, report and gate.

Registered through the ``pytest11`` entry point and by the top-level ``conftest.py``.
A test function that takes the ``bcas_case`` fixture is parametrised over the chosen
grids: one case per model x dataset x configuration, with a readable id such as
``smollm2-135m-hotpotqa-hs+r/s3/t16k/plan`` and markers for its dataset, grid, kind
and requirements, so ``-m "hotpotqa and search_scaling"``, ``-k s3``, ``--lf`` and
``-n`` work.  Importing this module is cheap: models, indexes and numpy-heavy code
load only when a case runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

OPTIONS: list[tuple[str, str, Any, str]] = [
    # (name, kind, default, help)
    ("model", "append", None, "model to evaluate (repeatable): BACKEND:MODEL (embedded:path.gguf, openai:qwen3-8b, "
                              "vllm:Qwen/Qwen3-8B, mock:gold|verbose|random), a bare backend name for its default "
                              "model, or a plain GGUF path / served name / HF id of --bcas-backend; default: the "
                              "backend's default (embedded: SmolLM2-135M-Instruct)"),
    ("backend", "str", "embedded", "model backend: embedded | openai | vllm"),
    ("base-url", "append", None, "base URL of an OpenAI-compatible server (openai backend); repeat it or give a "
                                 "comma list for several servers of one model (requests go to the least busy, a "
                                 "failing one is left for a while)"),
    ("api-key-env", "str", None, "name of the environment variable holding the server's API key"),
    ("datasets", "str", None, "comma-separated dataset names, file paths (layout detected) or FORMAT:PATH, e.g. "
                              "flashrag:nq/dev.jsonl, hotpotqa:hotpot_dev_distractor_v1.json (python -m bcas.data "
                              "--formats lists them; default: each grid's datasets)"),
    ("corpus", "str", None, "passage corpus searched by every item instead of its own documents: a FlashRAG corpus "
                            "JSONL, BEIR corpus.jsonl, our documents JSONL or FEVER wiki-pages/ (PATH or FORMAT:PATH)"),
    ("embedder", "str", None, "embedder of the dense and hybrid retrieval cases: minilm (CPU default), bge-m3 "
                              "(BCAS §3.5; gpu extra), bge-m3:PATH or sentence-transformers:PATH (a local folder)"),
    ("reranker", "str", None, "reranker of the hybrid + re-ranking cases: llm (the model under test, CPU default), "
                              "bge-reranker-v2-m3 (BCAS §3.5; gpu extra), bge-reranker-v2-m3:PATH or "
                              "cross-encoder:PATH (a sentence-transformers CrossEncoder saved in a local folder)"),
    ("shard", "str", None, "run only shard K of N (K/N, e.g. 1/4): the items whose id hashes to K, so N machines or "
                           "CI jobs each run a share; join the shard folders with python -m bcas.results merge"),
    ("retriever", "str", None, "search engine for the BM25 cases: a Milvus server's URL (http://HOST:19530; a "
                               "cluster, or python -m bcas.retrieval.milvus_lite), shared by every worker; its token, "
                               "if any, in $BCAS_RETRIEVER_TOKEN"),
    ("grid", "str", "smoke", "comma-separated grids: smoke, search_scaling, context_scaling, ablation, madara, rsc"),
    ("limit", "str", None, "items per dataset: a whole number >= 1 (a seeded subset, the same on every machine) or "
                           "all (every item); default: the grid's limit (smoke: 5), else 20"),
    ("seed", "int", 0, "seed of the item subset and of sampling"),
    ("epochs", "int", 1, "run each item this many times with distinct recorded sampling seeds (for sampled "
                         "decoding); accuracy is the mean of per-item means, intervals clustered by item"),
    ("concurrency", "int", None, "items of one case in flight at once (default: 1 for the embedded backend, whose "
                                 "single in-process model then reuses each conversation's cached prefix; 8 otherwise)"),
    ("judge", "str", "none", "LLM judge: none | same | BACKEND[:MODEL] (e.g. openai:gpt-4o-mini)"),
    ("judge-base-url", "str", None, "base URL of the judge's OpenAI-compatible server"),
    ("judge-repeats", "int", 1, "ask the judge this many times per item and record agreement"),
    ("prices", "str", None, "price sheet: a TOML path, PATH:SHEET, a sheet name of the sheet installed with bcas "
                            "(list, batch), or none (no pricing: cost_usd null); default: the installed sheet "
                            "bcas/resources/prices.toml, its default sheet"),
    ("baseline", "str", None, "baseline for the regression gate: a run directory, records.jsonl or baseline JSON"),
    ("min-accuracy", "float", None, "fail a case whose EM accuracy is below this floor"),
    ("alpha", "float", 0.05, "significance level of the regression gate"),
    ("gate-family", "str", "session", "cases one Holm correction of the gate covers: session (default: a CI run is "
                                      "one decision, its false-alarm rate stays at alpha however many cases run) | "
                                      "grid | case"),
    ("max-drop", "float", 0.0, "regression gate tolerance in accuracy points: fail a case only when its drop is "
                               "significantly larger (Tango score test)"),
    ("gate-strict", "bool", False, "usage error before anything runs when a gated case cannot fail at --bcas-alpha "
                                   "(too few paired items for its Holm threshold)"),
    ("report", "str", None, "run directory for records and reports (default reports/<grids>)"),
    ("allow-errors", "bool", False, "do not fail a case whose items end with stop_reason=error"),
    ("no-cache", "bool", False, "disable the generation cache"),
    ("allow-mismatch", "bool", False, "let the regression gate compare answers whose model fingerprint or prompt "
                                      "hash differ from the baseline's (the override is written into the report)"),
    ("no-preflight", "bool", False, "skip the session-start check of every server endpoint (models and judge)"),
    ("require-prices", "bool", False, "stop at session start when the price sheet has no price for a model "
                                      "(default: such a model's records get cost_usd null and a warning)"),
    ("max-cost", "float", None, "stop starting new items once the session's priced spend (US dollars, under the "
                                "price sheet) would pass this cap; the stop is in the report, rerunning resumes"),
    ("estimate", "bool", False, "print the expected calls, tokens and cost of the selected cases (price sheet and "
                                "generation cache) without running them"),
]

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


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bcas", "bcas evaluation suite (each also settable as an ini option bcas_*)")
    for name, kind, _default, help_text in OPTIONS:
        flag = f"--bcas-{name}"
        dest = _opt_name(name)
        if kind == "append":
            group.addoption(flag, action="append", dest=dest, default=None, help=help_text)
            parser.addini(dest, help_text, type="args", default=[])
        elif kind == "bool":
            group.addoption(flag, action="store_true", dest=dest, default=None, help=help_text)
            parser.addini(dest, help_text, type="bool", default=False)
        else:
            group.addoption(flag, action="store", dest=dest, default=None, help=help_text)
            parser.addini(dest, help_text, default=None)


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
            return {"embedded": "smollm2-135m"}.get(self.backend, self.backend)
        stem = Path(self.model).name if os.sep in self.model or self.model.endswith(".gguf") else self.model
        stem = re.sub(r"\.gguf$", "", stem.split("/")[-1])
        stem = re.sub(r"[^A-Za-z0-9_.+-]+", "-", stem).lower()
        return f"mock-{stem}" if self.backend == "mock" else stem


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
    from bcas.llm import BACKENDS
    from bcas.report.startup import check_model

    key_env = _get(config, "api-key-env")
    specs: list[ModelSpec] = []
    for raw in _get(config, "model") or [None]:
        chosen, model = parse_model_spec(raw, backend, BACKENDS)
        check_model("model", raw, chosen, model)
        if chosen == "openai" and not base_url:
            raise pytest.UsageError(
                f"--bcas-model {raw}: the openai backend needs --bcas-base-url (e.g. http://127.0.0.1:8000/v1)"
            )
        if chosen == "openai" and not model:
            raise pytest.UsageError(f"--bcas-model {raw}: the openai backend needs a model name (openai:NAME)")
        served = chosen == "openai"
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


@dataclass(frozen=True)
class Case:
    model: ModelSpec
    dataset: str
    grid: str
    entry: Any  # GridEntry

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
    extra: dict[str, Any] = field(default_factory=dict)


def _positive(value: int, name: str) -> int:
    if value < 1:
        raise pytest.UsageError(f"--bcas-{name}: expected an integer >= 1, got {value}")
    return value


def read_settings(config: pytest.Config) -> Settings:
    backend = _get(config, "backend")
    from bcas.llm import BACKENDS

    if backend not in BACKENDS:
        raise pytest.UsageError(f"--bcas-backend must be one of {', '.join(sorted(BACKENDS))}, got {backend!r}")
    from bcas.report import startup

    base_url = _base_urls(config)
    if backend == "openai" and not base_url:
        raise pytest.UsageError("--bcas-backend openai needs --bcas-base-url (e.g. http://127.0.0.1:8000/v1)")
    models = _model_specs(config, backend, base_url)
    grids = [g.strip() for g in str(_get(config, "grid")).split(",") if g.strip()]
    from bcas.report.grids import GRIDS

    for g in grids:
        if g not in GRIDS:
            raise pytest.UsageError(f"--bcas-grid: unknown grid {g!r}; available: {', '.join(sorted(GRIDS))}")
    # Every option is checked here, before any model loads or anything is written (bcas.report.startup).
    limit = startup.parse_limit(_get(config, "limit"))
    seed = startup.check_seed(_get(config, "seed"))
    judge, judge_base_url = _get(config, "judge"), startup.check_url("judge-base-url", _get(config, "judge-base-url"))
    startup.check_judge(judge, [m.base_url for m in models], judge_base_url)
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
    startup.check_report_dir(run_dir)
    settings = Settings(
        models=models,
        grids=grids,
        datasets=datasets,
        limit=limit,
        seed=seed,
        epochs=_positive(_get(config, "epochs"), "epochs"),
        concurrency=_positive(concurrency, "concurrency") if concurrency is not None
        else (1 if any(m.backend == "embedded" for m in models) else 8),
        judge=judge,
        judge_base_url=judge_base_url,
        judge_repeats=_positive(_get(config, "judge-repeats"), "judge-repeats"),
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
        shard=_shard(config),
        embedder=_retrieval_model(config, "embedder"),
        reranker=_retrieval_model(config, "reranker"),
        retriever=_engine_url(config),
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
        raise pytest.UsageError(f"--bcas-base-url: expected an http:// or https:// URL (e.g. "
                                f"http://127.0.0.1:8000/v1), got {bad[0]!r}")
    return ",".join(urls) or None


def _engine_url(config: pytest.Config) -> str | None:
    url = _get(config, "retriever")
    if url and not str(url).startswith(("http://", "https://")):
        raise pytest.UsageError(f"--bcas-retriever: expected the search engine's http:// or https:// URL "
                                f"(e.g. http://127.0.0.1:19530), got {url!r}")
    return url or None


def _shard(config: pytest.Config) -> Any:
    from bcas.shard import ShardError, parse_shard

    try:
        return parse_shard(_get(config, "shard"))
    except ShardError as exc:
        raise pytest.UsageError(f"--bcas-shard: {exc}") from None


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
    from bcas.report.grids import get_grid, with_retrieval_models

    embedder, reranker = getattr(settings, "embedder", None), getattr(settings, "reranker", None)
    cases = []
    for grid_name in settings.grids:
        grid = get_grid(grid_name)
        chosen = tuple(settings.datasets) if settings.datasets else None
        for model in settings.models:
            for dataset, entry in grid.cases(chosen):
                # The chosen retrieval models are part of the configuration (and its id).
                cases.append(Case(model, dataset, grid_name, with_retrieval_models(entry, embedder, reranker)))
    return cases


def _xdist_workers(config: pytest.Config) -> int:
    n = getattr(config.option, "numprocesses", None)
    if n in (None, 0):
        return 0
    if n == "auto" or n == "logical":
        return os.cpu_count() or 1
    return int(n)


def _add_marker(config: pytest.Config, name: str, text: str) -> None:
    """Register a marker once: a name already registered (pyproject.toml, a conftest) keeps its line."""
    known = {str(line).split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    if name not in known:
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_configure(config: pytest.Config) -> None:
    for marker, text in REQUIREMENT_MARKERS.items():
        _add_marker(config, marker, text)
    from bcas.data import DATASETS
    from bcas.report.grids import GRIDS, KINDS

    for name in DATASETS:
        _add_marker(config, name, f"cases on the {name} dataset")
    for name in GRIDS:
        _add_marker(config, name, f"cases of the {name} grid")
    for kind in KINDS:
        _add_marker(config, KIND_MARKER.format(kind), f"cases run by the {kind} runner (in any grid)")
    _add_marker(config, "min_accuracy(value)", "absolute EM accuracy floor for the regression gate")
    if getattr(config.option, "help", False):
        return  # --help lists the options; it checks none of them and needs no settings
    if hasattr(config, "workerinput"):
        config._bcas_token = config.workerinput.get("bcas_token", "w")  # type: ignore[attr-defined]
    else:
        import uuid

        config._bcas_token = uuid.uuid4().hex[:10]  # type: ignore[attr-defined]
    config._bcas_settings = read_settings(config)  # type: ignore[attr-defined]  # bad options fail here, early
    for case in expand_cases(config._bcas_settings):  # a dataset file's marker is its name (NAME= or its stem)
        if case.dataset not in DATASETS:
            _add_marker(config, case.dataset_label, f"cases on the dataset {case.dataset}")
    _gate_options(config)
    from bcas.report import cost, progress

    cost.configure(config, config._bcas_settings, _get(config, "max-cost"))  # --bcas-max-cost, checked
    progress.register(config)  # live progress lines in pytest's terminal
    if _get(config, "estimate"):
        from bcas.report import estimate

        estimate.register(config)  # --bcas-estimate: prints the estimate instead of running the cases
    if any(m.backend == "vllm" for m in config._bcas_settings.models) and _xdist_workers(config) > 1:
        raise pytest.UsageError(
            "--bcas-backend vllm runs one in-process engine per xdist worker on the same GPU; with "
            f"-n {_xdist_workers(config)} they would compete for its memory. Run without -n, or start one "
            "`vllm serve` and use --bcas-backend openai --bcas-base-url http://127.0.0.1:8000/v1 with -n."
        )
    if not hasattr(config, "workerinput") and not _get(config, "estimate"):  # run.json: the controller writes it
        from bcas.report.manifest import ManifestPlugin

        config.pluginmanager.register(ManifestPlugin(config, OPTIONS, _get, _opt_name, expand_cases), "bcas-manifest")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "bcas_case" not in metafunc.fixturenames:
        return
    settings = metafunc.config._bcas_settings
    params = []
    for case in expand_cases(settings):
        marks = [getattr(pytest.mark, case.grid), getattr(pytest.mark, KIND_MARKER.format(case.entry.kind)),
                 getattr(pytest.mark, case.dataset_label)]
        for req in case.entry.requires:
            marks.append(getattr(pytest.mark, req))
        if case.model.backend == "vllm":
            marks.append(pytest.mark.vllm)
        if settings.judge != "none":
            marks.append(pytest.mark.judge)
        params.append(pytest.param(case, id=case.id, marks=marks))
    metafunc.parametrize("bcas_case", params)


def _session(config: pytest.Config) -> Any:
    sess = getattr(config, "_bcas_session", None)
    if sess is None:
        from bcas.report.runner import BcasSession

        worker = getattr(config, "workerinput", {}).get("workerid")
        sess = BcasSession(config._bcas_settings, worker=worker, config=config)
        config._bcas_session = sess  # type: ignore[attr-defined]
    return sess


@pytest.fixture(scope="session")
def bcas_session(request: pytest.FixtureRequest) -> Any:
    """The session's shared runtime: datasets, indexes, models, results store."""
    sess = _session(request.config)
    yield sess
    sess.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gated = 0
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "bcas_case" in callspec.params:
            gated += 1
    config._bcas_n_cases = gated  # type: ignore[attr-defined]


def _gate_options(config: pytest.Config) -> None:
    from bcas.report.gate_power import GATE_OPTIONS, GateOptions

    try:
        config.stash[GATE_OPTIONS] = GateOptions.parse(
            _get(config, "alpha"), _get(config, "gate-family"), _get(config, "max-drop"), _get(config, "gate-strict")
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_itemcollected(item: pytest.Item) -> None:
    if "bcas_case" in getattr(getattr(item, "callspec", None), "params", {}):
        item.config._bcas_any_case = True  # type: ignore[attr-defined]


def _warn_without_cases(config: pytest.Config) -> None:
    """``--bcas-grid`` on the command line of a session that collected no grid case (``pytest tests``)."""
    grid = config.getoption("bcas_grid", default=None)
    if grid is None or getattr(config, "_bcas_any_case", False) or _xdist_workers(config) or hasattr(
            config, "workerinput"):
        return
    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is not None:
        tr.write_line(
            f"[bcas] warning: --bcas-grid {grid} is ignored: no collected test runs grid cases. The cases live "
            f"in benchmarks/ (python3 -m pytest benchmarks --bcas-grid {grid}, or a folder of your own with a test "
            "taking bcas_case); pytest without a path runs testpaths, the unit tests.", yellow=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The regression gate's power, once the cases and their Holm families are known (before any runs)."""
    config = session.config
    _warn_without_cases(config)
    settings = getattr(config, "_bcas_settings", None)
    if settings is None or not settings.baseline or _get(config, "estimate"):
        return
    cases = [item.callspec.params["bcas_case"] for item in session.items
             if "bcas_case" in getattr(getattr(item, "callspec", None), "params", {})]
    if not cases:
        return
    from bcas.report.gate_power import collected_plan
    from bcas.report.grids import get_grid

    limits = {c.id: settings.limit if settings.limit is not None else get_grid(c.grid).limit or DEFAULT_LIMIT
              for c in cases}
    from bcas.identity import prompt_hash
    from bcas.llm.fingerprint import model_fingerprint

    prints: dict[Any, str] = {}

    def identity(case: Case) -> tuple[str, str]:
        spec = case.model
        if spec not in prints:
            prints[spec] = model_fingerprint(spec.backend, spec.model, base_url=spec.base_url,
                                             api_key_env=spec.api_key_env, verify=settings.preflight)
        return prints[spec], prompt_hash(case.entry.kind)

    collected_plan(config, cases, limits, settings.baseline, settings.seed, settings.run_dir, config._bcas_token,
                   identity, bool(_get(config, "allow-mismatch")))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> None:
    """Per-case gate numbers as JUnit XML properties (``--junitxml``), before the report is made."""
    sess = getattr(item.config, "_bcas_session", None)
    if call.when == "call" and sess is not None:
        from bcas.report.exports import add_case_properties
        from bcas.report.gate_report import add_junit_properties
        from bcas.report.progress import progress_for

        add_junit_properties(item, sess.gate_results)
        plugin = progress_for(item.config)  # the case's metric, interval, n and cost
        add_case_properties(item, plugin.results if plugin is not None else None)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    sess = getattr(config, "_bcas_session", None)
    is_worker = hasattr(config, "workerinput")
    if sess is not None and is_worker:
        config.workeroutput["bcas_cases"] = sess.cases_run  # type: ignore[attr-defined]
        sess.close()
        return
    if is_worker or exitstatus == pytest.ExitCode.USAGE_ERROR:
        return
    # Only a session that ran cases writes: --collect-only, a run whose cases were all
    # deselected or skipped, and a run stopped at start leave the report folder untouched.
    if config.option.collectonly or (sess is None and not _ran_cases_elsewhere(config)):
        return
    from bcas.report.runner import finalize_run

    result = finalize_run(config._bcas_settings, sess, token=config._bcas_token)
    config._bcas_final = result  # type: ignore[attr-defined]
    if result is not None and result.holm_failures and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_sessionstart(session: pytest.Session) -> None:
    """Preflight every server endpoint of the run before any case (bcas.llm.preflight)."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    settings = getattr(config, "_bcas_settings", None)
    if settings is None:
        return
    _check_run_dir(settings)
    if settings.preflight:
        _preflight(config, settings)


def _check_run_dir(settings: Settings) -> None:
    """A run folder with 0.1.0 records (no fingerprints) is not written into (never mixed)."""
    if not settings.run_dir.is_dir():
        return
    from bcas.results import RecordError, ResultStore

    try:
        ResultStore(settings.run_dir).check_writable()
    except RecordError as exc:
        raise pytest.UsageError(f"--bcas-report: {exc}") from None


def _endpoints(settings: Settings) -> list[tuple[str, str, str | None]]:
    """(base_url, model, api_key_env) of every server the run talks to, models then judge."""
    from bcas.llm.multi_endpoint import split_base_urls

    seen: list[tuple[str, str, str | None]] = []
    for spec in settings.models:
        for url in split_base_urls(spec.base_url) if spec.model else []:  # each server of the model
            seen.append((url, spec.model, spec.api_key_env))
    judge = settings.judge
    if judge not in ("none", "same"):
        backend, _, name = judge.partition(":")
        base = settings.judge_base_url or next((m.base_url for m in settings.models if m.base_url), None)
        if backend == "openai" and base and name:
            key_env = next((m.api_key_env for m in settings.models if m.base_url == base), None)
            seen.extend((url, name, key_env) for url in split_base_urls(base))
    return list(dict.fromkeys(seen))


def _preflight(config: pytest.Config, settings: Settings) -> None:
    from bcas.llm.preflight import PreflightError, preflight

    results = []
    tr = config.pluginmanager.getplugin("terminalreporter")
    for base_url, model, key_env in _endpoints(settings):
        try:
            result = preflight(base_url, model, api_key_env=key_env)
        except PreflightError as exc:
            raise pytest.UsageError(f"preflight failed: {exc} (--bcas-no-preflight skips this check)") from None
        for warning in result.warnings:
            if tr is not None:
                tr.write_line(f"[bcas] warning: {warning}", yellow=True)
        results.append(result.to_dict())
    _same_model_everywhere(settings, results)
    config._bcas_preflight = results  # type: ignore[attr-defined]


def _same_model_everywhere(settings: Settings, results: list[dict[str, Any]]) -> None:
    """The servers of one model must serve the same model (one fingerprint for all its answers)."""
    from bcas.llm.multi_endpoint import split_base_urls

    for spec in settings.models:
        urls = split_base_urls(spec.base_url)
        served = {r["base_url"]: r.get("served_id") for r in results if r["model"] == spec.model and r["base_url"] in urls}
        if len(set(served.values())) > 1:
            shown = ", ".join(f"{url} serves {sid!r}" for url, sid in served.items())
            raise pytest.UsageError(f"preflight failed: the servers of --bcas-model {spec.model} serve different "
                                    f"models ({shown}); give servers of one model (--bcas-no-preflight skips this)")


def _check_prices(settings: Settings) -> None:
    """``--bcas-require-prices``: every evaluated model must have a price in the sheet."""
    if not settings.require_prices:
        return
    if settings.prices is None:
        raise pytest.UsageError("--bcas-require-prices: pricing is off (--bcas-prices none); name a price sheet")
    from bcas.results import PriceError, load_price_sheet

    try:
        sheet = load_price_sheet(settings.prices, settings.price_sheet)
    except PriceError as exc:
        raise pytest.UsageError(f"--bcas-prices: {exc}") from None
    for spec in settings.models:
        try:
            sheet.price_for(spec.label)
        except PriceError as exc:
            raise pytest.UsageError(f"--bcas-require-prices: {exc}") from None


def _ran_cases_elsewhere(config: pytest.Config) -> bool:
    # Under xdist the controller collects no items itself but its workers ran cases.
    return getattr(config.option, "dist", "no") != "no" and bool(getattr(config, "_bcas_worker_cases", 0))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["bcas_token"] = node.config._bcas_token


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    out = getattr(node, "workeroutput", {}) or {}
    config = node.config
    config._bcas_worker_cases = getattr(config, "_bcas_worker_cases", 0) + int(out.get("bcas_cases", 0))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    result = getattr(config, "_bcas_final", None)
    if result is None:
        return
    tr = terminalreporter
    tr.section("bcas summary")
    for line in result.table_lines:
        tr.write_line(line)
    for failure in result.holm_failures:
        tr.write_line("GATE FAILURE (Holm across the session): " + failure, red=True)
    tr.write_line(f"records: {result.records_path}")
    tr.write_line(f"report:  {result.report_path}")
    gate = getattr(result, "gate", None)
    if gate is not None:
        tr.section("regression gate")
        for line in gate.lines():
            tr.write_line(line, red=line.startswith("overall: FAIL"),
                          yellow=line.startswith("overall: CANNOT") or line.startswith("overall: NOTHING"))
