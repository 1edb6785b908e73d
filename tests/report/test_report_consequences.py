"""What a reader of the report loses when its comparisons break.

A ▲ on the wrong model in the model matrix, a Holm family that pools what the grid keeps
apart (or the reverse), a multi-epoch comparison tested as if it were one epoch, a
documents note that averages cases of different sizes into a number no item had.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bcas.report.comparisons import Comparison, _compare, holm_family
from bcas.report.html import _docs_cell
from bcas.report.html_models import _matrix_cell, significance_marks
from bcas.report.summary import _documents_note
from tests.support.ascii_locale import ascii_locale


def _comparison(model: str, reference: str, diff: float, *, significant: bool = True, p: float = 0.01, **where):
    place = {"grid": "g", "dataset": "d", "label": "bm25/s1", **where}
    return Comparison(
        n_paired=50, a=20, b=10, c=2, d=18, diff=diff, ci_lo=diff - 0.1, ci_hi=diff + 0.1, p_value=p,
        test="mcnemar-exact", model=model, reference=reference, p_holm=p, significant=significant, **place,
    )  # fmt: skip


def test_the_model_that_is_significantly_better_gets_the_up_mark_and_the_other_the_down_mark():
    comps = [
        _comparison("small", "large", -0.2, p=0.004),  # small is below large
        _comparison("small", "large", 0.3, label="other"),  # another configuration: not this cell
        _comparison("small", "mid", 0.1, significant=False),  # not significant: no mark
        _comparison("mid", "large", 0.2, p=0.03),  # small not involved
        _comparison("tiny", "small", -0.15, p=0.02),  # small as the reference, tiny below it
    ]
    above, below = significance_marks("small", "g", "d", "bm25/s1", comps)
    assert above == ["tiny (Holm p=0.02)"] and below == ["large (Holm p=0.004)"]
    above, below = significance_marks("large", "g", "d", "bm25/s1", comps)
    assert above == ["small (Holm p=0.004)"] and below == ["mid (Holm p=0.03)"]
    assert significance_marks("small", "g", "d2", "bm25/s1", comps) == ([], [])
    # a candidate above its reference by a fraction of a point is above it
    assert significance_marks("mid", "g", "d", "bm25/s1", comps) == (["large (Holm p=0.03)"], [])
    # an exact tie is no direction: neither side is above or below the other
    tie = [_comparison("x", "y", 0.0)]
    assert significance_marks("x", "g", "d", "bm25/s1", tie) == ([], [])
    assert significance_marks("y", "g", "d", "bm25/s1", tie) == ([], [])


def test_a_matrix_cell_shows_its_accuracy_marks_and_which_models_they_are_about():
    comps = [_comparison("small", "large", -0.2, p=0.004), _comparison("tiny", "small", -0.15, p=0.02)]
    panel = {"grid": "g", "dataset": "d"}
    cell = _matrix_cell(0.625, "small", "bm25/s1", panel, comps)
    assert cell == {"text": "62.5 ▲▼", "title": "above tiny (Holm p=0.02); below large (Holm p=0.004)"}
    assert _matrix_cell(0.5, "large", "bm25/s1", panel, comps) == {
        "text": "50.0 ▲",
        "title": "above small (Holm p=0.004)",
    }
    assert _matrix_cell(0.5, "nobody", "bm25/s1", panel, comps) == {"text": "50.0", "title": ""}
    # several models on a side are each named
    two = [_comparison("a", "b", 0.2, p=0.01), _comparison("a", "c", 0.3, p=0.02), _comparison("d", "a", 0.1, p=0.03),
           _comparison("e", "a", 0.1, p=0.04)]  # fmt: skip
    assert _matrix_cell(0.7, "a", "bm25/s1", panel, two)["title"] == (
        "above b (Holm p=0.01), c (Holm p=0.02); below d (Holm p=0.03), e (Holm p=0.04)"
    )
    assert _matrix_cell(None, "small", "bm25/s1", panel, comps) == {"text": "", "title": ""}


def test_holm_families_pool_over_models_and_datasets_unless_the_grid_says_per_cell():
    comp = _comparison("m", "ref", 0.1, family="filters")
    assert holm_family(comp) == ("g", "filters")
    assert holm_family(comp, {"g": SimpleNamespace(holm_scope="grid")}) == ("g", "filters")
    assert holm_family(comp, {"g": SimpleNamespace(holm_scope="cell")}) == ("g", "m", "d", "filters")
    assert holm_family(comp, {"other": SimpleNamespace(holm_scope="cell")}) == ("g", "filters")


def _recs(outcomes: dict[str, list[bool]]) -> list[dict]:
    return [
        {"item_id": item, "correct_em": ok, "prediction": "x", "epoch": e}
        for item, runs in outcomes.items()
        for e, ok in enumerate(runs)
    ]


def test_one_epoch_is_compared_by_mcnemar_and_several_by_their_item_means():
    cand, ref = _recs({"q1": [True], "q2": [True], "q3": [False]}), _recs({"q1": [False], "q2": [True], "q3": [False]})
    one = _compare("g", "m", "d", "s3", "s1", cand, ref, 0.05)
    assert one.test == "mcnemar-exact" and (one.a, one.b, one.c, one.d) == (1, 1, 0, 1)
    assert (one.grid, one.model, one.dataset, one.label, one.reference) == ("g", "m", "d", "s3", "s1")
    assert one.metric == "correct_em" and one.family == "" and one.significant is False
    assert one.p_holm == one.p_value  # alone, a comparison is a Holm family of one
    # the interval is at the level asked for: a 50% interval is narrower than a 95% one
    half = _compare("g", "m", "d", "s3", "s1", cand, ref, 0.5)
    assert half.ci_hi - half.ci_lo < one.ci_hi - one.ci_lo and half.diff == one.diff
    # two epochs on the candidate's side only: item means, not McNemar on a rounded outcome
    cand_many = _compare("g", "m", "d", "s3", "s1", _recs({"q1": [True, False], "q2": [True, True]}),
                         _recs({"q1": [False], "q2": [True]}), 0.05)  # fmt: skip
    assert cand_many.test != "mcnemar-exact" and cand_many.diff == pytest.approx(0.25)
    # several epochs on either side: the per-item means are compared, never rounded to pass/fail
    many = _compare("g", "m", "d", "s3", "s1", _recs({"q1": [True, False], "q2": [True, True]}),
                    _recs({"q1": [False, False], "q2": [True, True]}), 0.05)  # fmt: skip
    assert many.test != "mcnemar-exact" and many.diff == pytest.approx(0.25)
    ref_many = _compare("g", "m", "d", "s3", "s1", _recs({"q1": [True], "q2": [True]}),
                        _recs({"q1": [True, False], "q2": [True, True]}), 0.05)  # fmt: skip
    assert ref_many.test != "mcnemar-exact" and ref_many.diff == pytest.approx(0.25)
    # another metric is read as that metric
    judged = [{**r, "judge_verdict": not r["correct_em"]} for r in cand]
    by_judge = _compare("g", "m", "d", "s3", "s1", judged, [{**r, "judge_verdict": True} for r in ref], 0.05,
                        metric="judge_verdict", family="f")  # fmt: skip
    assert by_judge.metric == "judge_verdict" and by_judge.family == "f" and (by_judge.b, by_judge.c) == (0, 2)


def _row(label: str, n: int, docs: float, retrieved: float | None = None):
    return SimpleNamespace(
        label=label, n=n, docs_per_item=docs, retrieved_per_item=docs if retrieved is None else retrieved
    )


def test_cases_with_different_document_counts_are_named_apart_not_averaged():
    rows = [_row("nf", 5, 10.0), _row("sda", 5, 10.0), _row("rerank", 5, 5.0)]
    assert _documents_note(rows) == "10.0 documents on average (nf, sda); 5.0 documents on average (rerank)"
    # one case over two datasets' rows: its own mean over its items
    assert _documents_note([_row("nf", 2, 10.0), _row("nf", 6, 6.0)]) == "7.0 documents on average"
    padded = [_row("nf", 4, 10.0, 7.5)]
    assert (
        _documents_note(padded)
        == "10.0 documents on average, 7.5 of them retrieved, the rest padded from the collection"
    )
    # a case whose items got no document says so (MADARA with an empty retrieval), and one
    # whose documents were all padded says none was retrieved
    assert _documents_note([_row("nf", 5, 0.0)]) == "0.0 documents on average"
    assert _documents_note([_row("nf", 2, 0.0), _row("nf", 2, 4.0)]) == "2.0 documents on average"
    assert (
        _documents_note([_row("nf", 3, 10.0, 0.0)])
        == "10.0 documents on average, 0.0 of them retrieved, the rest padded from the collection"
    )


def test_the_documents_cell_shows_the_mean_and_how_many_were_retrieved():
    extras = [{"doc_ids": ["a", "b", "c", "d"], "retrieved_docs": 2}, {"doc_ids": ["a", "b"]}, {"no": "docs"}]
    assert _docs_cell(extras) == "3.0 (2.0)"
    assert _docs_cell([{"doc_ids": "not a list"}]) == "" and _docs_cell([]) == ""


def _record(item: str, epoch: int, ok: bool, extra: dict, cost: float | None = None) -> dict:
    from bcas.records import Record

    row = Record(
        run_id="r", model="m", config_id="c", label="s3", dataset="d", dataset_hash="h", item_id=item, question="?",
        answers=["x"], prediction="x" if ok else "y", correct_em=ok, f1=float(ok), model_fingerprint="fp",
        epoch=epoch, tokens_in=100, tokens_out=10, cost_usd=cost,
    ).to_dict()  # fmt: skip
    row["extra"] = extra
    return row


def test_the_terminals_beyond_accuracy_line_carries_each_figure_of_the_records():
    """Every number below is worked out by hand from the four records (two items, two epochs)."""
    from bcas.report.html_metrics import metric_lines
    from bcas.report.summary import summarize

    gold = {"gold_unmapped": 1}
    records = [
        _record("a", 0, True, {**gold, "evidence_recall": 1.0, "recall_at_step": [0.5, 1.0], "first_gold_step": 1,
                               "wasted_searches": 0, "redundant_searches": 1, "kept_precision": 0.5, "kept_recall": 1.0},
                cost=0.01),
        _record("a", 1, False, {**gold, "evidence_recall": 0.5, "recall_at_step": [0.5], "first_gold_step": 1,
                                "wasted_searches": 2, "redundant_searches": 0, "kept_precision": 1.0, "kept_recall": 0.5},
                cost=0.01),
        _record("b", 0, True, {"evidence_recall": 0.0, "recall_at_step": [0.0, 0.0, 0.0], "wasted_searches": 3,
                               "redundant_searches": 2}, cost=0.02),
        _record("b", 1, True, {"evidence_recall": 1.0, "recall_at_step": [1.0], "first_gold_step": 1,
                               "wasted_searches": 0, "redundant_searches": 0}, cost=0.02),
    ]  # fmt: skip
    assert metric_lines(summarize(records)) == [
        "beyond accuracy:",
        "  /m/d/s3: evidence recall 62.5% (per search 50 → 62 → 62), first gold search 1.00, wasted 1.25, "
        "1 gold refs unmapped, kept precision/recall 75.0 / 75.0%, redundant 0.75, correct/incorrect/not attempted "
        "3 / 1 / 0, F-score 75.0%, pass@2 100.0 [100.0, 100.0]%, pass^2 50.0 [0.0, 100.0]%, flips 50.0%, "
        "cost-of-pass $0.0200 [0.0200, 0.0200]",
    ]
    # one epoch, no gold, no price: none of those clauses, and the tokens of a pass instead of its cost
    plain = [_record("a", 0, True, {}), _record("b", 0, False, {})]
    (line,) = metric_lines(summarize(plain))[1:]
    assert line == (
        "  /m/d/s3: redundant —, correct/incorrect/not attempted 1 / 1 / 0, F-score 50.0%, tokens-of-pass "
        + line.rsplit("tokens-of-pass ", 1)[1]
    )
    assert line.rsplit("tokens-of-pass ", 1)[1].startswith("220 [")  # 2 answers x 110 tokens per correct answer
    assert metric_lines([]) == []


def test_an_interval_without_a_finite_value_or_bound_shows_infinity():
    from bcas.report.html_metrics import _interval

    assert _interval(None, 1.0, None, ".2f") == "∞ [1.00, ∞]"
    assert _interval(None, None, None, ".1f") == "—"
    assert _interval(2.0, 1.0, 3.0, ".1f", 100) == "200.0 [100.0, 300.0]"


def test_the_unlimited_budget_sits_last_on_the_budget_axis():
    from bcas.report.html_figures import budget_axis

    def cfg(searches):
        return {"budget": {"max_searches": searches, "max_total_tokens": 2000}, "retrieval": {"mode": "bm25"}}

    field, ordered, rest = budget_axis({"sinf": cfg(None), "s3": cfg(3), "s1": cfg(1), "odd": None})
    assert field == "max_searches" and ordered == ["s1", "s3", "sinf"] and rest == ["odd"]


def test_a_cost_points_interval_names_an_open_end():
    from bcas.report.html_cost import _interval
    from bcas.report.pareto import Point

    point = Point(model="m", label="l", grid="g", dataset="d", config_id="c", metric="correct_em", accuracy=0.5,
                  ci_lo=0.4, ci_hi=0.6, n=10, x=0.01, x_lo=0.005, x_hi=None)  # fmt: skip
    assert _interval(point) == "0.005 – ∞"
    assert _interval(Point(**{**point.__dict__, "x_lo": None, "x_hi": 0.0123456789})) == "– – 0.0123457"


def test_the_trajectory_panel_marks_the_gold_documents_of_the_searches_that_ran():
    from bcas.report.html_metrics import trajectory_panel

    rec = {
        "extra": {"recall_at_step": [0.5, 1.0, 1.0], "gold_hits": [["d2"], ["d9"], []], "evidence_recall": 1.0,
                  "first_gold_step": 1, "redundant_searches": 1, "wasted_searches": 0},
        "steps": [
            {"kind": "plan", "output": "x"},
            {"kind": "search", "query": "q one", "docs": ["d1", "d2"], "titles": ["Alpha", "Beta"]},
            {"kind": "search", "query": "q one", "flag": "repeated_query", "docs": []},  # not run: no row
            {"kind": "search", "query": "bad", "flag": "search_error"},  # failed: no row
            {"kind": "search", "query": "q two", "docs": ["d9", "d3"]},  # no titles: the ids
            {"kind": "search", "query": None, "docs": ["d4", "d5"], "titles": ["Only one"]},
        ],
    }  # fmt: skip
    html = str(trajectory_panel(rec))
    assert "evidence recall 100.0% · first gold search 1 · redundant 1 · wasted 0" in html
    assert (
        '<tr class="gold"><td>1</td><td class="t">q one</td><td class="t">Alpha, ★ Beta</td><td>50.0</td></tr>' in html
    )
    assert '<tr class="gold"><td>2</td><td class="t">q two</td><td class="t">★ d9, d3</td><td>100.0</td></tr>' in html
    assert '<tr><td>3</td><td class="t"></td><td class="t">Only one, d5</td><td>100.0</td></tr>' in html
    assert html.count("<tr") == 4  # the header and the three searches that ran
    # a record without a recall curve has no panel; a curve shorter than the searches shows a dash
    assert str(trajectory_panel({"extra": {}, "steps": rec["steps"]})) == ""
    short = str(trajectory_panel({**rec, "extra": {"recall_at_step": [0.5]}}))
    assert "<td>—</td>" in short and "evidence recall —% · first gold search — · redundant — · wasted —" in short
    # a recall that is not a number (an imported record) and an empty count show a dash, not the text
    odd = str(trajectory_panel({**rec, "extra": {"recall_at_step": ["n/a", 1.0], "first_gold_step": ""}}))
    assert '<td class="t">Alpha, Beta</td><td>—</td>' in odd and "first gold search — ·" in odd


def test_a_row_without_a_recall_curve_shows_a_dash_in_its_recall_cell():
    from bcas.report.html_metrics import HEADERS, row_cells
    from bcas.report.summary import summarize

    (row,) = summarize([_record("a", 0, True, {})])
    cells = dict(zip(HEADERS[4:], row_cells(row), strict=True))
    assert cells["recall % after search 1 → 2 → …"] == "—"


def test_kept_precision_without_recall_still_shows_in_the_terminal_line():
    from bcas.report.html_metrics import metric_lines
    from bcas.report.summary import summarize

    records = [_record("a", 0, True, {"kept_precision": 0.5}), _record("b", 0, True, {"kept_precision": 1.0})]
    (line,) = metric_lines(summarize(records))[1:]
    assert "kept precision/recall 75.0 / —%," in line


def test_the_beyond_accuracy_rows_carry_the_filter_keys_of_their_case():
    """The filter bar hides rows by grid, model, dataset and configuration: a row without its
    keys stays on screen whatever is chosen."""
    from bcas.report.html_metrics import metrics_section
    from bcas.report.summary import summarize

    rows = summarize([{**_record("a", 0, True, {"grid": "g1"}), "label": "bm25/s3", "dataset": "hotpotqa"}])
    html = str(metrics_section(rows))
    assert '<tr class="fr" data-grid="g1" data-model="m" data-dataset="hotpotqa" data-config="bm25/s3">' in html


def test_the_filter_bar_offers_each_model_dataset_grid_and_configuration_once_sorted():
    """A value missing from a box cannot be chosen; a box keyed wrongly filters nothing."""
    from bcas.report.html_interactive import filter_bar

    rows = [
        SimpleNamespace(model="m2", dataset="nq", grid="g1", label="bm25/s3"),
        SimpleNamespace(model="m1", dataset="hotpotqa", grid="g1", label="bm25/s1"),
        SimpleNamespace(model="m1", dataset="nq", grid="g2", label="bm25/s1"),
    ]
    html = str(filter_bar(rows))
    expected = {
        "model": ("all models", ["m1", "m2"]),
        "dataset": ("all datasets", ["hotpotqa", "nq"]),
        "grid": ("all grids", ["g1", "g2"]),
        "config": ("all configurations", ["bm25/s1", "bm25/s3"]),
    }
    for key, (everything, values) in expected.items():
        options = "".join(f'<option value="{v}">{v}</option>' for v in values)
        box = f'<label>{key} <select id="filter-{key}" data-key="{key}"><option value="">{everything}</option>{options}</select></label>'
        assert box in html, key
    # the boxes come in a fixed order: model, dataset, grid, configuration
    assert [html.index(f'id="filter-{k}"') for k in expected] == sorted(
        html.index(f'id="filter-{k}"') for k in expected
    )


def test_the_cost_stop_panel_names_the_cap_the_spend_and_each_stopped_case():
    from bcas.report.html_cost import stops_section

    assert str(stops_section([])) == ""
    html = str(
        stops_section(
            [
                {"case_id": "c1", "cap_usd": 0.5, "spent_usd": 0.25, "recorded": 3, "total": 10},
                {"case_id": "c2", "cap_usd": 0.5, "spent_usd": 0.5012345678, "recorded": None, "total": 4},
            ]
        )
    )
    assert "--bcas-max-cost 0.5 USD: the session's priced spend reached 0.501235 USD" in html
    assert "<li>c1: 3 of 10 items recorded</li><li>c2: 0 of 4 items recorded</li>" in html
    no_cap = str(stops_section([{"case_id": "c", "cap_usd": None, "spent_usd": None, "recorded": 1, "total": None}]))
    assert "--bcas-max-cost 0 USD" in no_cap and "reached 0 USD" in no_cap and "c: 1 of 0 items" in no_cap


def test_the_models_section_shows_each_pairs_figures_and_the_matrix_with_its_marks():
    """What a reader compares models by: who is first, the difference with its interval and both
    p values, which rows are significant, and the accuracy matrix with its ▲/▼ and hovers."""
    from bcas.report.html_models import model_sections

    comps = [_comparison("small", "large", -0.2, p=0.004), _comparison("mid", "large", 0.05, significant=False, p=0.5)]
    comps[1].p_holm = 0.75
    comps[
        0
    ].verdict = "large ahead of small: separated at alpha 0.05 (Holm p = 0.004, exact McNemar on n = 50 paired items)"
    matrix = {
        "panels": [
            {
                "grid": "g",
                "dataset": "d",
                "models": ["large", "small"],
                "rows": [{"label": "bm25/s1", "accuracy": [0.6, 0.4]}, {"label": "bm25/s3", "accuracy": [None, 0.5]}],
            }
        ]
    }
    html = str(model_sections(comps, matrix))
    cells = "".join(f'<td class="t">{t}</td>' for t in ("g", "d", "bm25/s1", "small", "large"))
    assert (
        '<tr class="fr sig" data-grid="g" data-dataset="d" data-config="bm25/s1" data-model="small" data-model-b="large">'
        + cells
        + '<td>50</td><td class="more">10</td><td class="more">2</td><td>-20.0 *</td><td>-30.0 – -10.0</td>'
        '<td class="more">0.0040</td><td>0.0040</td><td class="more">mcnemar-exact</td>'
        f'<td class="prose">{comps[0].verdict}</td></tr>'  # "more": behind "all columns"; the verdict wraps
    ) in html
    assert (
        '<tr class="fr" data-grid="g" data-dataset="d" data-config="bm25/s1" data-model="mid" data-model-b="large">'
    ) in html
    assert '<td>+5.0</td><td>-5.0 – +15.0</td><td class="more">0.5000</td><td>0.7500</td>' in html  # no *
    assert "<th>config</th><th>large</th><th>small</th>" in html
    assert (
        '<tr class="fr" data-grid="g" data-dataset="d" data-config="bm25/s1"><td class="t">bm25/s1</td>'
        '<td title="above small (Holm p=0.004)">60.0 ▲</td><td title="below large (Holm p=0.004)">40.0 ▼</td></tr>'
    ) in html
    assert '<td class="t">bm25/s3</td><td></td><td>50.0</td>' in html  # a model without that configuration: blank
    assert "Accuracy % by model × configuration — g / d" in html
    # one model: no section; a matrix alone still shows
    assert str(model_sections([], None)) == "" and str(model_sections([], {"panels": []})) == ""
    alone = str(model_sections([], matrix))
    assert "Accuracy % by model × configuration" in alone and 'id="model-comparisons"' in alone


def test_a_figure_panel_reads_each_configuration_from_the_grid_table_else_from_its_records():
    """The scaling chart's x axis is each configuration's budget: read from the wrong place, a
    point is plotted at another budget, or a configuration the table no longer has disappears."""
    from bcas.report.html_figures import panel_configs

    def entry(label: str, searches: int) -> SimpleNamespace:
        return SimpleNamespace(
            label=label, config=SimpleNamespace(to_dict=lambda: {"budget": {"max_searches": searches}})
        )

    grids = {"g": SimpleNamespace(entries=[entry("s1", 1), entry("s3", 3)])}
    records = [
        {"label": "s3", "config": {"budget": {"max_searches": 99}}},  # the table's entry wins
        {"label": "old", "config": {"retrieval": "bm25"}},  # no budget: not a configuration to plot by
        {"label": "old", "config": {"budget": {"max_searches": 5}}},  # a renamed configuration: its record's own
        {"label": "old", "config": {"budget": {"max_searches": 7}}},  # the first one read is kept
        {"label": "elsewhere", "config": {"budget": {"max_searches": 2}}},  # not in this panel
        {"label": "none", "config": "not a mapping"},
    ]
    got = panel_configs("g", ["s1", "s3", "old", "none"], records, grids)
    assert got == {
        "s1": {"budget": {"max_searches": 1}},
        "s3": {"budget": {"max_searches": 3}},
        "old": {"budget": {"max_searches": 5}},
        "none": None,
    }
    # a grid the run does not know: every configuration from its records
    assert panel_configs("other", ["s3"], records, grids) == {"s3": {"budget": {"max_searches": 99}}}


def _kv_rows(html: str) -> dict[str, str]:
    import re

    return dict(re.findall(r'<tr><td class="t">(.*?)</td><td class="t">(.*?)</td></tr>', html))


def test_the_run_section_says_what_ran_where_and_under_which_options():
    """The manifest panel is how a reader tells two runs apart: a wrong commit, a dropped
    "modified", a model without its fingerprint or an option without its source misleads."""
    from bcas.report.html_run import manifest_section

    latest = {
        "session": "s1", "started_at": "t2", "ended_at": None, "status": "interrupted",
        "bcas": {"version": "1.0", "git_commit": "def1234", "git_dirty": True}, "python": "3.11.7",
        "packages": {"llama-cpp-python": "0.3.36", "vllm": None},
        "host": {"cpu": "Xeon", "cpu_features": ["avx2", "fma"], "gpus": ["H200"]}, "seed": 7, "epochs": 3,
        "price_sheet": {"path": "p.toml", "sha256": "0123456789abcdef0123"},
        "models": {
            "small": {"backend": "embedded", "model": None, "fingerprint": "fp1", "recorded_fingerprints": ["fp0", "fp1"],
                      "served": "SmolLM2.gguf"},
            "big": {"backend": "openai", "model": "qwen", "fingerprint": "fp2", "recorded_fingerprints": ["fp2"]},
        },
        "judge": {"spec": "mock:gold", "grade_id": "g1"}, "datasets": {"hotpotqa": ["h1", "h2"]},
        "options": {"grid": {"value": "smoke", "source": "command line"}, "broken": "not a mapping"},
    }  # fmt: skip
    earlier = {"session": "s0", "started_at": "t0", "ended_at": "t1", "exit_status": 0, "models": {"a": {}, "b": {}},
               "bcas": {"version": "0.9", "git_commit": "abc"}}  # fmt: skip
    html = str(manifest_section({"sessions": [earlier, "not a session", latest]}))
    assert "(latest of 2 session(s))" in html
    rows = _kv_rows(html)
    assert rows == {
        "session": "s1 · t2 → running (interrupted: rerun the same command to resume)",
        "bcas": "1.0 @ def1234 (modified)",
        "python": "3.11.7",
        "packages": "llama-cpp-python 0.3.36",
        "host": "Xeon (avx2 fma) · GPUs: H200",
        "seed / epochs": "7 / 3",
        "price sheet": "p.toml sha256 0123456789abcdef",
        "model small": "embedded:default · served: SmolLM2.gguf · fp1 (recorded: fp0, fp1)",
        "model big": "openai:qwen · fp2",
        "judge": "mock:gold · g1",
        "dataset hotpotqa": "h1, h2",
        "--bcas-grid": "smoke  [command line]",
    }
    assert "<li>s0: t0 → t1, exit 0, models a, b, bcas 0.9 @ abc</li>" in html
    # a clean checkout, a finished session, no GPU, no pricing, no judge
    plain = {**latest, "status": "ok", "ended_at": "t3", "bcas": {"version": "1.0", "git_commit": "def1234"},
             "host": {"cpu": "Xeon"}, "price_sheet": None, "judge": None, "models": {}}  # fmt: skip
    rows = _kv_rows(str(manifest_section({"sessions": [plain]})))
    assert rows["session"] == "s1 · t2 → t3" and rows["bcas"] == "1.0 @ def1234"
    assert rows["host"] == "Xeon · GPUs: none" and rows["price sheet"] == "pricing off" and rows["judge"] == "none"
    no_commit = _kv_rows(
        str(manifest_section({"sessions": [{**plain, "bcas": {"version": "1.0", "git_dirty": True}}]}))
    )
    assert no_commit["bcas"] == "1.0"
    assert str(manifest_section(None)) == "" and str(manifest_section({"sessions": []})) == ""
    assert str(manifest_section({"sessions": ["damaged"]})) == ""


def test_each_panel_plots_every_model_over_its_configurations_and_shift_bars_where_the_grid_compares():
    from bcas.report import html_figures

    def row(grid, label, model, acc, **kw):
        return SimpleNamespace(grid=grid, dataset="d", label=label, model=model, accuracy=acc, ci_lo=acc - 0.1,
                               ci_hi=acc + 0.1, metric=kw.get("metric", "correct_em"), interval=kw.get("interval", "wilson"))  # fmt: skip

    rows = [
        row("g", "s3", "m1", 0.5), row("g", "s1", "m1", 0.3), row("g", "x-old", "m1", 0.2),
        row("g", "s1", "m2", 0.4, interval="clustered"),
        row("search_scaling", "s1", "m1", 0.1, metric="judge_verdict"),
    ]  # fmt: skip
    records = [
        {"extra": {"grid": "g"}, "dataset": "d", "label": "s1", "config": {"budget": {"max_searches": 1}}},
        {"extra": {"grid": "g"}, "dataset": "d", "label": "s3", "config": {"budget": {"max_searches": 3}}},
    ]
    comps = [
        SimpleNamespace(grid="g", dataset="d", model="m1", label="s3", diff=0.2, ci_lo=0.1, ci_hi=0.3),
        SimpleNamespace(grid="g", dataset="other", model="m1", label="s3", diff=0.9, ci_lo=0.8, ci_hi=1.0),
        SimpleNamespace(grid="search_scaling", dataset="d", model="m1", label="s1", diff=0.1, ci_lo=0, ci_hi=0.2),
    ]
    figs = html_figures.figure_list(rows, comps, {"g": ["s3", "s1"]}, records, {})
    assert [f.name for f in figs] == ["scaling-g-d", "shift-g-d", "scaling-search_scaling-d"]
    scaling, shift, scaling_s = (f.spec for f in figs)
    assert _title(scaling) == "g — d (SQuAD EM, 95% item-clustered; line: max searches in order)"
    got = {(r["series"], r["config"], r["on_axis"]): (r["acc"], r["lo"], r["hi"]) for r in scaling["data"]["values"]}
    assert got == {  # by budget on the line; a configuration the grid does not know is a dot, last
        ("m1", "s1", True): (30.0, 20.0, 40.0), ("m1", "s3", True): (50.0, 40.0, 60.0),
        ("m1", "x-old", False): (20.0, 10.0, 30.0), ("m2", "s1", True): (40.0, 30.0, 50.0),
    }  # fmt: skip
    assert scaling["layer"][0]["encoding"]["x"]["sort"] == ["s1", "s3", "x-old"]
    assert _title(scaling_s) == "search_scaling — d (LLM judge (BCAS §3.6), 95% Wilson)"
    # shift bars: the compared grid's comparisons on this dataset only; none for a scaling grid
    assert _title(shift) == "g — d: net shift in accuracy vs reference (Newcombe 95%)"
    assert [(r["series"], r["config"], r["diff"], r["lo"], r["hi"]) for r in shift["data"]["values"]] == [
        ("m1", "s3", 20.0, 10.0, 30.0)
    ]
    html = str(html_figures.figures(rows, comps, {"g": ["s3", "s1"]}, records, {}))
    assert html.count('<figure class="bcas-figure fr"') == 3
    assert '<figure class="bcas-figure fr" data-figure="shift-g-d" data-grid="g" data-dataset="d">' in html
    assert '<figure class="bcas-figure fr" data-figure="scaling-search_scaling-d" data-grid="search_scaling"' in html


def _title(spec: dict) -> str:
    title = spec["title"]
    return " ".join(title) if isinstance(title, list) else title


def test_a_summary_row_shows_each_figure_of_its_case_and_what_answered():
    """The summary table is the report's headline: each cell must be its own figure, in its unit."""
    from dataclasses import replace as with_fields

    from bcas.report.html import _summary_rows, test_doubles
    from bcas.report.summary import summarize

    (base,) = summarize([_record("a", 0, True, {"grid": "g"}), _record("b", 0, False, {"grid": "g"})])
    row = with_fields(
        base, grid="g", model="qwen", dataset="d", label="s1", reference=True, served="Other-7B.gguf", n=8,
        accuracy=0.625, ci_lo=0.3, ci_hi=0.85, judge_accuracy=0.5, judge_n=4, mean_f1=0.71234, mean_searches=1.5,
        mean_tokens_in=1234.4, mean_tokens_out=56.6, mean_llm_calls=2.25, cost_usd=0.01234, errors=1,
        invalid_turn_rate=0.1, context_window_stops=2, metric="strict_em", em_squad=0.75, model_fingerprint="fp",
        n_correct=5, cost_of_pass=0.0197, tokens_of_pass=90.4, latency_p95=1.25,
    )  # fmt: skip
    (shown,) = _summary_rows([row])
    assert shown["cls"] == "fr"
    assert shown["data"] == {"grid": "g", "model": "qwen", "dataset": "d", "config": "s1"}
    assert shown["cells"] == [
        "g", "qwen (served: Other-7B.gguf)", "d", "s1 (ref)", 8, "62.5", "30.0–85.0", "ref", "0.0197", "90", "1.250",
        "50.0", 4, "0.712", "1.50", "1234", "57", "2.2", "0.0123", 1, "10.0", 2, "strict_em", "75.0",
    ]  # fmt: skip
    # nothing correct: no correct answer was bought ("none", as cost-of-pass says it), not unknown
    assert _summary_rows([with_fields(row, n_correct=0, cost_of_pass=None, tokens_of_pass=None)])[0]["cells"][8:10] == [
        "none", "none",
    ]  # fmt: skip
    # no judge, no price, unknown figures
    plain = with_fields(row, reference=False, served=None, judge_n=0, judge_accuracy=None, invalid_turn_rate=None,
                        em_squad=None)  # fmt: skip
    (shown,) = _summary_rows([plain])
    assert shown["cells"][1] == "qwen" and shown["cells"][3] == "s1"
    assert shown["cells"][7] == "—"  # no paired comparison given
    assert shown["cells"][11:13] == ["—", "—"] and shown["cells"][20] == "" and shown["cells"][23] == ""
    assert _summary_rows([with_fields(row, cost_usd=None)])[0]["cells"][18] == "—"
    # A test double's cost is what its records say, as in summary.json: "—" under the installed sheet,
    # which prices none (tests/report/test_readable.py), its price where a sheet of the user's gives one.
    assert _summary_rows([with_fields(row, model_fingerprint="mock:gold")])[0]["cells"][18] == "0.0123"
    # which models of a run are test doubles: the mock backend's fingerprint, or a record marked so
    records = [
        {"model": "b", "model_fingerprint": "mock:gold"},
        {"model": "a", "model_fingerprint": "gguf:1", "extra": {"mock": True}},
        {"model": "c", "model_fingerprint": "gguf:2", "extra": {"mock": "yes"}},  # only True marks one
        {"model": "d", "model_fingerprint": None, "extra": None},
        {"model": "b", "model_fingerprint": "mock:gold"},
    ]
    assert test_doubles(records) == ["a", "b"]


