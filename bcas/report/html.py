"""Self-contained HTML report of a run (no network, no external assets).

Sections: filters (model, dataset, grid, configuration) over every table and
figure; summary per model x dataset x configuration; paired comparisons against each
grid's reference; models compared (pairs and the model x configuration matrix with
significance marks); the papers' figures from our data (budget-ordered scaling lines,
categorical configurations as dots with intervals, ablation bars with Newcombe
intervals, the MADARA method table with call counts and routing decisions); cost
against accuracy with the Pareto frontier; each item across every configuration and
model with a flip filter; the run manifest; a per-item drill-down of every trajectory.
The page is rendered from ``templates/report.html`` and its section templates with
autoescaping on (:mod:`bcas.report.templating`): Python code prepares rows of plain text
and the templates escape every value.  The page's own script
(:mod:`bcas.report.html_interactive`) sorts and filters and never evaluates record content;
the figures are Vega-Lite specs drawn by the Vega bundle inlined once (:mod:`bcas.report.vega`).
A banner names every model that is a test double (the ``mock`` backend).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from markupsafe import Markup

from bcas.grading.outcomes import outcome
from bcas.grids import GRIDS
from bcas.records.schema import is_test_double
from bcas.report.columns import n_cell
from bcas.report.comparisons import Comparison
from bcas.report.html_cost import cost_section, stops_section
from bcas.report.html_figures import figures
from bcas.report.html_interactive import CSS as INTERACTIVE_CSS
from bcas.report.html_interactive import SCRIPT, SCRIPT_HASH, filter_bar, fr_data
from bcas.report.html_items import items_section
from bcas.report.html_latency import latency_section
from bcas.report.html_methods import methods_section
from bcas.report.html_metrics import metrics_section, trajectory_panel
from bcas.report.html_models import model_sections
from bcas.report.html_run import manifest_section
from bcas.report.html_status import failures_section
from bcas.report.membership import GroupKey, group_key
from bcas.report.status import counting, mark
from bcas.report.summary import SummaryRow, grid_notes, served_beside
from bcas.report.templating import render
from bcas.report.vega import page_scripts

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3;cursor:pointer} td.t{text-align:left}
tr.sig td{background:#fff3f3} details{margin:2px 0} summary{cursor:pointer}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#fafafa;border:1px solid #eee;padding:4px;max-width:100em}
summary{overflow-wrap:anywhere}
td.t{overflow-wrap:normal;word-break:normal;hyphens:none} td{white-space:nowrap}
td.q{white-space:normal;min-width:24em;max-width:36em} td.prose{white-space:normal;min-width:14em;max-width:24em} .name{white-space:nowrap}
.ok{color:#137333}.bad{color:#b3261e} figure.bcas-figure{display:inline-block;margin:4px 8px 12px 0}
.figure-empty{color:#555;font-style:italic} figure.bcas-figure[hidden],.figure-empty[hidden]{display:none}
.n-note{white-space:normal;color:#555}
tr.failed td{background:#fdecea} tr.failed td:nth-child(6){color:#b3261e;font-weight:bold}
#case-failures{background:#fdecea;border-color:#b3261e;font-weight:normal} #case-failures h2{margin:0.2em 0}
.trajectory td.t{white-space:normal;overflow-wrap:break-word;min-width:8em}
"""


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v * 100:.1f}"


def test_doubles(records: list[dict[str, Any]]) -> list[str]:
    """The model labels of the run that are test doubles, sorted."""
    return sorted({str(r.get("model")) for r in records if is_test_double(r.get("model_fingerprint"), r.get("extra"))})


def _filter_data(r: SummaryRow | Comparison) -> dict[str, str]:
    """A row's filter keys: its grid, model, dataset and configuration."""
    return fr_data(grid=r.grid, model=r.model, dataset=r.dataset, config=r.label)


SUMMARY_HEADERS = [
    "grid",
    "model",
    "dataset",
    "config",
    "n",
    "acc %",
    "95% CI",
    "diff vs ref pts [95%]",
    "$ / correct",
    "tokens / correct",
    "p95 s",
    "judge %",
    "judge n",
    "F1",
    "searches",
    "tokens in",
    "tokens out",
    "LLM calls",
    "cost $",
    "errors",
    "invalid turns %",
    "context full",
    "metric",
    "SQuAD EM %",
]


