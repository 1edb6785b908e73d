"""Every section the report is given reaches the page, and the page is written where asked.

A reader of ``index.html`` loses a whole section, silently, if the page is rendered without
it: the filter bar, the notes that say which metric a grid reports, the regression gate a CI
job failed on, the figures, the cost table, the items table.  Each is
compared with what its own builder makes of the same run, so a section left out, or passed
as nothing, fails here.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from bcas.grids import GRIDS
from bcas.report.html import CSS, _notes, render_report
from bcas.report.html_cost import cost_section
from bcas.report.html_figures import figures
from bcas.report.html_interactive import filter_bar
from bcas.report.html_items import items_section
from bcas.report.html_metrics import metrics_section
from bcas.report.summary import grid_notes, write_summaries
from tests.support.reports import grid_records


def test_each_section_given_reaches_the_page_written_where_asked(tmp_path: Path) -> None:
    records = grid_records("search_scaling", 6)
    summaries = write_summaries(tmp_path / "summaries", records)
    rows, comparisons = summaries.rows, summaries.comparisons
    order = {name: [e.label for e in grid.entries] for name, grid in GRIDS.items()}
    gate = SimpleNamespace(
        rows=[], overall="PASS: nothing dropped", failed=False, baseline="base.json", test="mcnemar-exact",
        metrics=["correct_em"], alpha=0.05, family="session", not_gated=[("search_scaling/x", "no baseline")],
    )  # fmt: skip
    run_dir = tmp_path / "deep" / "inside" / "run"  # folders that do not exist yet
    path = render_report(run_dir, records, rows, comparisons, order, title="Nightly ablations", gate=gate)
    assert path == run_dir / "index.html"
    page = path.read_text(encoding="utf-8")
    assert "<title>Nightly ablations</title>" in page and "<h1>Nightly ablations</h1>" in page
    assert CSS.strip()[:60] in page
    grids = dict(GRIDS.items())
    sections = {
        "filter bar": filter_bar(rows),
        "metrics": metrics_section(rows),
        "figures": figures(rows, comparisons, order, records, grids),
        "cost": cost_section(rows),
        "items": items_section(records, grids),
    }
    for name, markup in sections.items():
        assert str(markup).strip(), f"{name}: the builder made nothing of this run"
        assert str(markup) in page, f"the {name} section is not on the page"
    for note in _notes(records, grid_notes(rows, records, grids)):
        assert f"<li>{note}</li>" in page or note.replace("'", "&#39;") in page
    assert 'id="regression-gate"' in page and "PASS: nothing dropped" in page and "no baseline" in page
    assert f"Items ({len(records)} of {len(records)})" in page
    assert ">None<" not in page and " None " not in page  # no section was handed over as nothing
