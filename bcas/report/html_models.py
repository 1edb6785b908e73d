"""Report sections for runs with several models: pairwise comparisons and the matrix.

The model × configuration matrix marks each accuracy with the paired tests of
:func:`bcas.report.summary.compare_models` on that configuration: ▲ significantly above
another model, ▼ significantly below one (Holm within grid × dataset; hover names
which and the adjusted p).  Rendered from ``templates/models.html`` with autoescaping; rows carry their filter keys (:mod:`bcas.report.html_interactive`).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from bcas.report.comparisons import Comparison
from bcas.report.html_interactive import fr_data
from bcas.report.templating import render

HEADERS = [
    "grid",
    "dataset",
    "config",
    "first",
    "second",
    "n paired",
    "first only",
    "second only",
    "diff pts",
    "95% CI",
    "p",
    "Holm p",
    "test",
    "verdict",
]


def model_sections(comparisons: list[Comparison], matrix: dict[str, Any] | None) -> Markup:
    """The "Models compared" section (empty when the run has one model)."""
    panels = (matrix or {}).get("panels") or []
    if not comparisons and not panels:
        return Markup()
    rows = [
        {
            "cls": "fr sig" if c.significant else "fr",
            "data": fr_data(grid=c.grid, dataset=c.dataset, config=c.label, model=c.model, model_b=c.reference),
            "cells": [
                c.grid,
                c.dataset,
                c.label,
                c.model,
                c.reference,
                c.n_paired,
                c.b,
                c.c,
                f"{c.diff * 100:+.1f}{' *' if c.significant else ''}",
                f"{c.ci_lo * 100:+.1f} – {c.ci_hi * 100:+.1f}",
                f"{c.p_value:.4f}",
                f"{c.p_holm:.4f}",
                c.test,
                c.verdict,  # who is ahead, only when separated (bcas.report.verdict)
            ],
        }
        for c in comparisons
    ]
    shown = [
        {
            "grid": panel["grid"],
            "dataset": panel["dataset"],
            "headers": ["config", *panel["models"]],
            "rows": [
                {
                    "cls": "fr",
                    "data": fr_data(grid=panel["grid"], dataset=panel["dataset"], config=row["label"]),
                    "cells": [
                        row["label"],
                        *(
                            _matrix_cell(v, m, row["label"], panel, comparisons)
                            for v, m in zip(row["accuracy"], panel["models"], strict=True)
                        ),
                    ],
                }
                for row in panel["rows"]
            ],
        }
        for panel in panels
    ]
    return render("models.html", headers=HEADERS, rows=rows, panels=shown)


def significance_marks(
    model: str, grid: str, dataset: str, label: str, comparisons: list[Comparison]
) -> tuple[list[str], list[str]]:
    """(models ``model`` is significantly above, models it is significantly below) on one configuration."""
    above: list[str] = []
    below: list[str] = []
    for c in comparisons:
        if (
            not c.significant
            or (c.grid, c.dataset, c.label) != (grid, dataset, label)
            or model not in (c.model, c.reference)
        ):
            continue
        if c.diff == 0:  # a tie has no direction
            continue
        other = c.reference if c.model == model else c.model
        higher = (c.diff > 0) == (c.model == model)
        (above if higher else below).append(f"{other} (Holm p={c.p_holm:.3g})")
    return above, below


def _matrix_cell(
    value: float | None, model: str, label: str, panel: dict[str, Any], comparisons: list[Comparison]
) -> dict[str, str]:
    """A matrix cell: its text (accuracy and marks) and its hover (which models, Holm p)."""
    if value is None:
        return {"text": "", "title": ""}
    above, below = significance_marks(model, panel["grid"], panel["dataset"], label, comparisons)
    marks = ("▲" if above else "") + ("▼" if below else "")
    hover = "; ".join(
        ([f"above {', '.join(above)}"] if above else []) + ([f"below {', '.join(below)}"] if below else [])
    )
    return {"text": f"{value * 100:.1f}{(' ' + marks) if marks else ''}", "title": hover}
