"""Rebuild a run folder's views from its records, with no model call (``bcas report RUN``).

Every file beside ``records.jsonl`` is a view of the records: ``summary.json``/``.csv``,
``index.html``, ``records.parquet`` and, when asked, a result sink's entries (MLflow).
A command that changes records (``bcas rejudge``, ``bcas reprice``) ends here, and so
does any user who wants the views back after editing or merging records by hand.  The
files are written by the same function that ends a session
(:func:`bcas.run.finalize.finalize_run`), so a session's summaries and a rebuild's are
byte-identical from the same records.

What a rebuild reads besides the records: the grids the run's sessions ran and the last
session's ``holm_scope`` (``run.json``), the probes' profiles (``rsc/``) and the gate's
session-wide report (``gate-report.json``), which is the verdict of the session that ran
the gate and is shown as it was written (a rebuild runs no gate).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bcas.records import RecordError
from bcas.records.manifest import read_manifest, session_grids
from bcas.records.store import record_files
from bcas.run.finalize import FinalResult, finalize_run

GATE_REPORT_FILE = "gate-report.json"


class RebuildError(RecordError):
    """A folder that cannot be rebuilt (missing, or holding no records)."""


@dataclass
class RebuildResult:
    run_dir: Path
    final: FinalResult | None
    published: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.final is None:
            return [f"{self.run_dir}: no records, nothing written"]
        out = list(self.final.table_lines)
        out.append(f"summary: {self.run_dir / 'summary.json'}")
        if self.final.report_path is not None:
            out.append(f"report: {self.final.report_path}")
        out.extend(f"published: {where}" for where in self.published)
        return out


def check_run_folder(run_dir: str | os.PathLike[str]) -> Path:
    """The run folder, or :class:`RebuildError` naming what is wrong; creates nothing."""
    path = Path(run_dir)
    if not path.exists():
        raise RebuildError(f"{path}: no such run folder")
    if not path.is_dir():
        raise RebuildError(f"{path}: not a run folder (a folder holding records.jsonl)")
    if not record_files(path):
        if any(path.glob("shard-*-of-*/records*.jsonl")):
            raise RebuildError(
                f"{path}: holds the shards of a run, not its records: join them first (bcas merge {path})"
            )
        raise RebuildError(f"{path}: holds no records.jsonl (not a run folder, or a run that answered nothing)")
    return path


def _settings(run_dir: Path, manifest: dict[str, Any] | None) -> SimpleNamespace:
    """What :func:`finalize_run` reads of the settings, from the sessions recorded in ``run.json``."""
    grids, holm_scope = session_grids(manifest)
    return SimpleNamespace(run_dir=run_dir, grids=grids, holm_scope=holm_scope, prices=None)


def read_gate_report(run_dir: Path, token: str = "") -> Any:
    """The gate's session-wide report as its session wrote it, or None (no gate ran, or unreadable)."""
    from bcas.gating.report import GateReport, GateRow

    path = Path(run_dir) / GATE_REPORT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        names = {f.name for f in fields(GateReport)}
        row_names = {f.name for f in fields(GateRow)}
        kept = {k: v for k, v in data.items() if k in names}
        kept["rows"] = [GateRow(**{k: v for k, v in row.items() if k in row_names}) for row in data["rows"]]
        kept["not_gated"] = [tuple(pair) for pair in kept.get("not_gated") or []]
        return GateReport(**kept)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def rebuild_run(
    run_dir: str | os.PathLike[str],
    sinks: Mapping[str, str | None] | None = None,
    *,
    title: str | None = None,
    notes: Sequence[str] = (),
) -> RebuildResult:
    """Write the summaries, the report and the parquet export of ``run_dir`` from its records.

    ``sinks``: the result sinks to publish to (name -> target, as ``--bcas-<option>``), checked
    before anything is written; none by default.  ``title`` and ``notes`` head the report.
    """
    from bcas.tracking import open_sinks, publish_all

    path = check_run_folder(run_dir)
    opened = open_sinks(dict(sinks)) if sinks else {}  # a tracker that is down stops before any write
    settings = _settings(path, read_manifest(path))
    final = finalize_run(
        settings,  # type: ignore[arg-type]  # the fields finalize_run reads
        None,
        token="report",
        gate_report=read_gate_report,
        title=title,
        notes=notes,
    )
    published = publish_all(opened, path) if opened and final is not None else []
    return RebuildResult(path, final, published)


__all__ = ["RebuildError", "RebuildResult", "check_run_folder", "read_gate_report", "rebuild_run"]
