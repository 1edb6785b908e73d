"""Report sections for runs with several models: pairwise comparisons and the matrix.

Everything model- or dataset-named passes through ``html.escape``.
"""

from __future__ import annotations

from html import escape
from typing import Any

from bcas.report.summary import Comparison


def model_sections(comparisons: list[Comparison], matrix: dict[str, Any] | None) -> str:
    """The "Models compared" section (empty when the run has one model)."""
    panels = (matrix or {}).get("panels") or []
    if not comparisons and not panels:
        return ""
    out = ["<h2>Models compared</h2>",
           "<p>Each pair of models on the same configuration and the same items: difference (first − second), "
           "Newcombe paired 95% interval and exact McNemar p (with several epochs: per-item means, paired t); "
           "Holm-adjusted within each grid × dataset (shaded and * : significant at 0.05).</p>"]
    head = ("<tr><th>grid</th><th>dataset</th><th>config</th><th>first</th><th>second</th><th>n paired</th>"
            "<th>first only</th><th>second only</th><th>diff pts</th><th>95% CI</th><th>p</th><th>Holm p</th>"
            "<th>test</th></tr>")
    body = []
    for c in comparisons:
        cls = ' class="sig"' if c.significant else ""
        body.append(
            f"<tr{cls}><td>{escape(c.grid)}</td><td>{escape(c.dataset)}</td><td>{escape(c.label)}</td>"
            f"<td>{escape(c.model)}</td><td>{escape(c.reference)}</td><td>{c.n_paired}</td><td>{c.b}</td>"
            f"<td>{c.c}</td><td>{c.diff * 100:+.1f}{' *' if c.significant else ''}</td>"
            f"<td>{c.ci_lo * 100:+.1f} – {c.ci_hi * 100:+.1f}</td><td>{c.p_value:.4f}</td><td>{c.p_holm:.4f}</td>"
            f"<td>{escape(c.test)}</td></tr>"
        )
    out.append(f'<table class="sortable" id="model-comparisons"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>')
    for panel in panels:
        models = panel["models"]
        head = "<tr><th>config</th>" + "".join(f"<th>{escape(m)}</th>" for m in models) + "</tr>"
        rows = []
        for row in panel["rows"]:
            cells = "".join("<td></td>" if v is None else f"<td>{v * 100:.1f}</td>" for v in row["accuracy"])
            rows.append(f"<tr><td>{escape(row['label'])}</td>{cells}</tr>")
        out.append(f"<h3>Accuracy % by model × configuration — {escape(panel['grid'])} / {escape(panel['dataset'])}</h3>"
                   f'<table class="matrix"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>')
    return "".join(out)