def test_what_answered_is_named_only_when_it_is_another_model():
    from bcas.report.summary import served_beside

    gguf = "SmolLM2-135M-Instruct-Q4_1.gguf"
    assert served_beside("smollm2-135m", gguf) == "smollm2-135m"  # the model asked for, by its file's name
    assert served_beside("smollm2-135m [a1b2c3]", gguf) == "smollm2-135m [a1b2c3]"  # a label with a fingerprint
    assert served_beside("smollm2-135m", None) == "smollm2-135m" and served_beside("smollm2-135m", "") == "smollm2-135m"
    assert served_beside("qwen3-8b [a1]", gguf) == f"qwen3-8b [a1] (served: {gguf})"


def test_a_tie_anywhere_in_the_list_does_not_hide_the_comparisons_after_it():
    comps = [_comparison("x", "y", 0.0), _comparison("x", "z", 0.2, p=0.02)]
    assert significance_marks("x", "g", "d", "bm25/s1", comps) == (["z (Holm p=0.02)"], [])


def test_a_comparison_row_shows_its_pair_difference_interval_counts_and_both_p_values():
    from bcas.report.html import _comparison_rows

    sig = _comparison("m", "large", -0.2, p=0.004, family="filters")
    sig.p_value = 0.001
    plain = _comparison("m", "large", 0.05, significant=False, p=0.5)
    sig.verdict = (
        "large ahead of bm25/s1: separated at alpha 0.05 (Holm p = 0.004, exact McNemar on n = 50 paired items)"
    )
    first, second = _comparison_rows([sig, plain])
    assert first["cls"] == "fr sig" and second["cls"] == "fr"
    assert first["data"] == {"grid": "g", "model": "m", "dataset": "d", "config": "bm25/s1"}
    assert first["cells"] == [
        "g", "m", "d", "bm25/s1 vs large", 50, "-20.0", "-30.0 – -10.0", 10, 2, "0.0010", "0.0040", "filters",
        sig.verdict,
    ]  # fmt: skip
    assert second["cells"][5:7] == ["+5.0", "-5.0 – +15.0"] and second["cells"][11] == "grid"


