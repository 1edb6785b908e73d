"""Joining run folders: the shards of one sharded run (``--bcas-shard K/N``) into one run.

``python -m bcas.results merge SHARD_1 ... SHARD_N --out RUN`` writes a new run folder
whose records, summaries and HTML report are those the unsharded run would have
written (timing fields and ``run_id`` aside, which say where and when each answer was
made):

* ``records.jsonl``: every record of every input (their worker files included), one per
  answer identity (:attr:`bcas.results.Record.key`), chosen by
  :func:`bcas.results.dedupe` (an answer beats an error, the newest grade wins);
* ``rsc/*.json``: the RSC profiles (each probe ran whole on one shard);
* ``run.json``: every input's sessions, each keeping its ``shard``, and ``merged_from``
  (the input folders and their shards);
* ``summary.csv``, ``summary.json``, ``index.html``: built from the merged records as
  :func:`bcas.harness.finalize.finalize_run` builds them at the end of a session.

Checks before anything is written: inputs exist and hold records or profiles; ``--out``
is none of them and holds no records yet; when the inputs' manifests say they are
shards, they are shards of one count, no shard twice and none missing (``--partial``
accepts a missing one).  The regression gate is not re-run here: gate the merged
folder by passing it as ``--bcas-baseline`` of a later run, or run the gate unsharded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bcas.harness.finalize import finalize_run
from bcas.harness.manifest import MANIFEST_FILE, read_manifest
from bcas.records import RECORDS_FILE, RecordError, dedupe, read_records_file, record_files


class MergeError(RecordError):
    """Run folders cannot be joined as asked; the message names the folder and the cause."""


@dataclass
class MergeSummary:
    out: Path
    inputs: list[Path]
    shards: list[str | None]
    records_in: int
    records_out: int
    profiles: int
    report: Path | None
    warnings: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        shown = ", ".join(f"{p} ({s or 'unsharded'})" for p, s in zip(self.inputs, self.shards, strict=True))
        lines = [
            f"merged {len(self.inputs)} run folders: {shown}",
            f"records: {self.records_out} answers ({self.records_in} records read) -> {self.out / RECORDS_FILE}",
            f"RSC profiles: {self.profiles}",
        ]
        if self.report is not None:
            lines.append(f"report: {self.report}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return lines


def _shards_of(manifest: dict[str, Any] | None) -> set[str | None]:
    if manifest is None:
        return {None}
    return {s.get("shard") for s in manifest.get("sessions", []) if isinstance(s, dict)} or {None}


def _check_shards(runs: Sequence[Path], manifests: Sequence[dict[str, Any] | None], partial: bool) -> list[str | None]:
    """The shard label of each input; refuse mixed counts, repeats and (unless ``partial``) gaps."""
    labels: list[str | None] = []
    for run, manifest in zip(runs, manifests, strict=True):
        found = _shards_of(manifest)
        if len(found) > 1:
            raise MergeError(
                f"{run}: its sessions ran different shards {sorted(map(str, found))}; merge one shard folder per shard"
            )
        labels.append(next(iter(found)))
    sharded = [label for label in labels if label is not None]
    if not sharded:
        return labels
    if len(sharded) != len(labels):
        plain = [str(r) for r, label in zip(runs, labels, strict=True) if label is None]
        raise MergeError(
            f"{', '.join(plain)}: not a shard (its run.json records no --bcas-shard), while the other "
            "folders are; merge the shards of one run only"
        )
    counts = {int(label.split("/")[1]) for label in sharded}
    if len(counts) > 1:
        raise MergeError(f"the folders are shards of different counts {sorted(counts)}: {sharded}")
    count = counts.pop()
    seen: dict[str, Path] = {}
    for run, label in zip(runs, sharded, strict=True):
        if label in seen:
            raise MergeError(f"shard {label} is given twice: {seen[label]} and {run}")
        seen[label] = run
    missing = [f"{k}/{count}" for k in range(1, count + 1) if f"{k}/{count}" not in seen]
    if missing and not partial:
        raise MergeError(
            f"shards {missing} are missing (given: {sorted(seen)}); the merged run would lack their "
            "items. Pass --partial to merge what is there"
        )
    return labels


def _grids(manifests: Sequence[dict[str, Any] | None]) -> list[str]:
    grids: list[str] = []
    for manifest in manifests:
        for session in (manifest or {}).get("sessions", []):
            for name in (session.get("settings") or {}).get("grids") or []:
                if name not in grids:
                    grids.append(str(name))
    return grids


def merge_runs(runs: Sequence[str | Path], out: str | Path, *, partial: bool = False) -> MergeSummary:
    """Join the run folders ``runs`` into the new run folder ``out`` (see the module docstring)."""
    inputs = [Path(r) for r in runs]
    target = Path(out)
    if not inputs:
        raise MergeError("give at least one run folder to merge")
    for run in inputs:
        if not run.is_dir():
            raise MergeError(f"{run}: not a run folder")
        if target.resolve() == run.resolve():
            raise MergeError(f"--out {target} is one of the inputs; the merged run goes into a new folder")
        if not record_files(run) and not (run / "rsc").is_dir():
            raise MergeError(f"{run}: holds no records*.jsonl files and no RSC profiles")
    if target.exists() and record_files(target):
        raise MergeError(f"--out {target} already holds records; choose a new folder")
    manifests = [read_manifest(run) for run in inputs]
    shards = _check_shards(inputs, manifests, partial)

    read = [rec for run in inputs for path in record_files(run) for rec in read_records_file(path)]
    merged = dedupe(read)
    if any(r.legacy for r in merged):
        raise MergeError(
            "an input holds records written by bcas 0.1.0 (no model fingerprint); they cannot be "
            "told apart from new answers and are not merged"
        )
    target.mkdir(parents=True, exist_ok=True)
    payload = "".join(r.to_json() + "\n" for r in merged)
    tmp = target / f"{RECORDS_FILE}.tmp"
    tmp.write_text(payload, encoding="utf-8")
    tmp.replace(target / RECORDS_FILE)

    warnings: list[str] = []
    profiles = 0
    for run in inputs:
        for path in sorted((run / "rsc").glob("*.json")) if (run / "rsc").is_dir() else []:
            dest = target / "rsc" / path.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.exists():
                if dest.read_bytes() != path.read_bytes():
                    warnings.append(f"{path}: another input holds a different profile of the same name; kept the first")
                continue
            shutil.copyfile(path, dest)
            profiles += 1

    sessions = [s for m in manifests for s in (m or {}).get("sessions", [])]
    manifest = {
        "schema_version": 1,
        "sessions": sessions,
        "merged_from": [{"run": str(run), "shard": label} for run, label in zip(inputs, shards, strict=True)],
    }
    (target / MANIFEST_FILE).write_text(
        json.dumps(manifest, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )

    grids = _grids(manifests) or sorted(
        {str((r.extra or {}).get("grid")) for r in merged if (r.extra or {}).get("grid")}
    )
    final = finalize_run(SimpleNamespace(run_dir=target, grids=grids), None, token="merge")
    return MergeSummary(
        target,
        inputs,
        shards,
        len(read),
        len(merged),
        profiles,
        final.report_path if final is not None else None,
        warnings,
    )


__all__ = ["MergeError", "MergeSummary", "merge_runs"]
