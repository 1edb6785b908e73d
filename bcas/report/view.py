"""``bcas view RUN_DIR... | FOLDER``: one leaderboard over many run folders, from their records.

A view, like a run's report: it reads each run folder's records (``records.jsonl`` and any
worker files, :func:`bcas.records.load_records`), its ``run.json`` and ``cases.jsonl``, and
works every figure out with the functions the run's own ``summary.json`` came from, so the two
agree number for number:

* each run's rows are :func:`bcas.report.summary.build_summaries` under the grids its sessions
  ran and their Holm scope (:func:`bcas.records.manifest.session_grids`, as ``bcas report``),
  with each case's status (a case that did not pass shows its mark, never an accuracy) and the
  served names of ``run.json``: accuracy with its Wilson 95% interval (BCAS Figure 2), or the
  item-clustered interval with several epochs (:mod:`bcas.report.paired`);
* the leaderboard puts the rows of every run side by side, one table per dataset × grid ×
  configuration, best first;
* each row is paired with the table's leader on the items both hold, as the run's summary
  pairs its configurations (:func:`bcas.report.paired.paired` on per-item means): the
  difference with Newcombe's (1998) paired 95% interval and the exact McNemar p-value (BCAS
  Figure 3, MADARA §6), or, with several epochs, the paired t-test on per-item means;
* every two rows of a table that share items are a pair whose flipped items (right in one,
  wrong in the other, with both trajectories side by side) get a page of their own, the
  leader's pairs first, at most ``max_pairs`` in all (the view says how many were left out).

Rows of different runs in one table are compared only when the model is all that differs: a
table whose rows differ in dataset hash, prompt hash or configuration id (another seed), the
rule of ``bcas compare`` (:func:`bcas.report.comparable.identity_differences`), or in the metric
their accuracy is measured in, is refused in one line naming each difference
(:class:`ViewMismatch`), unless ``allow_mismatch``, which shows them and lists every
difference at the top of the page.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bcas.grading.outcomes import METRIC_NAMES, outcome_fn
from bcas.grids import GRIDS, with_holm_scope
from bcas.records import Record, RecordError, load_records
from bcas.records.case_status import read_case_statuses
from bcas.records.manifest import read_manifest, served_by_fingerprint, session_grids
from bcas.records.store import record_files
from bcas.report.comparable import identity_differences, refusal
from bcas.report.membership import grouped
from bcas.report.paired import PairedResult, epochs_of, paired, per_item_means
from bcas.report.summary import Summaries, SummaryRow, build_summaries

MAX_PAIRS = 200  # pair pages written at most (each holds two trajectories per flipped item)
SHARD_PREFIX = "shard-"


class ViewError(ValueError):
    """A path that is no run folder and holds none, or runs that may not share a table; one line."""


class ViewMismatch(ViewError):
    """Rows of one table whose answers differ in more than the model (``--allow-mismatch`` shows them)."""


@dataclass
class ViewRun:
    """One run folder as the view reads it: its records, manifest and summaries."""

    path: Path
    name: str  # the folder relative to the folders given (unique within the view)
    records: list[Record]
    manifest: dict[str, Any] | None
    summaries: Summaries
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]]  # (grid, model, dataset, label) -> record dicts
    by_dict: dict[int, Record] = field(default_factory=dict)  # id(record dict) -> its Record

    @property
    def date(self) -> str:
        """The day the run's first session started (``YYYY-MM-DD``; "" when run.json says nothing)."""
        starts = [str(s.get("started_at") or "") for s in (self.manifest or {}).get("sessions") or [] if s]
        starts = sorted(s for s in starts if s)
        return starts[0][:10] if starts else ""

    @property
    def report(self) -> Path | None:
        """The run's own report (``index.html`` in its folder), when it has one."""
        page = self.path / "index.html"
        return page if page.is_file() else None


@dataclass
class Entry:
    """One row of the leaderboard: a run's summary row and the records it was worked out from."""

    run: ViewRun
    row: SummaryRow
    records: list[dict[str, Any]]
    vs_leader: PairedResult | None = None  # this row - the table's leader on the items both hold
    pair: str | None = None  # the id of the pair page of this row and the leader


@dataclass
class Table:
    """The leaderboard of one dataset × grid × configuration."""

    dataset: str
    grid: str
    label: str
    entries: list[Entry]

    @property
    def key(self) -> str:
        return f"{self.dataset} / {self.grid} / {self.label}"

    @property
    def metric(self) -> str:
        return self.entries[0].row.metric if self.entries else "correct_em"

    @property
    def leader(self) -> Entry | None:
        return self.entries[0] if self.entries and self.entries[0].row.counts else None


