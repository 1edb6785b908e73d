"""A case's status on its summary row, and what a row that does not count shows.

A case that failed its checks, stopped short or raised (:mod:`bcas.records.case_status`)
has records, and a mean over them, but that mean is no result: MADARA's PDE over items
of one document "keeps" the one document it was given and scores 100.0.  Its row keeps
its counts (items, errors, tokens) and shows, in place of every accuracy-like figure,
nothing (``null`` in summary.json, an empty cell in summary.csv, the status mark and the
reason in the report and the terminal); it takes no part in a comparison, a chart or
the model matrix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, replace
from typing import Any, Protocol, TypeVar

from bcas.records.case_status import MARKS, StatusIndex, items_note


class SummaryRow(Protocol):
    """What this module reads of a :class:`bcas.report.summary.SummaryRow` (a dataclass)."""

    grid: str
    model: str
    dataset: str
    label: str
    n: int
    model_fingerprint: str
    config_id: str
    status: str | None
    reason: str

    @property
    def counts(self) -> bool: ...


Row = TypeVar("Row", bound=SummaryRow)

# Every field of a summary row that reads as how well the case did.
RESULT_FIELDS = (
    "correct",
    "accuracy",
    "ci_lo",
    "ci_hi",
    "judge_accuracy",
    "judge_ci_lo",
    "judge_ci_hi",
    "mean_f1",
    "em_squad",
    "n_correct",
    "n_incorrect",
    "n_not_attempted",
    "not_attempted_rate",
    "accuracy_given_attempted",
    "f_score",
    "pass_at_k",
    "pass_at_k_lo",
    "pass_at_k_hi",
    "pass_hat_k",
    "pass_hat_k_lo",
    "pass_hat_k_hi",
    "flip_share",
    "cost_of_pass",
    "cost_of_pass_lo",
    "cost_of_pass_hi",
    "tokens_of_pass",
    "tokens_of_pass_lo",
    "tokens_of_pass_hi",
)


def with_status(rows: Iterable[Row], index: StatusIndex) -> list[Row]:
    """The rows with their case's status and reason (a row no status line names keeps ``None``),
    and the size of its dataset file with the words shown beside an n below it (:func:`items_note`)."""
    out = []
    for r in rows:
        found = index.find(r.grid, r.model, r.dataset, r.label, r.model_fingerprint, r.config_id)
        changes: dict[str, Any] = {} if found is None else {"status": found.status, "reason": found.reason}
        # The row's own case first: another grid's case of the same answers may hold out other items.
        sized = index.of_case(r.grid, r.model, r.dataset, r.label) or found
        if sized is not None and sized.file_items:
            note = items_note(r.n, sized.file_items, sized.held_out)
            changes.update(file_items=sized.file_items, held_out=sized.held_out, items_note=note)
        out.append(replace(r, **changes) if changes else r)  # type: ignore[type-var]
    return out


def counting(rows: Iterable[Row]) -> list[Row]:
    """The rows whose accuracy is a result (passed, or of a run that wrote no status)."""
    return [r for r in rows if r.counts]


def row_fields(row: SummaryRow) -> dict[str, Any]:
    """The row as summary.json and summary.csv write it: a row that does not count has no result fields."""
    out: dict[str, Any] = asdict(row)  # type: ignore[call-overload]
    if not row.counts:
        out.update(dict.fromkeys(RESULT_FIELDS))
    return out


def mark(row: SummaryRow) -> str:
    """What a row that does not count shows in place of its accuracy (``FAILED``, ``INCOMPLETE``, ``ERROR``)."""
    return MARKS.get(str(row.status), str(row.status).upper())


def status_lines(rows: Sequence[SummaryRow]) -> list[str]:
    """One line per case that does not count: its mark, its case and the reason."""
    return [
        f"{mark(r)}: {r.grid}/{r.model}/{r.dataset}/{r.label}: {r.reason or 'no reason recorded'}"
        for r in rows
        if not r.counts
    ]
