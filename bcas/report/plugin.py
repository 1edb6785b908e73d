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
    ("model", "append", None, "model to evaluate (repeatable); a GGUF path, a served model name or a HF id; "
                              "default: the backend's default (embedded: SmolLM2-135M-Instruct)"),
    ("backend", "str", "embedded", "model backend: embedded | openai | vllm"),
    ("base-url", "str", None, "base URL of an OpenAI-compatible server (openai backend)"),
    ("api-key-env", "str", None, "name of the environment variable holding the server's API key"),
    ("datasets", "str", None, "comma-separated dataset names, file paths (layout detected) or FORMAT:PATH, e.g. "
                              "flashrag:nq/dev.jsonl, hotpotqa:hotpot_dev_distractor_v1.json (python -m bcas.data "
                              "--formats lists them; default: each grid's datasets)"),
    ("corpus", "str", None, "passage corpus searched by every item instead of its own documents: a FlashRAG corpus "
                            "JSONL, BEIR corpus.jsonl, our documents JSONL or FEVER wiki-pages/ (PATH or FORMAT:PATH)"),
    ("grid", "str", "smoke", "comma-separated grids: smoke, search_scaling, context_scaling, ablation, madara, rsc"),
    ("limit", "int", None, "items per dataset (seeded subset; default: the grid's limit, else 20)"),
    ("seed", "int", 0, "seed of the item subset and of sampling"),
    ("concurrency", "int", None, "items of one case in flight at once (default: 1 for the embedded backend, whose "
                                 "single in-process model then reuses each conversation's cached prefix; 8 otherwise)"),
    ("judge", "str", "none", "LLM judge: none | same | BACKEND[:MODEL] (e.g. openai:gpt-4o-mini)"),
    ("judge-base-url", "str", None, "base URL of the judge's OpenAI-compatible server"),
    ("judge-repeats", "int", 1, "ask the judge this many times per item and record agreement"),
    ("prices", "str", None, "price sheet TOML (default: the sheet installed with bcas, bcas/resources/prices.toml)"),
    ("baseline", "str", None, "baseline for the regression gate: a run directory, records.jsonl or baseline JSON"),
    ("min-accuracy", "float", None, "fail a case whose EM accuracy is below this floor"),
    ("report", "str", None, "run directory for records and reports (default reports/<grids>)"),
    ("allow-errors", "bool", False, "do not fail a case whose items end with stop_reason=error"),
    ("no-cache", "bool", False, "disable the generation cache"),
]

DEFAULT_LIMIT = 20
REQUIREMENT_MARKERS = {
    "gpu": "needs a CUDA GPU",
    "slow": "heavy case",
    "judge": "uses an LLM judge",
    "vllm": "needs the vllm engine",
}


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
            raise pytest.UsageError(f"--bcas-{name}: expected {kind}, got {value!r}") from None
        return value
    raise KeyError(name)


@dataclass(frozen=True)
class ModelSpec:
    backend: str
    model: str | None
    base_url: str | None = None
    api_key_env: str | None = None

    @property
    def label(self) -> str:
        if self.model is None:
            return {"embedded": "smollm2-135m"}.get(self.backend, self.backend)
        stem = Path(self.model).name if os.sep in self.model or self.model.endswith(".gguf") else self.model
        stem = re.sub(r"\.gguf$", "", stem.split("/")[-1])
        return re.sub(r"[^A-Za-z0-9_.+-]+", "-", stem).lower()


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
    prices: Path
    baseline: str | None
    min_accuracy: float | None
    run_dir: Path
    allow_errors: bool
    cache: bool
    corpus: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def read_settings(config: pytest.Config) -> Settings:
    backend = _get(config, "backend")
    from bcas.llm import BACKENDS

    if backend not in BACKENDS:
        raise pytest.UsageError(f"--bcas-backend must be one of {', '.join(sorted(BACKENDS))}, got {backend!r}")
    base_url = _get(config, "base-url")
    if backend == "openai" and not base_url:
        raise pytest.UsageError("--bcas-backend openai needs --bcas-base-url (e.g. http://127.0.0.1:8000/v1)")
    models = [ModelSpec(backend, m, base_url, _get(config, "api-key-env")) for m in (_get(config, "model") or [None])]
    grids = [g.strip() for g in str(_get(config, "grid")).split(",") if g.strip()]
    from bcas.report.grids import GRIDS

    for g in grids:
        if g not in GRIDS:
            raise pytest.UsageError(f"--bcas-grid: unknown grid {g!r}; available: {', '.join(sorted(GRIDS))}")
    raw_ds = _get(config, "datasets")
    datasets = [d.strip() for d in raw_ds.split(",") if d.strip()] if raw_ds else None
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
    prices = _get(config, "prices")
    return Settings(
        models=models,
        grids=grids,
        datasets=datasets,
        limit=_get(config, "limit"),
        seed=_get(config, "seed"),
        concurrency=max(1, _get(config, "concurrency") or (1 if backend == "embedded" else 8)),
        judge=_get(config, "judge"),
        judge_base_url=_get(config, "judge-base-url"),
        judge_repeats=max(1, _get(config, "judge-repeats")),
        prices=Path(prices) if prices else _packaged_prices(),
        baseline=_get(config, "baseline"),
        min_accuracy=_get(config, "min-accuracy"),
        run_dir=run_dir,
        allow_errors=bool(_get(config, "allow-errors")),
        cache=not bool(_get(config, "no-cache")),
        corpus=corpus,
    )