def test_a_madara_row_averages_each_figure_over_its_items_and_names_the_routing():
    """The MADARA table: strict EM, calls and tokens per item, documents, and where routing sent it."""
    from bcas.report.html import _madara_rows

    def rec(item: str, ok: bool, calls: int, extra: dict, **fields) -> dict:
        base = {"item_id": item, "model": "m", "dataset": "conflictqa", "label": "madara/routed", "answers": ["Paris"],
                "prediction": "Paris" if ok else "Rome", "llm_calls": calls, "tokens_in": 100 * calls,
                "method": "madara", "extra": {"grid": "g", **extra}}  # fmt: skip
        return {**base, **fields}

    routing = {"mode": "PDE", "reason": "weak on this task"}
    records = [
        rec("a", True, 4, {"assessment_calls": 3, "generation_calls": 1, "doc_ids": ["1", "2"], "routing": routing}),
        rec(
            "b",
            False,
            6,
            {
                "assessment_calls": 5,
                "generation_calls": 1,
                "doc_ids": ["1", "2", "3", "4"],
                "retrieved_docs": 2,
                "routing": {"mode": "SDA", "reason": "strong"},
            },
        ),  # fmt: skip
        rec("c", True, 2, {"kind": "madara", "assessment_calls": None}, method="other", llm_calls=None),
        rec("z", True, 9, {}, method="bcas"),  # not a MADARA record
    ]
    (row,) = _madara_rows(records)
    assert row["cells"] == [
        "g", "m", "conflictqa", "madara/routed", 3, "66.7", "3.3", "2.7", "0.7", "400", "3.0 (2.0)",
        "PDE / SDA: strong; weak on this task",
    ]  # fmt: skip
    assert _madara_rows([rec("a", True, 1, {})])[0]["cells"][10:] == ["", ""]  # no documents listed, no routing
    assert _madara_rows([]) == []