def _cost_cell(r: SummaryRow) -> str:
    """The row's cost, as summary.json has it: ``—`` when unknown (a model the sheet does not
    price, such as the mock backend's test doubles under the installed sheet)."""
    return "—" if r.cost_usd is None else f"{r.cost_usd:.4f}"


def _diff_cell(r: SummaryRow, against: dict[GroupKey, Comparison]) -> str:
    """The row's paired difference from its grid's reference, in points, with its Newcombe interval."""
    if r.reference:
        return "ref"
    c = against.get((r.grid, r.model, r.dataset, r.label))
    if c is None or not r.counts:
        return "—"
    return f"{c.diff * 100:+.1f} [{c.ci_lo * 100:+.1f}, {c.ci_hi * 100:+.1f}]" + (" *" if c.significant else "")


def _per_correct(value: float | None, fmt: str, r: SummaryRow) -> str:
    """Cost (or tokens) of one correct answer: ``none`` when nothing was correct (no answer was
    bought, as cost-of-pass says it), ``—`` when unknown."""
    if not r.counts:
        return "—"
    if not r.n_correct:
        return "none"
    return "—" if value is None else format(value, fmt)


def gate_failures(gate: Any) -> dict[tuple[str, str], str]:
    """The cases the regression gate failed: ``(grid, case id)`` -> the line shown on their summary row."""
    if gate is None:
        return {}
    return {
        (r.grid, r.case_id): f"regression gate FAIL: {_pct(r.current_acc)}% vs baseline {_pct(r.baseline_acc)}%"
        f" (Holm p {r.p_holm:.4g})"
        if r.p_holm is not None
        else "regression gate FAIL"
        for r in gate.rows
        if r.verdict == "FAIL"
    }


def _gate_line(r: SummaryRow, failed: dict[tuple[str, str], str]) -> str:
    """The gate's failure line for a summary row (its case id: model[~served]-dataset-label), or ""."""
    for (grid, case_id), line in failed.items():
        if grid == r.grid and (case_id == f"{r.model}-{r.dataset}-{r.label}" or (
            case_id.startswith(f"{r.model}~") and case_id.endswith(f"-{r.dataset}-{r.label}")
        )):  # fmt: skip
            return line
    return ""


def _summary_rows(
    rows: list[SummaryRow], comparisons: list[Comparison] | None = None, gate: Any = None
) -> list[dict[str, Any]]:
    against = {(c.grid, c.model, c.dataset, c.label): c for c in comparisons or []}
    failed = gate_failures(gate)
    out = []
    for r in rows:
        line = _gate_line(r, failed) if failed else ""
        label = r.label + (" (ref)" if r.reference else "")
        out.append(
            {
                "cls": ("fr" if r.counts else "fr failed") + (" gate-fail" if line else ""),
                "data": _filter_data(r),
                "cells": _summary_cells(r, {"text": f"{label} ✘ gate", "title": line} if line else label, against),
            }
        )
    return out


def _summary_cells(r: SummaryRow, label: Any, against: dict[GroupKey, Comparison]) -> list[Any]:
    return [
        r.grid,
        served_beside(r.model, r.served),  # what answered, when it is not the model asked for
        r.dataset,
        label,
        n_cell(r.n, r.items_note),  # with "20 of 50 items; 30 held for calibration" when the file holds more
        # a case that did not pass: its mark and reason where its accuracy would be
        _pct(r.accuracy) if r.counts else {"text": mark(r), "title": r.reason},
        f"{_pct(r.ci_lo)}–{_pct(r.ci_hi)}" if r.counts else "—",
        _diff_cell(r, against),
        _per_correct(r.cost_of_pass, ".4g", r),
        _per_correct(r.tokens_of_pass, ".0f", r),
        "—" if r.latency_p95 is None else f"{r.latency_p95:.3f}",
        _pct(r.judge_accuracy) if r.judge_n and r.counts else "—",
        r.judge_n if r.judge_n else "—",
        f"{r.mean_f1:.3f}" if r.counts else "—",
        f"{r.mean_searches:.2f}",
        f"{r.mean_tokens_in:.0f}",
        f"{r.mean_tokens_out:.0f}",
        f"{r.mean_llm_calls:.1f}",
        _cost_cell(r),
        r.errors,
        _pct(r.invalid_turn_rate),
        r.context_window_stops,
        getattr(r, "metric", "correct_em"),
        _pct(getattr(r, "em_squad", None)) if r.counts else "—",
    ]


