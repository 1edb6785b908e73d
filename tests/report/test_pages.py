"""The report of a real two-model run in headless Chromium: sorting, filters, Pareto, flips.

The run: ``mock:gold`` and ``coin`` (bcas/testing/coin.py: gold's answers, replaced by a
wrong one on about half the requests, so outcomes flip between configurations) on the
``pages`` grid (tests/support/mockruns.py: BCAS over real BM25 on HotpotQA with max
searches 1, 2, 3 and 3 + planning; MADARA NF, PDE and SDA on FEVER), priced by a test sheet.  Each check recomputes what the page shows from
the run's own files (``summary.json``, ``records.jsonl``) independently of the report code,
then reads the page after clicking and choosing as a reader would.  The page must log no
error and request nothing but itself.  Skipped without Chromium, like tests/report/test_browser.py.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.chromium import PageWatch
from tests.support.mockruns import make_project, run_pytest
from tests.support.skips import skip_if_no_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, skip_if_no_chromium]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = make_project(tmp_path_factory.mktemp("pages"))
    result = run_pytest(
        project,
        "--bcas-model",
        "mock:gold",
        "--bcas-model",
        "coin",
        "--bcas-grid",
        "pages",
        "--bcas-prices",
        "prices.toml",
        "--bcas-report",
        "out",
        "-q",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return project / "out"


def summary_rows(run_dir: Path) -> list[dict[str, Any]]:
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["rows"]


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines() if line]


def expected_frontiers(rows: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """Per dataset, the (model, configuration) pairs no other pair beats on both cost and accuracy, cheapest first.

    Written from the definition: x is the mean cost per item when every point has a known cost
    above 0 somewhere, else mean completion tokens; a configuration in several grids counts once.
    """
    out = {}
    for dataset in sorted({r["dataset"] for r in rows}):
        points: dict[tuple[str, str], dict[str, Any]] = {}
        for r in rows:
            if r["dataset"] == dataset:
                points.setdefault((r["model"], r["config_id"]), r)
        costs = [p["mean_cost_usd"] for p in points.values()]
        use_cost = all(c is not None for c in costs) and any(c > 0 for c in costs)
        xy = [
            ((p["mean_cost_usd"] if use_cost else p["mean_tokens_out"]), p["accuracy"], p["model"], p["label"])
            for p in points.values()
        ]
        front = [
            (x, a, m, lab)
            for x, a, m, lab in xy
            if not any(x2 <= x and a2 >= a and (x2 < x or a2 > a) for x2, a2, _, _ in xy)
        ]
        out[dataset] = [(m, lab) for _, _, m, lab in sorted(front, key=lambda t: (t[0], -t[1]))]
    return out


def flipped_items(
    recs: list[dict[str, Any]], dataset: str, first: tuple[str, str], second: tuple[str, str]
) -> list[str]:
    """Items of ``dataset`` whose SQuAD EM outcome differs between (model, label) ``first`` and ``second``."""

    def outcomes(model: str, label: str) -> dict[str, bool]:
        return {
            r["item_id"]: bool(r["correct_em"])
            for r in recs
            if r["dataset"] == dataset and r["model"] == model and r["label"] == label
        }

    a, b = outcomes(*first), outcomes(*second)
    return sorted(i for i in set(a) & set(b) if a[i] != b[i])


# Run in the page (with the browser's own privileges): act as a reader, report what is visible.
INTERACT = r"""
(() => {
  const visible = (sel) => Array.from(document.querySelectorAll(sel)).filter((el) => !el.hidden && !el.closest('[hidden]'));
  const summaryRows = () => visible('#summary tbody tr').map((r) => Array.from(r.cells).map((c) => c.textContent));
  const choose = (sel, value) => { const s = document.querySelector(sel); s.value = value;
                                   s.dispatchEvent(new Event('change')); };
  const out = {};
  out.before = summaryRows();
  document.querySelectorAll('#summary thead th')[5].click();  // acc %
  out.sortedAsc = summaryRows();
  document.querySelectorAll('#summary thead th')[5].click();
  out.sortedDesc = summaryRows();
  choose('#filter-model', 'coin');
  out.coinOnly = summaryRows();
  out.coinCostPoints = visible('tr.pt').map((r) => r.dataset.model);
  choose('#filter-dataset', 'fever');
  out.coinFever = summaryRows();
  out.feverItemTables = visible('.items-panel').map((p) => p.dataset.dataset);
  choose('#filter-model', ''); choose('#filter-dataset', '');
  out.reset = summaryRows().length;
  out.frontiers = Array.from(document.querySelectorAll('.cost-panel')).map((panel) => ({
    dataset: panel.dataset.dataset,
    listed: Array.from(panel.querySelectorAll('ol.frontier li')).map((li) => [li.dataset.model, li.dataset.config]),
  }));
  const flips = (dataset, a, b, mode) => {
    const panel = Array.from(document.querySelectorAll('.items-panel')).find((p) => p.dataset.dataset === dataset);
    const box = panel.querySelector('.flip');
    const pick = (cls, text) => { const s = box.querySelector(cls);
      const opt = Array.from(s.options).find((o) => o.textContent === text); s.value = opt.value;
      s.dispatchEvent(new Event('change')); };
    pick('select.flip-a', a); pick('select.flip-b', b);
    const m = box.querySelector('select.flip-mode'); m.value = mode; m.dispatchEvent(new Event('change'));
    const rows = Array.from(panel.querySelectorAll('tbody tr')).filter((r) => !r.hidden).map((r) => r.dataset.item);
    const cols = Array.from(panel.querySelectorAll('thead th')).filter((th) => th.offsetParent !== null)
      .map((th) => th.textContent);
    return {rows: rows.sort(), count: box.querySelector('.count').textContent, cols: cols};
  };
  out.flipModels = flips('hotpotqa', 'mock-gold · bm25/s1/t2k', 'coin · bm25/s1/t2k', 'flip');
  const [first, second] = PAIR;
  out.flipConfigs = flips('hotpotqa', first, second, 'flip');
  out.onlyA = flips('hotpotqa', first, second, 'a');
  out.onlyB = flips('hotpotqa', first, second, 'b');
  out.all = flips('hotpotqa', first, second, 'all');
  const within = document.querySelector('.cost-panel[data-dataset="hotpotqa"] .within');
  const input = within.querySelector('input'); input.value = '100'; input.dispatchEvent(new Event('input'));
  out.within100 = within.querySelector('.answer').textContent;
  out.matrices = Array.from(document.querySelectorAll('table.matrix')).map((t) => ({
    title: t.closest('.scroll').previousElementSibling.previousElementSibling.textContent,
    headers: Array.from(t.querySelectorAll('thead th')).map((c) => c.textContent),
    rows: Array.from(t.tBodies[0].rows).map((r) => Array.from(r.cells).map((c) => c.textContent)),
  }));
  // as Vega drew each figure: a path per model's budget line (its points), a path per categorical dot
  out.lines = Array.from(document.querySelectorAll('figure.bcas-figure g.budget_line_marks path')).map((l) => [
    l.closest('figure').dataset.figure, (l.getAttribute('d').match(/[ML]/g) || []).length]);
  out.dots = Array.from(document.querySelectorAll('figure.bcas-figure g.category_dots_marks path')).map((c) => c.closest('figure').dataset.figure);
  out.ready = document.body.dataset.ready;
  return out;
})()
"""


def two_way_pair(recs: list[dict[str, Any]]) -> tuple[str, str]:
    """Two of coin's HotpotQA configurations whose outcomes flip both ways (so the modes can be told apart)."""
    labels = sorted({r["label"] for r in recs if r["model"] == "coin" and r["dataset"] == "hotpotqa"})
    for a, b in combinations(labels, 2):
        flips = flipped_items(recs, "hotpotqa", ("coin", a), ("coin", b))
        right_a = {r["item_id"] for r in recs if r["model"] == "coin" and r["label"] == a and r["correct_em"]}
        if any(i in right_a for i in flips) and any(i not in right_a for i in flips):
            return a, b
    raise AssertionError(f"no two coin configurations flip both ways among {labels}")


