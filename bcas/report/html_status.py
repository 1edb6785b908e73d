"""The report's section on cases that did not pass: each case's mark, key and reason.

A failed, incomplete or errored case (:mod:`bcas.records.case_status`) keeps its row in
the summary, marked, with no accuracy; this section, at the top of the page, says which
cases those are and why, so the page never reads as if every case had a result.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

from bcas.report.status import SummaryRow, mark
from bcas.report.templating import render


def failures_section(rows: Sequence[SummaryRow]) -> Markup:
    """The cases of ``rows`` that did not pass (empty markup when every case passed)."""
    failed = [r for r in rows if not r.counts]
    if not failed:
        return Markup()
    return render(
        "failures.html",
        cases=[
            {"mark": mark(r), "case": f"{r.grid} / {r.model} / {r.dataset} / {r.label}", "reason": r.reason}
            for r in failed
        ],
        total=len(rows),
    )
