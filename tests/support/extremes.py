"""Running a registered grid at the extremes of its axes, one item per case, and checking
what it wrote (``tests/proofs/test_every_grid_real.py``; the selection is unit-tested in
``tests/foundations/test_grid_extremes.py``).

The cases are :func:`bcas.grids.extreme_cases` of the grid; the command line selects them
with ``-m`` (their datasets' markers) and ``-k`` (the end of each case id,
``<dataset>-<entry label>]``), so the run is ``python -m pytest benchmarks --bcas-grid G
--bcas-limit 1 -m ... -k ...`` as a user would type it.

A model's context window decides which of them can run: a budgeted case whose token
budget and forced answer alone exceed the window is refused before anything runs
(:func:`bcas.run.plan_checks.window_need`, issue 46 item 6), so :func:`select` leaves it
out of the run and keeps it apart (``Selection.refused``); :func:`run_refusal` shows one of
them refused in one line naming ``--bcas-model``, before any record is written.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bcas.data import dataset_label
from bcas.grids import GRIDS, GridEntry, extreme_cases
from bcas.registry import RUN_KINDS, per_item
from bcas.run.plan_checks import window_need
from bcas.testing.project import read_records

REPO = Path(__file__).resolve().parents[2]

# The BCAS grids run on HotpotQA where they can (the ablation grid runs only there), so
# they share one dense index and the reproduction dataset.
PREFER = ("hotpotqa",)


@dataclass(frozen=True)
class Selection:
    """The extreme cases of one grid that the model's window can hold (``cases``), the
    ``-m`` / ``-k`` expressions that select them, and those it cannot (``refused``)."""

    grid: str
    cases: tuple[tuple[str, GridEntry], ...]
    refused: tuple[tuple[str, GridEntry], ...] = ()
    window: int | None = None

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The end of each chosen case id (``<model>-<dataset>-<label>``), with pytest's closing bracket."""
        return tuple(_suffix(ds, entry) for ds, entry in self.cases)

    @property
    def markers(self) -> str:
        return " or ".join(sorted({dataset_label(ds) for ds, _ in self.cases}))

    @property
    def keywords(self) -> str:
        return " or ".join(self.suffixes)

    def args(self) -> list[str]:
        return ["--bcas-grid", self.grid, "--bcas-limit", "1", "-m", self.markers, "-k", self.keywords]


def _suffix(ds: str, entry: GridEntry) -> str:
    return f"{dataset_label(ds)}-{entry.label}]"


def fits(entry: GridEntry, window: int | None) -> bool:
    """Whether a model of ``window`` tokens (None: unknown) may run ``entry``: the rule the run
    checks before anything starts (:mod:`bcas.run.plan_checks`)."""
    need = window_need(entry.kind, entry.config)
    return not window or need is None or need <= window


def select(grid: str, prefer: tuple[str, ...] = PREFER, window: int | None = None) -> Selection:
    """The extreme cases of ``grid``, split by whether a model of ``window`` tokens can hold their budget."""
    cases = extreme_cases(GRIDS.get(grid), prefer)
    kept = tuple((ds, e) for ds, e in cases if fits(e, window))
    return Selection(grid, kept, tuple((ds, e) for ds, e in cases if not fits(e, window)), window)


@dataclass
class Row:
    """One chosen case after the run: its records (or probe profile), stop reasons, seconds."""

    grid: str
    dataset: str
    entry: GridEntry
    records: list[dict[str, Any]] = field(default_factory=list)
    profiles: list[dict[str, Any]] = field(default_factory=list)
    seconds: float | None = None

    @property
    def stops(self) -> str:
        if not per_item(self.entry.kind):
            return f"profile ({self.profiles[0].get('n_queries', '?')} calibration items)" if self.profiles else "-"
        reasons = sorted({str(r.get("stop_reason") or "-") for r in self.records})
        return ",".join(reasons) or "-"


def run_grid(
    selection: Selection, run_dir: Path, extra: list[str], env: dict[str, str], timeout: float
) -> tuple[subprocess.CompletedProcess[str], float, dict[str, float]]:
    """Run the selection into ``run_dir``; (the process, wall seconds, seconds per case id from junit)."""
    junit = run_dir.parent / f"{run_dir.name}-{selection.grid}-junit.xml"
    command = [
        sys.executable, "-m", "pytest", "benchmarks", *selection.args(), *extra,
        "--bcas-report", str(run_dir), "--junitxml", str(junit), "-p", "no:cacheprovider", "-q",
    ]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.monotonic() - start
    seconds = {}
    if junit.is_file():
        for case in ET.parse(junit).getroot().iter("testcase"):
            seconds[case.get("name", "")] = float(case.get("time") or 0.0)
    return proc, wall, seconds


