"""The Python front door: run grids from a script, a notebook or a scheduler job.

:func:`evaluate` takes the options of ``pytest benchmarks --bcas-...`` as keyword
arguments and runs the same engine (:mod:`bcas.run`): the same settings and checks, the
same plan (one case per model x dataset x grid entry), the same executor, resume and
generation cache, and the same run folder (``records.jsonl``, ``run.json``,
``summary.csv/json``, ``index.html``).  So ``bcas compare`` reads an API
run and a pytest run of the same options alike.

    >>> import bcas
    >>> res = bcas.evaluate(grids=["smoke"], models=["mock:gold"], limit=5, out="reports/x")
    >>> res.frame[["case_id", "item_id", "correct_em"]]      # doctest: +SKIP

A bad argument is one ``ValueError`` line that names it (``limit: expected ...``).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bcas.registry import did_you_mean
from bcas.run.options import DEFAULTS, KINDS, OptionError, RawValue
from bcas.run.plan import Plan, make_plan
from bcas.run.settings import Case, Settings, build_settings, check_baseline
from bcas.tracking import SINKS, ResultSink, SinkError, open_sinks, publish_all, sink_option

if TYPE_CHECKING:
    import pandas

    from bcas.gating.plan import GatePlan
    from bcas.gating.report import GateReport
    from bcas.report.comparisons import Comparison
    from bcas.report.summary import SummaryRow
    from bcas.run.estimate import CaseEstimate
    from bcas.run.finalize import GateReporter
    from bcas.run.session import BcasSession

# Options that only mean something under pytest (a terminal, collection, JUnit).
PYTEST_ONLY = frozenset({"estimate"})
# evaluate()'s own argument names for options spelt otherwise on the command line.
RENAMED = {"grid": "grids", "model": "models", "report": "out"}


@dataclass
class Results:
    """What :func:`evaluate` ran: its folder, records, summaries, comparisons and gate verdict."""

    run_dir: Path
    settings: Settings
    records: list[dict[str, Any]]
    summary: list[SummaryRow]
    comparisons: list[Comparison]
    model_comparisons: list[Comparison]
    gate: GateReport | None
    report_path: Path | None
    failures: dict[str, list[str]] = field(default_factory=dict)  # case id -> broken invariants, gate failures
    stopped: list[str] = field(default_factory=list)  # cases --bcas-max-cost stopped (resumable)
    written: int = 0  # records this call wrote (0: everything was resumed)
    published: list[str] = field(default_factory=list)  # one line per result sink (mlflow=...): where the run went

    @property
    def frame(self) -> pandas.DataFrame:
        """The run's records as a pandas DataFrame (one row per answer; nested fields as objects)."""
        import pandas

        return pandas.DataFrame(self.records)

    @property
    def passed(self) -> bool:
        """No case broke an invariant or failed the gate (the floor, the paired test, the session's Holm step)."""
        return not self.failures and not (self.gate is not None and self.gate.holm_failures)


def _as_list(name: str, value: str | Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name}: expected a name or a list of names, got {value!r}")
    return list(value)