def _packaged_prices() -> Path:
    from bcas.resources import resource_path

    return resource_path("prices.toml")


def expand_cases(settings: Settings) -> list[Case]:
    from bcas.report.grids import get_grid

    cases = []
    for grid_name in settings.grids:
        grid = get_grid(grid_name)
        chosen = tuple(settings.datasets) if settings.datasets else None
        for model in settings.models:
            for dataset, entry in grid.cases(chosen):
                cases.append(Case(model, dataset, grid_name, entry))
    return cases


def _xdist_workers(config: pytest.Config) -> int:
    n = getattr(config.option, "numprocesses", None)
    if n in (None, 0):
        return 0
    if n == "auto" or n == "logical":
        return os.cpu_count() or 1
    return int(n)


def pytest_configure(config: pytest.Config) -> None:
    for marker, text in REQUIREMENT_MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: {text}")
    from bcas.data import DATASETS
    from bcas.report.grids import GRIDS, KINDS

    for name in DATASETS:
        config.addinivalue_line("markers", f"{name}: cases on the {name} dataset")
    for name in GRIDS:
        config.addinivalue_line("markers", f"{name}: cases of the {name} grid")
    for kind in KINDS:
        config.addinivalue_line("markers", f"{kind}: cases run by the {kind} runner")
    config.addinivalue_line("markers", "min_accuracy(value): absolute EM accuracy floor for the regression gate")
    if hasattr(config, "workerinput"):
        config._bcas_token = config.workerinput.get("bcas_token", "w")  # type: ignore[attr-defined]
    else:
        import uuid

        config._bcas_token = uuid.uuid4().hex[:10]  # type: ignore[attr-defined]
    config._bcas_settings = read_settings(config)  # type: ignore[attr-defined]  # bad options fail here, early
    if _get(config, "backend") == "vllm" and _xdist_workers(config) > 1:
        raise pytest.UsageError(
            "--bcas-backend vllm runs one in-process engine per xdist worker on the same GPU; with "
            f"-n {_xdist_workers(config)} they would compete for its memory. Run without -n, or start one "
            "`vllm serve` and use --bcas-backend openai --bcas-base-url http://127.0.0.1:8000/v1 with -n."
        )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "bcas_case" not in metafunc.fixturenames:
        return
    from bcas.data import DATASETS

    settings = metafunc.config._bcas_settings
    params = []
    for case in expand_cases(settings):
        marks = [getattr(pytest.mark, case.grid), getattr(pytest.mark, case.entry.kind)]
        if case.dataset in DATASETS:
            marks.append(getattr(pytest.mark, case.dataset))
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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    sess = getattr(config, "_bcas_session", None)
    is_worker = hasattr(config, "workerinput")
    if sess is not None and is_worker:
        config.workeroutput["bcas_cases"] = sess.cases_run  # type: ignore[attr-defined]
        sess.close()
        return
    if is_worker:
        return
    n_cases = getattr(config, "_bcas_n_cases", 0)
    if sess is None and n_cases == 0 and not _ran_cases_elsewhere(config):
        return
    from bcas.report.runner import finalize_run

    result = finalize_run(config._bcas_settings, sess, token=config._bcas_token)
    config._bcas_final = result  # type: ignore[attr-defined]
    if result is not None and result.holm_failures and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
