"""Stopping a run cleanly: Ctrl-C (SIGINT) and a scheduler's stop (SIGTERM).

Both end the session the same way.  SIGTERM is turned into the ``KeyboardInterrupt`` that
Ctrl-C raises (a handler installed once the session's grid cases are collected, in the main
process only: an xdist controller or a run without ``-n``; a session without grid cases
keeps the default), so pytest ends the session as interrupted (exit
status 2) and runs its end-of-session hooks.  The items in flight are cancelled
(:meth:`bcas.run.session.BcasSession.run_case`); every finished item is already in
the store, one fsynced line each.  The bcas plugin then does what a finished session
does with what is there: the workers' ``records.<worker>.jsonl`` files are merged into
``records.jsonl``, the summaries and the HTML report are written, and ``run.json``'s entry
gets its end time and ``status: "interrupted"`` (:mod:`bcas.harness.manifest`).  The
terminal gets one line instead of the table (:func:`interrupted_line`):
``interrupted after N of M items; run the same command to resume``.  Rerunning the same
command resumes: recorded answers are skipped by identity.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterable
from types import FrameType
from typing import Any

import pytest

from bcas.harness import state

INTERRUPT = pytest.StashKey["InterruptPlugin"]()


def _terminate(signum: int, frame: FrameType | None) -> None:
    # The message keeps "KeyboardInterrupt" in pytest's one-line report of the interrupt.
    raise KeyboardInterrupt("SIGTERM")


class InterruptPlugin:
    """The controller's side: SIGTERM as Ctrl-C, the selected cases, the interrupted line."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.case_ids: set[str] | None = None  # the cases this session selected, once collected
        self._previous: Any = None
        self._installed = False

    # -- SIGTERM, once the session has grid cases -----------------------------------------------
    def install(self) -> None:
        """SIGTERM raises ``KeyboardInterrupt`` from now on (main thread, default handler only)."""
        if self._installed or threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        previous = signal.getsignal(signal.SIGTERM)
        if previous not in (signal.SIG_DFL, None):
            return  # someone else handles SIGTERM (a wrapper, a test runner): theirs stands
        self._previous = previous
        signal.signal(signal.SIGTERM, _terminate)
        self._installed = True

    def pytest_unconfigure(self) -> None:
        if self._installed:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    # -- which cases run ---------------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        ids = {
            str(getattr(item.callspec.params["bcas_case"], "id", ""))  # a bcas.run.settings.Case
            for item in session.items
            if isinstance(item, pytest.Function) and hasattr(item, "callspec") and "bcas_case" in item.callspec.params
        }
        if ids:
            self.case_ids = ids
            self.install()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the controller collects nothing: a worker's collection names the cases."""
        if self.case_ids is None:
            wanted = {case.id for case in self.config.stash[state.PLAN].cases}
            found = {nodeid[nodeid.find("[") + 1 : -1] for nodeid in ids if nodeid.endswith("]")} & wanted
            if found:
                self.case_ids = found
                self.install()


def count_items(settings: Any, case_ids: set[str], records: Iterable[dict[str, Any]]) -> tuple[int, int | None]:
    """(items recorded, items wanted) over the selected item-by-item cases of this session.

    Wanted: each case's item subset (this shard's) times the epochs, as the runner plans it.
    Recorded: distinct (case, item, epoch) of the run folder's records made under this
    session's seed.  ``None`` for the total when a dataset cannot be read now.
    """
    from bcas.data import load_evaluation
    from bcas.grids import get_grid
    from bcas.registry import per_item
    from bcas.run.plan import make_plan

    epochs = int(getattr(settings, "epochs", 1) or 1)
    shard = getattr(settings, "shard", None)
    wanted: dict[str, set[str]] = {}
    total: int | None = 0
    plan = make_plan(settings)
    for case in plan.cases:
        if case.id not in case_ids or not per_item(case.entry.kind):
            continue
        grid = get_grid(case.grid)
        limit = plan.limit_for(case)
        try:
            ds = load_evaluation(
                case.dataset, limit=limit, seed=settings.seed, holdout=grid.holdout_for(settings.calibration_n)
            )
        except Exception:  # noqa: BLE001 - the line is said without a total rather than not at all
            total = None
            continue
        ids = {it.id for it in ds.items if shard is None or shard.owns(it.id)}
        wanted[case.id] = ids
        if total is not None:
            total += len(ids) * epochs
    done = set()
    for rec in records:
        case_id = str((rec.get("extra") or {}).get("case_id"))
        if (
            case_id in wanted
            and str(rec.get("item_id")) in wanted[case_id]
            and int(rec.get("epoch") or 0) < epochs
            and (rec.get("config") or {}).get("seed", settings.seed) == settings.seed
        ):
            done.add((case_id, str(rec.get("item_id")), int(rec.get("epoch") or 0)))
    return len(done), total


def register(config: pytest.Config) -> InterruptPlugin | None:
    """The controller's interrupt plugin (none in an xdist worker: the controller reports)."""
    if hasattr(config, "workerinput"):
        return None
    plugin = InterruptPlugin(config)
    config.stash[INTERRUPT] = plugin
    config.pluginmanager.register(plugin, "bcas-interrupt")
    return plugin


def interrupted(exitstatus: int) -> bool:
    """pytest's exit status of an interrupted session (Ctrl-C, or SIGTERM through :func:`_terminate`)."""
    return int(exitstatus) == int(pytest.ExitCode.INTERRUPTED)


def interrupted_line(config: pytest.Config) -> str:
    """The one line an interrupted session prints, from the run folder's records as merged now."""
    from bcas.records import ResultStore

    settings = config.stash[state.SETTINGS]
    plugin: InterruptPlugin | None = config.stash.get(INTERRUPT, None)
    case_ids = plugin.case_ids if plugin is not None else None
    try:
        records = [r.to_dict() for r in ResultStore(settings.run_dir).records()]
    except Exception:  # noqa: BLE001 - a damaged file was reported by the finalisation; still say what to do
        records = []
    done, total = count_items(settings, case_ids or set(), records)
    of = f" of {total}" if total is not None else ""
    return f"interrupted after {done}{of} items; run the same command to resume"


__all__ = ["INTERRUPT", "InterruptPlugin", "count_items", "interrupted", "interrupted_line", "register"]