def refusal_args(grid: str, case: tuple[str, GridEntry]) -> list[str]:
    """The command-line selection of one case of ``grid``: ``-m`` its dataset, ``-k`` the end of its id."""
    ds, entry = case
    return ["--bcas-grid", grid, "--bcas-limit", "1", "-m", dataset_label(ds), "-k", _suffix(ds, entry)]


def run_refusal(
    grid: str, case: tuple[str, GridEntry], run_dir: Path, extra: list[str], env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run one case the model's window cannot hold, as a user would select it, into ``run_dir``."""
    command = [
        sys.executable, "-m", "pytest", "benchmarks", *refusal_args(grid, case), *extra,
        "--bcas-report", str(run_dir), "-p", "no:cacheprovider", "-q",
    ]  # fmt: skip
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def refusal_problems(proc: subprocess.CompletedProcess[str], run_dir: Path, window: int) -> list[str]:
    """What is wrong with a refusal: it must be a usage error (exit 4) of one line naming
    ``--bcas-model`` and the window, no traceback, and no run folder written."""
    out = proc.stdout + proc.stderr
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    found = []
    if proc.returncode != 4:  # pytest.ExitCode.USAGE_ERROR
        found.append(f"exit {proc.returncode}, not a usage error (4)")
    if len(errors) != 1 or not errors[0].startswith("ERROR: --bcas-model: "):
        found.append(f"not one error line naming --bcas-model: {errors}")
    elif f"has a context window of {window:,} tokens" not in errors[0]:
        found.append(f"the error does not name the window of {window:,} tokens: {errors[0]}")
    if "Traceback" in out:
        found.append("a traceback")
    if run_dir.exists():
        found.append(f"{run_dir} was written")
    return found


def collect(selection: Selection, run_dir: Path, seconds: dict[str, float]) -> list[Row]:
    """Each chosen case with the records (or profiles) the run folder holds for it."""
    records = read_records(run_dir) if (run_dir / "records.jsonl").is_file() else []
    profiles = [json.loads(p.read_text()) for p in sorted((run_dir / "rsc").glob("*.json"))]
    rows = []
    for (ds, entry), suffix in zip(selection.cases, selection.suffixes, strict=True):
        tail = "-" + suffix[:-1]
        row = Row(selection.grid, ds, entry)
        if per_item(entry.kind):
            row.records = [r for r in records if str((r.get("extra") or {}).get("case_id", "")).endswith(tail)]
        else:
            row.profiles = [p for p in profiles if str(p.get("case_id", "")).endswith(tail)]
        row.seconds = next((s for name, s in seconds.items() if name.endswith(suffix)), None)
        rows.append(row)
    return rows


def problems(rows: list[Row]) -> list[str]:
    """What is wrong with a finished selection: a case without a record (or profile), an
    errored record, a budget overrun (BCAS §3.3: searches within ``max_searches``,
    completion tokens within ``max_total_tokens`` + ``forced_answer_tokens``)."""
    found = []
    for row in rows:
        name = f"{row.grid}/{row.dataset}/{row.entry.label}"
        if not (row.records if per_item(row.entry.kind) else row.profiles):
            found.append(f"{name}: no {'record' if per_item(row.entry.kind) else 'RSC profile'}")
        for r in row.records:
            if r.get("stop_reason") == "error" or r.get("error"):
                found.append(f"{name}: {r.get('item_id')} ended in error: {str(r.get('error'))[:300]}")
            if not RUN_KINDS.meta(row.entry.kind, "budgeted", False):
                continue
            budget = (r.get("config") or {}).get("budget") or {}
            searches, tokens = budget.get("max_searches"), int(budget.get("max_total_tokens", 0))
            allowance = int(budget.get("forced_answer_tokens", 0))
            if searches is not None and int(r.get("searches_used") or 0) > int(searches):
                found.append(f"{name}: searches_used {r.get('searches_used')} > max_searches {searches}")
            if int(r.get("tokens_out") or 0) > tokens + allowance:
                found.append(f"{name}: tokens_out {r.get('tokens_out')} > {tokens} + forced answer {allowance}")
    return found


def table(rows: list[Row]) -> str:
    """grid / dataset / configuration / stop reason / searches / tokens out / seconds, one line per case."""
    lines = [f"{'grid':<16} {'dataset':<16} {'configuration':<24} {'stop reason':<28} {'srch':>4} {'tok':>6} {'s':>7}"]
    for row in rows:
        searches = ",".join(str(r.get("searches_used")) for r in row.records) or "-"
        tokens = ",".join(str(r.get("tokens_out")) for r in row.records) or "-"
        secs = "-" if row.seconds is None else f"{row.seconds:.0f}"
        lines.append(
            f"{row.grid:<16} {row.dataset:<16} {row.entry.label:<24} {row.stops:<28} {searches:>4} {tokens:>6} {secs:>7}"
        )
    return "\n".join(lines)
