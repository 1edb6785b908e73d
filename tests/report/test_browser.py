"""The HTML report in headless Chromium: it loads without script errors, shows its
tables, sorts them, and renders hostile record text inert.

Skipped when Chromium is absent (CI installs the Debian package through
``BCAS_INSTALL_BROWSER=1 .ci/install``).  Playwright drives it (the fixture ``page``,
tests/conftest.py); tests/support/chromium.py says what counts as an error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bcas.records import Record, ResultStore, load_records
from tests.support.chromium import PageWatch, is_local, opened
from tests.support.reports import HOSTILE, LONG_TEXT, NON_LATIN, SCRIPT_TAG, grid_records, hostile_records, render
from tests.support.skips import skip_if_no_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, skip_if_no_chromium]

# What a test usually wants to know about a page after its scripts ran.
DOM_FACTS = r"""
(() => {
  const onAttrs = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      if (a.name.toLowerCase().startsWith('on')) onAttrs.push(el.tagName.toLowerCase() + '[' + a.name + ']');
    }
  }
  const table = (id) => {
    const t = document.getElementById(id);
    if (!t) return null;
    return {
      headers: Array.from(t.querySelectorAll('thead th')).map((c) => c.textContent),
      rows: Array.from(t.tBodies[0] ? t.tBodies[0].rows : []).map((r) => Array.from(r.cells).map((c) => c.textContent)),
    };
  };
  return {
    title: document.title,
    body_data: Object.assign({}, document.body ? document.body.dataset : {}),
    window_pwned: typeof window.__pwned !== 'undefined',
    scripts: document.scripts.length,
    counts: Object.fromEntries(['img', 'svg', 'iframe', 'textarea', 'details', 'table', 'object', 'embed', 'link']
      .map((t) => [t, document.getElementsByTagName(t).length])),
    event_handler_attributes: onAttrs,
    summary: table('summary'),
    comparisons: table('comparisons'),
    text: document.body ? document.body.textContent : '',
    html: document.documentElement.outerHTML,
  };
})()
"""

EM_COLUMN = 5  # "acc %" (the grid's primary metric) in the summary table

SORT_SUMMARY = f"""
(() => {{
  const table = document.getElementById('summary');
  const th = table.querySelectorAll('thead th')[{EM_COLUMN}];
  const column = () => Array.from(table.tBodies[0].rows).map((r) => r.cells[{EM_COLUMN}].textContent);
  th.click();
  const ascending = column();
  th.click();
  return {{ascending: ascending, descending: column()}};
}})()
"""

# Each figure element and what Vega drew in it (its chart is an svg of class "marks").
FIGURES_DRAWN = """
({
  figures: document.querySelectorAll('figure.bcas-figure').length,
  drawn: document.querySelectorAll('figure.bcas-figure div.vega-chart svg.marks').length,
  failed: document.querySelectorAll('figure.bcas-figure[data-error]').length,
  details: Array.from(document.querySelectorAll('details')).filter((d) => !d.closest('figure')).length,
  shown_after_filter: (() => {  // choose grid "ablation": the search-scaling figure goes, its two stay
    const select = document.getElementById('filter-grid');
    if (!select) return null;  // a page without filters (bcas compare)
    select.value = 'ablation';
    select.dispatchEvent(new Event('change'));
    return Array.from(document.querySelectorAll('figure.bcas-figure[data-grid]'))
      .filter((f) => f.getBoundingClientRect().height > 0).map((f) => f.dataset.figure);
  })(),
})
"""

HOSTILE_TITLE = f"bcas — hostile {SCRIPT_TAG}"


def facts_and(extra: str) -> str:
    return f"({{facts: {DOM_FACTS}, extra: {extra}}})"


def assert_inert(page: PageWatch, title: str) -> dict[str, Any]:
    """No injected markup or script ran: nothing tried to run, no marker, no handler, no element."""
    facts = page.evaluate(DOM_FACTS)
    assert page.errors == [], "the page logged errors (a blocked or failed injected script shows up here)"
    assert facts["body_data"] == {"ready": "1"}, "the page's script must run and nothing else may mark the body"
    assert facts["title"] == title
    assert facts["window_pwned"] is False
    assert facts["html"].count("data-pwned") == 0
    # the page's script, the Vega bundle and the figure loader, and one spec (data, never run) per figure
    assert facts["scripts"] == 3 + facts["html"].count('<script type="application/json">')
    assert facts["event_handler_attributes"] == []
    for tag in ("img", "iframe", "textarea", "object", "embed", "link"):
        assert facts["counts"][tag] == 0, f"an injected <{tag}> was created"
    return facts


def test_real_report_loads_and_shows_its_tables(tmp_path: Path, page: Page) -> None:
    records = grid_records("search_scaling") + grid_records("ablation", seed=1)
    path, rows, comparisons = render(tmp_path / "run", records)

    watch = PageWatch.attach(page).open(path)
    value = watch.evaluate(facts_and(SORT_SUMMARY))
    drawn = watch.evaluate(FIGURES_DRAWN)
    assert watch.errors == []
    facts, sort = value["facts"], value["extra"]
    assert facts["body_data"] == {"ready": "1"}
    assert facts["title"] == "bcas report"

    summary = facts["summary"]
    assert summary is not None, "no table with id=summary"
    assert summary["headers"][:6] == ["grid", "model", "dataset", "config", "n", "acc %"]
    assert len(summary["rows"]) == len(rows) == 12
    for cells, row in zip(summary["rows"], rows, strict=True):
        label = row.label + (" (ref)" if row.reference else "")
        assert cells[:5] == [row.grid, row.model, row.dataset, label, str(row.n)]
        assert cells[EM_COLUMN] == f"{row.accuracy * 100:.1f}"
    assert len(facts["comparisons"]["rows"]) == len(comparisons) == 10
    # The search-scaling chart, the ablation chart and its shift bars, the cost-accuracy scatter of
    # hotpotqa and its cost-of-a-correct-answer scatter.
    shown = drawn.pop("shown_after_filter")
    assert drawn == {"figures": 5, "drawn": 5, "failed": 0, "details": len(records)}  # a figure's menu aside
    assert shown == ["scaling-ablation-hotpotqa", "shift-ablation-hotpotqa"]  # the filter hides a figure

    # Clicking a header sorts numerically, then reverses.
    expected = sorted(f"{r.accuracy * 100:.1f}" for r in rows)
    assert sort["ascending"] == sorted(expected, key=float)
    assert sort["descending"] == sorted(expected, key=float, reverse=True)
    assert sort["ascending"] != sort["descending"]


def test_hostile_text_round_trips_through_records_and_renders_inert(tmp_path: Path, page: Page) -> None:
    original = hostile_records()
    store = ResultStore(tmp_path / "run")
    store.extend(Record.from_dict(r) for r in original)
    records = [r.to_dict() for r in load_records(tmp_path / "run")]
    # Non-Latin text, RTL marks, emoji and the 100k-character text come back unchanged
    # (compared record by record, so a failure names the records instead of diffing megabytes).
    assert len(records) == len(original)
    assert [i for i, (got, want) in enumerate(zip(records, original, strict=True)) if got != want] == []

    path, rows, _ = render(tmp_path / "run", records, title=HOSTILE_TITLE)
    source = path.read_text(encoding="utf-8")
    assert source.count("&lt;script&gt;window.__pwned=1;") > 0
    assert source.count(SCRIPT_TAG) == 0

    facts = assert_inert(PageWatch.attach(page).open(path), HOSTILE_TITLE)
    assert len(facts["summary"]["rows"]) == len(rows) == 2
    text = facts["text"]
    for payload in HOSTILE:
        assert text.count(payload) > 0, "each payload is shown to the reader as plain text"
    for sample in NON_LATIN:
        assert text.count(sample) > 0
    assert text.count(LONG_TEXT) > 0


def test_escaping_alone_keeps_hostile_text_inert(tmp_path: Path, page: Page) -> None:
    """Defence in depth: with the Content-Security-Policy removed, escaping still suffices."""
    path, _, _ = render(tmp_path / "run", hostile_records(), title=HOSTILE_TITLE)
    source = path.read_text(encoding="utf-8")
    without_csp, removed = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", source)
    assert removed == 1
    bare = tmp_path / "no-csp.html"
    bare.write_text(without_csp, encoding="utf-8")
    assert_inert(PageWatch.attach(page).open(bare), HOSTILE_TITLE)


def test_the_check_sees_payloads_that_are_not_escaped(tmp_path: Path, browser: Browser) -> None:
    """Control: the same payloads pasted in raw do run without the policy, and are reported as violations with it."""
    path, _, _ = render(tmp_path / "run", grid_records("search_scaling", n_items=2))
    source = path.read_text(encoding="utf-8")
    raw = source.replace("<h2>Summary</h2>", "<h2>Summary</h2>" + "".join(HOSTILE), 1)

    open_page = tmp_path / "raw-no-csp.html"
    open_page.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", raw), encoding="utf-8")
    with opened(browser, open_page) as page:
        facts = page.evaluate(DOM_FACTS)
        assert facts["window_pwned"] is True
        assert facts["body_data"].get("pwned") == "1"
        assert facts["title"] == "pwned"
        assert any(e.startswith("dialog alert") for e in page.errors)
        # The request log sees what would leave the machine (a protocol-relative stylesheet: another host).
        assert [url for url in page.requests if not is_local(url)] == ["file://evil.example/s.css"]

    guarded = tmp_path / "raw-with-csp.html"
    guarded.write_text(raw, encoding="utf-8")
    with opened(browser, guarded) as page:
        facts = page.evaluate(DOM_FACTS)
        assert "pwned" not in facts["body_data"] and facts["window_pwned"] is False
        assert facts["body_data"].get("ready") == "1"
        violations = [e for e in page.errors if "Content Security Policy" in e]
        assert len(violations) >= 3, page.errors  # the inline script, the onerror handler, the external script


def test_a_compare_page_draws_its_figure_offline(tmp_path: Path, browser: Browser) -> None:
    from bcas.cli import main as bcas_main

    for name, seed in (("a", 1), ("b", 2)):
        ResultStore(tmp_path / name).extend(Record.from_dict(r) for r in grid_records("ablation", seed=seed))
    page_path = tmp_path / "cmp.html"
    assert bcas_main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(page_path)]) == 0
    with opened(browser, page_path) as page:
        value = page.evaluate(FIGURES_DRAWN)
        assert page.errors == [] and page.requests == [page_path.resolve().as_uri()]  # nothing besides the page
        assert value["figures"] == value["drawn"] == 1 and value["failed"] == 0
