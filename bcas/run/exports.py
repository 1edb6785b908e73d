"""Exports for other tools: ``records.parquet`` and per-case JUnit XML properties.

``records.parquet`` holds the same records as ``records.jsonl``, one row each: scalar
fields as typed columns (``cost_usd`` stays null where the cost is unknown, never 0),
``answers`` as a list of strings, and the nested fields (``config``, ``judge``,
``steps``, ``extra``, ``grades``, ``timing``) as JSON text columns ending in ``_json``, since their
shape differs between BCAS and MADARA records.  It needs pyarrow (``pip install
'bcas[parquet]'``); without it the run says so and writes the JSONL alone.

Per-case properties (``--junitxml``; pytest writes ``item.user_properties`` as
``<property>`` elements): the grid's primary metric, accuracy with its 95% interval and
method, n, the case's cost (``unknown`` when any record's is), and what this session ran.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from bcas.records import Record
from bcas.records.case_status import case_verdict, items_note
from bcas.run.cost import cost_text

PARQUET_FILE = "records.parquet"
NESTED = ("config", "judge", "steps", "extra", "grades", "timing")
PYARROW_MISSING = "pyarrow is not installed (pip install 'bcas[parquet]'); records.jsonl holds every record"


def case_result(stats: Any, outcome: Any, grid: str, label: str) -> dict[str, str]:
    """A finished case's ``bcas_*`` properties (strings): its primary metric, interval, n, cost, and this session's run."""
    from bcas.grids import GRIDS
    from bcas.report.summary import summarize

    props: dict[str, str] = {
        "bcas_case": stats.case_id,
        "bcas_items_total": str(stats.total),
        "bcas_items_run": str(stats.done),
        "bcas_items_resumed": str(stats.resumed),
        "bcas_wall_s": f"{float(getattr(outcome, 'wall_s', 0.0)):.3f}",
        "bcas_run_tokens": str(stats.tokens),
        "bcas_run_cost": cost_text(stats.cost, stats.unpriced, stats.priced),
        "bcas_stopped": "true" if stats.stopped else "false",
    }
    file_items, held = int(getattr(outcome, "file_items", 0) or 0), int(getattr(outcome, "held_out", 0) or 0)
    if note := items_note(stats.total, file_items, held):  # fewer items than the file holds: said where n is shown
        props["bcas_items_note"] = note
    # The rule cases.jsonl follows (bcas.run.session.run_case), on the same stop message.
    props["bcas_status"], reason = case_verdict(
        getattr(outcome, "stopped", None), getattr(outcome, "violations", ()) or ()
    )
    if reason:  # a case that did not pass has no accuracy to show: its reason instead
        props["bcas_reason"] = reason
        return props
    records = list(getattr(outcome, "records", None) or [])
    if not records:
        return props
    from bcas.metrics.latency import items_per_minute

    rate = items_per_minute(records)  # the latency line's figure (one definition of throughput)
    if rate is not None:
        props["bcas_items_per_min"] = f"{rate:.1f}"
    rows = summarize(records, dict(GRIDS.items()), only=[grid])
    row = next((r for r in rows if r.grid == grid and r.label == label), rows[0] if rows else None)
    if row is None:
        return props
    props.update(
        {
            "bcas_metric": row.metric,
            "bcas_accuracy": f"{row.accuracy:.4f}",
            "bcas_ci_low": f"{row.ci_lo:.4f}",
            "bcas_ci_high": f"{row.ci_hi:.4f}",
            "bcas_interval": f"95% {row.interval}",
            "bcas_n": str(row.n),
            "bcas_cost_usd": "unknown" if row.cost_usd is None else f"{row.cost_usd:.6f}",
        }
    )
    return props


def add_case_properties(item: Any, results: dict[str, dict[str, str]] | None) -> None:
    """Append the finished case's properties to ``item.user_properties`` (before its report is made)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "bcas_case" not in callspec.params or not results:
        return
    props = results.get(callspec.params["bcas_case"].id)
    if props and not any(name == "bcas_case" for name, _ in item.user_properties):
        item.user_properties.extend(props.items())


def _schema() -> Any:
    import pyarrow as pa

    kinds = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    fields = []
    for f in dataclasses.fields(Record):
        if f.name in NESTED:
            fields.append(pa.field(f.name + "_json", pa.string()))
        elif f.name == "answers":
            fields.append(pa.field("answers", pa.list_(pa.string())))
        else:
            text = str(f.type).replace(" ", "")
            base = text.split("|")[0]
            fields.append(pa.field(f.name, kinds.get(base, pa.string()), nullable=True))
    return pa.schema(fields)


def records_table(records: list[dict[str, Any]]) -> Any:
    """A ``pyarrow.Table`` of records (dicts as ``Record.to_dict()`` gives them)."""
    import pyarrow as pa

    schema = _schema()
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for rec in records:
        for name in schema.names:
            if name.endswith("_json") and name[:-5] in NESTED:
                value = rec.get(name[:-5])
                columns[name].append(
                    None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
                )
            elif name == "answers":
                columns[name].append([str(a) for a in rec.get("answers") or []])
            else:
                columns[name].append(rec.get(name))
    return pa.table(columns, schema=schema)


def write_parquet(run_dir: str | os.PathLike[str], records: list[dict[str, Any]]) -> Path | None:
    """Write ``records.parquet`` beside ``records.jsonl``; None (nothing written) without pyarrow."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None

    path = Path(run_dir) / PARQUET_FILE
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(records_table(records), tmp)
    tmp.replace(path)
    return path