COMPARISON_HEADERS = [
    "grid",
    "model",
    "dataset",
    "config vs ref",
    "n paired",
    "diff pts",
    "Newcombe 95% CI",
    "b (cfg only)",
    "c (ref only)",
    "McNemar p",
    "Holm p",
    "Holm family",
    "verdict",
]


def _comparison_rows(comps: list[Comparison]) -> list[dict[str, Any]]:
    return [
        {
            "cls": "fr sig" if c.significant else "fr",
            "data": _filter_data(c),
            "cells": [
                c.grid,
                c.model,
                c.dataset,
                f"{c.label} vs {c.reference}",
                c.n_paired,
                f"{c.diff * 100:+.1f}",
                f"{c.ci_lo * 100:+.1f} – {c.ci_hi * 100:+.1f}",
                c.b,
                c.c,
                f"{c.p_value:.4f}",
                f"{c.p_holm:.4f}",
                getattr(c, "family", "") or "grid",
                c.verdict,  # who is ahead, only when separated (bcas.report.verdict)
            ],
        }
        for c in comps
    ]


MADARA_HEADERS = [
    "grid",
    "model",
    "dataset",
    "method",
    "n",
    "strict EM %",
    "LLM calls/item",
    "assessment calls/item",
    "generation calls/item",
    "tokens in/item",
    "docs/item (retrieved)",
    "routing decision",
]