def test_an_rsc_profile_row_shows_the_probe_figures_and_where_the_router_sent_the_pair():
    """The RSC probe's row: ρ̂ per assessor, ρ*, ρ̄, the class, NF's EM and the routed treatment."""
    from bcas.report.html import _profile_rows

    profile = {
        "model_label": "small", "model": "ignored", "dataset": "conflictqa", "n_queries": 10,
        "rho_hat": [0.1234, 0.5, 1], "rho_star": 0.5, "rho_bar": 0.45678, "classification": "weak",
        "em_nf": 0.2, "decision": {"mode": "PDE", "reason": "NF below 30%"},
    }  # fmt: skip
    (row,) = _profile_rows([profile])
    assert row["cells"] == ["small", "conflictqa", "10", "0.12 0.50 1.00", "0.5", "0.457", "weak", "0.2", "PDE",
                            "NF below 30%"]  # fmt: skip
    bare = _profile_rows([{"model": "m"}])[0]["cells"]
    assert bare == ["m", "", "", "", "", "0.000", "", "", "", ""]  # nothing made up for what the probe lacks
    assert _profile_rows([]) == []
    assert _profile_rows([{}])[0]["cells"][0] == ""  # a profile naming no model: no made-up name


def test_an_items_drill_down_shows_its_facts_and_each_steps_tokens_and_documents():
    """Opening an item is how a reader checks why it was graded as it was: its F1, the judge's
    verdict, why it stopped, how many searches it made (0 included), and per step what went
    in and out of the model and which documents came back (titles where the step has them)."""
    from bcas.report.html import _drilldown

    steps = [
        {"kind": "search", "query": "capital of France", "tokens_in": 0, "tokens_out": 5, "retrieved": ["d1", "d2"]},
        {"kind": "search", "query": "Paris", "retrieved_ids": ["x7"], "titles": ["Paris (city)"]},
        {"kind": "answer", "output": "Paris", "tokens_in": 12},
    ]
    base = {"model": "m", "dataset": "hotpotqa", "config_id": "c", "item_id": "q1", "question": "Q?", "answers": ["P"]}
    wrong = {
        **base,
        "f1": 0.5,
        "judge_verdict": False,
        "stop_reason": "max_searches",
        "searches_used": 0,
        "steps": steps,
    }
    (item,) = _drilldown([wrong])
    assert item["facts"] == ["F1 0.50", "judge wrong", "stop max_searches", "searches 0"]
    assert [s["kind"] for s in item["steps"]] == ["search", "search", "answer"]
    assert [s["tokens"] for s in item["steps"]] == ["0 in / 5 out", "", "12 in"]
    assert [s["text"] for s in item["steps"]] == ["capital of France", "Paris", "Paris"]
    assert [s["retrieved"] for s in item["steps"]] == ["d1, d2", "Paris (city)", ""]
    (right,) = _drilldown([{**base, "f1": 1.0, "judge_verdict": True}])
    assert right["facts"] == ["F1 1.00", "judge right"] and right["steps"] == []
    # a record without an F1 reads 0 and one without steps shows none
    (bare,) = _drilldown([{**base, "f1": None, "steps": None}])
    assert bare["facts"] == ["F1 0.00"] and bare["steps"] == []


