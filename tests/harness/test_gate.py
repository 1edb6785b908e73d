"""The regression gate's parts: baselines, pairing, Holm families, the plan's power and the report."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from bcas.gating.baseline import (
    BaselineError,
    GateResult,
    build_baseline,
    holm_session,
    item_digest,
    item_outcomes,
    load_baseline,
    load_baseline_cases,
    match_baseline,
    paired_result,
)
from bcas.gating.errors import GateError
from bcas.gating.plan import GateOptions, GatePlan, plan_gate
from bcas.gating.report import (
    VERDICT_CANNOT_FAIL,
    VERDICT_FAIL,
    VERDICT_NOT_RUN,
    VERDICT_PASS,
    build_report,
    junit_properties,
)
from bcas.stats import holm_bonferroni, mcnemar_exact_one_sided


def _rec(item: str, correct: bool, model: str = "m", config: str = "c1", dhash: str = "h1", **kw) -> dict:
    return {
        "model": model,
        "dataset": "ds",
        "config_id": config,
        "dataset_hash": dhash,
        "item_id": item,
        "correct_em": correct,
        "question": f"question {item}",
        "answers": [f"answer {item}"],
        "label": "cfg",
        **kw,
    }


def test_baseline_round_trip_keeps_metrics_digests_and_fingerprint(tmp_path: Path) -> None:
    recs = [_rec(f"q{i}", i % 2 == 0, judge_verdict=(i % 3 == 0), model_fingerprint="mock:gold") for i in range(6)]
    data = build_baseline(recs)
    path = tmp_path / "base.json"
    path.write_text(json.dumps(data))
    (case,) = load_baseline_cases(path)
    assert case.fingerprint == "mock:gold" and case.model == "m"
    assert case.items == {f"q{i}": i % 2 == 0 for i in range(6)}
    assert case.digests["q3"] == item_digest("question q3", ["answer q3"])
    judged = load_baseline(path, "judge_verdict")
    assert list(judged.values())[0] == {f"q{i}": i % 3 == 0 for i in range(6)}
    # A metric the baseline never recorded gates nothing (rather than reading as all-false).
    assert load_baseline(path, "no_such_metric") == {}


def test_epochs_vote_per_item() -> None:
    recs = [_rec("a", True), _rec("a", False), _rec("a", True), _rec("b", False), _rec("b", True)]
    recs.append({**_rec("c", True), "correct_em": None})
    assert item_outcomes(recs) == {"a": True, "b": True}


def test_hand_edited_v1_baseline_and_errors_name_the_case(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    path.write_text(
        json.dumps(
            {
                "cases": {
                    "k": {
                        "model": "m",
                        "dataset": "ds",
                        "config_id": "c1",
                        "dataset_hash": "h1",
                        "items": {"q1": True, "q2": True},
                    }
                }
            }
        )
    )
    (case,) = load_baseline_cases(path)
    assert case.items == {"q1": True, "q2": True} and case.digests == {}
    path.write_text(json.dumps({"cases": {"k": {"items": {"q1": "yes"}}}}))
    with pytest.raises(BaselineError, match=r"case 'k': item 'q1': correct_em must be true or false"):
        load_baseline_cases(path)
    path.write_text("[1, 2]")
    with pytest.raises(BaselineError, match="not a bcas baseline"):
        load_baseline_cases(path)
    with pytest.raises(BaselineError, match="not found"):
        load_baseline_cases(tmp_path / "missing.json")


def _cases(tmp_path: Path, records: list[dict]) -> list:
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return load_baseline_cases(path)


def test_matching_same_model_then_the_only_model_then_refuses(tmp_path: Path) -> None:
    digests = {f"q{i}": item_digest(f"question q{i}", [f"answer q{i}"]) for i in range(4)}
    cases = _cases(tmp_path, [_rec(f"q{i}", True, model="gold") for i in range(4)])
    found, paired, note = match_baseline(cases, "gold", "ds", "c1", "h1", digests)
    assert found is not None and len(paired) == 4 and note == ""
    # A new model against the baseline's only model for this configuration.
    found, paired, note = match_baseline(cases, "random", "ds", "c1", "h1", digests)
    assert found is not None and found.model == "gold" and "gold" in note
    # Another configuration is never compared.
    assert match_baseline(cases, "gold", "ds", "c2", "h1", digests)[0] is None
    # Two baseline models, neither the current one: ambiguous, not gated.
    cases = _cases(tmp_path, [_rec("q0", True, model="a"), _rec("q0", True, model="b")])
    found, _, why = match_baseline(cases, "c", "ds", "c1", "h1", digests)
    assert found is None and "a, b" in why


def test_items_pair_across_subsets_only_with_equal_content(tmp_path: Path) -> None:
    cases = _cases(tmp_path, [_rec(f"q{i}", True, dhash="big") for i in range(10)])
    digests = {f"q{i}": item_digest(f"question q{i}", [f"answer q{i}"]) for i in range(3)}
    digests["q9"] = item_digest("an edited question", ["answer q9"])  # same id, other content
    found, paired, _ = match_baseline(cases, "m", "ds", "c1", "small", digests)
    assert found is not None and sorted(paired) == ["q0", "q1", "q2"]


def test_paired_result_numbers() -> None:
    base = {f"q{i}": True for i in range(10)}
    records = [_rec(f"q{i}", i < 3) for i in range(10)] + [_rec("extra", True)]
    res = paired_result("case", "k", records, base, n_gated=2, alpha=0.05)
    assert res is not None
    assert (res.n_paired, res.worse_only, res.better_only) == (10, 7, 0)
    assert res.baseline_acc == 1.0 and res.current_acc == pytest.approx(0.3)
    assert res.p_value == mcnemar_exact_one_sided(0, 7) == 2**-7
    assert res.threshold == 0.025 and res.failed_now
    assert res.min_discordant == 6 and res.min_drop == pytest.approx(0.6)
    msg = res.message()
    for piece in (
        "accuracy 0.300 vs baseline 1.000",
        "on 10 shared items",
        "baseline-only correct 7",
        "current-only correct 0",
        "p = 0.007812",
        "0.025",
        "2 gated cases",
    ):
        assert piece in msg, piece


def _result(case: str, p: float, family: str = "session", size: int = 3, n: int = 50, **kw) -> GateResult:
    threshold = 0.05 / size
    return GateResult(
        case,
        "k",
        n,
        0.5,
        0.6,
        5,
        1,
        p,
        threshold,
        p <= threshold,
        family=family,
        family_size=size,
        min_discordant=8,
        min_drop=8 / n,
        **kw,
    )


def test_holm_runs_within_families_and_pads_missing_cases() -> None:
    # Two results of a planned family of three: the missing p-value counts as 1, so b
    # (0.03 > 0.05/2) is kept; a family of two would have rejected it (0.03 <= 0.05/1).
    results = [_result("a", 0.01), _result("b", 0.03)]
    rejected = holm_session(results)
    expected, _ = holm_bonferroni([0.01, 0.03, 1.0])
    assert [r.case_id for r in rejected] == [c for c, rej in zip("ab", expected[:2], strict=True) if rej] == ["a"]
    assert holm_bonferroni([0.01, 0.03])[0] == [True, True]
    # Same p-values, each its own family: both rejected at 0.05.
    alone = [_result("a", 0.01, "case a", 1), _result("b", 0.03, "case b", 1)]
    assert {r.case_id for r in holm_session(alone)} == {"a", "b"}


def test_report_verdicts_holm_thresholds_and_step_down_failures() -> None:
    # a: first step (0.05/3); b: rejected only by the step-down (0.05/2); c: cannot fail.
    results = [_result("a", 0.001), _result("b", 0.02), _result("c", 0.5, n=5)]
    results[2].min_discordant = results[2].min_drop = None
    report = build_report(None, results)
    assert report is not None
    verdicts = {r.case_id: r.verdict for r in report.rows}
    assert verdicts == {"a": VERDICT_FAIL, "b": VERDICT_FAIL, "c": VERDICT_CANNOT_FAIL}
    thresholds = {r.case_id: r.holm_threshold for r in report.rows}
    assert thresholds == {"a": pytest.approx(0.05 / 3), "b": pytest.approx(0.05 / 2), "c": pytest.approx(0.05)}
    assert (
        len(report.holm_failures) == 1
        and "b:" in report.holm_failures[0]
        and "Holm step-down" in report.holm_failures[0]
    )
    assert report.overall.startswith("FAIL: 2 of 3")
    text = "\n".join(report.lines())
    assert "overall: FAIL" in text and "cannot fail" in text


def test_overall_says_when_the_gate_could_not_fail() -> None:
    stuck = [_result(c, 0.03, n=5) for c in "abc"]
    for r in stuck:
        r.min_discordant = r.min_drop = None
    report = build_report(None, stuck)
    assert report is not None and not report.failed
    assert report.overall.startswith("CANNOT FAIL") and "measures nothing" in report.overall
    mixed = build_report(None, [_result("z", 0.3), *stuck[:1]])
    assert mixed is not None and mixed.overall == "PASS (1 of 2 gated cases could not fail)"
    assert [r.verdict for r in mixed.rows] == [VERDICT_PASS, VERDICT_CANNOT_FAIL]


def test_junit_properties_carry_the_numbers() -> None:
    props = dict(junit_properties(_result("a", 0.001), None))
    assert props["bcas_gate"] == VERDICT_FAIL
    assert props["bcas_gate_n_paired"] == "50" and props["bcas_gate_baseline_only"] == "5"
    assert float(props["bcas_gate_p"]) == 0.001 and props["bcas_gate_can_fail"] == "true"
    assert junit_properties(None, None) == []


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"alpha": 0}, "--bcas-alpha"),
        ({"alpha": "1.5"}, "--bcas-alpha"),
        ({"family": "run"}, "--bcas-gate-family"),
        ({"max_drop_points": 100}, "--bcas-max-drop"),
        ({"max_drop_points": -1}, "--bcas-max-drop"),
    ],
)
def test_options_are_validated(kwargs: dict, message: str) -> None:
    with pytest.raises(GateError, match=message):  # a ValueError the front doors show their own way
        GateOptions.parse(**kwargs)


def test_options_defaults() -> None:
    o = GateOptions.parse()
    assert (o.alpha, o.family, o.max_drop, o.strict) == (0.05, "session", 0.0, False)
    assert GateOptions.parse(max_drop_points="10").max_drop == pytest.approx(0.10)


# --- planning against a real dataset ---------------------------------------------------


def _plugin_cases(n_configs: int = 3):
    from bcas.config import Budget, RetrievalConfig, RunConfig
    from bcas.grids import GridEntry
    from bcas.run.settings import Case, ModelSpec

    entries = [
        GridEntry(
            "bcas",
            RunConfig(budget=Budget(max_searches=s, max_total_tokens=2000), retrieval=RetrievalConfig(mode="bm25")),
        )
        for s in range(1, n_configs + 1)
    ]
    return [Case(ModelSpec("mock", "gold"), "hotpotqa", "smoke", e) for e in entries]


def _baseline_for(cases, limit: int, seed: int, correct: bool, path: Path, model: str | None = None) -> Path:
    from dataclasses import replace

    from bcas.data import load_dataset

    recs = []
    for case in cases:
        ds = load_dataset(case.dataset, limit=limit, seed=seed)
        cid = replace(case.entry.config, seed=seed).config_id
        for it in ds.items:
            recs.append(
                {
                    "model": model or case.model.label,
                    "dataset": ds.name,
                    "config_id": cid,
                    "dataset_hash": ds.hash,
                    "item_id": it.id,
                    "correct_em": correct,
                    "question": it.question,
                    "answers": list(it.answers),
                }
            )
    path.write_text(json.dumps(build_baseline(recs)))
    return path


def test_plan_reports_cases_that_cannot_fail(tmp_path: Path) -> None:
    cases = _plugin_cases(3)
    base = _baseline_for(cases, 5, 0, True, tmp_path / "base.json")
    plan = plan_gate(cases, {c.id: 5 for c in cases}, str(base), 0, GateOptions())
    assert [c.n_paired for c in plan.gated] == [5, 5, 5]
    assert all(c.family_size == 3 and c.threshold == pytest.approx(0.05 / 3) for c in plan.gated)
    assert len(plan.cannot_fail) == 3
    problem = plan.usage_problem()
    assert problem is not None and "3 of 3 gated cases cannot fail" in problem and "--bcas-limit, e.g. 6" in problem
    assert any("THE GATE CANNOT FAIL" in line for line in plan.lines())
    # Per-case families: alone at 0.05, 5 lost items (p = 0.031) can fail.
    per_case = plan_gate(cases, {c.id: 5 for c in cases}, str(base), 0, GateOptions(family="case"))
    assert not per_case.cannot_fail and per_case.usage_problem() is None
    assert all(c.min_drop == 1.0 for c in per_case.gated)


def test_plan_pairs_a_larger_baseline_on_the_shared_items(tmp_path: Path) -> None:
    cases = _plugin_cases(1)
    base = _baseline_for(cases, 40, 0, True, tmp_path / "base.json", model="mock-old")
    plan = plan_gate(cases, {cases[0].id: 20}, str(base), 0, GateOptions())
    (cp,) = plan.gated
    assert cp.n_paired == 20 and cp.baseline_model == "mock-old"  # a baseline without fingerprints: the name alone
    assert plan.baseline == str(base) and cp.key == next(iter(json.loads(base.read_text())["cases"]))
    assert cp.min_discordant == 5 and cp.min_drop == pytest.approx(0.25)
    # The plan survives its JSON file (the xdist controller reads what a worker planned).
    again = GatePlan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again.cases[cp.case_id] == cp


def test_plan_without_a_matching_case_gates_nothing(tmp_path: Path) -> None:
    cases = _plugin_cases(2)
    base = _baseline_for(cases[:1], 5, 0, True, tmp_path / "base.json")
    plan = plan_gate(cases, {c.id: 5 for c in cases}, str(base), 0, GateOptions(family="case"))
    assert [c.case_id for c in plan.gated] == [cases[0].id]
    assert "no case of this dataset and configuration" in plan.cases[cases[1].id].reason
    report = build_report(plan, [])
    assert report is not None and [r.verdict for r in report.rows] == [VERDICT_NOT_RUN]
    assert report.not_gated and report.not_gated[0][0] == cases[1].id


def test_html_gate_section_is_escaped(tmp_path: Path) -> None:
    from bcas.report.html import render_report

    evil = "<script>alert(1)</script>"
    report = build_report(None, [_result(evil, 0.001)])
    path = render_report(tmp_path, [], [], [], gate=report)
    html = path.read_text()
    assert 'id="regression-gate"' in html and 'id="gate-overall"' in html
    assert evil not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "FAIL: 1 of 1" in html


def test_docs_power_table_is_what_the_code_computes() -> None:
    from bcas.gating.power import main as power_main

    readme = (Path(__file__).resolve().parents[2] / "docs" / "gating.md").read_text(encoding="utf-8")
    start = readme.index("<!-- gate-power-table -->") + len("<!-- gate-power-table -->")
    end = readme.index("<!-- /gate-power-table -->")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert power_main([]) == 0
    assert readme[start:end].strip() == buf.getvalue().strip()
    # The 1/7/30-case columns at alpha 0.05 include the case: 5 items, 7 cases: cannot fail.
    assert "| 5 | 100.0 | cannot fail | cannot fail |" in readme


def test_each_case_is_gated_on_its_grids_primary_metric(tmp_path: Path) -> None:
    """A judge-graded grid run with a judge is gated on the judge's verdicts, never on SQuAD EM
    of a baseline that has no verdicts (the case is then not gated, and says why)."""
    from bcas.run.settings import Case

    paper = [Case(c.model, c.dataset, "search_scaling", c.entry) for c in _plugin_cases(2)]
    base = _baseline_for(paper, 5, 0, True, tmp_path / "base.json")
    limits = {c.id: 5 for c in paper}
    without = plan_gate(paper, limits, str(base), 0, GateOptions(), judge=False)
    assert [(c.metric, c.n_paired) for c in without.cases.values()] == [("correct_em", 5)] * 2
    judged = plan_gate(paper, limits, str(base), 0, GateOptions(), judge=True)
    assert [(c.metric, c.n_paired) for c in judged.cases.values()] == [("judge_verdict", 0)] * 2
    assert all("no case of this dataset and configuration" in c.reason for c in judged.cases.values())


def test_a_case_without_per_item_records_is_named_as_not_gated(tmp_path: Path) -> None:
    from dataclasses import replace

    from bcas.gating.plan import CasePlan
    from bcas.run.settings import Case

    case = _plugin_cases(1)[0]
    rsc = Case(case.model, "hotpotqa", "smoke", replace(case.entry, kind="rsc"))
    base = _baseline_for([case], 5, 0, True, tmp_path / "base.json")
    plan = plan_gate([rsc, case], {rsc.id: 5, case.id: 5}, str(base), 0, GateOptions())
    assert plan.cases[rsc.id] == CasePlan(rsc.id, "smoke", "correct_em", "", reason="rsc case: no per-item records")
    assert [c.case_id for c in plan.gated] == [case.id]  # the cases after it are still planned


def test_a_case_whose_dataset_cannot_load_is_named_with_the_reason_and_the_rest_planned(tmp_path: Path) -> None:
    """Planned under --bcas-seed 7: the subset and configuration the case will run are the seeded ones."""
    from bcas.gating.plan import CasePlan
    from bcas.run.settings import Case

    case = _plugin_cases(1)[0]
    missing = Case(case.model, "no-such-dataset", "smoke", case.entry)
    base = _baseline_for([case], 5, 7, True, tmp_path / "base.json")
    plan = plan_gate([missing, case], {missing.id: 5, case.id: 5}, str(base), 7, GateOptions())
    refused = plan.cases[missing.id]
    assert refused == CasePlan(missing.id, "smoke", "correct_em", "", reason=refused.reason)
    assert refused.reason.startswith("no-such-dataset: unknown dataset; registered names are [")
    (gated,) = plan.gated
    assert (gated.case_id, gated.grid, gated.n_paired) == (case.id, "smoke", 5)


def test_the_plan_names_the_range_of_drops_its_cases_can_detect(tmp_path: Path) -> None:
    cases = _plugin_cases(3)
    base = _baseline_for(cases, 40, 0, True, tmp_path / "base.json")
    limits = dict(zip([c.id for c in cases], (10, 20, 40), strict=True))
    plan = plan_gate(cases, limits, str(base), 0, GateOptions(family="case"))
    drops = sorted(c.min_drop for c in plan.gated)
    assert len(set(drops)) == 3
    expected = f"  3 gated cases can fail; the smallest drop each can detect: {drops[0] * 100:.1f}-{drops[-1] * 100:.1f} points"
    assert expected in plan.lines()


def test_a_gate_that_cannot_fail_lists_its_cases_then_what_to_change(tmp_path: Path) -> None:
    from bcas.gating.plan import _cannot_fail_text

    cases = _plugin_cases(3)
    base = _baseline_for(cases, 5, 0, True, tmp_path / "base.json")
    plan = plan_gate(cases, {c.id: 5 for c in cases}, str(base), 0, GateOptions())
    problem = plan.usage_problem()
    assert problem is not None
    listed, advice = problem.split(". Give each case more items", 1)
    assert listed.endswith(_cannot_fail_text(plan.cannot_fail[-1])) and "; ..." not in listed
    assert advice.startswith(" (--bcas-limit, e.g. 6)")


def test_a_tolerance_gate_plans_the_smallest_drop_beyond_its_margin(tmp_path: Path) -> None:
    from bcas.gating.baseline import min_detectable

    cases = _plugin_cases(1)
    base = _baseline_for(cases, 40, 0, True, tmp_path / "base.json")
    plan = plan_gate(cases, {cases[0].id: 40}, str(base), 0, GateOptions(family="case", max_drop=0.1))
    (cp,) = plan.gated
    assert (cp.min_discordant, cp.min_drop) == min_detectable(40, 0.05, 0.1) != min_detectable(40, 0.05, 0.0)
    assert plan.cases[cases[0].id].key != ""
