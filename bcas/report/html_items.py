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
from typing import Any

from markupsafe import Markup

from bcas.grading.outcomes import outcome
from bcas.report.html_interactive import fr_data
from bcas.report.membership import grouped
from bcas.report.summary import grid_metrics
from bcas.report.templating import render

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


def _cell(col: dict[str, Any], rec: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a cell shows: outcome mark, answer (or the error), searches, tokens, documents seen."""
    if rec is None:
        return None
    ok = outcome(rec, col["metric"])
    pred = str(rec.get("prediction") or ("(error) " + str(rec.get("error") or "") if rec.get("error") else ""))
    docs = documents_seen(rec)
    return {
        "state": "" if ok is None else ("1" if ok else "0"),
        "cls": "none" if ok is None else ("ok" if ok else "bad"),
        "mark": "?" if ok is None else ("✔" if ok else "✘"),
        "prediction": pred,
        "searches": int(rec.get("searches_used") or 0),
        "tokens": f"{int(rec.get('tokens_in') or 0) + int(rec.get('tokens_out') or 0):,}",
        "docs": ", ".join(docs),
        "n_docs": len(docs),
    }


def _table(i: int, dataset: str, cols: list[dict[str, Any]]) -> dict[str, Any]:
    item_ids = sorted({item for c in cols for item in c["by_item"]})
    rows = []
    for item_id in item_ids[:ITEM_LIMIT]:
        first = next(c["by_item"][item_id] for c in cols if item_id in c["by_item"])
        rows.append(
            {
                "item": item_id,
                "question": str(first.get("question", ""))[:160],
                "data": fr_data(dataset=dataset),
                "cells": [_cell(c, c["by_item"].get(item_id)) for c in cols],
            }
        )
    return {
        "id": f"items-{i}",
        "dataset": dataset,
        "more": f" (first {ITEM_LIMIT} of {len(item_ids)} items)" if len(item_ids) > ITEM_LIMIT else "",
        "columns": [
            {
                "heading": f"{c['model']} · {c['label']}",
                "model": c["model"],
                "config": c["label"],
                "grids": ", ".join(c["grids"]),
            }
            for c in cols
        ],
        "rows": rows,
    }


def items_section(records: list[dict[str, Any]], grids: Mapping[str, Any]) -> Markup:
    """The "Items across configurations" section (empty without item records)."""
    by_dataset = columns(records, grids)
    if not by_dataset:
        return Markup()
    tables = [_table(i, ds, cols) for i, (ds, cols) in enumerate(by_dataset.items())]
    return render("items.html", tables=tables, modes=FLIP_MODES)
