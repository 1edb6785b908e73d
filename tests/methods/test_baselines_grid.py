"""The ``baselines`` grid (BCAS §6.1, §7): its table, its collection, a run on the mock model
with a user's own method registered as docs/extending.md shows, and what the summary, the
terminal and the report (opened in Chromium) answer: each method against the agent, cost
per correct answer, the extra cost per extra correct answer and the method Pareto figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bcas.grids import AGENT_VS_METHOD, get_grid
from bcas.grids.baselines import BASELINE_DATASETS, BASELINE_METHODS, BASELINE_MODES
from bcas.report.methods import extra_cost
from bcas.testing.project import grid_project, read_records
from tests.support.chromium import PageWatch
from tests.support.mockruns import REPO, run_pytest
from tests.support.skips import skip_if_no_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Page

# A user's own method, written from scratch as docs/extending.md shows, in a baselines grid of
# the user's on the BM25 mode (fast: no dense index).
CONFTEST = '''
from bcas.grids import register_grid
from bcas.grids.baselines import BASELINE_MODES, baselines_grid
from bcas.methods import MethodRun, register_method


@register_method("first_passage", paper="a user's method: answer from the top passage", searches="one")
async def first_passage(run: MethodRun) -> str:
    """Search once with the question; answer from the first passage alone."""
    hits = await run.search(run.item.question)
    await run.answer(f"Passage: {run.passages(hits[:1])}\\nAnswer the question now.\\nQuestion: {run.item.question}")
    return "answered"


register_grid(baselines_grid(name="mine", methods=("closed_book", "retrieve_read", "iter_retgen", "ircot",
                                                   "self_ask", "first_passage"),
                             datasets=("hotpotqa",), modes=BASELINE_MODES[:1]))
'''


def test_the_grid_holds_every_method_at_the_matched_budget_against_the_agent_of_its_mode() -> None:
    grid = get_grid("baselines")
    assert grid.datasets == BASELINE_DATASETS == ("hotpotqa", "2wikimultihopqa", "triviaqa")
    by_label = {e.label: e for e in grid.entries}
    tags = [tag for tag, _ in BASELINE_MODES]
    assert [m for _, m in BASELINE_MODES][0].mode == "bm25" and [m for _, m in BASELINE_MODES][
        1
    ].mode == "hybrid_rerank"
    for tag in tags:
        agent = by_label[f"bcas/{tag}"]
        assert agent.kind == "bcas" and agent.config.budget.max_searches == 3
        assert agent.config.budget.max_total_tokens == 2000
    assert grid.reference is by_label["bcas/bm25"]
    assert by_label["closed_book"].config.budget.max_searches == 0
    assert by_label["closed_book"].compare == tuple((f"bcas/{t}", AGENT_VS_METHOD) for t in tags)
    for method in BASELINE_METHODS[1:]:
        for tag, retrieval in BASELINE_MODES:
            entry = by_label[f"{method}/{tag}"]
            assert entry.kind == method and entry.config.method == method
            assert entry.config.retrieval == retrieval and entry.config.budget.max_total_tokens == 2000
            assert entry.config.budget.max_searches == (1 if method == "retrieve_read" else 3)
            assert entry.compare == ((f"bcas/{tag}", AGENT_VS_METHOD),)
    ids = [e.config.config_id for e in grid.entries]
    assert len(ids) == len(set(ids)) == 11  # two methods at one budget are two configurations
    assert get_grid("baselines").holm_scope == "grid"


def test_pytest_collects_every_method_mode_and_dataset_case() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks", "--bcas-grid", "baselines", "--bcas-model", "mock:gold",
         "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(ids) == 33, out.stdout
    for ds in BASELINE_DATASETS:
        for label in [e.label for e in get_grid("baselines").entries]:
            assert any(ds in i and label in i for i in ids), (ds, label)


def test_extra_cost_says_infinity_and_cheaper_plainly() -> None:
    def recs(pairs: list[tuple[int, bool]]) -> list[dict[str, Any]]:
        return [{"item_id": str(i), "tokens_in": t, "tokens_out": 0, "cost_usd": None, "ok": ok}
                for i, (t, ok) in enumerate(pairs)]  # fmt: skip

    def ok(r: dict[str, Any]) -> bool:
        return bool(r["ok"])

    # the agent costs more and answers as many: ∞
    assert extra_cost(recs([(10, True), (10, False)]), recs([(1, True), (1, False)]), ok)[-1] == "∞"
    # the agent is as accurate and cheaper: cheaper
    assert extra_cost(recs([(1, True), (1, True)]), recs([(5, True), (5, False)]), ok)[-1] == "cheaper"
    # two more correct of four for 40 more tokens in all: 20 tokens per extra correct answer
    unit, n, da, dc, value, lo, hi, verdict = extra_cost(
        recs([(20, True), (20, True), (10, True), (10, False)]), recs([(10, False), (10, False), (0, True), (0, False)]),
        ok,
    )  # fmt: skip
    assert (unit, n, verdict) == ("tokens", 4, "ratio") and da == pytest.approx(0.5) and dc == pytest.approx(10.0)
    assert value == pytest.approx(20.0) and lo is not None and lo <= 20.0


@pytest.fixture(scope="module")
def user_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    folder = grid_project(tmp_path_factory.mktemp("baselines"), CONFTEST)
    run_dir = folder / "run"
    out = run_pytest(
        folder, "--bcas-grid", "mine", "--bcas-model", "mock:gold", "--bcas-limit", "3", "--bcas-report", str(run_dir)
    )
    return run_dir, out


def test_a_users_method_runs_in_the_grid_beside_the_builtins(user_run: tuple[Path, Any]) -> None:
    run_dir, out = user_run
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    records = read_records(run_dir)
    by_method: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_method.setdefault(r["method"], []).append(r)
    assert set(by_method) == {"bcas", *BASELINE_METHODS, "first_passage"}
    assert all(len(v) == 3 for v in by_method.values())
    assert all(r["stop_reason"] != "error" for r in records)
    assert all(r["searches_used"] == 0 for r in by_method["closed_book"])
    assert all(r["searches_used"] == 1 for r in by_method["retrieve_read"] + by_method["first_passage"])
    assert all(r["searches_used"] <= 3 and r["tokens_out"] <= 2000 for r in records if r["method"] != "bcas")
    assert [s["kind"] for s in by_method["first_passage"][0]["steps"]] == ["search", "answer"]
    # every search a method makes is timed as the loop's are: the latency views' shares are measured
    searched = [r for r in records if r["searches_used"]]
    assert searched and all(r["timing"]["searches"] == r["searches_used"] for r in searched)
    assert all(len(r["timing"]["search_times"]) == r["searches_used"] for r in searched)
    assert all(r["correct_em"] for r in by_method["first_passage"])  # mock:gold answers the gold answer
    # each method's answers have their own prompt hash and configuration
    assert len({r["prompt_hash"] for r in records}) == len(by_method)
    assert len({r["config_id"] for r in records}) == len(by_method)


def test_the_summary_and_terminal_answer_the_question(user_run: tuple[Path, Any]) -> None:
    run_dir, out = user_run
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = summary["methods"]["rows"]
    assert {r["label"] for r in rows} == {"closed_book", *(f"{m}/bm25" for m in BASELINE_METHODS[1:]),
                                          "first_passage/bm25"}  # fmt: skip
    for r in rows:
        assert r["agent"] == "bcas/bm25" and r["n_paired"] == 3
        assert r["diff"] == pytest.approx(r["accuracy"] - r["agent_accuracy"])
        assert r["ci_lo"] <= r["diff"] <= r["ci_hi"] and 0 <= r["p_value"] <= r["p_holm"] <= 1
        assert r["tokens_per_correct"] is None or r["tokens_per_correct"] > 0
    closed = next(r for r in rows if r["method"] == "closed_book")
    assert closed["mean_searches"] == 0
    extra = summary["methods"]["extra_cost"]
    assert len(extra) == 1 and extra[0]["agent"] == "bcas/bm25" and extra[0]["text"]
    # mock:gold is right everywhere: nothing separates the agent from any method, so no verdict
    # (neither "∞" nor "cheaper") is given; the text says why and what would give one.
    assert extra[0]["verdict"] == "not separable"
    assert extra[0]["text"].startswith(f"{extra[0]['method']} vs bcas/bm25: not separable at n = 3 (Holm p = 1")
    assert extra[0]["text"].endswith(
        "the agent's cost per item minus the method's: " + f"+{extra[0]['extra_cost']:,.0f} tokens"
    )
    assert "paired items would detect a difference of 5 points (none observed) with 80% power" in extra[0]["text"]
    assert all(r["verdict"].startswith(f"{r['label']} vs bcas/bm25: not separable at n = 3") for r in rows)
    terminal = out.stdout
    line = next(x for x in terminal.splitlines() if x.startswith("agent vs methods mine mock-gold hotpotqa"))
    assert line.endswith(
        f"(bcas/bm25): extra cost per extra correct answer over {extra[0]['method']}: {extra[0]['text']}"
    )
    assert "∞" not in line and "cheaper" not in line
    assert "  first_passage/bm25: 100.0% vs agent" in terminal


@pytest.mark.browser
@skip_if_no_chromium
def test_the_report_shows_the_comparison_the_extra_cost_and_the_method_pareto_figure(
    user_run: tuple[Path, Any], page: Page
) -> None:
    run_dir, _ = user_run
    watch = PageWatch.attach(page).open(run_dir / "index.html")
    value = watch.evaluate(
        """(() => {
          const t = (id) => [...document.querySelectorAll('#' + id + ' tbody tr')].map(
            (tr) => [...tr.cells].map((c) => c.textContent));
          const fig = document.querySelector('.methods-figure');
          return {methods: t('methods-table'), extra: t('extra-cost-table'),
                  svg: fig ? fig.querySelectorAll('figure.bcas-figure svg.marks').length : 0,
                  frontier: fig ? fig.querySelectorAll('ol.frontier li').length : 0,
                  heading: !!document.getElementById('agent-vs-methods')};
        })()""",
    )
    assert watch.errors == []
    assert value["heading"] and value["svg"] == 1 and value["frontier"] >= 1
    assert len(value["methods"]) == 6 and len(value["extra"]) == 1
    assert {row[2] for row in value["methods"]} >= {"closed_book", "first_passage/bm25", "ircot/bm25"}
    assert value["extra"][0][3] in {row[2] for row in value["methods"]}  # the compared method is one of them


def test_the_report_shows_the_summarys_method_rows(user_run: tuple[Path, Any]) -> None:
    """The page's agent-vs-methods table is summary.json's rows (one computation for both views):
    each method, its agent, its n and its Holm p as the summary has them."""
    import re

    run_dir, _ = user_run
    rows = json.loads((run_dir / "summary.json").read_text())["methods"]["rows"]
    page = (run_dir / "index.html").read_text(encoding="utf-8")
    table = page.split('id="methods-table"')[1].split("</table>")[0]
    shown = [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", tr, flags=re.S)]
        for tr in table.split("<tbody")[1].split("<tr")[1:]
    ]
    want = [[r["label"], r["agent"], str(r["n_paired"]), f"{r['p_holm']:.3g}"] for r in rows]
    assert sorted([c[2], c[3], c[4], c[10].rstrip(" *")] for c in shown) == sorted(want)


def test_the_report_draws_the_method_results_it_is_given(tmp_path: Path) -> None:
    """render_report shows the agent-vs-methods results it is handed (the summary's), never its own."""
    from bcas.report.html import render_report
    from bcas.report.methods import MethodRow
    from bcas.report.summary import write_summaries
    from tests.support.reports import grid_records

    records = grid_records("smoke", n_items=2)
    summaries = write_summaries(tmp_path, records)
    row = MethodRow(
        grid="smoke", model="m", dataset="d", label="closed_book", method="closed_book", agent="bcas/bm25",
        n_paired=2, accuracy=0.5, agent_accuracy=0.5, diff=0.0, ci_lo=-0.5, ci_hi=0.5, p_value=0.123,
        p_holm=0.777, significant=False, verdict="closed_book vs bcas/bm25: not separable", mean_searches=0.0, mean_tokens_out=9.0, mean_tokens=20.0, mean_cost_usd=None,
        cost_per_correct=None, tokens_per_correct=18.0,
    )  # fmt: skip
    given = render_report(tmp_path, records, summaries.rows, summaries.comparisons, methods=([row], []))
    assert "methods-table" in given.read_text(encoding="utf-8") and ">0.777<" in given.read_text(encoding="utf-8")
    plain = render_report(tmp_path / "none", records, summaries.rows, summaries.comparisons)
    assert "methods-table" not in plain.read_text(encoding="utf-8")
