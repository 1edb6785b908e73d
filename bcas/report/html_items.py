"""Per-item comparison: one question across every configuration and model of the run.

One table per dataset: a row per item, a column per model × configuration (a
configuration that several grids share is one column: the same answers).  Each cell
shows the answer, whether it is right in the grid's primary metric
(:mod:`bcas.grading.outcomes`), searches, tokens and how many documents the answer saw
(BCAS: the documents its searches returned; MADARA: the documents in its context).
Two chosen columns and a mode filter the rows to the items whose outcome flips between
them (:mod:`bcas.report.html_interactive`).  With several epochs the cells show epoch 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from html import escape
from typing import Any

from bcas.grading.outcomes import outcome
from bcas.report.html_interactive import fr_attrs
from bcas.report.membership import grouped
from bcas.report.summary import grid_metrics

ITEM_LIMIT = 1000  # rows per dataset table; a larger run lists its first items (the drill-down has the rest)
FLIP_MODES = (("all", "all items"), ("flip", "outcome differs"), ("a", "only A right"), ("b", "only B right"))


def documents_seen(rec: dict[str, Any]) -> list[str]:
    """Document ids the answer saw: its searches' documents (BCAS) or its context (MADARA)."""
    extra = rec.get("extra") or {}
    context = extra.get("context_doc_ids")
    if isinstance(context, list) and context:
        return [str(d) for d in dict.fromkeys(context)]
    return [str(d) for d in dict.fromkeys(d for step in rec.get("steps") or [] for d in step.get("docs") or [])]


def columns(records: list[dict[str, Any]], grids: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """dataset -> columns, each {model, label, grids, metric, by_item: item id -> record (epoch 0)}."""
    groups, _ = grouped(records, grids)
    metrics = grid_metrics(records, grids)
    out: dict[str, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for (grid, model, dataset, label), recs in sorted(groups.items()):
        config_id = str(recs[0].get("config_id", ""))
        col = out[dataset].get((model, config_id))
        if col is None:
            by_item = {str(r.get("item_id")): r for r in recs if int(r.get("epoch") or 0) == 0}
            col = {
                "model": model,
                "label": label,
                "grids": [],
                "metric": metrics.get(grid, "correct_em"),
                "by_item": by_item,
            }
            out[dataset][(model, config_id)] = col
        col["grids"].append(grid)
    return {ds: sorted(cols.values(), key=lambda c: (c["label"], c["model"])) for ds, cols in sorted(out.items())}


def _cell(j: int, col: dict[str, Any], rec: dict[str, Any] | None) -> str:
    if rec is None:
        return f'<td class="none" data-col="{j}" data-ok="">—</td>'
    ok = outcome(rec, col["metric"])
    state = "" if ok is None else ("1" if ok else "0")
    cls = "none" if ok is None else ("ok" if ok else "bad")
    mark = "?" if ok is None else ("✔" if ok else "✘")
    pred = str(rec.get("prediction") or ("(error) " + str(rec.get("error") or "") if rec.get("error") else ""))
    docs = documents_seen(rec)
    tokens = int(rec.get("tokens_in") or 0) + int(rec.get("tokens_out") or 0)
    return (
        f'<td class="{cls}" data-col="{j}" data-ok="{state}"><div class="cell" title="{escape(pred)}">'
        f"{mark} {escape(pred[:80])}</div><div>{int(rec.get('searches_used') or 0)} srch · {tokens:,} tok · "
        f'<span title="{escape(", ".join(docs))}">{len(docs)} docs</span></div></td>'
    )


def _table(i: int, dataset: str, cols: list[dict[str, Any]]) -> str:
    tid = f"items-{i}"
    item_ids = sorted({item for c in cols for item in c["by_item"]})
    shown = item_ids[:ITEM_LIMIT]
    heads = "".join(
        f'<th title="{escape(", ".join(c["grids"]))}">{escape(c["model"])} · {escape(c["label"])}</th>' for c in cols
    )
    rows = []
    for item_id in shown:
        first = next(c["by_item"][item_id] for c in cols if item_id in c["by_item"])
        cells = "".join(_cell(j, c, c["by_item"].get(item_id)) for j, c in enumerate(cols))
        rows.append(
            f'<tr class="fr item" data-item="{escape(item_id)}"{fr_attrs(dataset=dataset)}>'
            f'<td class="t">{escape(item_id)}</td><td class="t">{escape(str(first.get("question", ""))[:160])}'
            f"</td>{cells}</tr>"
        )
    options = "".join(
        f'<option value="{j}">{escape(c["model"])} · {escape(c["label"])}</option>' for j, c in enumerate(cols)
    )
    second = options.replace('<option value="1">', '<option value="1" selected>', 1) if len(cols) > 1 else options
    modes = "".join(f'<option value="{v}">{escape(t)}</option>' for v, t in FLIP_MODES)
    more = f" (first {ITEM_LIMIT} of {len(item_ids)} items)" if len(item_ids) > ITEM_LIMIT else ""
    return (
        f'<div class="items-panel fr" data-dataset="{escape(dataset)}"><h3>{escape(dataset)}{escape(more)}</h3>'
        f'<p class="flip" data-table="{tid}"><label>A <select class="flip-a">{options}</select></label>'
        f'<label>B <select class="flip-b">{second}</select></label>'
        f'<label>show <select class="flip-mode">{modes}</select></label> <span class="count"></span></p>'
        f'<div class="scroll"><table class="sortable items" id="{tid}"><thead><tr><th>item</th><th>question</th>'
        f"{heads}</tr></thead><tbody>{''.join(rows)}</tbody></table></div></div>"
    )


def items_section(records: list[dict[str, Any]], grids: Mapping[str, Any]) -> str:
    """The "Items across configurations" section (empty without item records)."""
    by_dataset = columns(records, grids)
    if not by_dataset:
        return ""
    return (
        '<h2 id="items-compared">Items across configurations and models</h2>'
        "<p>Each question once, each model × configuration a column: ✔/✘ in the grid's primary metric, the "
        "answer (hover for all of it), searches, tokens (in + out) and the documents the answer saw. Choose "
        'two columns and "outcome differs" to see the items that flip between them.</p>'
        + "".join(_table(i, ds, cols) for i, (ds, cols) in enumerate(by_dataset.items()))
    )