def raw_options(
    grids: str | Sequence[str],
    models: str | Sequence[str] | None,
    datasets: str | Sequence[str] | None,
    limit: int | str | None,
    out: str | os.PathLike[str] | None,
    options: dict[str, RawValue],
) -> dict[str, RawValue]:
    """The keyword arguments as raw option values (``bcas.run.options`` names); unknown ones raise."""
    given: dict[str, RawValue] = {}
    for key, value in options.items():
        name = key.replace("_", "-")
        if name not in KINDS or name in RENAMED:
            names = {n.replace("-", "_") for n in KINDS if n not in PYTEST_ONLY} | set(RENAMED.values())
            known = sorted(names | {sink_option(n).replace("-", "_") for n in SINKS.names()})
            hint = (
                f" (use {RENAMED[name]}=)"
                if name in RENAMED
                else did_you_mean(key, [*known, "limit", "progress", "root"])
            )
            raise ValueError(f"{key}: not an option of bcas.evaluate{hint}; known: {', '.join(known)}")
        if name in PYTEST_ONLY:
            raise ValueError(f"{key}: only the pytest front door has it (pytest benchmarks --bcas-{name})")
        given[name] = value
    grid_list = _as_list("grids", grids) or []
    if not grid_list:
        raise ValueError("grids: name at least one grid (e.g. grids=['smoke'])")
    given["grid"] = ",".join(grid_list)
    given["model"] = _as_list("models", models)
    ds = _as_list("datasets", datasets)
    given["datasets"] = ",".join(ds) if ds else None
    given["limit"] = None if limit is None else str(limit)
    given["report"] = None if out is None else os.fspath(out)
    return given


def chosen_sinks(options: dict[str, RawValue]) -> dict[str, str | None]:
    """Take the result-sink keywords out of ``options``: one per registered sink, as
    ``--bcas-<option> [TARGET]`` is one (:mod:`bcas.harness.tracking`).  ``True``: the
    sink's default target; a string or path: that target; ``None``/``False``: not chosen."""
    chosen: dict[str, str | None] = {}
    for name in SINKS.names():
        key = sink_option(name).replace("-", "_")
        value = options.pop(key, None)
        if value is None or value is False:
            continue
        if value is True:
            chosen[name] = None
        elif isinstance(value, (str, os.PathLike)):
            chosen[name] = os.fspath(value)
        else:
            raise ValueError(f"{key}: expected True (the default target) or a target such as a URI, got {value!r}")
    return chosen


def _argument_error(exc: OptionError) -> ValueError:
    text = exc.for_argument()
    for option, argument in RENAMED.items():
        text = text.replace(f"{option}: ", f"{argument}: ", 1) if exc.option == option else text
    return ValueError(text)


def evaluate(
    grids: str | Sequence[str] = ("smoke",),
    models: str | Sequence[str] | None = None,
    datasets: str | Sequence[str] | None = None,
    *,
    limit: int | str | None = None,
    out: str | os.PathLike[str] | None = None,
    progress: bool = False,
    root: str | os.PathLike[str] | None = None,
    **options: RawValue,
) -> Results:
    """Run ``grids`` x ``models`` x ``datasets`` into ``out`` and return what they gave.

    ``models``: ``BACKEND:MODEL`` specs (``mock:gold``, ``embedded:path.gguf``,
    ``openai:NAME`` with ``base_url=``); default: the embedded backend's model.
    ``datasets``: names, paths or ``FORMAT:PATH`` (default: each grid's).  ``limit``:
    items per dataset (``"all"``: every item).  ``out``: the run folder (default
    ``ROOT/reports/<grids>``, ``root`` the current folder).  Every other option of
    ``--bcas-NAME`` is the keyword ``NAME`` with ``_`` for ``-`` (``seed=``,
    ``judge=``, ``baseline=``, ``min_accuracy=``, ``epochs=``, ``no_cache=``...).
    ``progress=True`` prints notes and one line per case.  A result sink is its keyword
    too (``mlflow=True`` for ``sqlite:///mlruns.db``, ``mlflow="http://host:5000"``): it
    is reached before any answer is made (a tracker that is down is one ``ValueError``
    line) and gets the finished run folder (:attr:`Results.published`); a resumed run
    updates what it published before.

    Items already recorded in ``out`` under the same answer identity are not run again
    (resume), and answers come from the generation cache where it has them.
    """
    options = dict(options)
    sinks = chosen_sinks(options)
    given = raw_options(grids, models, datasets, limit, out, options)
    try:
        settings = build_settings(given, Path(root) if root is not None else Path.cwd())
        check_baseline(settings.baseline)
        from bcas.run.preflight import check_run_dir

        check_run_dir(settings)
    except OptionError as exc:
        raise _argument_error(exc) from None
    plan = make_plan(settings)
    try:  # as the pytest session start does: before any answer is paid for
        opened = open_sinks(sinks)
    except SinkError as exc:
        # the option's name as this call's keyword; the command line's own hint does not apply here
        raise ValueError(str(exc).split("; write --bcas-")[0].replace("--bcas-", "")) from None
    return _run(settings, given, plan, progress, opened)