def test_two_model_report_sorts_filters_lists_the_frontier_and_flips(run: Path, page: Page) -> None:
    rows, recs = summary_rows(run), records(run)
    first, second = two_way_pair(recs)
    pair = json.dumps([f"coin · {first}", f"coin · {second}"])
    watch = PageWatch.attach(page).open(run / "index.html")
    got = watch.evaluate(INTERACT.replace("PAIR", pair))
    assert watch.errors == [], watch.errors
    assert watch.requests == [(run / "index.html").resolve().as_uri()], "the page requested something besides itself"
    assert got["ready"] == "1"

    # Sorting reorders the visible rows by accuracy, then reverses them.
    acc = [float(r[5]) for r in got["sortedAsc"]]
    assert acc == sorted(acc) and [float(r[5]) for r in got["sortedDesc"]] == sorted(acc, reverse=True)
    # (The table may already list rows in ascending accuracy; descending then reorders it.)
    assert len(set(acc)) > 1 and got["sortedDesc"] != got["before"] and len(got["before"]) == len(rows) == 14

    # Filters leave exactly the matching rows (and points, and item tables), and come back.
    assert sorted(r[1] for r in got["coinOnly"]) == ["coin"] * 7
    assert set(got["coinCostPoints"]) == {"coin"}
    assert [(r[1], r[2]) for r in got["coinFever"]] == [("coin", "fever")] * 3
    assert got["feverItemTables"] == ["fever"]
    assert got["reset"] == 14

    # The frontier the page lists is the one computed from summary.json by the definition.
    expected = expected_frontiers(rows)
    listed = {f["dataset"]: [tuple(p) for p in f["listed"]] for f in got["frontiers"]}
    assert listed == expected
    assert all(len(front) >= 2 for front in expected.values())  # cheap-and-wrong and dear-and-right both stay

    # The flip filter shows exactly the items whose outcome differs between the chosen columns.
    gold_vs_coin = flipped_items(recs, "hotpotqa", ("mock-gold", "bm25/s1/t2k"), ("coin", "bm25/s1/t2k"))
    assert got["flipModels"]["rows"] == gold_vs_coin and 0 < len(gold_vs_coin) < 12
    between = flipped_items(recs, "hotpotqa", ("coin", first), ("coin", second))
    assert got["flipConfigs"]["rows"] == between and 0 < len(between) < 12
    assert got["flipConfigs"]["count"] == f"{len(between)} of 12 items shown"
    # The table shows the two chosen columns; the others wait behind "all columns".
    assert got["flipConfigs"]["cols"] == ["item", "question", f"coin · {first}", f"coin · {second}"]
    right_in_first = {r["item_id"] for r in recs if r["model"] == "coin" and r["label"] == first and r["correct_em"]}
    assert got["onlyA"]["rows"] == [i for i in between if i in right_in_first]
    assert got["onlyB"]["rows"] == [i for i in between if i not in right_in_first]
    assert len(got["all"]["rows"]) == 12

    # The matrix marks exactly the significant paired model differences: ▲ on the higher model, ▼ on the lower.
    comps = json.loads((run / "summary.json").read_text(encoding="utf-8"))["model_comparisons"]
    marks = {}
    for c in comps:
        up, down = (c["model"], c["reference"]) if c["diff"] > 0 else (c["reference"], c["model"])
        marks[(c["dataset"], c["label"], up)] = "▲" if c["significant"] else ""
        marks[(c["dataset"], c["label"], down)] = "▼" if c["significant"] else ""
    assert "▲" in marks.values() and "" in marks.values()  # some pairs differ significantly, some do not
    seen = {}
    for matrix in got["matrices"]:
        dataset = matrix["title"].rsplit("/ ", 1)[1]
        for row in matrix["rows"]:
            for model, cell in zip(matrix["headers"][1:], row[1:], strict=True):
                seen[(dataset, row[0], model)] = cell.split(" ")[1] if " " in cell else ""
    assert seen == marks

    # Lines join only the ordered budgets (max searches 1, 2, 3), one per model; planning and the
    # MADARA treatments are dots with intervals.
    hot = [n for title, n in got["lines"] if "hotpotqa" in title]
    assert hot == [3, 3] and not [t for t, _ in got["lines"] if "fever" in t]
    assert sum("hotpotqa" in t for t in got["dots"]) == 2 and sum("fever" in t for t in got["dots"]) == 6

    # Within 100 points of the best, the cheapest configuration of all answers.
    hot = [r for r in rows if r["dataset"] == "hotpotqa"]
    cheapest = min(hot, key=lambda r: (r["mean_cost_usd"], -r["accuracy"]))
    assert got["within100"].startswith(f"{cheapest['model']} · {cheapest['label']}: ")
