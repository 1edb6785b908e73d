"""Self-contained HTML report of a run (no network, no external assets).

Sections: filters (model, dataset, grid, configuration) over every table and
figure; summary per model x dataset x configuration; paired comparisons against each
grid's reference; models compared (pairs and the model x configuration matrix with
significance marks); the papers' figures from our data (budget-ordered scaling lines,
categorical configurations as dots with intervals, ablation bars with Newcombe
intervals, the MADARA method table with call counts and routing decisions); cost
against accuracy with the Pareto frontier; each item across every configuration and
model with a flip filter; the run manifest; a per-item drill-down of every trajectory.
All dataset and model text passes through ``html.escape``; the page's only script
(:mod:`bcas.report.html_interactive`) sorts and filters and never evaluates record content.
"""

from __future__ import annotations

import json
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from bcas.grading.outcomes import outcome
from bcas.grids import GRIDS
from bcas.report.html_cost import cost_section, stops_section
from bcas.report.html_figures import figures
from bcas.report.html_interactive import CSS as INTERACTIVE_CSS
from bcas.report.html_interactive import SCRIPT, SCRIPT_HASH, filter_bar, fr_attrs
from bcas.report.html_items import items_section
from bcas.report.html_metrics import metrics_section, trajectory_panel
from bcas.report.html_models import model_sections
from bcas.report.html_run import manifest_section
from bcas.report.membership import GroupKey, group_key
from bcas.report.summary import Comparison, SummaryRow, grid_notes

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3;cursor:pointer} td.t{text-align:left}
tr.sig td{background:#fff3f3} details{margin:2px 0} summary{cursor:pointer}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#fafafa;border:1px solid #eee;padding:4px;max-width:100em}
summary,td.t{overflow-wrap:anywhere}
.ok{color:#137333}.bad{color:#b3261e} .fig{display:inline-block;margin:4px}
"""


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v * 100:.1f}"


def _table(
    headers: list[str],
    rows: list[list[str]],
    cls: str = "sortable",
    row_classes: list[str] | None = None,
    table_id: str = "",
    row_attrs: list[str] | None = None,
) -> str:
    """A table; ``row_attrs``: each row's filter attributes (``fr_attrs``), which make it filterable."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        classes = " ".join(c for c in ((row_classes[i] if row_classes else ""), "fr" if row_attrs else "") if c)
        rc = f' class="{classes}"' if classes else ""
        attrs = row_attrs[i] if row_attrs else ""
        cells = "".join(f'<td class="t">{c}</td>' if j < 4 else f"<td>{c}</td>" for j, c in enumerate(row))
        body.append(f"<tr{rc}{attrs}>{cells}</tr>")
    tid = f' id="{table_id}"' if table_id else ""
    return f'<table class="{cls}"{tid}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


# The grouping columns the summary, comparison and MADARA tables open with.
_GROUP_HEADERS = ("grid", "model", "dataset")


def _group_cells(grid: str, model: str, dataset: str) -> list[str]:
    return [escape(grid), escape(model), escape(dataset)]


def _filter_attrs(rows: list[SummaryRow] | list[Comparison]) -> list[str]:
    """Each row's filter attributes: its grid, model, dataset and configuration."""
    return [fr_attrs(grid=r.grid, model=r.model, dataset=r.dataset, config=r.label) for r in rows]


def _summary_table(rows: list[SummaryRow]) -> str:
    headers = [
        *_GROUP_HEADERS,
        "config",
        "n",
        "acc %",
        "95% CI",
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
    body = [
        [
            *_group_cells(r.grid, r.model, r.dataset),
            escape(r.label) + (" (ref)" if r.reference else ""),
            str(r.n),
            _pct(r.accuracy),
            f"{_pct(r.ci_lo)}–{_pct(r.ci_hi)}",
            _pct(r.judge_accuracy),
            str(r.judge_n),
            f"{r.mean_f1:.3f}",
            f"{r.mean_searches:.2f}",
            f"{r.mean_tokens_in:.0f}",
            f"{r.mean_tokens_out:.0f}",
            f"{r.mean_llm_calls:.1f}",
            "—" if r.cost_usd is None else f"{r.cost_usd:.4f}",
            str(r.errors),
            _pct(r.invalid_turn_rate),
            str(r.context_window_stops),
            escape(getattr(r, "metric", "correct_em")),
            _pct(getattr(r, "em_squad", None)),
        ]
        for r in rows
    ]
    return _table(headers, body, table_id="summary", row_attrs=_filter_attrs(rows))


def _comparison_table(comps: list[Comparison]) -> str:
    headers = [
        *_GROUP_HEADERS,
        "config vs ref",
        "n paired",
        "diff pts",
        "Newcombe 95% CI",
        "b (cfg only)",
        "c (ref only)",
        "McNemar p",
        "Holm p",
        "Holm family",
    ]
    body = [
        [
            *_group_cells(c.grid, c.model, c.dataset),
            f"{escape(c.label)} vs {escape(c.reference)}",
            str(c.n_paired),
            f"{c.diff * 100:+.1f}",
            f"{c.ci_lo * 100:+.1f} – {c.ci_hi * 100:+.1f}",
            str(c.b),
            str(c.c),
            f"{c.p_value:.4f}",
            f"{c.p_holm:.4f}",
            escape(getattr(c, "family", "") or "grid"),
        ]
        for c in comps
    ]
    return _table(
        headers,
        body,
        row_classes=["sig" if c.significant else "" for c in comps],
        table_id="comparisons",
        row_attrs=_filter_attrs(comps),
    )


def _madara_table(records: list[dict[str, Any]]) -> str:
    groups: dict[GroupKey, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        extra = rec.get("extra") or {}
        if rec.get("method") == "madara" or extra.get("kind") == "madara":
            groups[group_key(rec)].append(rec)
    if not groups:
        return ""
    headers = [
        *_GROUP_HEADERS,
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
    body = []
    for (grid, model, dataset, label), recs in sorted(groups.items()):
        n = len(recs)
        ex = [r.get("extra") or {} for r in recs]
        # RoutingDecision.to_dict() names the routed treatment ``mode`` (PDE, SDA, CoT, ATF).
        routes = sorted({str(e["routing"].get("mode", "")) for e in ex if isinstance(e.get("routing"), dict)})
        reasons = sorted({str(e["routing"].get("reason", "")) for e in ex if isinstance(e.get("routing"), dict)})
        body.append(
            [
                *_group_cells(grid, model, dataset),
                escape(label),
                str(n),
                _pct(sum(bool(outcome(r, "strict_em")) for r in recs) / n),
                f"{sum(r.get('llm_calls') or 0 for r in recs) / n:.1f}",
                f"{sum(e.get('assessment_calls') or 0 for e in ex) / n:.1f}",
                f"{sum(e.get('generation_calls') or 0 for e in ex) / n:.1f}",
                f"{sum(r.get('tokens_in') or 0 for r in recs) / n:.0f}",
                _docs_cell(ex),
                escape(" / ".join(routes) + (": " + "; ".join(reasons) if reasons else "")),
            ]
        )
    return "<h2>MADARA methods</h2>" + _table(headers, body, table_id="madara")


def _docs_cell(extras: list[dict[str, Any]]) -> str:
    """Mean documents the items chose among and, in brackets, how many of them were retrieved."""
    listed = [e for e in extras if isinstance(e.get("doc_ids"), list)]
    if not listed:
        return ""
    docs = sum(len(e["doc_ids"]) for e in listed) / len(listed)
    retrieved = sum(int(e.get("retrieved_docs", len(e["doc_ids"]))) for e in listed) / len(listed)
    return f"{docs:.1f} ({retrieved:.1f})"


def _profiles_table(profiles: list[dict[str, Any]]) -> str:
    if not profiles:
        return ""
    headers = ["model", "dataset", "n queries", "ρ̂₁ ρ̂₂ ρ̂₃", "ρ*", "ρ̄", "class", "EM NF", "routed to", "reason"]
    body = []
    for p in profiles:
        dec = p.get("decision") or {}
        rho = p.get("rho_hat") or []
        body.append(
            [
                escape(str(p.get("model_label", p.get("model", "")))),
                escape(str(p.get("dataset", ""))),
                escape(str(p.get("n_queries", ""))),
                escape(" ".join(f"{float(r):.2f}" for r in rho)),
                escape(str(p.get("rho_star", ""))),
                escape(f"{float(p.get('rho_bar') or 0):.3f}"),
                escape(str(p.get("classification", ""))),
                escape(str(p.get("em_nf", ""))),
                escape(str(dec.get("mode", ""))),
                escape(str(dec.get("reason", ""))),
            ]
        )
    return "<h2>RSC profiles and routing</h2>" + _table(headers, body, table_id="rsc")


def _drilldown(records: list[dict[str, Any]], limit: int = 2000) -> str:
    parts = [f"<h2>Items ({min(len(records), limit)} of {len(records)})</h2>"]
    for rec in records[:limit]:
        ok = rec.get("correct_em")
        verdict = rec.get("judge_verdict")
        head = (
            f'<span class="{"ok" if ok else "bad"}">{"✔" if ok else "✘"}</span> '
            f"{escape(str(rec.get('model')))} · {escape(str(rec.get('dataset')))} · "
            f"{escape(str(rec.get('label') or rec.get('config_id')))} · {escape(str(rec.get('item_id')))} — "
            f"{escape(str(rec.get('question', ''))[:160])}"
        )
        steps = []
        for step in rec.get("steps") or []:
            kind = escape(str(step.get("kind", "")))
            text = step.get("query") or step.get("output") or ""
            ids = step.get("retrieved") or step.get("retrieved_ids") or []
            titles = step.get("titles") or []
            steps.append(
                f"<li><b>{kind}</b> ({escape(str(step.get('tokens_in', '')))} in / "
                f"{escape(str(step.get('tokens_out', '')))} out) <pre>{escape(str(text))}</pre>"
                + (f"<div>retrieved: {escape(', '.join(map(str, titles or ids)))}</div>" if ids or titles else "")
                + "</li>"
            )
        body = (
            f"<div>answers: {escape(json.dumps(rec.get('answers'), ensure_ascii=False))}</div>"
            f"<div>prediction: <b>{escape(str(rec.get('prediction')))}</b> · F1 {float(rec.get('f1') or 0):.2f} · "
            f"judge {escape(str(verdict))} · stop {escape(str(rec.get('stop_reason')))} · "
            f"searches {escape(str(rec.get('searches_used')))}</div>"
            + (f"<div>error: {escape(str(rec.get('error')))}</div>" if rec.get("error") else "")
            + trajectory_panel(rec)
            + f"<ol>{''.join(steps)}</ol>"
        )
        extra = rec.get("extra") or {}
        attrs = fr_attrs(
            model=str(rec.get("model")),
            dataset=str(rec.get("dataset")),
            grid=str(extra.get("grid", "")),
            config=str(rec.get("label") or rec.get("config_id")),
        )
        parts.append(f'<details class="fr"{attrs}><summary>{head}</summary>{body}</details>')
    return "".join(parts)


def _notes(records: list[dict[str, Any]], grid_lines: list[str] | None = None) -> str:
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
    lines = list(grid_lines or []) + [missing_price_note(model, sheet) for model, sheet in missing]
    if not lines:
        return ""
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return f'<div class="notes"><h2>Notes</h2><ul id="notes">{items}</ul></div>'


def _gate_section(gate: Any) -> str:
    """The regression gate: per gated case the paired numbers and verdict, then the overall verdict."""
    if gate is None:
        return ""
    headers = [
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

    def num(v: Any, fmt: str) -> str:
        return "" if v is None else escape(format(v, fmt))

    body = [
        [
            escape(r.case_id),
            escape(r.grid),
            escape(f"{r.family} ({r.family_size})"),
            escape(r.verdict),
            str(r.n_paired),
            _pct(r.baseline_acc),
            _pct(r.current_acc),
            num(r.worse_only, "d"),
            num(r.better_only, "d"),
            num(r.p_value, ".4g"),
            num(r.holm_threshold, ".4g"),
            num(r.p_holm, ".4g"),
            "" if r.min_drop is None else f"{r.min_drop * 100:.1f}",
        ]
        for r in gate.rows
    ]
    classes = ["sig" if r.verdict == "FAIL" else "" for r in gate.rows]
    overall = str(gate.overall)
    cls = "bad" if gate.failed or not overall.startswith("PASS") else "ok"
    not_gated = "".join(f"<li>{escape(case_id)}: {escape(reason)}</li>" for case_id, reason in gate.not_gated)
    others = "".join(
        f"<li>{escape(r.case_id)}: compared with {escape(r.compared_with)}</li>"
        for r in gate.rows
        if getattr(r, "compared_with", "")
    )
    return (
        '<h2 id="regression-gate">Regression gate</h2>'
        f'<p class="{cls}" id="gate-overall"><b>{escape(overall)}</b></p>'
        f"<p>Baseline <code>{escape(str(gate.baseline))}</code>; {escape(gate.test)} on "
        f"{escape(', '.join(gate.metrics))} over the items both runs recorded; alpha {escape(f'{gate.alpha:g}')}, "
        f"Holm over each {escape(gate.family)} family (a planned case without a result counts as p = 1). "
        "Min detectable drop: the smallest accuracy drop the case could call significant (every discordant item "
        "lost); a case with none cannot fail.</p>"
        + _table(headers, body, row_classes=classes, table_id="gate")
        + (f'<p>Baseline answers of another identity:</p><ul id="gate-overrides">{others}</ul>' if others else "")
        + (f"<p>Not gated:</p><ul>{not_gated}</ul>" if not_gated else "")
    )


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
) -> Path:
    """Write ``index.html`` into ``run_dir`` and return its path (``gate``: a ``GateReport``;
    ``stops``: cases the session's ``--bcas-max-cost`` stopped, :mod:`bcas.run.cost`)."""
    grid_order = grid_order or {}
    html = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src '{SCRIPT_HASH}'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{CSS}{INTERACTIVE_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1><p>{len(records)} records · run <code>{escape(run_dir.name)}</code></p>"
        + stops_section(stops or [])
        + filter_bar(rows)
        + _notes(records, grid_notes(rows, records, dict(GRIDS.items())))
        + _gate_section(gate)
        + "<h2>Summary</h2>"
        + _summary_table(rows)
        + metrics_section(rows)
        + "<h2>Paired comparisons against each grid's reference</h2>"
        + "<p>Difference = configuration − reference on the same items, in each grid's metric (see Notes); "
        "Newcombe (1998) paired 95% interval; exact McNemar p, Holm-adjusted within each Holm family: one per grid, "
        "or as the grid declares (MADARA: scoring-only methods vs NF, and isolation methods, per model × dataset; "
        "shaded: significant at 0.05).</p>"
        + _comparison_table(comparisons)
        + model_sections(model_comparisons or [], matrix)
        + "<h2>Figures</h2>"
        + figures(rows, comparisons, grid_order, records, dict(GRIDS.items()))
        + _madara_table(records)
        + cost_section(rows)
        + _profiles_table(profiles or [])
        + items_section(records, dict(GRIDS.items()))
        + manifest_section(manifest)
        + _drilldown(records)
        + f"<script>{SCRIPT}</script></body></html>"
    )
    path = run_dir / "index.html"
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