def estimate(
    grids: str | Sequence[str] = ("smoke",),
    models: str | Sequence[str] | None = None,
    datasets: str | Sequence[str] | None = None,
    *,
    limit: int | str | None = None,
    out: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    **options: RawValue,
) -> list[CaseEstimate]:
    """What :func:`evaluate` with the same arguments would spend, without running it: per case
    (and per calibration probe, marked ``calibration``) its items, model calls, searches, tokens,
    cost and wall-time range (:mod:`bcas.run.estimate`; ``--bcas-estimate`` prints the same rows).
    No model is loaded, no index built, nothing written."""
    from bcas.run.estimate import estimate as estimate_cases

    given = raw_options(grids, models, datasets, limit, out, dict(options))
    try:
        settings = build_settings(given, Path(root) if root is not None else Path.cwd())
    except OptionError as exc:
        raise _argument_error(exc) from None
    return estimate_cases(settings, list(make_plan(settings).cases))


def _run(
    settings: Settings, given: dict[str, RawValue], plan: Plan, progress: bool, sinks: dict[str, ResultSink]
) -> Results:
    from bcas.run.cost import CaseStopped
    from bcas.run.finalize import finalize_run
    from bcas.run.manifest import finish_session, plain, session_entry, start_session
    from bcas.run.observe import QUIET, PrintObserver
    from bcas.run.preflight import preflight_servers
    from bcas.run.session import BcasSession

    observer = PrintObserver() if progress else QUIET
    token = uuid.uuid4().hex[:10]
    preflight: list[dict[str, Any]] = []
    if settings.preflight:  # every server of the run answers, and serves what it is named for
        try:
            preflight = preflight_servers(settings, lambda line: observer.message(f"[bcas] warning: {line}"))
        except OptionError as exc:
            raise _argument_error(exc) from None
        from bcas.run.served import served_names

        plan = plan.with_served(served_names(settings.models, preflight))  # case ids name what was served
    from bcas.run.plan_checks import calibration_notes, check_cases
    from bcas.run.windows import context_windows

    try:  # the grid can run on the data and models given: one ValueError naming the argument, before any answer
        check_cases(settings, plan.cases, context_windows(settings, preflight))
    except OptionError as exc:
        raise _argument_error(exc) from None
    for line in calibration_notes(settings, plan.cases, option="calibration_n="):
        observer.message(f"[bcas] {line}")
    session = BcasSession(settings, token=token, observer=observer)
    try:
        gate_plan = _plan_gate(session, plan, given, token) if settings.baseline else None
        session.gate_plan = gate_plan  # --bcas-gate-sequential orders and stops items by it
    except ValueError:
        session.close()
        raise
    chosen = {name: {"value": plain(v, name), "source": "argument"} for name, v in given.items() if v not in (None, [])}
    defaults = {name: {"value": plain(v, name), "source": "default"} for name, v in DEFAULTS.items()}
    start_session(settings.run_dir, session_entry(token, settings, {**defaults, **chosen}, preflight))
    failures: dict[str, list[str]] = {}
    stopped: list[str] = []
    before = _count(settings.run_dir)
    exit_status = 2  # interrupted, unless the cases finish
    try:
        for case in plan.cases:
            try:
                outcome = session.run_case(case)
            except CaseStopped as stop:
                observer.message(f"[bcas] {case.id}: {stop}")
                stopped.append(case.id)
                continue
            problems = list(outcome.violations)
            if settings.baseline or settings.min_accuracy is not None:
                from bcas.gating.case import gate_case

                problems += gate_case(session, case, outcome, None, gate_plan)
            if problems:
                failures[case.id] = problems
        exit_status = 1 if failures else 0
    finally:
        final = finalize_run(settings, session, token=token, gate_report=_gate_reporter(settings))
        if final is not None and final.holm_failures and exit_status == 0:
            exit_status = 1
        finish_session(settings.run_dir, token, exit_status)
    from bcas.records import ResultStore

    published = publish_all(sinks, settings.run_dir) if final is not None else []
    for line in published:
        observer.message(f"[bcas] {line}")
    records = [r.to_dict() for r in ResultStore(settings.run_dir).records()]
    summaries = final.summaries if final is not None else None
    gate = final.gate if final is not None else None
    return Results(
        run_dir=settings.run_dir,
        settings=settings,
        records=records,
        summary=summaries.rows if summaries is not None else [],
        comparisons=summaries.comparisons if summaries is not None else [],
        model_comparisons=summaries.model_comparisons if summaries is not None else [],
        gate=gate,  # type: ignore[arg-type]  # finalize's GateVerdict is bcas.gating's GateReport
        report_path=final.report_path if final is not None else None,
        failures=failures,
        stopped=stopped,
        written=_count(settings.run_dir) - before,
        published=published,
    )