def _madara_rows(
    records: list[dict[str, Any]], marks: dict[GroupKey, str] | None = None, notes: dict[GroupKey, str] | None = None
) -> list[dict[str, Any]]:
    """One row per MADARA case; ``marks``: the cases that did not pass, shown with their mark, not strict EM;
    ``notes``: the words beside the n of a case evaluated on fewer items than its file holds."""
    marks, notes = marks or {}, notes or {}
    groups: dict[GroupKey, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        extra = rec.get("extra") or {}
        if rec.get("method") == "madara" or extra.get("kind") == "madara":
            groups[group_key(rec)].append(rec)
    body = []
    for (grid, model, dataset, label), recs in sorted(groups.items()):
        n = len(recs)
        ex = [r.get("extra") or {} for r in recs]
        # RoutingDecision.to_dict() names the routed treatment ``mode`` (PDE, SDA, CoT, ATF).
        decisions = [e["routing"] for e in ex if isinstance(e.get("routing"), dict)]
        routes = sorted({str(d.get("mode")) for d in decisions if d.get("mode")})
        reasons = sorted({str(d.get("reason")) for d in decisions if d.get("reason")})  # none recorded: no colon
        body.append(
            {
                "cells": [
                    grid,
                    model,
                    dataset,
                    label,
                    n_cell(n, notes.get((grid, model, dataset, label), "")),
                    marks.get((grid, model, dataset, label))
                    or _pct(sum(bool(outcome(r, "strict_em")) for r in recs) / n),
                    f"{sum(r.get('llm_calls') or 0 for r in recs) / n:.1f}",
                    f"{sum(e.get('assessment_calls') or 0 for e in ex) / n:.1f}",
                    f"{sum(e.get('generation_calls') or 0 for e in ex) / n:.1f}",
                    f"{sum(r.get('tokens_in') or 0 for r in recs) / n:.0f}",
                    _docs_cell(ex),
                    " / ".join(routes) + (": " + "; ".join(reasons) if reasons else ""),
                ]
            }
        )
    return body


def _docs_cell(extras: list[dict[str, Any]]) -> str:
    """Mean documents the items chose among and, in brackets, how many of them were retrieved."""
    listed = [e for e in extras if isinstance(e.get("doc_ids"), list)]
    if not listed:
        return ""
    docs = sum(len(e["doc_ids"]) for e in listed) / len(listed)
    retrieved = sum(int(e.get("retrieved_docs", len(e["doc_ids"]))) for e in listed) / len(listed)
    return f"{docs:.1f} ({retrieved:.1f})"


PROFILE_HEADERS = ["model", "dataset", "n queries", "ρ̂₁ ρ̂₂ ρ̂₃", "ρ*", "ρ̄", "class", "EM NF", "routed to", "reason"]


def _profile_rows(profiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = []
    for p in profiles:
        dec = p.get("decision") or {}
        rho = p.get("rho_hat") or []
        body.append(
            {
                "cells": [
                    str(p.get("model_label", p.get("model", ""))),
                    str(p.get("dataset", "")),
                    str(p.get("n_queries", "")),
                    " ".join(f"{float(r):.2f}" for r in rho),
                    str(p.get("rho_star", "")),
                    f"{float(p.get('rho_bar') or 0):.3f}",
                    str(p.get("classification", "")),
                    str(p.get("em_nf", "")),
                    str(dec.get("mode", "")),
                    str(dec.get("reason", "")),
                ]
            }
        )
    return body


def _tokens_text(step: dict[str, Any]) -> str:
    """``12 in / 3 out`` with whichever counts the step has; empty when it has none."""
    parts = [
        f"{step[key]} {name}" for key, name in (("tokens_in", "in"), ("tokens_out", "out")) if step.get(key) is not None
    ]
    return " / ".join(parts)


def _drilldown(records: list[dict[str, Any]], limit: int = 2000) -> list[dict[str, Any]]:
    """Each record's head line, answer facts (only those it has: no ``None``) and steps."""
    out = []
    for rec in records[:limit]:
        verdict = rec.get("judge_verdict")
        facts = [f"F1 {float(rec.get('f1') or 0):.2f}"]
        if verdict is not None:
            facts.append(f"judge {'right' if verdict else 'wrong'}")
        if rec.get("stop_reason"):
            facts.append(f"stop {rec.get('stop_reason')}")
        if rec.get("searches_used") is not None:
            facts.append(f"searches {rec.get('searches_used')}")
        steps = []
        for step in rec.get("steps") or []:
            ids = step.get("retrieved") or step.get("retrieved_ids") or []
            titles = step.get("titles") or []
            steps.append(
                {
                    "kind": str(step.get("kind", "")),
                    "tokens": _tokens_text(step),
                    "text": str(step.get("query") or step.get("output") or ""),
                    "retrieved": ", ".join(map(str, titles or ids)),
                }
            )
        extra = rec.get("extra") or {}
        label = str(rec.get("label") or rec.get("config_id"))
        out.append(
            {
                "ok": bool(rec.get("correct_em")),
                "head": f"{rec.get('model')} · {rec.get('dataset')} · {label} · {rec.get('item_id')} — "
                f"{str(rec.get('question', ''))[:160]}",
                "answers": json.dumps(rec.get("answers"), ensure_ascii=False),
                "prediction": str(rec.get("prediction") or ""),
                "facts": facts,
                "error": str(rec.get("error")) if rec.get("error") else "",
                "trajectory": trajectory_panel(rec),
                "steps": steps,
                "data": fr_data(
                    model=str(rec.get("model")),
                    dataset=str(rec.get("dataset")),
                    grid=str(extra.get("grid", "")),
                    config=label,
                ),
            }
        )
    return out


def _notes(records: list[dict[str, Any]], grid_lines: list[str] | None = None) -> list[str]:
    """Run-level notes: each grid's metric and retrieval models (vs the paper's), and models a
    price sheet could not price (their cost is unknown, not 0)."""
    from bcas.records import missing_price_note

    missing = sorted(
        {
            (str(m.get("model")), str(m.get("sheet")))
            for r in records
            if isinstance(m := (r.get("extra") or {}).get("price_missing"), dict)
        }
    )
    return list(grid_lines or []) + [missing_price_note(model, sheet) for model, sheet in missing]


GATE_HEADERS = [
    "case",
    "grid",
    "Holm family",
    "verdict",
    "n paired",
    "baseline %",
    "current %",
    "baseline only",
    "current only",
    "p",
    "Holm threshold",
    "Holm p",
    "min detectable drop (pts)",
]


def _gate(gate: Any) -> dict[str, Any] | None:
    """The regression gate: per gated case the paired numbers and verdict, then the overall verdict."""
    if gate is None:
        return None

    def num(v: Any, fmt: str) -> str:
        return "" if v is None else format(v, fmt)

    rows = [
        {
            "cls": "sig" if r.verdict == "FAIL" else "",
            "cells": [
                r.case_id,
                r.grid,
                f"{r.family} ({r.family_size})",
                r.verdict,
                r.n_paired,
                _pct(r.baseline_acc),
                _pct(r.current_acc),
                num(r.worse_only, "d"),
                num(r.better_only, "d"),
                num(r.p_value, ".4g"),
                num(r.holm_threshold, ".4g"),
                num(r.p_holm, ".4g"),
                "" if r.min_drop is None else f"{r.min_drop * 100:.1f}",
            ],
        }
        for r in gate.rows
    ]
    overall = str(gate.overall)
    return {
        "overall": overall,
        "cls": "bad" if gate.failed or not overall.startswith("PASS") else "ok",
        "baseline": str(gate.baseline),
        "test": gate.test,
        "metrics": ", ".join(gate.metrics),
        "alpha": f"{gate.alpha:g}",
        "family": gate.family,
        "headers": GATE_HEADERS,
        "rows": rows,
        "overrides": [(r.case_id, r.compared_with) for r in gate.rows if getattr(r, "compared_with", "")],
        "sequential": [(r.case_id, r.how) for r in gate.rows if getattr(r, "how", "")],
        "not_gated": list(gate.not_gated),
    }


def render_report(
    run_dir: Path,
    records: list[dict[str, Any]],
    rows: list[SummaryRow],
    comparisons: list[Comparison],
    grid_order: dict[str, list[str]] | None = None,
    title: str = "bcas report",
    profiles: list[dict[str, Any]] | None = None,
    gate: Any = None,
    model_comparisons: list[Comparison] | None = None,
    matrix: dict[str, Any] | None = None,
    manifest: dict[str, Any] | None = None,
    stops: list[dict[str, Any]] | None = None,
    notes: list[str] | None = None,
    methods: tuple[list[Any], list[Any]] | None = None,
) -> Path:
    """Write ``index.html`` into ``run_dir`` and return its path (``gate``: a ``GateReport``;
    ``stops``: cases the session's ``--bcas-max-cost`` stopped, :mod:`bcas.run.cost`; ``notes``:
    lines shown first among the notes; ``methods``: the summary's agent-vs-methods results,
    ``Summaries.methods``, so the page shows what summary.json says; none, no such section)."""
    grid_order = grid_order or {}
    grids = dict(GRIDS.items())
    results = counting(rows)  # the charts, matrices and beyond-accuracy tables show no case that did not pass
    marks = {(r.grid, r.model, r.dataset, r.label): mark(r) for r in rows if not r.counts}
    figure_html = figures(results, comparisons, grid_order, records, grids)
    cost = cost_section(results, records) + latency_section(results, records)
    methods_html = methods_section(results, methods or ([], []))
    figure_scripts, figure_hashes = page_scripts(figure_html, cost, methods_html)  # Vega, once, when a figure is drawn
    html = render(
        "report.html",
        title=title,
        # The page's own constants, not data: the stylesheet and the one script admitted by its hash.
        css=Markup(CSS + INTERACTIVE_CSS),
        script=Markup(SCRIPT),
        script_hash=SCRIPT_HASH,
        figure_scripts=figure_scripts,
        figure_hashes=figure_hashes,
        n_records=len(records),
        run_name=run_dir.name,
        test_doubles=test_doubles(records),
        failures=failures_section(rows),
        stops=stops_section(stops or []),
        filters=filter_bar(rows),
        notes=list(notes or []) + _notes(records, grid_notes(rows, records, grids)),
        gate=_gate(gate),
        summary_headers=SUMMARY_HEADERS,
        summary_rows=_summary_rows(rows, comparisons, gate),
        metrics=metrics_section(results),
        comparison_headers=COMPARISON_HEADERS,
        comparison_rows=_comparison_rows(comparisons),
        models=model_sections(model_comparisons or [], matrix),
        figures=figure_html,
        madara_headers=MADARA_HEADERS,
        madara_rows=_madara_rows(records, marks, {(r.grid, r.model, r.dataset, r.label): r.items_note for r in rows}),
        cost=cost,
        methods=methods_html,
        profile_headers=PROFILE_HEADERS,
        profile_rows=_profile_rows(profiles or []),
        items=items_section(records, grids),
        manifest=manifest_section(manifest),
        drilldown=_drilldown(records),
    )
    path = run_dir / "index.html"
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
