"""The report at a laptop's width (1,280 px) in headless Chromium, with two models whose
names are long and hyphenated (``llama-3.1-8b-instruct-q8_0``) over two grids, priced.

What a reader sees: the page itself never scrolls sideways; the summary shows its decision
columns (grid, model, dataset, configuration, n, accuracy, its interval, the difference from
the reference, cost and tokens per correct answer, p95 latency) without scrolling; with "all
columns" ticked it scrolls inside its own box with its first columns kept in view;
no model name breaks across lines; the items table gives a question room (no 3-4 words a
line); every figure is drawn with axis titles; the cost chart keeps its legend under the points,
names each point's configuration (its tooltip) and uses round, evenly spaced ticks.  A screenshot of the page's top is
written beside the report for a person to look at.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bcas.grids import GRIDS
from bcas.report.html import render_report
from bcas.report.summary import write_summaries
from tests.support.chromium import opened
from tests.support.reports import grid_records
from tests.support.skips import skip_if_no_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.browser, skip_if_no_chromium]

WIDTH = 1280
MODELS = (("llama-3.1-8b-instruct-q8_0", "gguf:sha256:aaaa"), ("qwen3-8b-instruct-q4_k_m", "gguf:sha256:bbbb"))
QUESTION = "Which American actress, who portrayed Corliss Archer in the film Kiss and Tell, later held which position?"

FACTS = r"""
(() => {
  const lines = (el) => {
    const range = document.createRange(); range.selectNodeContents(el);
    return new Set(Array.from(range.getClientRects()).filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
  };
  const summary = document.getElementById('summary'), box = summary.parentElement;
  const heads = Array.from(summary.tHead.rows[0].cells);
  const boxRight = box.getBoundingClientRect().right;
  const key = heads.filter((th) => th.offsetParent !== null)
    .map((th) => ({name: th.textContent, right: th.getBoundingClientRect().right}));
  const scrollsFirst = box.scrollWidth > box.clientWidth + 1;
  document.getElementById('summary-all').click();  // every column: the box scrolls, its first columns stay
  const modelCells = Array.from(document.querySelectorAll('#summary tbody td:nth-child(2), .name'));
  const broken = modelCells.filter((c) => lines(c) > 1).map((c) => c.textContent);
  // scroll the summary's box: the first two columns stay where they were
  const before = [0, 1].map((i) => summary.tBodies[0].rows[0].cells[i].getBoundingClientRect().left);
  box.scrollLeft = 400;
  const after = [0, 1].map((i) => summary.tBodies[0].rows[0].cells[i].getBoundingClientRect().left);
  const third = summary.tBodies[0].rows[0].cells[2].getBoundingClientRect().left;
  box.scrollLeft = 0;
  const boxScrolls = box.scrollWidth > box.clientWidth;
  document.getElementById('summary-all').click();
  const questions = Array.from(document.querySelectorAll('table.items td.q'))
    .map((c) => ({width: c.getBoundingClientRect().width, lines: lines(c), words: c.textContent.trim().split(/\s+/).length}));
  // each figure as Vega drew it (an svg of class "marks"): axis titles, the x axis's tick labels, the legend, the points
  const rect = (el) => el.getBoundingClientRect();
  const figures = Array.from(document.querySelectorAll('figure.bcas-figure')).map((f) => {
    const svg = f.querySelector('svg.marks');
    if (!svg) return {name: f.dataset.figure, drawn: false};
    const xAxis = Array.from(svg.querySelectorAll('g.role-axis')).find((g) => (g.getAttribute('aria-label') || '').startsWith('X-axis'));
    const points = Array.from(svg.querySelectorAll('g.mark-symbol.role-mark path'));
    const legend = svg.querySelector('g.role-legend');
    return {
      name: f.dataset.figure, drawn: true, right: rect(svg).right,
      axis_titles: Array.from(svg.querySelectorAll('g.role-axis-title text')).map((t) => t.textContent),
      ticks: xAxis ? Array.from(xAxis.querySelectorAll('g.role-axis-label text')).filter((t) => +(t.getAttribute('opacity') ?? 1) > 0)
        .map((t) => ({text: t.textContent, left: rect(t).left, right: rect(t).right})) : [],
      svg_left: rect(svg).left, svg_right: rect(svg).right,
      lowest_point: Math.max(...points.map((p) => rect(p).bottom)),
      legend_top: legend ? rect(legend).top : null,
      points: points.length,
      described: points.filter((p) => (p.getAttribute('aria-label') || '').includes('configuration: ')).length,
    };
  });
  return {page_width: document.documentElement.scrollWidth, box_right: boxRight, key: key, broken: broken,
          before: before, after: after, third: third, questions: questions, figures: figures,
          box_scrolls: boxScrolls, scrolls_first: scrollsFirst};
})()
"""


@pytest.fixture(scope="module")
def laptop(tmp_path_factory: pytest.TempPathFactory, browser: Browser) -> tuple[dict, Path]:
    run_dir = tmp_path_factory.mktemp("laptop")
    records = []
    for seed, (model, fingerprint) in enumerate(MODELS):
        for grid in ("search_scaling", "ablation"):
            records += [
                {**r, "model": model, "model_fingerprint": fingerprint, "question": QUESTION}
                for r in grid_records(grid, n_items=6, seed=seed)
            ]
    summaries = write_summaries(run_dir, records)
    order = {name: [e.label for e in grid.entries] for name, grid in GRIDS.items()}
    path = render_report(
        run_dir,
        records,
        summaries.rows,
        summaries.comparisons,
        order,
        model_comparisons=summaries.model_comparisons,
        matrix=summaries.matrix,
    )
    shot = run_dir / "top-1280.png"
    top = "(() => ({x: 0, y: 0, width: 1280, height: 1400}))()"
    with opened(browser, path, width=WIDTH) as page:
        facts = page.evaluate(FACTS)
        page.page.screenshot(path=shot, clip=page.evaluate(top), full_page=True)
        assert page.errors == []
    assert shot.stat().st_size > 1000
    return facts, run_dir


def test_no_page_level_horizontal_scroll_at_1280px(laptop: tuple[dict, Path]) -> None:
    facts, _ = laptop
    assert facts["page_width"] <= WIDTH, f"the page is {facts['page_width']} px wide at {WIDTH} px"


def test_the_summary_decision_columns_fit_and_all_columns_keep_the_first_in_view(laptop: tuple[dict, Path]) -> None:
    facts, _ = laptop
    assert [k["name"] for k in facts["key"]] == [
        "grid", "model", "dataset", "config", "n", "acc %", "95% CI", "diff vs ref pts [95%]", "$ / correct",
        "tokens / correct", "p95 s",
    ]  # fmt: skip
    for column in facts["key"]:
        assert column["right"] <= facts["box_right"] + 0.5, f"{column['name']} is behind the scroll"
    assert not facts["scrolls_first"]  # the decision columns fit: nothing to scroll
    assert facts["box_scrolls"]  # every column: the table scrolls inside its own box
    assert facts["after"] == pytest.approx(facts["before"], abs=1)  # grid and model stayed put
    assert facts["third"] < facts["before"][1]  # while the dataset column scrolled under them


def test_model_names_never_break_and_questions_have_room(laptop: tuple[dict, Path]) -> None:
    facts, _ = laptop
    assert facts["broken"] == [], f"names broken across lines: {facts['broken'][:5]}"
    assert facts["questions"]
    for q in facts["questions"]:
        assert q["width"] >= 280, q  # about 24 characters' em; not 3-4 words a line
        assert q["words"] / q["lines"] >= 5, q


def test_every_chart_has_axis_titles_and_the_cost_chart_keeps_its_legend_off_the_points(
    laptop: tuple[dict, Path],
) -> None:
    facts, _ = laptop
    figures = facts["figures"]
    assert len(figures) >= 4 and all(f["drawn"] for f in figures), figures
    for chart in figures:
        assert len(chart["axis_titles"]) == 2 and all(chart["axis_titles"]), chart
        assert chart["svg_right"] <= WIDTH, chart["name"]  # no figure runs off the page
    cost = [f for f in figures if f["name"].startswith(("cost-", "cop-"))]
    assert cost  # cost against accuracy, and cost of a correct answer
    for chart in cost:
        assert chart["legend_top"] > chart["lowest_point"]  # under the plot, not on it
        assert chart["points"] > 0 and chart["described"] == chart["points"]  # each point names its configuration
        ticks = chart["ticks"]
        values = [float(t["text"].replace("$", "").replace(",", "")) for t in ticks]
        steps = {round(b - a, 12) for a, b in zip(values, values[1:], strict=False)}
        assert len(ticks) >= 3 and len(steps) == 1, ticks  # evenly spaced
        step = steps.pop()
        assert round(step / 10 ** math.floor(math.log10(step)), 6) in (1, 2, 2.5, 5), ticks  # round numbers
        assert all(len(t["text"]) <= 8 and "e" not in t["text"] for t in ticks), ticks  # no 8e-05
        assert all(chart["svg_left"] <= t["left"] and t["right"] <= chart["svg_right"] for t in ticks)
        assert all(a["right"] < b["left"] for a, b in zip(ticks, ticks[1:], strict=False)), ticks  # none overlap
