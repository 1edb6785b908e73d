"""``--bcas-estimate``: the expected calls, searches, tokens, cost and wall time of the selected cases, without running them.

The figures are :mod:`bcas.run.estimate`'s: each case's items (those of its plan not yet
recorded in the run folder) times the call structure its run kind, method or treatment
declares under its budgets (:mod:`bcas.callshape`); calibration (the routed MADARA
pipeline's RSC probe, the ``rsc`` kind) in rows of their own; wall time as a range from
the model's measured speed.  No model is loaded, no index is built, nothing is written
to the run folder.  With ``--bcas-shard`` (K/N or ``auto``) every item of the run is
planned, whatever K, and a second table gives each of the N shards' items, calls and
expected wall time (:mod:`bcas.harness.estimate_shards`), to size an array before
submitting it.
"""

from __future__ import annotations

from typing import Any

import pytest

from bcas.harness import state
from bcas.harness.estimate_shards import _duration, shard_lines
from bcas.records.case_status import items_note
from bcas.run.estimate import CaseEstimate, estimate


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.6f}"


def _calls(e: CaseEstimate) -> str:
    """The expected calls, with the structure's range when the model decides where it stops."""
    if e.calls_min == e.calls_max:
        return f"{e.calls:,.0f}"
    return f"{e.calls:,.0f} ({e.calls_min:,.0f}-{e.calls_max:,.0f})"


def _wall(e: CaseEstimate) -> str:
    if e.wall is None:
        return "unknown"
    return f"{_duration(e.wall[0])}-{_duration(e.wall[1])}"


def _n(e: CaseEstimate) -> str:
    """The items, and the file's size when the case evaluates fewer than it holds (held for calibration named)."""
    note = "" if e.calibration else items_note(e.items, e.dataset_items, e.held_out)
    return f"  ({note})" if note else ""


def lines(estimates: list[CaseEstimate], settings: Any) -> list[str]:
    """The terminal's estimate table, its calibration rows and the total."""
    sheet = "pricing off" if getattr(settings, "prices", None) is None else f"price sheet {settings.prices}"
    out = [
        f"expected spend of {len(estimates)} row(s) ({sheet}; from each case's call structure and budgets; "
        "nothing was run, no model loaded, no index built)",
        f"{'case':<48}{'items':>7}{'calls':>20}{'per item':>10}{'searches':>10}{'tokens in':>12}"
        f"{'tokens out':>12}{'cost $':>12}{'wall':>22}",
    ]
    for e in estimates:
        per = "" if not e.items else f"{e.calls / e.items:.1f}"
        label = ("[calibration] " if e.calibration and not e.case_id.startswith("calibration") else "") + e.case_id
        out.append(
            f"{label[:47]:<48}{e.items:>7}{_calls(e):>20}{per:>10}{e.searches:>10,.0f}{e.tokens_in:>12,.0f}"
            f"{e.tokens_out:>12,.0f}{_cost(e.cost):>12}{_wall(e):>22}{_n(e)}"
        )
    cases = [e for e in estimates if not e.calibration]
    calibration = [e for e in estimates if e.calibration]
    notes = sorted({f"{e.kind}: {e.note} (expected: {e.basis})" for e in estimates if e.note})
    out.extend(f"  note: {n}" for n in notes)
    reranked = sorted({e.rerank for e in estimates if e.rerank})
    if reranked:
        out.append(
            "  note: the llm reranker asks the model once per candidate: "
            + ", ".join(str(n) for n in reranked)
            + " calls per search, in the re-ranking cases' calls"
        )
    judged = sum(e.judge_calls for e in cases)
    if judged:
        out.append(f"  plus {judged:,.0f} judge calls ({settings.judge}), priced and timed apart")
    speeds = sorted({f"{e.model}: {e.speed}" for e in estimates if e.items})
    out.append(
        "  wall time from "
        + ("; ".join(speeds) or "nothing")
        + (
            " (unknown: no measured speed; run a few items first and their records become the basis)"
            if any(e.wall is None for e in estimates)
            else ""
        )
    )

    def total(rows: list[CaseEstimate], name: str) -> str:
        priced = [e.cost for e in rows if e.cost is not None]
        unknown = [e.case_id for e in rows if e.cost is None]
        walls = [e.wall for e in rows]
        wall = (
            "unknown"
            if any(w is None for w in walls)
            else f"{_duration(sum(w[0] for w in walls if w))}-{_duration(sum(w[1] for w in walls if w))}"
        )
        return (
            f"{name}: {sum(e.items for e in rows)} items, {sum(e.calls for e in rows):,.0f} calls, "
            f"{sum(e.tokens_in for e in rows):,.0f} tokens in, {sum(e.tokens_out for e in rows):,.0f} "
            f"tokens out, cost ${sum(priced):.6f}"
            + (f" + {len(unknown)} case(s) of unknown cost" if unknown else "")
            + f", wall {wall}"
        )

    if calibration:
        out.append(total(calibration, "calibration"))
    out.append(total(cases, "total"))
    if getattr(settings, "shard", None) is not None:
        out.extend(shard_lines(estimates, settings))
    return out


class EstimatePlugin:
    """Replaces the run loop: prints the estimate of the collected cases and runs none of them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if self.config.option.collectonly:
            return None  # --collect-only lists the cases; the estimate needs a session that would run them
        cases = [
            item.callspec.params["bcas_case"]
            for item in session.items
            if isinstance(item, pytest.Function)  # only a function is parametrised
            and "bcas_case" in getattr(getattr(item, "callspec", None), "params", {})
        ]
        settings = self.config.stash[state.SETTINGS]
        tr = self.config.pluginmanager.getplugin("terminalreporter")
        rows = lines(estimate(settings, cases), settings) if cases else ["no bcas cases selected"]
        if tr is not None:
            tr.ensure_newline()
            tr.section("bcas estimate")
            for line in rows:
                tr.write_line(line)
        return True


def register(config: pytest.Config) -> None:
    """``--bcas-estimate``: refuse ``-n`` (the estimate runs in one process) and take over the run loop."""
    if getattr(config.option, "numprocesses", None) not in (None, 0):
        raise pytest.UsageError("--bcas-estimate runs in one process; drop -n")
    config.pluginmanager.register(EstimatePlugin(config), "bcas-estimate")