def _gate_reporter(settings: Settings) -> GateReporter | None:
    """The session-wide Holm step of the gate, for a run with a baseline."""
    if not settings.baseline:
        return None
    from bcas.gating.report import session_gate_report

    return session_gate_report


def _count(run_dir: Path) -> int:
    path = run_dir / "records.jsonl"
    if not path.is_file():
        return 0
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def _plan_gate(session: BcasSession, plan: Plan, given: dict[str, RawValue], token: str) -> GatePlan:
    """The gate's plan over every case, before any runs (as pytest makes it at collection)."""
    from bcas.gating import BaselineError, GateError, GateOptions, plan_gate
    from bcas.gating.plan import resumed_gate_problem

    settings = session.settings
    try:
        options = GateOptions.parse(
            given.get("alpha"),
            given.get("gate-family"),
            given.get("max-drop"),
            given.get("gate-strict"),
            given.get("gate-sequential"),
            given.get("gate-fallback-share"),
        )
        options = replace(options, metric=settings.gate_metric)
        problem = resumed_gate_problem(settings.run_dir, token, options)
        if problem:
            raise GateError(problem)
    except GateError as exc:  # the flag as this call's keyword: --bcas-gate-fallback-share -> gate_fallback_share
        raise ValueError(re.sub(r"--bcas-([a-z-]+)", lambda m: m.group(1).replace("-", "_"), str(exc))) from None

    def identity(case: Case) -> tuple[str, str]:
        found = plan.identity(case, session.fingerprint(case.model))  # bcas.run.plan: computed once
        return found.fingerprint, found.prompt_hash

    limits: dict[str, int | None] = {c.id: plan.limit_for(c) for c in plan.cases}
    try:
        gate_plan = plan_gate(
            list(plan.cases),
            limits,
            str(settings.baseline),
            settings.seed,
            options,
            identity,
            bool(given.get("allow-mismatch")),
            settings.judge != "none",
            bool(given.get("gate-new-model")),
        )
    except BaselineError as exc:
        raise ValueError(f"baseline: {exc}") from None
    refusal = gate_plan.refusal()
    if refusal:
        raise ValueError(
            f"baseline: {refusal}; pass gate_new_model=True to gate a new model against "
            "the baseline's, or allow_mismatch=True to compare any difference anyway"
        )
    problem = gate_plan.usage_problem()
    if problem and options.strict:
        raise ValueError(f"gate_strict: {problem}")
    gate_plan.save(settings.run_dir, token)
    return gate_plan


__all__ = ["Results", "evaluate"]
