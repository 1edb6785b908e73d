"""Each case's status in a run folder: ``cases.jsonl``, one line per finished case.

A case's records alone do not say whether the case holds: a MADARA treatment whose
items averaged fewer documents than it keeps, a case whose items ended in error, one the
cost cap or an interrupt cut short.  Its accuracy is then no result, and every view of
the run (summary.json/csv, the report, the terminal, a tracker) has to say so.  The run
engine appends one line when a case ends (:func:`append_case_status`); the views read
the latest line of each case (:func:`read_case_statuses`) and match it to their rows by
answer identity (model fingerprint + configuration id + dataset), else by the case's
grid × model × dataset × configuration label.

A line also holds the size of the case's dataset file and how many of its items were
held out for calibration, so that the n of a case evaluated on fewer items than its file
holds is shown with the words of :func:`items_note` ("20 of 50 items; 30 held for
calibration") by every view, the ones rebuilt from the run folder alone included.

Statuses: ``passed`` (its invariants hold), ``failed`` (an invariant broke: the reason
lists them), ``incomplete`` (stopped before all its items ran: the cost cap, an
interrupt), ``error`` (the case raised before it finished: the reason is the error).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CASES_FILE = "cases.jsonl"
PASSED, FAILED, INCOMPLETE, ERROR = "passed", "failed", "incomplete", "error"
STATUSES = (PASSED, FAILED, INCOMPLETE, ERROR)
# Shown in place of a number wherever a case's accuracy would be.
MARKS = {FAILED: "FAILED", INCOMPLETE: "INCOMPLETE", ERROR: "ERROR"}
COUNT_FIELDS = frozenset({"file_items", "held_out"})


@dataclass(frozen=True)
class CaseStatus:
    """How one case ended, with the keys that match it to a summary row."""

    case_id: str
    grid: str
    model: str  # the model label
    dataset: str
    label: str  # the configuration's label
    status: str
    reason: str = ""
    fingerprint: str = ""  # the answer identity, when the case got as far as computing it
    config_id: str = ""
    session: str = ""
    # The size of the case's dataset file and, of its items, those held out for calibration
    # (MADARA Algorithm 2), for the n shown beside a case evaluated on fewer (0: not known).
    file_items: int = 0
    held_out: int = 0

    @property
    def counts(self) -> bool:
        """Whether the case's accuracy is a result (it passed its checks)."""
        return self.status == PASSED


def items_note(evaluated: int, file_items: int, held: int) -> str:
    """'20 of 50 items; 30 held for calibration': the words beside the n of a case evaluated on
    fewer items than its file holds, wherever that n is shown (terminal, JUnit, estimate, summary,
    report); "" when it evaluated them all or the file's size is not known (0)."""
    if not file_items or evaluated >= file_items:
        return ""
    return f"{evaluated} of {file_items} items" + (f"; {held} held for calibration" if held else "")


def case_verdict(stopped: str | None, violations: Sequence[str]) -> tuple[str, str]:
    """A case's status and reason once its items stopped running: the one rule that
    ``cases.jsonl``, the JUnit XML and the end-of-case line all follow.

    ``stopped`` is the cost cap's message when the cap cut the case short: ``incomplete``,
    whatever its checks say (the items it never ran break them too); else ``failed`` with its
    broken checks, else ``passed`` with no reason."""
    if stopped is not None:
        return INCOMPLETE, stopped
    if violations:
        return FAILED, "; ".join(violations)
    return PASSED, ""


def append_case_status(run_dir: Path, status: CaseStatus) -> None:
    """Append ``status`` as one line (one ``write`` on an ``O_APPEND`` descriptor, so the
    lines of concurrent workers never interleave)."""
    if status.status not in STATUSES:
        raise ValueError(f"case status {status.status!r} is not one of {', '.join(STATUSES)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(asdict(status), sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(run_dir / CASES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_case_statuses(run_dir: Path) -> list[CaseStatus]:
    """The latest status of each case of ``run_dir`` (a later session's line replaces an earlier one)."""
    path = Path(run_dir) / CASES_FILE
    if not path.is_file():
        return []
    latest: dict[str, CaseStatus] = {}
    names = set(CaseStatus.__dataclass_fields__)
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line of a killed process
        if not isinstance(raw, dict) or raw.get("status") not in STATUSES:
            continue
        entry = CaseStatus(**{k: _field(k, v) for k, v in raw.items() if k in names and v is not None})
        latest[entry.case_id] = entry
    return list(latest.values())


def _field(name: str, value: Any) -> Any:
    """A field of a status line as the dataclass holds it: the counts as whole numbers, the rest as text."""
    if name in COUNT_FIELDS:
        try:
            return max(int(value), 0)
        except (TypeError, ValueError):
            return 0
    return str(value)


class StatusIndex:
    """Case statuses looked up by a summary row's identity, else by its case key."""

    def __init__(self, statuses: Iterable[CaseStatus]) -> None:
        self.by_identity: dict[tuple[str, str, str], CaseStatus] = {}
        self.by_case: dict[tuple[str, str, str, str], CaseStatus] = {}
        for s in statuses:
            if s.fingerprint and s.config_id:
                self.by_identity[(s.fingerprint, s.config_id, s.dataset)] = _worse(
                    self.by_identity.get((s.fingerprint, s.config_id, s.dataset)), s
                )
            self.by_case[(s.grid, s.model, s.dataset, s.label)] = s

    def __bool__(self) -> bool:
        return bool(self.by_case)

    def find(
        self, grid: str, model: str, dataset: str, label: str, fingerprint: str, config_id: str
    ) -> CaseStatus | None:
        """The status of a row: by identity (the same answers, whichever grid ran them), else by case key."""
        found = self.by_identity.get((fingerprint, config_id, dataset))
        return found if found is not None else self.of_case(grid, model, dataset, label)

    def of_case(self, grid: str, model: str, dataset: str, label: str) -> CaseStatus | None:
        """The status line of a row's own case (its grid's), not of another grid's case with the same answers."""
        return self.by_case.get((grid, model.split(" [", 1)[0], dataset, label))

    def of_record(self, rec: Mapping[str, Any]) -> CaseStatus | None:
        """The status of the case a record belongs to (by its identity)."""
        key = (str(rec.get("model_fingerprint") or ""), str(rec.get("config_id") or ""), str(rec.get("dataset") or ""))
        return self.by_identity.get(key)


def _worse(old: CaseStatus | None, new: CaseStatus) -> CaseStatus:
    """Two grids' cases of one identity: the one that does not count wins (its answers are the same)."""
    if old is None or (old.counts and not new.counts):
        return new
    return old
