"""Report sections for runs with several models: pairwise comparisons and the matrix.

The model × configuration matrix marks each accuracy with the paired tests of
:func:`bcas.report.summary.compare_models` on that configuration: ▲ significantly above
another model, ▼ significantly below one (Holm within grid × dataset; hover names
which and the adjusted p).  Everything model- or dataset-named passes through
``html.escape``; rows carry their filter keys (:mod:`bcas.report.html_interactive`).
"""

from __future__ import annotations

from html import escape
from typing import Any

from bcas.report.html_interactive import fr_attrs
from bcas.report.summary import Comparison


def model_sections(comparisons: list[Comparison], matrix: dict[str, Any] | None) -> str:
    """The "Models compared" section (empty when the run has one model)."""
    panels = (matrix or {}).get("panels") or []
    if not comparisons and not panels:
        return ""
    out = [
        "<h2>Models compared</h2>",
        "<p>Each pair of models on the same configuration and the same items: difference (first − second), "
        "Newcombe paired 95% interval and exact McNemar p (with several epochs: per-item means, paired t); "
        "Holm-adjusted within each grid × dataset (shaded and * : significant at 0.05).</p>",
    ]
    head = (
        "<tr><th>grid</th><th>dataset</th><th>config</th><th>first</th><th>second</th><th>n paired</th>"
        "<th>first only</th><th>second only</th><th>diff pts</th><th>95% CI</th><th>p</th><th>Holm p</th>"
        "<th>test</th></tr>"
    )
    body = []
    for c in comparisons:
        cls = ' class="fr sig"' if c.significant else ' class="fr"'
        attrs = fr_attrs(grid=c.grid, dataset=c.dataset, config=c.label, model=c.model, model_b=c.reference)
        body.append(
            f"<tr{cls}{attrs}><td>{escape(c.grid)}</td><td>{escape(c.dataset)}</td><td>{escape(c.label)}</td>"
            f"<td>{escape(c.model)}</td><td>{escape(c.reference)}</td><td>{c.n_paired}</td><td>{c.b}</td>"
            f"<td>{c.c}</td><td>{c.diff * 100:+.1f}{' *' if c.significant else ''}</td>"
            f"<td>{c.ci_lo * 100:+.1f} – {c.ci_hi * 100:+.1f}</td><td>{c.p_value:.4f}</td><td>{c.p_holm:.4f}</td>"
            f"<td>{escape(c.test)}</td></tr>"
        )
    out.append(
        f'<table class="sortable" id="model-comparisons"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'
    )
    for panel in panels:
        models = panel["models"]
        head = "<tr><th>config</th>" + "".join(f"<th>{escape(m)}</th>" for m in models) + "</tr>"
        rows = []
        for row in panel["rows"]:
            cells = "".join(
                _matrix_cell(v, m, row["label"], panel, comparisons)
                for v, m in zip(row["accuracy"], models, strict=True)
            )
            attrs = fr_attrs(grid=panel["grid"], dataset=panel["dataset"], config=row["label"])
            rows.append(f'<tr class="fr"{attrs}><td class="t">{escape(row["label"])}</td>{cells}</tr>')
        out.append(
            f"<h3>Accuracy % by model × configuration — {escape(panel['grid'])} / {escape(panel['dataset'])}</h3>"
            "<p>▲ / ▼: significantly above / below the model named on hover, paired on the same items "
            "(Holm within grid × dataset, 0.05).</p>"
            f'<table class="matrix sortable"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
        )
    return "".join(out)


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
        other = c.reference if c.model == model else c.model
        higher = c.diff > 0 if c.model == model else c.diff < 0
        (above if higher else below).append(f"{other} (Holm p={c.p_holm:.3g})")
    return above, below


def _matrix_cell(
    value: float | None, model: str, label: str, panel: dict[str, Any], comparisons: list[Comparison]
) -> str:
    if value is None:
        return "<td></td>"
    above, below = significance_marks(model, panel["grid"], panel["dataset"], label, comparisons)
    marks = ("▲" if above else "") + ("▼" if below else "")
    hover = "; ".join(
        ([f"above {', '.join(above)}"] if above else []) + ([f"below {', '.join(below)}"] if below else [])
    )
    title = f' title="{escape(hover)}"' if hover else ""
    return f"<td{title}>{value * 100:.1f}{(' ' + marks) if marks else ''}</td>"