def test_an_items_drill_down_is_headed_filed_and_marked_by_its_own_case():
    """The head names the model, dataset, configuration (its label, else its id) and item; the
    filter keys put it under its grid and configuration; the mark and answer are its own."""
    from bcas.report.html import _drilldown

    rec = {
        "model": "m", "dataset": "hotpotqa", "config_id": "c9", "label": "bm25/s1", "item_id": "q1",
        "question": "Which city?", "answers": ["Paris", "Paris, France"], "prediction": "Lyon",
        "correct_em": False, "error": "engine died", "extra": {"grid": "smoke"},
        "steps": [{"retrieved": [], "titles": []}],
    }  # fmt: skip
    (item,) = _drilldown([rec])
    assert item["head"] == "m · hotpotqa · bm25/s1 · q1 — Which city?"
    assert item["data"] == {"model": "m", "dataset": "hotpotqa", "grid": "smoke", "config": "bm25/s1"}
    assert item["ok"] is False and item["prediction"] == "Lyon" and item["error"] == "engine died"
    assert item["answers"] == '["Paris", "Paris, France"]'
    assert item["steps"] == [{"kind": "", "tokens": "", "text": "", "retrieved": ""}]  # nothing made up
    (unlabelled,) = _drilldown([{**rec, "label": None, "correct_em": True, "error": None, "extra": None}])
    assert unlabelled["head"].startswith("m · hotpotqa · c9 · q1") and unlabelled["data"]["config"] == "c9"
    assert unlabelled["data"]["grid"] == "" and unlabelled["ok"] is True and unlabelled["error"] == ""
    assert len(_drilldown([rec] * 5, limit=3)) == 3  # a page of thousands of items stops at the limit


def _gate_row(case: str, verdict: str, **fields):
    base = dict(
        case_id=case, grid="smoke", family="session", family_size=3, verdict=verdict, n_paired=200,
        baseline_acc=0.5, current_acc=0.43, worse_only=21, better_only=7, p_value=0.01234,
        holm_threshold=0.025, p_holm=0.03702, min_drop=0.02, compared_with="",
    )  # fmt: skip
    return SimpleNamespace(**{**base, **fields})


def test_the_gate_panel_shows_each_cases_paired_numbers_and_marks_the_failing_ones():
    """The panel is where a CI reader learns which case failed the gate and by how much."""
    from bcas.report.html import _gate

    rows = [
        _gate_row("smoke/a", "FAIL"),
        _gate_row("smoke/b", "PASS", worse_only=None, better_only=None, p_value=None, holm_threshold=None,
                  p_holm=None, min_drop=None, baseline_acc=None, compared_with="smoke/a"),
    ]  # fmt: skip
    gate = SimpleNamespace(
        rows=rows, overall="FAIL: 1 of 2 gated cases dropped", failed=True, baseline="b.json",
        test="mcnemar-exact", metrics=["correct_em"], alpha=0.05, family="session", not_gated=["smoke/c"],
    )  # fmt: skip
    panel = _gate(gate)
    assert panel is not None
    failing, passing = panel["rows"]
    assert failing["cls"] == "sig" and passing["cls"] == ""
    assert failing["cells"] == [
        "smoke/a", "smoke", "session (3)", "FAIL", 200, "50.0", "43.0", "21", "7", "0.01234", "0.025", "0.03702", "2.0",
    ]  # fmt: skip
    # what the gate did not compute is blank, not a made-up 0
    assert passing["cells"][5:] == ["", "43.0", "", "", "", "", "", ""]
    assert panel["cls"] == "bad" and panel["overrides"] == [("smoke/b", "smoke/a")]
    assert panel["not_gated"] == ["smoke/c"] and panel["alpha"] == "0.05" and panel["metrics"] == "correct_em"
    assert (panel["baseline"], panel["test"], panel["family"]) == ("b.json", "mcnemar-exact", "session")
    assert panel["overall"] == "FAIL: 1 of 2 gated cases dropped" and len(panel["headers"]) == len(failing["cells"])
    # green only when the gate passed and says so
    passed = SimpleNamespace(**{**vars(gate), "overall": "PASS: 2 cases", "failed": False, "metrics": ["f1", "em"]})
    assert _gate(passed)["cls"] == "ok" and _gate(passed)["metrics"] == "f1, em"  # type: ignore[index]
    unsure = SimpleNamespace(**{**vars(gate), "overall": "CANNOT FAIL: too few items", "failed": False})
    assert _gate(unsure)["cls"] == "bad"  # type: ignore[index]
    assert _gate(None) is None


def test_the_run_notes_name_each_unpriced_model_with_its_sheet_after_the_grids_lines():
    from bcas.records import missing_price_note
    from bcas.report.html import _notes

    records = [
        {"extra": {"price_missing": {"model": "qwen3-8b", "sheet": "list"}}},
        {"extra": {"price_missing": {"model": "qwen3-8b", "sheet": "list"}}},  # once, however many records
        {"extra": {"price_missing": {"model": "llama-3", "sheet": "team.json"}}},
        {"extra": None},
    ]
    notes = _notes(records, ["smoke: accuracy is SQuAD EM"])
    assert notes == [
        "smoke: accuracy is SQuAD EM",
        missing_price_note("llama-3", "team.json"),
        missing_price_note("qwen3-8b", "list"),
    ]
    assert "qwen3-8b" in notes[2] and "list" in notes[2]
    assert _notes(records[3:]) == []


def _beyond_cells(rows) -> list[dict[str, str]]:
    """The "Beyond accuracy" table of the page, one {header: cell text} per row."""
    import re
    from html import unescape

    from bcas.report.html_metrics import HEADERS, metrics_section

    html = str(metrics_section(rows))
    body = html.split("<tbody>", 1)[1]
    out = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S):
        cells = [unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, flags=re.S)]
        assert len(cells) == len(HEADERS)
        out.append(dict(zip(HEADERS, cells, strict=True)))
    return out


def test_the_pages_beyond_accuracy_table_puts_each_figure_of_the_records_in_its_column():
    """The page's table, not only the terminal line: the same four records (two items, two
    epochs), with citations; every figure worked out by hand."""
    import re

    from bcas.report.summary import summarize

    records = [
        _record("a", 0, True, {"evidence_recall": 1.0, "citation_precision": 1.0, "citation_recall": 0.5}, cost=0.01),
        _record("a", 1, False, {"evidence_recall": 0.5, "citation_precision": 0.5, "citation_recall": 1.0}, cost=0.01),
        _record("b", 0, True, {"evidence_recall": 0.0}, cost=0.02),
        _record("b", 1, True, {"evidence_recall": 1.0, "citation_precision": 0.25, "citation_recall": 0.0}, cost=0.02),
    ]  # fmt: skip
    (row,) = _beyond_cells(summarize(records))
    assert row["correct / incorrect / not attempted"] == "3 / 1 / 0"
    assert row["acc. given attempted %"] == "75.0" and row["F-score %"] == "75.0"
    assert row["pass@k % [95%]"] == "k=2: 100.0 [100.0, 100.0]"
    assert row["pass^k % [95%]"] == "k=2: 50.0 [0.0, 100.0]"
    assert row["flips %"] == "50.0"
    assert row["cost-of-pass $ [95%]"] == "0.0200 [0.0200, 0.0200]"
    # 110 tokens an answer, 3 of 4 correct: 146.7 tokens a correct answer, each bound a finite whole number
    assert re.fullmatch(r"147 \[\d+, \d+\]", row["tokens-of-pass [95%]"]), row["tokens-of-pass [95%]"]
    # cited: (1 + 0.5 + 0.25) / 3 precise, (0.5 + 1 + 0) / 3 recalled, over the 3 records asked to cite
    assert row["citation precision / recall %"] == "58.3 / 50.0 (n=3)"
    # one epoch and no citations: pass@k and pass^k are not a figure of this run, nor citations
    (plain,) = _beyond_cells(summarize([_record("a", 0, True, {}), _record("b", 0, False, {})]))
    assert plain["citation precision / recall %"] == "—"
    assert plain["acc. given attempted %"] == "50.0"
    assert plain["pass@k % [95%]"] == plain["pass^k % [95%]"] == "k=1: 50.0 [0.0, 100.0]"
    # a row with no graded outcome (a judge's metric that no verdict reached): no k, so no figure
    import dataclasses

    (graded,) = summarize([_record("a", 0, True, {})])
    ungraded = dataclasses.replace(graded, pass_k=0, pass_at_k=None, pass_at_k_lo=None, pass_at_k_hi=None,
                                   pass_hat_k=None, pass_hat_k_lo=None, pass_hat_k_hi=None)  # fmt: skip
    (none,) = _beyond_cells([ungraded])
    assert none["pass@k % [95%]"] == none["pass^k % [95%]"] == "—"


def _graded(item: str, label: str, grid: str, em: bool, judged: bool, reference: bool = False) -> dict:
    row = _record(item, 0, em, {"grid": grid, "reference": reference})
    return {**row, "label": label, "config_id": f"id-{label}", "judge_verdict": judged}


