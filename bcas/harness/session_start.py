"""Session-start checks of a real run: the run folder and the servers (preflight)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from bcas.harness import state
from bcas.run.options import OptionError
from bcas.run.preflight import check_run_dir, preflight_servers, same_model_everywhere
from bcas.run.settings import Case, Settings
from bcas.run.windows import context_warnings, context_windows


def _check_run_dir(settings: Settings) -> None:
    """A run folder with 0.1.0 records (no fingerprints) is not written into (never mixed)."""
    try:
        check_run_dir(settings)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def _preflight(config: pytest.Config, settings: Settings) -> None:
    tr = config.pluginmanager.getplugin("terminalreporter")

    def warn(line: str) -> None:
        if tr is not None:
            tr.write_line(f"[bcas] warning: {line}", yellow=True)

    try:
        config.stash[state.PREFLIGHT] = preflight_servers(settings, warn)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def _same_model_everywhere(settings: Settings, results: list[dict[str, Any]]) -> None:
    try:
        same_model_everywhere(settings, results)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def _warn_context_windows(config: pytest.Config, settings: Settings) -> None:
    """Session start: the context-window warnings, in one block (the preflight has run, if it runs)."""
    preflight: list[dict[str, Any]] = config.stash.get(state.PREFLIGHT, [])
    tr = config.pluginmanager.getplugin("terminalreporter")
    for line in context_warnings(settings, context_windows(settings, preflight)):
        if tr is not None:
            tr.write_line(f"[bcas] warning: {line}", yellow=True)


def collected_cases(cases: Sequence[Case], ids: Sequence[str]) -> list[Case]:
    """The planned ``cases`` among the node ids a worker collected (under xdist the controller
    collects nothing): those ``-k``, ``-m`` and deselection left, in plan order."""
    found = {nodeid[nodeid.find("[") :] for nodeid in ids if "[" in nodeid}
    return [case for case in cases if f"[{case.id}]" in found]


def check_selected_cases(config: pytest.Config, cases: list[Any]) -> None:
    """After collection, before any case runs: the selected cases can run on the data and models
    given (one usage error naming the option, :mod:`bcas.run.plan_checks`), and the calibration
    probes they will make are said up front."""
    settings: Settings | None = config.stash.get(state.SETTINGS, None)
    if settings is None or not cases or hasattr(config, "workerinput") or config.option.collectonly:
        return  # an xdist worker: its controller checked the planned cases; --collect-only lists, runs nothing
    from bcas.run.plan_checks import calibration_notes, check_cases

    preflight: list[dict[str, Any]] = config.stash.get(state.PREFLIGHT, [])
    try:
        check_cases(settings, cases, context_windows(settings, preflight))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is not None:
        for line in calibration_notes(settings, cases):
            tr.write_line(f"[bcas] {line}")