@dataclass
class Pair:
    """Two rows of one table on the items both hold: A ranks above B; ``result`` is B - A."""

    id: str
    table: Table
    a: Entry
    b: Entry
    result: PairedResult
    a_only: list[str]  # items A got right and B wrong (per-item mean higher in A, with epochs)
    b_only: list[str]


@dataclass
class View:
    runs: list[ViewRun]
    tables: list[Table]
    pairs: list[Pair]
    pairs_left_out: int
    mismatches: list[str]
    notes: list[str]


# -- finding and reading run folders ---------------------------------------------------------


def is_run_folder(path: Path) -> bool:
    return bool(record_files(path))


def _below(folder: Path) -> list[Path]:
    """Run folders under ``folder`` (itself included): a run folder's own subfolders (its shards,
    ``rsc/``) are its own, not runs of the view."""
    found = []
    for root, dirs, _files in os.walk(folder):
        here = Path(root)
        if is_run_folder(here):
            found.append(here)
            dirs[:] = []
        else:
            dirs.sort()
    return found


def find_runs(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[Path], list[str]]:
    """The run folders given or found below the folders given, and notes on those left out.

    :class:`ViewError` for a path that does not exist, is no folder, or holds no run folder.
    A run folder whose shards were merged into another found folder (``run.json``'s
    ``merged_from``) is left out: the merged run holds its answers.
    """
    found: dict[Path, Path] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise ViewError(f"{path}: no such run folder or folder")
        if not path.is_dir():
            raise ViewError(f"{path}: not a folder (give run folders, or a folder holding them)")
        runs = _below(path)
        if not runs:
            raise ViewError(f"{path}: no run folder found in it (a run folder holds records.jsonl)")
        for run in runs:
            found.setdefault(run.resolve(), run)
    merged: dict[Path, Path] = {}
    for resolved in found:
        for entry in (read_manifest(resolved) or {}).get("merged_from") or []:
            source = Path(str(entry.get("run", ""))) if isinstance(entry, dict) else None
            for where in (source, resolved.parent / source) if source else ():
                if where.resolve() in found and where.resolve() != resolved:
                    merged[where.resolve()] = resolved
    notes = [f"{found[src]}: left out, merged into {found[into]}" for src, into in sorted(merged.items())]
    return [run for resolved, run in sorted(found.items()) if resolved not in merged], notes


def run_names(paths: Sequence[Path]) -> list[str]:
    """Each run folder's name in the view: its path relative to the folder all of them share."""
    resolved = [p.resolve() for p in paths]
    if len(resolved) == 1:
        return [resolved[0].name]
    common = Path(os.path.commonpath(resolved))
    return [str(p.relative_to(common)) or p.name for p in resolved]


def folder_summaries(run_dir: Path, records: list[dict[str, Any]], manifest: dict[str, Any] | None) -> Summaries:
    """The run's summaries as its ``summary.json`` holds them (``bcas.run.finalize``, ``bcas report``):
    the grids its sessions ran, their Holm scope, each case's status and the served names."""
    names, holm_scope = session_grids(manifest)
    grids = with_holm_scope(dict(GRIDS.items()), holm_scope)
    result = build_summaries(records, grids, names, None, read_case_statuses(run_dir))
    served = served_by_fingerprint(manifest)
    if served:
        result.rows[:] = [replace(r, served=served.get(r.model_fingerprint)) for r in result.rows]
    return result


def read_run(path: Path, name: str) -> ViewRun:
    """A run folder's records, manifest, summaries and the records of each summary row."""
    try:
        records = load_records(path)
    except RecordError as exc:
        raise ViewError(str(exc)) from None
    dicts = [r.to_dict() for r in records]
    manifest = read_manifest(path)
    summaries = folder_summaries(path, dicts, manifest)
    names, holm_scope = session_grids(manifest)
    groups, _references = grouped(dicts, with_holm_scope(dict(GRIDS.items()), holm_scope), names)
    by_dict = {id(d): r for d, r in zip(dicts, records, strict=True)}
    return ViewRun(path, name, records, manifest, summaries, dict(groups), by_dict)


# -- the leaderboard ---------------------------------------------------------------------------


def _rank(entry: Entry) -> tuple[Any, ...]:
    """Rows that count first, best accuracy first; ties by model and run."""
    return (not entry.row.counts, -entry.row.accuracy, entry.row.model, entry.run.name)


