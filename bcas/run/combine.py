"""Two or more runs combined into one report: ``bcas compare RUN RUN [RUN ...] --report DIR``.

Runs of different models on the same items (one run per model, each made on its own
machine or day) are one experiment: their records together are what one run of all the
models would have written.  The combined folder gets the records, the case statuses,
summary.json/csv and the usual report, whose "Models compared" section pairs every two
models on the same configuration and items (exact McNemar, Holm within each grid ×
dataset; :func:`bcas.report.summary.compare_models`), as it does for one run.

Only the model may differ.  Under each dataset × configuration label the runs must agree
on the dataset hash (the same items), the prompt hash (the same prompts) and the
configuration id (the same configuration and seed); anything else is refused, naming
each difference, unless ``allow_mismatch``, which writes the differences into the
report's notes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bcas.config import config_differences
from bcas.grids import base_label
from bcas.records import Record, RecordError, ResultStore, dedupe, load_records
from bcas.records.case_status import append_case_status, read_case_statuses
from bcas.report.comparable import COMPARED_ON
from bcas.run.rebuild import rebuild_run


class MismatchError(RecordError):
    """The runs differ in something other than the model."""


@dataclass
class Combined:
    out: Path
    runs: list[Path]
    records: int
    models: list[str]
    report: Path
    differences: list[str] = field(default_factory=list)
    model_comparisons: int = 0

    def lines(self) -> list[str]:
        out = [
            f"combined {len(self.runs)} runs ({self.records} records; models {', '.join(self.models)}) into {self.out}"
        ]
        out += [f"MISMATCH ALLOWED (--allow-mismatch): {d}" for d in self.differences]
        out.append(f"model comparisons: {self.model_comparisons} (paired, on the same configuration and items)")
        out.append(f"report: {self.report}")
        return out


def differences(runs: dict[Path, list[Record]]) -> list[str]:
    """What differs between the runs besides the model, per dataset × grid entry (its label without
    the run's departures from the grid's values, :func:`bcas.grids.base_label`); a configuration
    id names the fields that differ, in words with both values (:func:`bcas.config.config_differences`)."""
    seen: dict[tuple[str, str], dict[str, dict[str, set[str]]]] = defaultdict(lambda: defaultdict(dict))
    configs: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for path, records in runs.items():
        for rec in records:
            key = (rec.dataset, base_label(rec.label) if rec.label else rec.config_id)
            for name, _ in COMPARED_ON:
                seen[key][name].setdefault(str(path), set()).add(str(getattr(rec, name)))
            configs[key].setdefault(str(path), rec.config)
    out = []
    for (dataset, label), by_name in sorted(seen.items()):
        for name, what in COMPARED_ON:
            values = by_name[name]
            if len({v for vs in values.values() for v in vs}) > 1:
                shown = "; ".join(f"{Path(p).name}: {', '.join(sorted(vs))}" for p, vs in sorted(values.items()))
                fields = _field_differences(configs[(dataset, label)]) if name == "config_id" else ""
                out.append(f"{dataset} / {label}: {what} differs ({shown}){fields}")
    return out


def _field_differences(by_run: dict[str, dict[str, Any]]) -> str:
    """The fields in which each other run's configuration differs from the first run's, as words."""
    (first, reference), *rest = sorted(by_run.items())
    parts = [
        "; ".join(found)
        for path, config in rest
        if (found := config_differences(reference, config, (Path(first).name, Path(path).name)))
    ]
    return f": {' / '.join(parts)}" if parts else ""


def combine_runs(paths: Sequence[str | Path], out: str | Path, allow_mismatch: bool = False) -> Combined:
    """Write the combined run folder ``out`` (records, cases.jsonl, summaries, index.html) of ``paths``.

    Raises :class:`MismatchError` (one line) when the runs differ in more than the model and
    ``allow_mismatch`` is off, and :class:`RecordError` on a run that cannot be read or an
    ``out`` that already holds records.
    """
    if len(paths) < 2:
        raise RecordError("combining runs needs two or more run folders")
    target = Path(out)
    runs = {Path(p): load_records(p) for p in paths}
    found = differences(runs)
    if found and not allow_mismatch:
        raise MismatchError(
            "not comparable (only the model may differ): " + "; ".join(found) + " (--allow-mismatch combines them "
            "anyway and says so in the report)"
        )
    if (target / "records.jsonl").is_file():
        raise RecordError(f"{target}: already holds records; combine into a new folder")
    records = dedupe(r for recs in runs.values() for r in recs)
    ResultStore(target).extend(records)
    for path in runs:
        folder = path if path.is_dir() else path.parent
        for status in read_case_statuses(folder):
            append_case_status(target, status)
    # Every view of the combined folder is written as `bcas report` writes a run's: summaries, report,
    # records.parquet, the latency and method lines (bcas.run.rebuild).
    rebuilt = rebuild_run(
        target,
        title=f"bcas — {' + '.join(p.name for p in runs)}",
        notes=[f"combined from {p}" for p in runs] + [f"compared despite: {d}" for d in found],
    )
    final = rebuilt.final
    if final is None or final.report_path is None:
        raise RecordError(f"{target}: the combined records gave no report")
    models = sorted({r.model for r in records})
    compared = len(final.summaries.model_comparisons) if final.summaries is not None else 0
    return Combined(target, list(runs), len(records), models, final.report_path, found, compared)
