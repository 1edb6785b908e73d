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
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import pytest

from bcas.harness import state
from bcas.harness.session_start import (
    _check_run_dir,
    _preflight,
    _warn_context_windows,
    check_selected_cases,
    collected_cases,
)
from bcas.harness.settings import KIND_MARKER, REQUIREMENT_MARKERS, _get, _opt_name, read_settings
from bcas.llm import backend_meta
from bcas.run.options import OPTIONS
from bcas.run.plan import make_plan
from bcas.run.settings import Case

if TYPE_CHECKING:
    from bcas.run.session import BcasSession


def registered_extensions() -> str:
    """What is registered now (a conftest or a bcas.plugins entry point may add to it)."""
    from bcas.formats import FORMATS
    from bcas.grids import GRIDS
    from bcas.llm import BACKENDS
    from bcas.registry import RETRIEVAL_MODES, RUN_KINDS, TREATMENTS

    return "; ".join(
        [
            BACKENDS.describe(),
            FORMATS.describe(),
            RETRIEVAL_MODES.describe(),
            TREATMENTS.describe(),
            RUN_KINDS.describe(),
            f"grids: {', '.join(sorted(GRIDS))}",
        ]
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(
        "bcas", "bcas evaluation suite (each also settable as an ini option bcas_*); " + registered_extensions()
    )
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
    from bcas.harness import tracking

    tracking.add_options(parser)  # --bcas-mlflow and every other registered result sink


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Iterator[None]:
    """A mistyped ``--bcas-*`` option is a usage error naming the closest one (after the initial
    conftests, whose options count too); pytest alone would say only "unrecognized arguments"."""
    from bcas.run.options import mistyped_option

    result = yield
    groups = [*getattr(parser, "_groups", []), getattr(parser, "_anonymous", None)]
    known = [name for group in groups if group is not None for opt in group.options for name in opt.names()]
    problem = mistyped_option(args, known)
    if problem is not None:
        raise pytest.UsageError(problem)
    return result


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
    from bcas.grids import GRIDS
    from bcas.registry import RUN_KINDS

    for name in DATASETS:
        _add_marker(config, name, f"cases on the {name} dataset")
    for name in GRIDS:
        _add_marker(config, name, f"cases of the {name} grid")
    for kind in RUN_KINDS:
        _add_marker(config, KIND_MARKER.format(kind), f"cases run by the {kind} run kind (in any grid)")
    _add_marker(
        config, "min_accuracy(value)", "absolute accuracy floor (the grid's primary metric) for the regression gate"
    )
    if getattr(config.option, "help", False):
        return  # --help lists the options; it checks none of them and needs no settings
    if hasattr(config, "workerinput"):
        config.stash[state.TOKEN] = config.workerinput.get("bcas_token", "w")
    else:
        import uuid

        config.stash[state.TOKEN] = uuid.uuid4().hex[:10]
    settings = config.stash[state.SETTINGS] = read_settings(config)  # bad options fail here, early
    plan = config.stash[state.PLAN] = make_plan(settings)  # the cases, once
    if hasattr(config, "workerinput"):  # the controller's preflight read what the servers serve: same ids
        plan = config.stash[state.PLAN] = plan.with_served(config.workerinput.get("bcas_served") or {})
    for case in plan.cases:  # a dataset file's marker is its name (NAME= or its stem)
        if case.dataset not in DATASETS:
            _add_marker(config, case.dataset_label, f"cases on the dataset {case.dataset}")
    from bcas.harness.gate_hooks import read_options

    read_options(config)  # the gate's level, family, tolerance: a bad one is a usage error
    from bcas.harness import progress

    progress.register(config)  # live progress lines in pytest's terminal
    if _get(config, "estimate"):
        from bcas.harness import estimate

        estimate.register(config)  # --bcas-estimate: prints the estimate instead of running the cases
    exclusive = sorted({m.backend for m in settings.models if backend_meta(m.backend, "one_per_process")})
    if exclusive and _xdist_workers(config) > 1:
        raise pytest.UsageError(
            f"--bcas-backend {exclusive[0]} runs one in-process engine per xdist worker on the same GPU; with "
            f"-n {_xdist_workers(config)} they would compete for its memory. Run without -n, or start one "
            "`vllm serve` and use --bcas-backend openai --bcas-base-url http://127.0.0.1:8000/v1 with -n."
        )
    if not hasattr(config, "workerinput") and not _get(config, "estimate"):  # run.json: the controller writes it
        from bcas.harness import interrupt
        from bcas.harness.manifest import ManifestPlugin

        config.pluginmanager.register(ManifestPlugin(config), "bcas-manifest")
        interrupt.register(config)  # Ctrl-C and SIGTERM: what finished is merged, reported and resumable
        from bcas.harness import tracking

        tracking.register(config)  # result sinks: checked at session start, published at the end


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "bcas_case" not in metafunc.fixturenames:
        return
    settings = metafunc.config.stash[state.SETTINGS]
    params = []
    for case in metafunc.config.stash[state.PLAN].cases:
        marks = [
            getattr(pytest.mark, case.grid),
            getattr(pytest.mark, KIND_MARKER.format(case.entry.kind)),
            getattr(pytest.mark, case.dataset_label),
        ]
        for req in case.entry.requires:
            marks.append(getattr(pytest.mark, req))
        for req in backend_meta(case.model.backend, "requires", ()):  # e.g. vllm: the vllm marker
            marks.append(getattr(pytest.mark, req))
        if settings.judge != "none":
            marks.append(pytest.mark.judge)
        params.append(pytest.param(case, id=case.id, marks=marks))
    metafunc.parametrize("bcas_case", params)


def _session(config: pytest.Config) -> BcasSession:
    sess = config.stash.get(state.SESSION, None)
    if sess is None:
        from bcas.harness.progress import progress_for
        from bcas.run.session import BcasSession

        worker = getattr(config, "workerinput", {}).get("workerid")
        sess = BcasSession(
            config.stash[state.SETTINGS], worker=worker, token=state.token(config), observer=progress_for(config)
        )
        config.stash[state.SESSION] = sess
    return sess


@pytest.fixture(scope="session")
def bcas_session(request: pytest.FixtureRequest) -> Iterator[BcasSession]:
    """The session's shared runtime: datasets, indexes, models, results store."""
    sess = _session(request.config)
    yield sess
    sess.close()


def pytest_itemcollected(item: pytest.Item) -> None:
    if "bcas_case" in getattr(getattr(item, "callspec", None), "params", {}):
        item.config.stash[state.ANY_CASE] = True


def _warn_without_cases(config: pytest.Config) -> None:
    """``--bcas-grid`` on the command line of a session that collected no grid case (``pytest tests``)."""
    grid = config.getoption("bcas_grid", default=None)
    if (
        grid is None
        or config.stash.get(state.ANY_CASE, False)
        or _xdist_workers(config)
        or hasattr(config, "workerinput")
    ):
        return
    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is not None:
        tr.write_line(
            f"[bcas] warning: --bcas-grid {grid} is ignored: no collected test runs grid cases. The cases live "
            f"in benchmarks/ (python3 -m pytest benchmarks --bcas-grid {grid}, or a folder of your own with a test "
            "taking bcas_case); pytest without a path runs testpaths, the unit tests.",
            yellow=True,
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """The regression gate's power, once the cases and their Holm families are known (before any runs)."""
    config = session.config
    _warn_without_cases(config)
    cases = [
        cast(Case, item.callspec.params["bcas_case"])  # pytest_generate_tests parametrises it with cases
        for item in session.items
        if isinstance(item, pytest.Function)  # only a function is parametrised
        and "bcas_case" in getattr(getattr(item, "callspec", None), "params", {})
    ]
    check_selected_cases(config, cases)  # the grid can run on the data given; calibration calls said up front
    settings = config.stash.get(state.SETTINGS, None)
    if settings is None or not settings.baseline or _get(config, "estimate") or not cases:
        return
    from bcas.harness.gate_hooks import collected_plan

    plan = config.stash[state.PLAN]
    limits: dict[str, int | None] = {c.id: plan.limit_for(c) for c in cases}

    def identity(case: Case) -> tuple[str, str]:
        found = plan.identity(case)  # bcas.run.plan: the case identity, computed once per model
        return found.fingerprint, found.prompt_hash

    collected_plan(
        config,
        cases,
        limits,
        settings.baseline,
        settings.seed,
        settings.run_dir,
        config.stash[state.TOKEN],
        identity,
        bool(_get(config, "allow-mismatch")),
        bool(_get(config, "gate-new-model")),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Per-case gate numbers as JUnit XML properties (``--junitxml``), before the report is made."""
    sess = item.config.stash.get(state.SESSION, None)
    if call.when == "call" and sess is not None:
        from bcas.harness.gate_hooks import add_junit_properties
        from bcas.harness.progress import progress_for
        from bcas.run.exports import add_case_properties

        add_junit_properties(item, sess.gate_results)
        plugin = progress_for(item.config)  # the case's metric, interval, n and cost
        add_case_properties(item, plugin.results if plugin is not None else None)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    sess = config.stash.get(state.SESSION, None)
    is_worker = hasattr(config, "workerinput")
    if sess is not None and is_worker:
        config.workeroutput["bcas_cases"] = sess.cases_run  # type: ignore[attr-defined]
        sess.close()
        return
    if is_worker or exitstatus == pytest.ExitCode.USAGE_ERROR:
        return
    from bcas.harness.interrupt import interrupted

    stopped = interrupted(exitstatus) and _cases_started(config)  # Ctrl-C or SIGTERM once cases ran
    # Only a session that ran cases writes: --collect-only, a run whose cases were all
    # deselected or skipped, and a run stopped at start leave the report folder untouched.
    if config.option.collectonly or (sess is None and not _ran_cases_elsewhere(config) and not stopped):
        return
    from bcas.gating.report import session_gate_report
    from bcas.run.finalize import finalize_run

    result = finalize_run(
        config.stash[state.SETTINGS],
        sess,
        token=config.stash[state.TOKEN],
        status="interrupted" if stopped else None,
        gate_report=session_gate_report,
    )
    if stopped:
        from bcas.harness.interrupt import interrupted_line

        config.stash[state.INTERRUPTED] = interrupted_line(config)
    config.stash[state.FINAL] = result
    if result is not None and result.holm_failures and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_sessionstart(session: pytest.Session) -> None:
    """Preflight every server endpoint of the run before any case (bcas.llm.preflight)."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    settings = config.stash.get(state.SETTINGS, None)
    if settings is None:
        return
    _check_run_dir(settings)
    if settings.preflight:  # every run, its answers cached or not (--bcas-no-preflight: offline replay)
        _preflight(config, settings)
        from bcas.run.served import served_names

        # before collection (and before xdist starts its workers): a case id names what was served
        read: list[dict[str, Any]] = config.stash.get(state.PREFLIGHT, [])
        served = served_names(settings.models, read)
        config.stash[state.SERVED] = served
        config.stash[state.PLAN] = config.stash[state.PLAN].with_served(served)
    _warn_context_windows(config, settings)


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before the manifest plugin writes run.json
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Under xdist the controller collects no cases: it checks those its first worker collected
    (the selected ones: ``-k``, ``-m``), before any is scheduled; a usage error stops the session."""
    config = node.config
    if config.stash.get(state.CHECKED, False) or config.stash.get(state.SETTINGS, None) is None:
        return
    config.stash[state.CHECKED] = True
    check_selected_cases(config, collected_cases(config.stash[state.PLAN].cases, ids))


def _cases_started(config: pytest.Config) -> bool:
    """The session's cases were known and its run.json entry written (so cases may have run)."""
    manifest = config.pluginmanager.get_plugin("bcas-manifest")
    return bool(getattr(manifest, "started", False))


def _ran_cases_elsewhere(config: pytest.Config) -> bool:
    # Under xdist the controller collects no items itself but its workers ran cases.
    return getattr(config.option, "dist", "no") != "no" and bool(config.stash.get(state.WORKER_CASES, 0))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["bcas_token"] = node.config.stash[state.TOKEN]
    node.workerinput["bcas_served"] = dict(node.config.stash.get(state.SERVED, {}))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    out = getattr(node, "workeroutput", {}) or {}
    config = node.config
    config.stash[state.WORKER_CASES] = config.stash.get(state.WORKER_CASES, 0) + int(out.get("bcas_cases", 0))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    result = config.stash.get(state.FINAL, None)
    tr = terminalreporter
    stopped = config.stash.get(state.INTERRUPTED, None)
    if stopped is not None:  # one line; the table is in the report
        report = f" (report: {result.report_path})" if result is not None and result.report_path else ""
        tr.write_line(f"[bcas] {stopped}{report}", yellow=True)
        return
    if result is None:
        return
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
            tr.write_line(
                line,
                red=line.startswith("overall: FAIL"),
                yellow=line.startswith("overall: CANNOT") or line.startswith("overall: NOTHING"),
            )
