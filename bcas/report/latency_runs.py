"""What ``bcas latency RUN_DIR...`` shows: throughput against p95 latency across concurrency levels (BCAS §6.1).

Load is a run condition, not a configuration: the records of one item at two levels have
the same answer identity, so one run folder cannot hold both (its resume would take the
second level's items as already recorded).  Each level runs into its own folder
(``--bcas-concurrency N --bcas-no-cache --bcas-report runs/cN``: without the generation
cache, so every level really loads the server), and this command reads the folders
together: per configuration (model · dataset · label) one row per level with items per
minute, p50 and p95 time per item and the mean wait (:func:`bcas.metrics.latency.load_curve`),
and with ``--out FILE.html`` the same as a page with the knee figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bcas.records.store import read_records_file
from bcas.report.charts import knee_chart
from bcas.report.html_latency import load_curves
from bcas.report.templating import render
from bcas.report.vega import page_scripts


def _records(run_dirs: Sequence[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "records.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{run_dir}: no records.jsonl (not a run folder)")
        out.extend(r.to_dict() for r in read_records_file(path))
    return out


def curve_lines(curves: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The load table as text: one block per configuration, one line per level."""

    def s(v: float | None, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    lines: list[str] = []
    for name, curve in sorted(curves.items()):
        lines.append(name)
        lines.append(f"  {'concurrency':>11}{'n':>6}{'items/min':>11}{'p50 s':>9}{'p95 s':>9}{'wait s':>9}")
        for p in curve:
            lines.append(
                f"  {p['concurrency']:>11}{p['n']:>6}{s(p['items_per_min'], '.1f'):>11}"
                f"{s(p['latency_p50'], '.3f'):>9}{s(p['latency_p95'], '.3f'):>9}{s(p['mean_wait_s'], '.3f'):>9}"
            )
    return lines


def latency_runs(run_dirs: Sequence[str], out: str | None = None) -> list[str]:
    """The load table of ``run_dirs`` as lines (and, with ``out``, the page with the knee figure
    written there).  ``ValueError``: a folder without records, or no configuration timed at two
    levels or more."""
    try:
        records = _records(run_dirs)
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None
    curves = load_curves(records)
    if not curves:
        raise ValueError("no configuration has timed records at two concurrency levels or more")
    lines = curve_lines(curves)
    if out:
        rows = [
            [name, str(p["concurrency"]), str(p["n"])]
            + [
                "—" if p[k] is None else f"{p[k]:.{d}f}"
                for k, d in (("items_per_min", 1), ("latency_p50", 3), ("latency_p95", 3), ("mean_wait_s", 3))
            ]
            for name, curve in sorted(curves.items())
            for p in curve
        ]
        knee = knee_chart("latency-knee", curves)
        figure = render("_figure_one.html", figure=knee)
        scripts, hashes = page_scripts(figure)
        page = render(
            "latency_runs.html",
            title="bcas latency",
            knee=figure,
            rows=rows,
            runs=list(run_dirs),
            scripts=scripts,
            script_hashes=hashes,
        )
        Path(out).write_text(page, encoding="utf-8")
        lines.append(f"written: {out}")
    return lines


__all__ = ["curve_lines", "latency_runs"]
