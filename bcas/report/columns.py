"""Which columns of a report table a reader sees first: the decision columns.

At a laptop's width (1,280 px) no table of the report scrolls sideways. Each wide table
shows its decision columns (who and what: grid, model, dataset, configuration, n; then
accuracy with its interval, the difference from the reference with its interval, cost or
tokens per correct answer, p95 latency) and hides the rest behind one click: the
"all N columns" box above the table (a checkbox styled by CSS, no script), which shows
every column and lets the table scroll inside its own box.

:data:`DECISION_COLUMNS` names, per table id, the headers shown first; a table not listed
shows every column. :func:`hidden_columns` is what the templates' ``table`` macro asks.
"""

from __future__ import annotations

from collections.abc import Sequence

DECISION_COLUMNS: dict[str, tuple[str, ...]] = {
    "summary": (
        "grid", "model", "dataset", "config", "n", "acc %", "95% CI", "diff vs ref pts [95%]", "$ / correct",
        "tokens / correct", "p95 s",
    ),
    "comparisons": (
        "grid", "model", "dataset", "config vs ref", "n paired", "diff pts", "Newcombe 95% CI", "Holm p", "verdict",
    ),
    "beyond": (
        "grid", "model", "dataset", "config", "evidence recall %", "correct / incorrect / not attempted",
        "cost-of-pass $ [95%]", "tokens-of-pass [95%]",
    ),
    "latency-table": ("model", "dataset", "configuration", "n", "p50 s", "p95 s", "items/min"),
    "methods-table": (
        "model", "dataset", "method", "n", "method acc %", "diff (method − agent) pts", "95% CI (Newcombe)",
        "verdict", "tokens/correct", "USD/correct",
    ),
    "madara": ("grid", "model", "dataset", "method", "n", "strict EM %", "LLM calls/item", "tokens in/item"),
    "gate": ("case", "verdict", "n paired", "baseline %", "current %", "Holm p", "min detectable drop (pts)"),
    "model-comparisons": (
        "grid", "dataset", "config", "first", "second", "n paired", "diff pts", "95% CI", "Holm p", "verdict",
    ),
}  # fmt: skip


PROSE_COLUMNS = frozenset({"verdict"})  # sentences: they wrap inside a bounded width instead of widening the table


def prose_columns(headers: Sequence[str]) -> list[int]:
    """Indices of the columns whose cells are sentences (a verdict): they wrap (``td.prose``)."""
    return [i for i, h in enumerate(headers) if str(h) in PROSE_COLUMNS]


def hidden_columns(table_id: str, headers: Sequence[str]) -> list[int]:
    """Indices of the columns of table ``table_id`` hidden until "all columns" is chosen
    (none for a table without decision columns, or when hiding would leave one column)."""
    shown = DECISION_COLUMNS.get(table_id)
    if not shown:
        return []
    hidden = [i for i, h in enumerate(headers) if str(h) not in shown]
    return hidden if len(hidden) < len(headers) - 1 else []


__all__ = ["DECISION_COLUMNS", "PROSE_COLUMNS", "hidden_columns", "prose_columns"]


def n_cell(n: int, note: str) -> object:
    """A case's n as a table cell, with the words of a case evaluated on fewer items than its file
    holds beside it (the ``table`` macro's ``note``; :func:`bcas.records.case_status.items_note`)."""
    return {"text": n, "note": note} if note else n