def _paired(cand: Entry, ref: Entry) -> tuple[PairedResult, list[str], list[str]]:
    """``cand`` - ``ref`` on the items both hold, as the run's summary pairs two groups
    (:func:`bcas.report.summary.compare_to_reference`), and the items each got right alone."""
    fn = outcome_fn(cand.row.metric)
    means_c, means_r = per_item_means(cand.records, fn), per_item_means(ref.records, fn)
    binary = epochs_of(cand.records) <= 1 and epochs_of(ref.records) <= 1
    shared = sorted(set(means_c) & set(means_r))
    ref_only = [i for i in shared if means_r[i] > means_c[i]]
    cand_only = [i for i in shared if means_c[i] > means_r[i]]
    return paired(means_c, means_r, binary), ref_only, cand_only


def _differences(table: Table) -> list[str]:
    """What, besides the model, differs between the table's rows (each row against the first)."""
    out = []
    first = table.entries[0]
    for other in table.entries[1:]:
        found = identity_differences(first.records, other.records)
        if other.row.metric != first.row.metric:
            names = (METRIC_NAMES.get(m, m) for m in (first.row.metric, other.row.metric))
            found.append("accuracy is measured in another metric: A {} vs B {}".format(*names))
        where = f"{table.key}: A {first.run.name} · {first.row.model} vs B {other.run.name} · {other.row.model}"
        out += [f"{where}: {d}" for d in found]
    return out


def leaderboard(runs: Iterable[ViewRun]) -> list[Table]:
    """One table per dataset × grid × configuration, its rows from every run, best first."""
    cells: dict[tuple[str, str, str], list[Entry]] = defaultdict(list)
    for run in runs:
        for row in run.summaries.rows:
            recs = run.groups.get((row.grid, row.model, row.dataset, row.label), [])
            cells[(row.dataset, row.grid, row.label)].append(Entry(run, row, recs))
    return [Table(d, g, lab, sorted(es, key=_rank)) for (d, g, lab), es in sorted(cells.items())]


def pair_up(tables: Sequence[Table], max_pairs: int = MAX_PAIRS) -> tuple[list[Pair], int]:
    """Every two counting rows of a table that share items, the leaders' pairs first; at most
    ``max_pairs`` (and how many more there were).  Sets each row's difference from its leader."""
    candidates: list[tuple[int, Table, Entry, Entry]] = []
    for table in tables:
        counting = [e for e in table.entries if e.row.counts]
        for i, a in enumerate(counting):
            for b in counting[i + 1 :]:
                candidates.append((0 if i == 0 else 1, table, a, b))
    candidates.sort(key=lambda c: c[0])  # stable: the leaders' pairs first, then table order
    pairs: list[Pair] = []
    left_out = 0
    for rank, table, a, b in candidates:
        result, a_only, b_only = _paired(b, a)
        if result.n_paired == 0:
            continue
        if rank == 0:
            b.vs_leader = result
        if len(pairs) >= max_pairs:
            left_out += 1
            continue
        pair = Pair(f"p{len(pairs) + 1}", table, a, b, result, a_only, b_only)
        pairs.append(pair)
        if rank == 0:
            b.pair = pair.id
    return pairs, left_out


def build_view(
    paths: Sequence[str | os.PathLike[str]], allow_mismatch: bool = False, max_pairs: int = MAX_PAIRS
) -> View:
    """The view of the run folders ``paths`` (or the folders holding them); :class:`ViewMismatch`
    when a table's rows differ in more than the model and ``allow_mismatch`` is off."""
    folders, notes = find_runs(paths)
    runs = [read_run(p, n) for p, n in zip(folders, run_names(folders), strict=True)]
    tables = leaderboard(runs)
    mismatches = [d for t in tables for d in _differences(t)]
    if mismatches and not allow_mismatch:
        raise ViewMismatch(refusal(mismatches).removeprefix("error: "))
    pairs, left_out = pair_up(tables, max_pairs)
    for run in runs:
        if not run.summaries.rows:
            notes.append(f"{run.name}: no summary row (its records belong to no grid case)")
    return View(runs, tables, pairs, left_out, mismatches, notes)


__all__ = [
    "MAX_PAIRS",
    "Entry",
    "Pair",
    "Table",
    "View",
    "ViewError",
    "ViewMismatch",
    "ViewRun",
    "build_view",
    "find_runs",
    "folder_summaries",
    "leaderboard",
    "pair_up",
    "read_run",
    "run_names",
]
