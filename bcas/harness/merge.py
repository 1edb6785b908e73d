"""Joining run folders: the shards of one sharded run (``--bcas-shard K/N``) into one run.

``bcas merge SHARD_1 ... SHARD_N --out RUN`` writes a new run folder
whose records, summaries and HTML report are those the unsharded run would have
written (timing fields and ``run_id`` aside, which say where and when each answer was
made); ``bcas merge RUN`` does the same for a run folder whose shards
ran with ``--bcas-shard auto`` into ``RUN/shard-K-of-N/`` (:func:`find_shards`), and
writes the merged run into ``RUN`` itself:

* ``records.jsonl``: every record of every input (their worker files included), one per
  answer identity (:attr:`bcas.records.Record.key`), chosen by
  :func:`bcas.records.dedupe` (an answer beats an error, the newest grade wins);
* ``rsc/*.json``: the RSC profiles, with their ``*.jsonl`` results and calls (each probe ran whole on one shard);
* ``run.json``: every input's sessions, each keeping its ``shard``, ``merged_from``
  (the input folders and their shards), ``missing_shards`` (``--partial``) and
  ``mismatches`` (``--allow-mismatch``);
* ``summary.csv``, ``summary.json``, ``index.html``: built from the merged records as
  :func:`bcas.run.finalize.finalize_run` builds them at the end of a session.

Checks before anything is written: inputs exist and hold records, profiles or a
manifest; ``--out`` is none of them and holds no records yet (unless a previous merge
wrote them); when the inputs' manifests say they are shards, they are shards of one
count, no shard twice and none missing (``--partial`` merges what is there and names
the missing ones); a shard folder's name agrees with its manifest; and the inputs agree
on everything that decides an answer (:mod:`bcas.harness.merge_checks`: bcas version,
grids, answer-changing options, model fingerprints, dataset hashes, price sheet): a
difference names the shard and the field, and stops the merge unless
``--allow-mismatch``.  The regression gate is not re-run here: gate the merged folder by
rerunning the suite on it with ``--bcas-baseline`` (every answer is recorded, so nothing
is asked again), or run the gate unsharded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bcas.harness.merge_checks import Mismatch, mismatches
from bcas.records import RECORDS_FILE, Record, RecordError, dedupe, read_records_file, record_files
from bcas.records.case_status import CASES_FILE, append_case_status, read_case_statuses
from bcas.records.manifest import MANIFEST_FILE, read_manifest
from bcas.run.finalize import finalize_run
from bcas.shard import SHARD_FOLDER


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
    missing: list[str] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)

    def lines(self) -> list[str]:
        shown = ", ".join(f"{p} ({s or 'unsharded'})" for p, s in zip(self.inputs, self.shards, strict=True))
        lines = [
            f"merged {len(self.inputs)} run folders: {shown}",
            f"records: {self.records_out} answers ({self.records_in} records read) -> {self.out / RECORDS_FILE}",
            f"RSC profiles: {self.profiles}",
        ]
        if self.missing:
            lines.append(f"missing shards (--partial): {', '.join(self.missing)}; their items are not in this run")
        lines.extend(f"mismatch (--allow-mismatch): {m.line()}" for m in self.mismatches)
        if self.report is not None:
            lines.append(f"report: {self.report}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return lines


def find_shards(parent: Path) -> list[Path]:
    """The ``shard-K-of-N`` folders in ``parent`` (``--bcas-shard auto``), ordered by N, then K."""
    if not parent.is_dir():
        return []
    shards: list[tuple[int, int, Path]] = []
    for path in parent.iterdir():
        match = SHARD_FOLDER.match(path.name)
        if match is not None and path.is_dir():
            shards.append((int(match.group("count")), int(match.group("index")), path))
    return [path for _, _, path in sorted(shards)]


def _shards_of(manifest: dict[str, Any] | None) -> set[str | None]:
    if manifest is None:
        return {None}
    return {s.get("shard") for s in manifest.get("sessions", []) if isinstance(s, dict)} or {None}


def _check_shards(
    runs: Sequence[Path], manifests: Sequence[dict[str, Any] | None], partial: bool
) -> tuple[list[str | None], list[str]]:
    """The shard label of each input and the missing shards; refuse mixed counts, repeats and (unless
    ``partial``) gaps."""
    labels: list[str | None] = []
    for run, manifest in zip(runs, manifests, strict=True):
        found = _shards_of(manifest)
        if len(found) > 1:
            raise MergeError(
                f"{run}: its sessions ran different shards {sorted(map(str, found))}; merge one shard folder per shard"
            )
        label = next(iter(found))
        named = SHARD_FOLDER.match(run.name)
        if named is not None and label is not None and label != "{}/{}".format(*named.group("index", "count")):
            raise MergeError(f"{run}: the folder is named for another shard than its run.json's {label}")
        labels.append(label)
    sharded = [label for label in labels if label is not None]
    if not sharded:
        return labels, []
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
    return labels, missing


def _grids(manifests: Sequence[dict[str, Any] | None]) -> list[str]:
    grids: list[str] = []
    for manifest in manifests:
        for session in (manifest or {}).get("sessions", []):
            for name in (session.get("settings") or {}).get("grids") or []:
                if name not in grids:
                    grids.append(str(name))
    return grids


def _inputs(runs: Sequence[str | Path], out: str | Path | None) -> tuple[list[Path], Path]:
    """The input folders and the target: one folder holding ``shard-K-of-N`` folders stands for them
    (the merged run goes into it unless ``out`` says otherwise)."""
    inputs = [Path(r) for r in runs]
    if not inputs:
        raise MergeError("give at least one run folder to merge")
    if len(inputs) == 1 and find_shards(inputs[0]):
        parent = inputs[0]
        return find_shards(parent), Path(out) if out is not None else parent
    if out is None:
        raise MergeError(
            f"{inputs[0]} holds no shard-K-of-N folders: give the shard folders and --out DIR for the merged run"
        )
    return inputs, Path(out)


def _check_target(target: Path, inputs: Sequence[Path]) -> None:
    for run in inputs:
        if not run.is_dir():
            raise MergeError(f"{run}: not a run folder")
        if target.resolve() == run.resolve():
            raise MergeError(f"--out {target} is one of the inputs; the merged run goes into a new folder")
        if not record_files(run) and not (run / "rsc").is_dir() and read_manifest(run) is None:
            raise MergeError(f"{run}: holds no records*.jsonl files, no RSC profiles and no run.json")
    if target.exists() and record_files(target) and "merged_from" not in (read_manifest(target) or {}):
        raise MergeError(f"{target} already holds records of its own; merge into a new folder (--out DIR)")


def merge_runs(
    runs: Sequence[str | Path],
    out: str | Path | None = None,
    *,
    partial: bool = False,
    allow_mismatch: bool = False,
) -> MergeSummary:
    """Join the run folders ``runs`` (or the shards in the one folder given) into ``out`` (see the
    module docstring)."""
    inputs, target = _inputs(runs, out)
    _check_target(target, inputs)
    manifests = [read_manifest(run) for run in inputs]
    shards, missing = _check_shards(inputs, manifests, partial)
    per_input: list[list[Record]] = [
        [rec for path in record_files(run) for rec in read_records_file(path)] for run in inputs
    ]
    found = mismatches(inputs, shards, manifests, per_input)
    if found and not allow_mismatch:
        shown = "\n  ".join(m.line() for m in found)
        raise MergeError(
            f"the folders are not parts of one run ({len(found)} difference(s)):\n  {shown}\n"
            "rerun the odd shard with the others' options and models, or pass --allow-mismatch to merge "
            "anyway (the differences are written into the merged run.json)"
        )

    read = [rec for recs in per_input for rec in recs]
    merged = dedupe(read)
    if any(r.legacy for r in merged):
        raise MergeError(
            "an input holds records written by bcas 0.1.0 (no model fingerprint); they cannot be "
            "told apart from new answers and are not merged"
        )
    target.mkdir(parents=True, exist_ok=True)
    for stale in record_files(target):  # a previous merge's output (checked above): replaced as a whole
        stale.unlink()
    payload = "".join(r.to_json() + "\n" for r in merged)
    tmp = target / f"{RECORDS_FILE}.tmp"
    tmp.write_text(payload, encoding="utf-8")
    tmp.replace(target / RECORDS_FILE)

    # each shard's case statuses; a case that did not pass on one shard did not pass (its line is last, so it wins)
    (target / CASES_FILE).unlink(missing_ok=True)
    for status in sorted((s for run in inputs for s in read_case_statuses(run)), key=lambda s: s.counts is False):
        append_case_status(target, status)

    warnings: list[str] = []
    profiles = 0
    for run in inputs:
        # profiles (*.json) and their probe results, EvalNF answers and calls (*.jsonl)
        for path in sorted((run / "rsc").glob("*.json*")) if (run / "rsc").is_dir() else []:
            if path.suffix not in (".json", ".jsonl"):
                continue
            dest = target / "rsc" / path.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.exists():
                if dest.read_bytes() != path.read_bytes():
                    warnings.append(f"{path}: another input holds a different file of the same name; kept the first")
                continue
            shutil.copyfile(path, dest)
            profiles += path.suffix == ".json"

    sessions = [s for m in manifests for s in (m or {}).get("sessions", [])]
    manifest: dict[str, Any] = {
        "schema_version": 1,
        "sessions": sessions,
        "merged_from": [{"run": str(run), "shard": label} for run, label in zip(inputs, shards, strict=True)],
    }
    if missing:
        manifest["missing_shards"] = missing
    if found:
        manifest["mismatches"] = [m.as_dict() for m in found]
    (target / MANIFEST_FILE).write_text(
        json.dumps(manifest, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )

    # the grids the sessions ran; the summaries add the grid each record was run under
    # (bcas.report.membership), so folders whose run.json names none still report theirs
    merged_run = SimpleNamespace(run_dir=target, grids=_grids(manifests), holm_scope=None)  # what finalize reads
    final = finalize_run(merged_run, None, token="merge")  # type: ignore[arg-type]
    return MergeSummary(
        target,
        inputs,
        shards,
        len(read),
        len(merged),
        profiles,
        final.report_path if final is not None else None,
        warnings,
        missing,
        found,
    )


__all__ = ["MergeError", "MergeSummary", "find_shards", "merge_runs"]
