"""The report read at 1,400 pixels in headless Chromium: no word in a table cell is broken
across lines (``smok/e``), every table scrolls inside its own box rather than widening the
page, and a run on a test double says so at the top.  Screenshots of the summary and the
Beyond-accuracy table are written beside the report for a person to look at."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.chromium import opened
from tests.support.reports import grid_records, render
from tests.support.skips import skip_if_no_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.browser, skip_if_no_chromium]

WIDTH = 1400

# Words (runs of non-space characters) of every table cell that the browser laid out on
# more than one line, and tables whose box does not scroll on its own.
LAYOUT = r"""
(() => {
  const broken = [];
  for (const cell of document.querySelectorAll('#summary td, #beyond td, #comparisons td')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /\S+/g;
      let m;
      while ((m = re.exec(node.data)) !== null) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  const unboxed = Array.from(document.querySelectorAll('table[id]'))
    .filter((t) => getComputedStyle(t.parentElement).overflowX !== 'auto')
    .map((t) => t.id);
  return {
    broken: broken,
    unboxed: unboxed,
    page_width: document.documentElement.scrollWidth,
    banner: (document.getElementById('test-double') || {}).textContent || null,
  };
})()
"""


def _rect(selector: str) -> str:
    return (
        f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();"
        " return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width,"
        " height: Math.min(r.height, 900)}; })()"
    )


def test_tables_keep_words_whole_and_scroll_in_their_own_box_at_1400px(tmp_path: Path, browser: Browser) -> None:
    records = grid_records("smoke", n_items=4) + grid_records("ablation", n_items=4, seed=1)
    records = [{**r, "model": "mock-gold", "model_fingerprint": "mock:gold"} for r in records]
    path, _, _ = render(tmp_path, records)
    shots = [(tmp_path / "summary.png", _rect("#summary")), (tmp_path / "beyond.png", _rect("#beyond"))]
    with opened(browser, path, width=WIDTH) as page:
        facts = page.evaluate(LAYOUT)
        for png, clip in shots:
            page.page.screenshot(path=png, clip=page.evaluate(clip), full_page=True)
        assert page.errors == []
    assert facts["broken"] == [], f"words broken across lines: {facts['broken'][:10]}"
    assert facts["unboxed"] == [], f"tables that widen the page instead of scrolling: {facts['unboxed']}"
    assert facts["page_width"] <= WIDTH, "the page itself scrolls sideways"
    assert facts["banner"] and "mock-gold" in facts["banner"]
    for png, _ in shots:
        assert png.stat().st_size > 1000