def test_each_configuration_is_compared_with_what_its_grid_names_under_the_grids_metric():
    """The paired tests the report and the gate print: each entry against the entries its
    grid compares it with (families as the grid says), never across grids, under the grid's
    primary metric, Holm-adjusted within each family.  Lost, a user reads a comparison with
    the wrong configuration, on SQuAD EM where the grid is graded by a judge, or corrected
    for the wrong number of tests."""
    from bcas.report.summary import compare_to_reference
    from bcas.stats import holm_bonferroni

    # Judge verdicts: ref right on 1-6; a right on 1-2; b right on 1-4.  SQuAD EM says the opposite
    # of the judge on every record, so a comparison under the wrong metric counts other items.
    judged = {"ref": {1, 2, 3, 4, 5, 6}, "a": {1, 2}, "b": {1, 2, 3, 4}}
    records = [
        _graded(f"q{i}", label, grid, em=i not in right, judged=i in right, reference=label == "ref")
        for grid in ("g", "h")
        for label, right in judged.items()
        for i in range(1, 7)
    ]
    named = {"ref": [], "a": [("ref", "f1")], "b": [("ref", "f1"), ("a", "f2")]}
    grid = SimpleNamespace(entries=[], primary_metric="judge_verdict", holm_scope="grid",
                           comparisons=lambda label: named.get(label, []))  # fmt: skip
    # h's table names no comparisons (a table of another kind): its reference is the records'
    comps = compare_to_reference(records, grids={"g": grid, "h": SimpleNamespace(entries=[])}, only=["g"])
    on_g = sorted((c.label, c.reference, c.family, c.metric, c.b, c.c) for c in comps if c.grid == "g")
    # (label, compared with, family, metric, candidate-only right, other-only right)
    assert on_g == [
        ("a", "ref", "f1", "judge_verdict", 0, 4),
        ("b", "a", "f2", "judge_verdict", 2, 0),
        ("b", "ref", "f1", "judge_verdict", 0, 2),
    ]
    f1 = [c for c in comps if c.grid == "g" and c.family == "f1"]
    reject, adjusted = holm_bonferroni([c.p_value for c in f1], alpha=0.05)
    assert [c.p_holm for c in f1] == adjusted and all(c.p_holm >= c.p_value for c in f1)
    assert [c.significant for c in f1] == reject == [False, False]
    # at the level asked for: a vs ref (4 discordant items, p = 0.125) passes Holm's 0.3 / 2
    lenient = compare_to_reference(records, alpha=0.3, grids={"g": grid}, only=["g"])
    assert sorted((c.label, c.reference, c.significant) for c in lenient if c.family == "f1") == [
        ("a", "ref", True), ("b", "ref", False)]  # fmt: skip
    (f2,) = [c for c in comps if c.grid == "g" and c.family == "f2"]
    assert f2.p_holm == f2.p_value  # alone in its family: nothing to correct for
    # Grid h: the records' reference, one family, SQuAD EM (no metric declared); no pair crosses grids.
    on_h = sorted((c.label, c.reference, c.family, c.metric, c.b, c.c) for c in comps if c.grid == "h")
    assert on_h == [("a", "ref", "", "correct_em", 4, 0), ("b", "ref", "", "correct_em", 2, 0)]


def test_figures_read_the_grid_table_and_order_and_draw_every_panel_after_a_scaling_grid(monkeypatch):
    """Where the budget axis and the order of a chart come from: the grid table's entries,
    the grid's own order, or (records imported without a grid or dataset) the records'
    configurations; a scaling grid's panel (no shift bars) does not end the figures."""
    from bcas.report import html_figures
    from bcas.report.vega import Figure

    charts: list[tuple] = []
    monkeypatch.setattr(
        html_figures,
        "scaling_chart",
        lambda name, title, ordered, categorical, *a: (
            charts.append((title, ordered, categorical)) or Figure(name, None)
        ),
    )
    monkeypatch.setattr(html_figures, "shift_chart", lambda name, *a: Figure(name, None))

    def row(grid, dataset, label, metric="correct_em"):
        # no ``interval`` field: a row read from an older summary is Wilson's
        return SimpleNamespace(grid=grid, dataset=dataset, label=label, model="m", accuracy=0.5, ci_lo=0.4,
                               ci_hi=0.6, metric=metric)  # fmt: skip

    def entry(label, searches):
        config = {"budget": {"max_searches": searches, "max_total_tokens": 2000}, "retrieval": {"mode": "bm25"}}
        return SimpleNamespace(label=label, config=SimpleNamespace(to_dict=lambda: config))

    rows = [
        row("context_scaling", "d", "c1"),
        row("g", "d", "s3"), row("g", "d", "s1", metric="my_metric"), row("g", "d", "zeta"), row("g", "d", "alpha"),
        row("", "", "b2"), row("", "", "b1"),
    ]  # fmt: skip
    records = [  # imported without a grid or a dataset: their own configurations give the axis
        {"label": "b2", "config": {"budget": {"max_searches": 2}}},
        {"label": "b1", "config": {"budget": {"max_searches": 1}}},
    ]
    grids = {"g": SimpleNamespace(entries=[entry("s1", 1), entry("s3", 3)])}
    order = {"g": ["zeta", "s3", "s1", "alpha"]}
    html_figures.figures(rows, [], order, records, grids)
    titles = {a[0]: (a[1], a[2]) for a in charts}
    assert titles == {
        " —  (SQuAD EM, 95% Wilson; line: max searches in order)": (["b1", "b2"], []),
        "context_scaling — d (SQuAD EM, 95% Wilson)": ([], ["c1"]),
        "g — d (SQuAD EM, my_metric, 95% Wilson; line: max searches in order)": (["s1", "s3"], ["zeta", "alpha"]),
    }


def test_the_budget_axis_groups_configurations_that_differ_in_one_budget_field_only():
    """The line of a scaling chart joins configurations that differ in one budget field; one
    that differs in more is a separate point, and the seed or label never separates them."""
    from pathlib import Path

    from bcas.report.html_figures import budget_axis

    def cfg(searches, tokens=2000, **more):
        return {"budget": {"max_searches": searches, "max_total_tokens": tokens}, "retrieval": {"mode": "bm25"}, **more}

    # an unknown configuration first does not stop the others being read
    assert budget_axis({"odd": None, "s3": cfg(3), "s1": cfg(1)}) == ("max_searches", ["s1", "s3"], ["odd"])
    # seeds and labels differ, key order differs, a value JSON cannot hold: still one axis
    reordered = {"retrieval": {"mode": "bm25"}, "budget": {"max_total_tokens": 2000, "max_searches": 3}}
    configs = {"s1": cfg(1, seed=1, label="s1", corpus=Path("c")), "s3": {**reordered, "seed": 2, "label": "s3",
               "corpus": Path("c")}}  # fmt: skip
    assert budget_axis(configs) == ("max_searches", ["s1", "s3"], [])
    # differing in two budget fields: no line
    assert budget_axis({"a": cfg(1, 2000), "b": cfg(3, 4000)}) == (None, [], ["a", "b"])
    # two axes of two: the first budget field (searches) is drawn
    tie = {"s1": cfg(1, 2000), "s3": cfg(3, 2000), "t4": cfg(1, 4000)}
    assert budget_axis(tie) == ("max_searches", ["s1", "s3"], ["t4"])


def test_an_items_drill_down_keeps_what_an_older_record_or_another_script_wrote():
    """Records from older runs name their documents ``retrieved_ids``; a long question is
    cut at 160 characters in the head; answers keep their letters (no \\u escapes); no
    prediction is shown as nothing, not as a made-up value."""
    from bcas.report.html import _drilldown

    long_q = "Q" * 159 + "é" + "tail that is not shown"
    rec = {"model": "m", "dataset": "d", "config_id": "c", "item_id": "q1", "question": long_q,
           "answers": ["Zürich", "日本"], "prediction": None,
           "steps": [{"kind": "search", "query": "q", "retrieved_ids": ["x7", "x8"]}]}  # fmt: skip
    (item,) = _drilldown([rec])
    assert item["steps"][0]["retrieved"] == "x7, x8"
    assert item["head"] == "m · d · c · q1 — " + "Q" * 159 + "é"
    assert item["answers"] == '["Zürich", "日本"]' and item["prediction"] == ""
    (no_question,) = _drilldown([{k: v for k, v in rec.items() if k != "question"}])
    assert no_question["head"] == "m · d · c · q1 — "


def test_the_gate_panel_prints_small_p_values_and_drops_as_computed():
    """A p-value of 1e-05 is printed as Python's general format does (e-05, not E-05), a
    minimum drop of 0.3 as 30.0 points, and a row that never names what it was compared
    with is no override."""
    from bcas.report.html import _gate

    row = _gate_row("smoke/a", "FAIL", p_value=0.0000123456, holm_threshold=0.0000456, p_holm=0.0000789, min_drop=0.3)
    bare = SimpleNamespace(**{k: v for k, v in vars(_gate_row("smoke/b", "PASS")).items() if k != "compared_with"})
    gate = SimpleNamespace(rows=[row, bare], overall="FAIL", failed=True, baseline="b.json", test="mcnemar-exact",
                           metrics=["correct_em"], alpha=0.05, family="session", not_gated=[])  # fmt: skip
    panel = _gate(gate)
    assert panel["rows"][0]["cells"][9:] == ["1.235e-05", "4.56e-05", "7.89e-05", "30.0"]
    assert panel["overrides"] == []


