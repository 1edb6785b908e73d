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
        "cost": cost_section(rows, records),
        "items": items_section(records, grids),
    }
    for name, markup in sections.items():
        assert str(markup).strip(), f"{name}: the builder made nothing of this run"
        assert str(markup) in page, f"the {name} section is not on the page"
    notes = _notes(records, grid_notes(rows, records, grids))
    assert notes, "this run has run notes to show"
    for note in notes:
        assert f"<li>{note}</li>" in page or note.replace("'", "&#39;") in page
    assert 'id="regression-gate"' in page and "PASS: nothing dropped" in page and "no baseline" in page
    assert f"Items ({len(records)} of {len(records)})" in page
    assert ">None<" not in page and " None " not in page  # no section was handed over as nothing


def test_a_run_of_several_models_with_madara_cases_shows_their_sections(tmp_path: Path) -> None:
    """Two models on one grid: the model matrix and the model comparisons reach the page;
    MADARA records get their own table (routes, reasons, calls, tokens); the default title."""
    from bcas.report.html import MADARA_HEADERS, _madara_rows
    from bcas.report.html_models import model_sections

    records = grid_records("search_scaling", 6) + grid_records("search_scaling", 6, seed=1, model="other-model")
    for i, rec in enumerate(records[:4]):  # a MADARA case among them
        rec["method"] = "madara"
        rec["tokens_in"] = 100 + i
        routing = {"mode": "SDA" if i % 2 else "PDE", **({"reason": "NF below 30%"} if i == 0 else {})}
        rec["extra"] = {**(rec.get("extra") or {}), "routing": routing}
    summaries = write_summaries(tmp_path / "s", records)
    assert summaries.matrix["panels"] and summaries.model_comparisons
    path = render_report(tmp_path / "run", records, summaries.rows, summaries.comparisons,
                         model_comparisons=summaries.model_comparisons, matrix=summaries.matrix)  # fmt: skip
    page = path.read_text(encoding="utf-8")
    assert "<title>bcas report</title>" in page
    models = str(model_sections(summaries.model_comparisons, summaries.matrix))
    assert models.strip() and models in page
    madara = _madara_rows(records)
    assert len(madara) == 1 and madara[0]["cells"][-1] == "PDE / SDA: NF below 30%"
    for rec in records[:4]:
        rec["extra"]["routing"].pop("reason", None)
    assert _madara_rows(records)[0]["cells"][-1] == "PDE / SDA"  # no reason recorded: no dangling colon
    assert madara[0]["cells"][9] == "102"  # mean prompt tokens: (100 + 101 + 102 + 103) / 4, rounded
    records[0]["tokens_in"] = None  # not recorded: counts 0
    assert _madara_rows(records)[0]["cells"][9] == "76"  # (0 + 101 + 102 + 103) / 4 = 76.5, rounded to even
    for header in MADARA_HEADERS:  # every column is in the page (some behind "all columns")
        assert f"<th>{header}</th>" in page or f'<th class="more">{header}</th>' in page
    assert "PDE / SDA: NF below 30%" in page