def test_the_summary_files_hold_every_figure_the_report_computes():
    """summary.json and summary.csv are what teams load into their own tools: each must carry
    the rows under the grid's metric, the comparisons with the reference and between models,
    the model matrix, the notes, the routing, and what answered, written the same way every
    time (sorted keys, one-space indent), into a folder made as needed."""
    import csv
    import io
    import json
    from dataclasses import asdict
    from pathlib import Path
    from tempfile import TemporaryDirectory

    from bcas.report.summary import (
        compare_models,
        compare_to_reference,
        grid_notes,
        model_matrix,
        rows_to_csv,
        summarize,
        write_summaries,
    )  # fmt: skip

    records = []
    for model in ("m1", "m2"):
        for label in ("ref", "a"):
            for i in range(4):
                rec = _graded(f"q{i}", label, "g", em=(i + (label == "a") + (model == "m2")) % 2 == 0,
                              judged=i < 3 - (label == "a"), reference=label == "ref")  # fmt: skip
                rec.update(model=model, model_fingerprint=f"fp-{model}", grades={"j": {"verdict": True}})
                rec["extra"]["recall_at_step"] = [0.5, 1.0]
                rec["extra"]["evidence_recall"] = 1.0
                records.append(rec)
    table = SimpleNamespace(entries=[], primary_metric="judge", holm_scope="grid",
                            comparisons=lambda label: [("ref", "")] if label == "a" else [],
                            metric_note=lambda metric: f"graded by {metric}")  # fmt: skip
    grids = {"g": table}
    with TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "nested" / "run"
        write_summaries(run_dir, records, grids, None, False, routing=[{"probe": 1}], served={"fp-m1": "Other.gguf"})
        text = (run_dir / "summary.json").read_text(encoding="utf-8")
        csv_text = (run_dir / "summary.csv").read_text(encoding="utf-8")
        write_summaries(Path(tmp) / "plain", records, grids, None, True)  # a judge: the grid's own metric
        plain = json.loads((Path(tmp) / "plain" / "summary.json").read_text(encoding="utf-8"))
    payload = json.loads(text)
    assert text == json.dumps(payload, indent=1, sort_keys=True)  # the same bytes for the same figures

    def as_json(value):
        return json.loads(json.dumps(value))

    rows = summarize(records, grids, None, False)  # judge=False: the judge-declared grid is graded by EM
    assert {r.metric for r in rows} == {"correct_em"}
    served = {"m1": "Other.gguf", "m2": None}
    assert payload["rows"] == as_json([{**asdict(r), "served": served[r.model]} for r in rows])
    assert payload["comparisons"] == as_json(
        [asdict(c) for c in compare_to_reference(records, grids=grids, judge=False)]
    )
    assert len(payload["comparisons"]) == 2 and {c["metric"] for c in payload["comparisons"]} == {"correct_em"}
    assert payload["model_comparisons"] == as_json(
        [asdict(c) for c in compare_models(records, grids=grids, judge=False)]
    )
    assert len(payload["model_comparisons"]) == 2
    assert payload["model_matrix"] == as_json(model_matrix(rows)) and payload["model_matrix"]
    assert payload["notes"] == grid_notes(rows, records, grids) and "g: graded by correct_em" in payload["notes"]
    assert payload["routing"] == [{"probe": 1}] and plain["routing"] == []
    assert {r["served"] for r in plain["rows"]} == {None}
    assert {r["metric"] for r in plain["rows"]} == {"judge_verdict"}
    assert {c["metric"] for c in plain["comparisons"] + plain["model_comparisons"]} == {"judge_verdict"}
    table_rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert len(table_rows) == 4 and list(table_rows[0])[:4] == ["grid", "model", "dataset", "label"]
    assert [row["model"] for row in table_rows] == [r.model for r in rows]
    assert {row["recall_at_step"] for row in table_rows} == {"0.5;1"}  # a list as a;b
    assert {row["served"] for row in table_rows} == {"Other.gguf", ""}
    assert rows_to_csv([]) == ""


def test_the_model_matrix_puts_each_models_accuracy_in_its_own_cell_where_a_run_has_several():
    """Model × configuration per grid × dataset: a panel with one model says nothing and is
    left out, without hiding the panels after it; a configuration one model did not run is
    an empty cell, not another model's figure."""
    from bcas.report.summary import model_matrix

    def row(grid, dataset, label, model, acc):
        return SimpleNamespace(grid=grid, dataset=dataset, label=label, model=model, accuracy=acc)

    rows = [
        row("a", "d", "s1", "only", 0.9),  # one model: no panel, and the panels after it still come
        row("g", "d", "s1", "m2", 0.4), row("g", "d", "s1", "m1", 0.5), row("g", "d", "s3", "m1", 0.7),
        row("h", "d", "s1", "m1", 0.1), row("h", "d", "s1", "m2", 0.2), row("h", "d", "s1", "m3", 0.3),
    ]  # fmt: skip
    assert model_matrix(rows) == {
        "panels": [
            {"grid": "g", "dataset": "d", "models": ["m1", "m2"],
             "rows": [{"label": "s1", "accuracy": [0.5, 0.4]}, {"label": "s3", "accuracy": [0.7, None]}]},
            {"grid": "h", "dataset": "d", "models": ["m1", "m2", "m3"],
             "rows": [{"label": "s1", "accuracy": [0.1, 0.2, 0.3]}]},
        ]
    }  # fmt: skip
    assert model_matrix(rows[:1]) == {"panels": []}


def test_what_answered_is_shown_beside_a_model_only_when_it_is_another_model():
    from bcas.report.summary import served_beside

    assert served_beside("smollm2-135m", "SmolLM2-135M-Instruct-Q4_1.gguf") == "smollm2-135m"
    assert served_beside("qwen3-8b", "Llama-3-8B.gguf") == "qwen3-8b (served: Llama-3-8B.gguf)"
    # a label shown with a short fingerprint: the label alone is compared with what answered
    assert served_beside("qwen3-8b [fp abc] [x]", "Qwen3-8B-Q4_K_M.gguf") == "qwen3-8b [fp abc] [x]"
    assert served_beside("qwen3-8b", None) == "qwen3-8b"
    # a label with a space is compared whole ("my model", not "my")
    assert served_beside("my model [fp a]", "my-other.gguf") == "my model [fp a] (served: my-other.gguf)"


def test_models_are_compared_pairwise_with_holm_within_each_grid_and_dataset():
    """Three models on one configuration: three pairs, Holm-corrected together; the pairs of
    another dataset are their own family."""
    from bcas.report.summary import compare_models
    from bcas.stats import holm_bonferroni

    right = {"m1": {0, 1, 2, 3, 4, 5}, "m2": {0, 1}, "m3": {0, 1, 2, 3}}
    records = []
    for dataset in ("d1", "d2"):
        for model, ok in right.items():
            for i in range(8):
                rec = _graded(f"q{i}", "s1", "g", em=i in ok, judged=i in ok)
                rec.update(model=model, model_fingerprint=f"fp-{model}", dataset=dataset)
                records.append(rec)
    comps = compare_models(records)
    assert sorted((c.dataset, c.model, c.reference) for c in comps) == [
        (d, a, b) for d in ("d1", "d2") for a, b in (("m1", "m2"), ("m1", "m3"), ("m2", "m3"))
    ]
    for dataset in ("d1", "d2"):
        family = [c for c in comps if c.dataset == dataset]
        _reject, adjusted = holm_bonferroni([c.p_value for c in family], alpha=0.05)
        assert [c.p_holm for c in family] == adjusted


def test_the_run_section_lists_every_package_gpu_and_earlier_session():
    """Several packages and GPUs each named once, every earlier session a line of its own,
    the manifest's file named, and a field the session did not record left blank."""
    from bcas.records.manifest import MANIFEST_FILE
    from bcas.report.html_run import manifest_section

    def session(name, **fields):
        return {"session": name, "started_at": "t", "ended_at": "u", "exit_status": 0, "models": {},
                "bcas": {"version": "1"}, **fields}  # fmt: skip

    latest = session("s2", python=None, packages={"bm25s": "0.2", "faiss-cpu": "1.9", "vllm": ""},
                     host={"cpu": "EPYC", "gpus": ["H200", "A100"]})  # fmt: skip
    html = str(manifest_section({"sessions": [session("s0"), session("s1"), latest]}))
    rows = _kv_rows(html)
    assert rows["packages"] == "bm25s 0.2, faiss-cpu 1.9" and rows["host"] == "EPYC · GPUs: H200, A100"
    assert rows["python"] == ""
    assert "<li>s0: t → u, exit 0" in html and "<li>s1: t → u, exit 0" in html and "<li>s2:" not in html
    assert MANIFEST_FILE in html


def test_each_grids_notes_say_which_accuracy_it_is_and_what_was_left_out() -> None:
    """The notes under a summary are where a reader learns which metric a grid's accuracy is,
    how many answers no judge graded, which gold references matched no document, the grid's
    own caveat, how its Holm families are drawn and which retrieval models answered."""
    from bcas.report.summary import grid_notes

    def row(grid: str, metric: str = "correct_em", ungraded: int = 0, unmapped: int = 0) -> SimpleNamespace:
        return SimpleNamespace(grid=grid, metric=metric, dataset="toy", ungraded=ungraded, gold_unmapped=unmapped,
                               docs_per_item=None, label="a")  # fmt: skip

    def table(compare: bool, scope: str = "grid", **extra: object) -> SimpleNamespace:
        # a probe entry: no per-item records, so each record stays under the grid it was run for
        entry = SimpleNamespace(compare=(("ref", ""),) if compare else (), kind="rsc")
        return SimpleNamespace(entries=[entry], holm_scope=scope, **extra)

    grids = {
        "b": table(True, metric_note=lambda m: f"{m} as the paper grades it",
                   retrieval_notes=lambda configs: [f"retrieval of {[c.get('embedder') for c in configs]}"]),
        "c": table(True, scope="model"),
        "d": table(False, metric_note=lambda m: ""),
        "e": SimpleNamespace(holm_scope="grid"),
    }  # fmt: skip
    rows = [row("b", "judge_verdict", ungraded=2), row("b", ungraded=1, unmapped=3), row("a"), row("c", "custom_pass"),
            row("d"), row("e")]  # fmt: skip
    records = [{**_record(f"q{i}", 0, True, {"grid": grid}), "config": config}
               for i, (grid, config) in enumerate((("b", {"embedder": "bge-m3"}), ("a", {"embedder": "minilm"}),
                                                   ("b", None)))]  # fmt: skip
    assert grid_notes(rows, records, grids) == [
        "a: accuracy is SQuAD EM",
        "b: accuracy is SQuAD EM, LLM judge (BCAS §3.6) (3 answers without a judge grade left out)",
        "b: 3 gold evidence references name no document of the searched collection",
        "b: correct_em as the paper grades it",
        "b: Holm families pooled over models × datasets",
        "retrieval of ['bge-m3', None]",  # the table's own sentences, on the configurations of its answers
        "c: accuracy is custom_pass",
        "c: Holm families per model × dataset",
        "d: accuracy is SQuAD EM",
        "e: accuracy is SQuAD EM",
    ]


def test_a_run_under_two_grids_summarises_and_compares_every_answer_under_both(tmp_path) -> None:
    """A session run under two grids that share configurations records each answer under the
    grid it ran for; its summary must still give both grids their rows, their comparisons with
    the reference and between models, each under the metric the run graded by."""
    import json
    from dataclasses import replace

    from bcas.config import Budget, RetrievalConfig, RunConfig
    from bcas.grids import Grid, GridEntry
    from bcas.report.summary import write_summaries

    def config(searches: int) -> RunConfig:
        return RunConfig(budget=Budget(max_searches=searches, max_total_tokens=2000), retrieval=RetrievalConfig())

    # the reference is named in the grid; its answers carry their configuration's label
    ref, cand = GridEntry("bcas", config(1), reference=True, name="baseline"), GridEntry("bcas", config(2))
    grids = {name: Grid(name, (ref, cand), datasets=("d",), primary_metric="judge", holm_scope=scope)
             for name, scope in (("one", "grid"), ("two", "cell"))}  # fmt: skip
    records = []
    for model in ("m1", "m2"):
        for entry in (ref, cand):
            for i in range(4):
                rec = _record(f"q{i}", 0, entry is ref, {"grid": "one"})  # the reference right, the other wrong
                rec.update(model=model, model_fingerprint=f"fp-{model}", label=entry.config.label,
                           config_id=replace(entry.config, seed=0).config_id, judge_verdict=i < 1,
                           grades={"j": {"verdict": i < 1}})  # fmt: skip
                records.append(rec)
    write_summaries(tmp_path, records, grids, ["one", "two"], False)
    payload = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert sorted({(r["grid"], r["model"], r["label"]) for r in payload["rows"]}) == [
        (g, m, e.label) for g in ("one", "two") for m in ("m1", "m2") for e in (ref, cand)
    ]
    assert {(c["grid"], c["metric"]) for c in payload["comparisons"]} == {("one", "correct_em"), ("two", "correct_em")}
    assert {(c["grid"], c["metric"]) for c in payload["model_comparisons"]} == {
        ("one", "correct_em"), ("two", "correct_em")}  # fmt: skip
    assert {r["metric"] for r in payload["rows"]} == {"correct_em"}
    # each model's 4 discordant items: p = 0.125; pooled over the two models on grid one (Holm: 0.25),
    # per model on grid two (its scope is the cell)
    assert sorted((c["grid"], c["model"], c["p_value"], c["p_holm"]) for c in payload["comparisons"]) == [
        ("one", "m1", 0.125, 0.25), ("one", "m2", 0.125, 0.25), ("two", "m1", 0.125, 0.125),
        ("two", "m2", 0.125, 0.125)]  # fmt: skip
    assert {c["family"] for c in payload["model_comparisons"]} == {""}  # the grid's one family
    # the items table reads each column under its grid's metric: the judge's verdicts here
    from bcas.report.html_items import columns, items_section

    cols = columns(records, grids)["d"]
    assert sorted((c["model"], c["label"], c["metric"]) for c in cols) == [
        (m, e.label, "judge_verdict") for m in ("m1", "m2") for e in (ref, cand)]  # fmt: skip
    assert ref.label == "baseline" != ref.config.label
    # judged: one item of four right in each column (12 of 16 wrong); by EM the reference's 4 right (8 wrong);
    # one more mark in the legend
    assert (str(items_section(records, grids)).count("✘"), str(items_section(records, {})).count("✘")) == (13, 9)


def test_the_summary_and_page_of_non_ascii_answers_are_written_under_an_ascii_locale(tmp_path, monkeypatch):
    """A C-locale CI runner writes summary.csv and index.html of a model or answer outside ASCII
    in UTF-8, as they are read.  ``io.text_encoding`` stands for the locale's default here."""

    from bcas.report.html import render_report
    from bcas.report.summary import write_summaries

    record = {**_record("a", 0, True, {}), "model": "Zürich-7B", "prediction": "Zoë"}
    ascii_locale(monkeypatch)
    summaries = write_summaries(tmp_path, [record], {}, None, False)
    assert "Zürich-7B" in (tmp_path / "summary.csv").read_text(encoding="utf-8")
    page = render_report(tmp_path, [record], summaries.rows, summaries.comparisons, {}).read_text(encoding="utf-8")
    assert "Zürich-7B" in page and "Zoë" in page


def test_the_drill_down_holds_the_first_2000_answers():
    """The page stays loadable on a large run: its drill-down data stops at 2,000 answers."""
    from bcas.report.html import _drilldown

    records = [_record(f"q{i}", 0, True, {}) for i in range(2001)]
    assert [d["head"].split(" · ")[3].split(" ")[0] for d in _drilldown(records)] == [f"q{i}" for i in range(2000)]


def test_the_cost_sections_tolerance_starts_at_the_documented_default_and_names_the_cheapest():
    """The "cheapest configuration within N points of the best" line opens at WITHIN_DEFAULT points
    with its answer filled in for the page's first view."""
    from bcas.report.html_cost import WITHIN_DEFAULT, cost_section
    from bcas.report.summary import summarize

    records = [{**_record(f"q{i}", 0, i < n_right, {}, cost=cost), "label": label, "config_id": label}
               for label, n_right, cost in (("cheap", 3, 0.01), ("dear", 4, 0.05)) for i in range(4)]  # fmt: skip
    html = str(cost_section(summarize(records)))
    assert f'value="{WITHIN_DEFAULT:g}"' in html and 'value="None"' not in html
    assert '<span class="answer">m · dear: 100.0%' in html


def test_a_summary_row_adds_up_its_records_judge_cost_and_documents():
    """Each figure of a summary row worked out by hand from four records: the judge's accuracy
    over the answers it graded (Wilson interval), the run's cost (unknown as soon as one answer
    is unpriced), the means per answer and MADARA's documents read and retrieved per item."""
    from bcas.report.summary import summarize
    from bcas.stats import wilson_interval

    verdicts, costs, docs = (True, None, False, True), (0.01, 0.02, 0.03, 0.04), (10, 10, 5, 5)
    records = []
    for i, (ok, verdict, cost, n_docs) in enumerate(
        zip((True, True, False, False), verdicts, costs, docs, strict=True)
    ):
        extra = {"doc_ids": [f"d{j}" for j in range(n_docs)], **({"retrieved_docs": 20} if i < 2 else {})}
        rec = _record(f"q{i}", 0, ok, extra, cost=cost)
        rec.update(judge_verdict=verdict, searches_used=i + 1, tokens_in=100 * (i + 1), tokens_out=10 * (i + 1),
                   llm_calls=2 * (i + 1))  # fmt: skip
        records.append(rec)
    (row,) = summarize(records)
    assert (row.n, row.correct, row.accuracy) == (4, 2, 0.5)
    lo, hi = wilson_interval(2, 3)
    assert (row.judge_n, row.judge_accuracy, row.judge_ci_lo, row.judge_ci_hi) == (3, 2 / 3, lo, hi)
    assert (row.mean_searches, row.mean_tokens_in, row.mean_tokens_out, row.mean_llm_calls) == (2.5, 250, 25, 5)
    assert row.cost_usd == pytest.approx(0.10) and row.mean_cost_usd == pytest.approx(0.025)
    assert (row.docs_per_item, row.retrieved_per_item) == (7.5, 12.5)  # retrieved: 20, 20, 5, 5
    assert (row.config_id, row.errors, row.reference, row.treatment, row.em_squad) == ("c", 0, False, None, 0.5)
    assert row.interval == "wilson" and row.metric == "correct_em" and row.mean_f1 == 0.5
    # MADARA's treatments are named; a row of the reference configuration says so; SQuAD EM stays
    # beside another metric; a failed answer counts as an error
    madara = [{**r, "extra": {**r["extra"], "treatment": t}, "judge_verdict": True}
              for r, t in zip(records, ("sda", "atf", "sda", None), strict=True)]  # fmt: skip
    madara[2]["stop_reason"] = "error"
    (row,) = summarize(madara)
    assert (row.treatment, row.errors) == ("atf,sda", 1)
    (row,) = summarize([{**r, "extra": {**r["extra"], "reference": True}} for r in records])
    assert row.reference is True
    # under a judge-graded grid the row counts the judge's verdicts, with SQuAD EM beside them
    judged = [{**r, "judge_verdict": True, "extra": {**r["extra"], "grid": "g"}} for r in records]
    (row,) = summarize(judged, {"g": SimpleNamespace(entries=[], primary_metric="judge")}, judge=True)
    assert (row.metric, row.correct, row.accuracy, row.em_squad) == ("judge_verdict", 4, 1.0, 0.5)
    # the agent's turns: 2 invalid of 10 action turns; one answer stopped by the context window
    turns = [{**r, "extra": {**r["extra"], "action_turns": 1 + 2 * i, "invalid_turns": i % 2},
              "stop_reason": "context_window" if i == 3 else "answered"} for i, r in enumerate(records)]  # fmt: skip
    (row,) = summarize(turns)
    assert (row.action_turns, row.invalid_turn_rate, row.context_window_stops) == (16, 2 / 16, 1)
    (row,) = summarize(records)
    assert (row.action_turns, row.invalid_turn_rate, row.context_window_stops) == (0, None, 0)
    # an imported record without a ledger or fingerprint counts as none spent, not as one
    bare = [{**r, "searches_used": None, "tokens_in": None, "tokens_out": None, "llm_calls": None,
             "model_fingerprint": None} for r in records]  # fmt: skip
    (row,) = summarize(bare)
    assert (row.mean_searches, row.mean_tokens_in, row.mean_tokens_out, row.mean_llm_calls) == (0, 0, 0, 0)
    assert row.model_fingerprint == ""
    unpriced = [*records[:3], {**records[3], "cost_usd": None}]
    (row,) = summarize(unpriced)
    assert (row.cost_usd, row.mean_cost_usd) == (None, None)
    (row,) = summarize([{**r, "judge_verdict": None, "extra": {}} for r in records])
    assert (row.judge_n, row.judge_accuracy, row.docs_per_item, row.retrieved_per_item) == (0, None, None, None)
