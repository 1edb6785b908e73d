"""The regression gate's parts: baselines, pairing, Holm families, the plan's power and the report."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
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
from tests.support.ascii_locale import ascii_locale


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


def test_the_session_report_joins_this_sessions_plan_and_every_workers_results(tmp_path: Path, monkeypatch) -> None:
    """The end-of-session gate reads the plan and each worker's results of this session only
    (older sessions' files are removed, a torn file is skipped), ranks each family by p for the
    Holm step-down, lists a planned case that did not run, and writes ``gate-report.json`` for
    CI tooling, readable under any locale."""
    from dataclasses import asdict

    from bcas.gating.plan import CasePlan
    from bcas.gating.report import GateRow, session_gate_report

    options = GateOptions(family="session")
    planned = {
        cid: CasePlan(cid, "smoke", "correct_em", f"k{cid}", n_paired=50, family="session", family_size=4,
                      threshold=0.05 / 4, min_discordant=8, min_drop=0.16)
        for cid in ("zé", "a", "b", "c")
    }  # fmt: skip
    planned["d"] = CasePlan("d", "smoke", "correct_em", "", reason="no case of this dataset and configuration")
    GatePlan(baseline="base.json", options=options, cases=planned).save(tmp_path, "t1", worker="gw0")
    GatePlan(baseline="old.json", options=options, cases={}).save(tmp_path, "t0", worker="gw0")
    results = {
        "gw0": [_result("b", 0.015, size=4)],  # rejected only by the step-down (second of four: 0.05/3)
        "gw1": [_result("a", 0.001, size=4)],  # first step: 0.001 <= 0.05/4
        "gw2": [_result("c", 0.5, size=4)],
    }
    for worker, rs in results.items():
        (tmp_path / f"gate.t1.{worker}.json").write_text(json.dumps([asdict(r) for r in rs]), encoding="utf-8")
    (tmp_path / "gate.t1.gw.json").write_text('[{"case_id": "torn', encoding="utf-8")  # read first
    (tmp_path / "gate.t0.main.json").write_text(json.dumps([asdict(_result("old", 0.0001))]), encoding="utf-8")
    ascii_locale(monkeypatch)
    real_unlink = Path.unlink

    def removed_by_another_worker_first(self, missing_ok=False):
        real_unlink(self, missing_ok=True)  # every process of the session clears old files
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", removed_by_another_worker_first)
    report = session_gate_report(tmp_path, "t1")
    assert report is not None and report.baseline == "base.json"
    assert sorted(p.name for p in tmp_path.glob("gate*.json")) == [
        "gate-plan.t1.json", "gate-report.json", "gate.t1.gw.json", "gate.t1.gw0.json", "gate.t1.gw1.json",
        "gate.t1.gw2.json"]  # fmt: skip
    assert [r.case_id for r in report.rows] == ["zé", "a", "b", "c"]
    assert report.rows[0] == GateRow("zé", "smoke", "session", 4, 50, None, None, None, None, None, None, None,
                                     0.16, VERDICT_NOT_RUN)  # fmt: skip
    assert [(r.verdict, r.holm_threshold) for r in report.rows[1:]] == [
        (VERDICT_FAIL, pytest.approx(0.05 / 4)), (VERDICT_FAIL, pytest.approx(0.05 / 3)),
        (VERDICT_PASS, pytest.approx(0.05 / 2))]  # fmt: skip
    (step_down,) = report.holm_failures
    assert step_down == _result("b", 0.015, size=4).message(0.05 / 3, "Holm step-down")
    assert report.not_gated == [("d", "no case of this dataset and configuration")]
    written = (tmp_path / "gate-report.json").read_text(encoding="utf-8")
    assert written.startswith('{\n "baseline": "base.json",\n "alpha": 0.05,')  # one field a line
    assert json.loads(written) == json.loads(json.dumps(report.to_dict()))
    # a session whose gate did not run: no report, and no stale file left for CI to read
    assert session_gate_report(tmp_path, "t2") is None and not (tmp_path / "gate-report.json").exists()


def test_a_report_from_results_alone_names_their_level_family_and_test() -> None:
    """Without a plan (a run gated case by case), the report takes the level, family and test
    from the results, in the order the step-down needs whatever order the workers wrote."""
    results = [_result("c", 0.5, family="grid g", size=3), _result("a", 0.001, family="grid g", size=3),
               _result("b", 0.02, family="grid g", size=3, test="one-sided tolerance test", alpha=0.1)]  # fmt: skip
    report = build_report(None, results)
    assert report is not None
    assert (report.baseline, report.alpha, report.family, report.test, report.metrics) == (
        "(baseline)", 0.05, "grid g", "one-sided exact McNemar", ["correct_em"])  # fmt: skip
    rows = {r.case_id: r for r in report.rows}
    assert [r.case_id for r in report.rows] == ["c", "a", "b"]
    assert (rows["a"].holm_threshold, rows["b"].holm_threshold, rows["c"].holm_threshold) == (
        pytest.approx(0.05 / 3), pytest.approx(0.1 / 2), pytest.approx(0.05))  # fmt: skip
    c = rows["c"]
    assert (c.grid, c.family, c.family_size, c.n_paired, c.baseline_acc, c.current_acc, c.worse_only,
            c.better_only, c.p_value, c.min_drop) == ("", "grid g", 3, 50, 0.6, 0.5, 5, 1, 0.5, 0.16)  # fmt: skip


def test_junit_properties_carry_the_numbers() -> None:
    props = dict(junit_properties(_result("a", 0.001), None))
    assert props["bcas_gate"] == VERDICT_FAIL
    assert props["bcas_gate_n_paired"] == "50" and props["bcas_gate_baseline_only"] == "5"
    assert float(props["bcas_gate_p"]) == 0.001 and props["bcas_gate_can_fail"] == "true"
    assert junit_properties(None, None) == []


def test_each_cases_junit_properties_are_its_verdict_and_every_number_behind_it() -> None:
    """A CI system reads the gate from the JUnit file alone: the verdict of each case (not gated
    and why, not run, fail, pass, cannot fail) and the numbers behind it under fixed names."""
    from bcas.gating.plan import CasePlan

    failed = _result("a", 0.001, family="grid g", size=2, metric="judge_verdict")
    assert junit_properties(failed, None) == [
        ("bcas_gate", VERDICT_FAIL),
        ("bcas_gate_metric", "judge_verdict"),
        ("bcas_gate_test", "one-sided exact McNemar"),
        ("bcas_gate_n_paired", "50"),
        ("bcas_gate_baseline_acc", "0.6000"),
        ("bcas_gate_current_acc", "0.5000"),
        ("bcas_gate_baseline_only", "5"),
        ("bcas_gate_current_only", "1"),
        ("bcas_gate_p", "0.001"),
        ("bcas_gate_holm_threshold", "0.025"),
        ("bcas_gate_family", "grid g (2 cases)"),
        ("bcas_gate_can_fail", "true"),
        ("bcas_gate_min_drop_pts", "16.00"),
    ]
    passed = dict(junit_properties(_result("b", 0.4), None))
    assert passed["bcas_gate"] == VERDICT_PASS
    stuck = _result("c", 0.4, n=5)
    stuck.min_discordant = stuck.min_drop = None
    props = dict(junit_properties(stuck, None))
    assert (props["bcas_gate"], props["bcas_gate_can_fail"], props["bcas_gate_min_drop_pts"]) == (
        VERDICT_CANNOT_FAIL, "false", "")  # fmt: skip
    not_gated = CasePlan("d", "smoke", "correct_em", "", reason="no baseline case")
    assert junit_properties(None, not_gated) == [("bcas_gate", "not gated: no baseline case")]
    planned = CasePlan("e", "smoke", "correct_em", "k", n_paired=7, min_discordant=4)
    assert junit_properties(None, planned) == [
        ("bcas_gate", VERDICT_NOT_RUN), ("bcas_gate_n_paired", "7"), ("bcas_gate_can_fail", "true")]  # fmt: skip
    assert junit_properties(None, CasePlan("f", "smoke", "correct_em", "k", n_paired=3))[2] == (
        "bcas_gate_can_fail", "false")  # fmt: skip


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"alpha": 0}, "--bcas-alpha"),
        ({"alpha": "1.5"}, "--bcas-alpha"),
        ({"alpha": 1}, "--bcas-alpha"),
        ({"family": "run"}, "--bcas-gate-family"),
        ({"max_drop_points": 100}, "--bcas-max-drop"),
        ({"max_drop_points": -1}, "--bcas-max-drop"),
        ({"fallback_share": 1}, r"^--bcas-gate-fallback-share must lie in \[0, 1\), got 1$"),
        ({"fallback_share": "-0.5"}, r"^--bcas-gate-fallback-share must lie in \[0, 1\), got '-0.5'$"),
        ({"fallback_share": "nan"}, r"^--bcas-gate-fallback-share must lie in \[0, 1\), got 'nan'$"),
        ({"fallback_share": "x"}, r"^--bcas-gate-fallback-share must be a number in \[0, 1\), got 'x'$"),
    ],
)
def test_options_are_validated(kwargs: dict, message: str) -> None:
    with pytest.raises(GateError, match=message):  # a ValueError the front doors show their own way
        GateOptions.parse(**kwargs)


def test_options_defaults() -> None:
    o = GateOptions.parse()
    assert (o.alpha, o.family, o.max_drop, o.strict) == (0.05, "session", 0.0, False)
    assert GateOptions.parse(max_drop_points="10").max_drop == pytest.approx(0.10)
    assert GateOptions.parse(family="").family == "session"  # an empty option is the default
    assert GateOptions.parse().fallback_share == 0.2 and GateOptions.parse(fallback_share=None).fallback_share == 0.2
    assert GateOptions.parse(fallback_share="0").fallback_share == 0.0
    assert GateOptions.parse(fallback_share="0.35").fallback_share == 0.35


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
    from bcas.cli import main as bcas_main

    readme = (Path(__file__).resolve().parents[2] / "docs" / "gating.md").read_text(encoding="utf-8")
    start = readme.index("<!-- gate-power-table -->") + len("<!-- gate-power-table -->")
    end = readme.index("<!-- /gate-power-table -->")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert bcas_main(["gate", "power"]) == 0
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


def _identity_baseline(case, path: Path, fingerprint: str, prompt: str, model: str | None = None) -> Path:
    data = json.loads(_baseline_for([case], 5, 0, True, path, model=model).read_text())
    for c in data["cases"].values():
        c["model_fingerprint"], c["prompt_hash"] = fingerprint, prompt
    path.write_text(json.dumps(data))
    return path


def test_a_baseline_of_other_answers_is_refused_naming_each_difference_or_compared_when_allowed(tmp_path: Path) -> None:
    """The gate never silently pairs answers of another model build or another prompt: it refuses
    and says what differs (and which option compares a new model); ``--bcas-allow-mismatch``
    compares anyway and says so beside the baseline's name."""
    (case,) = _plugin_cases(1)
    base = _identity_baseline(case, tmp_path / "base.json", "fpA", "phA")

    def plan_of(fingerprint: str, prompt: str, **kw):
        plan = plan_gate([case], {case.id: 5}, str(base), 0, GateOptions(), identity=lambda c: (fingerprint, prompt),
                         **kw)  # fmt: skip
        return plan.cases[case.id]

    both = (f"model fingerprint fpA ({case.model.label}, baseline) vs fpB (this run); "
            "prompt hash phA (baseline) vs phB (this run)")  # fmt: skip
    refused = plan_of("fpB", "phB")
    assert refused.refused and refused.reason == "refused: the answers differ in identity: " + both
    new_build = plan_of("fpB", "phA")
    assert new_build.refused and new_build.reason == (
        f"refused: the answers differ in identity: model fingerprint fpA ({case.model.label}, baseline) vs fpB "
        "(this run) (a new model against the baseline's: --bcas-gate-new-model)")  # fmt: skip
    assert (
        plan_of("fpA", "phB").reason
        == "refused: the answers differ in identity: prompt hash phA (baseline) vs phB (this run)"
    )
    allowed = plan_of("fpB", "phB", allow_mismatch=True)
    assert allowed.gated and not allowed.refused and allowed.mismatch == both
    assert allowed.baseline_model == f"{case.model.label} [compared despite --bcas-allow-mismatch: {both}]"
    same = plan_of("fpA", "phA")
    assert same.gated and (same.mismatch, same.baseline_model) == ("", "")
    assert plan_of("fpB", "phA", new_model=True).gated


def test_a_grid_with_calibration_items_is_paired_on_the_items_it_evaluates(tmp_path: Path) -> None:
    """MADARA's grids set calibration items aside before drawing the evaluated ones: the gate
    describes a case by those same items (their subset's hash), so a baseline of the same
    items pairs all of them, also when it was written before item digests."""
    from dataclasses import replace

    from bcas.data import load_evaluation
    from bcas.grids import GRIDS
    from bcas.run.settings import Case, ModelSpec

    grid = GRIDS["madara"]
    assert grid.holdout > 0
    case = Case(ModelSpec("mock", "gold"), "fever", "madara", grid.entries[0])
    ds = load_evaluation("fever", limit=5, seed=0, holdout=grid.holdout)
    config_id = replace(case.entry.config, seed=0).config_id
    recs = [{"model": case.model.label, "dataset": ds.name, "config_id": config_id, "dataset_hash": ds.hash,
             "item_id": it.id, "prediction": "x", "correct_em": True} for it in ds.items]  # fmt: skip
    base = tmp_path / "base.json"
    base.write_text(json.dumps(build_baseline(recs)))  # no question or answers: no digests
    plan = plan_gate([case], {case.id: 5}, str(base), 0, GateOptions(metric="correct_em"))
    assert plan.cases[case.id].n_paired == 5 and set(plan.items[case.id]) == {it.id for it in ds.items}


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


# --- one finished case through the gate both front doors call ---------------------------


@dataclass
class _GateSettings:
    baseline: str | None = None
    seed: int = 0
    judge: str = "none"
    min_accuracy: float | None = None
    gate_metric: str | None = None


class _GateSession:
    def __init__(self, settings: _GateSettings, limits: dict[str, int]) -> None:
        self.settings = settings
        self.gate_results: list[GateResult] = []
        self._limits = limits

    def limit_for(self, case) -> int:
        return self._limits[case.id]


@dataclass
class _Outcome:
    records: list[dict]


def _case_records(case, correct: list[bool], **extra) -> _Outcome:
    from bcas.data import load_dataset

    ds = load_dataset(case.dataset, limit=len(correct), seed=0)
    return _Outcome([{"item_id": it.id, "prediction": "x", "correct_em": ok, **extra}
                     for it, ok in zip(ds.items, correct, strict=True)])  # fmt: skip


def test_a_cases_floor_is_its_marker_else_the_settings_and_is_read_on_the_gated_metric() -> None:
    """The accuracy floor (``min_accuracy`` marker, else ``--bcas-min-accuracy``) fails a case
    below it with the case's numbers, on the metric the gate uses: the chosen one, else the
    grid's primary metric (the judge's verdict for a judge-graded grid when a judge runs)."""
    from bcas.gating.case import gate_case
    from bcas.run.settings import Case

    (case,) = _plugin_cases(1)
    outcome = _case_records(case, [True, True, False, False, False], judge_verdict=True)  # EM 0.4, judge 1.0

    def gate(floor: float | None, **settings) -> list[str]:
        return gate_case(_GateSession(_GateSettings(**settings), {case.id: 5}), case, outcome, floor)

    below = f"regression gate: {case.id}: correct_em accuracy 0.400 over 5 items is below the floor 0.500"
    assert gate(None) == []  # no floor anywhere: nothing to fail
    assert gate(0.5) == [below]  # the marker's floor
    assert gate(None, min_accuracy=0.5) == [below]  # the settings' floor
    assert gate(0.3, min_accuracy=0.9) == []  # the marker's floor wins over the settings'
    assert gate(0.4) == []  # at the floor: passes
    assert gate(0.5, gate_metric="judge_verdict") == []  # the chosen metric, not the grid's
    judged = Case(case.model, case.dataset, "search_scaling", case.entry)  # a judge-graded paper grid
    assert gate_case(_GateSession(_GateSettings(judge="llm"), {}), judged, outcome, 0.5) == []
    (failure,) = gate_case(_GateSession(_GateSettings(judge="none"), {}), judged, outcome, 0.5)
    assert failure == below.replace(case.id, judged.id)


def test_a_finished_case_is_paired_with_the_baseline_its_result_kept_and_a_loss_failed(tmp_path: Path) -> None:
    """A case the run's plan does not hold is planned on its own (its item limit, the run's
    seed, the chosen metric and the judge), paired with the baseline, its result kept on the
    session for the session-wide Holm step, and a significant loss is a failure."""
    from bcas.gating.case import gate_case
    from bcas.run.settings import Case

    (case,) = _plugin_cases(1)
    base = _baseline_for([case], 5, 0, True, tmp_path / "base.json")
    lost = _case_records(case, [False] * 5)  # every item the baseline got right is now wrong
    alone = GateOptions(family="case")  # alone at 0.05, five losses (p = 0.031) fail

    session = _GateSession(_GateSettings(baseline=str(base)), {case.id: 5})
    (failure,) = gate_case(session, case, lost, None, plan=None, options=alone)
    (result,) = session.gate_results
    assert failure == result.message() and result.failed_now
    assert (result.case_id, result.worse_only, result.better_only, result.family) == (case.id, 5, 0, f"case {case.id}")
    assert result.metric == "correct_em"
    # a plan of the run that does not hold the case: the case is planned on its own
    other = plan_gate(_plugin_cases(2)[1:], {}, str(base), 0, GateOptions())
    again = _GateSession(_GateSettings(baseline=str(base)), {case.id: 5})
    assert gate_case(again, case, lost, None, plan=other, options=alone) == [failure]
    # the run's own plan is used as it is (here: a family of one, the session's)
    planned = plan_gate([case], {case.id: 5}, str(base), 0, GateOptions())
    kept = _GateSession(_GateSettings(baseline=str(base)), {case.id: 5})
    assert gate_case(kept, case, _case_records(case, [True] * 5), None, plan=planned) == []
    assert [(r.family, r.worse_only, r.failed_now) for r in kept.gate_results] == [("session", 0, False)]
    # another seed draws another configuration: no baseline case to pair with, nothing kept
    seeded = _GateSession(_GateSettings(baseline=str(base), seed=3), {case.id: 5})
    assert gate_case(seeded, case, lost, None, options=alone) == [] and seeded.gate_results == []
    # the judge's verdicts, which this baseline lacks, when chosen: nothing to pair
    chosen = _GateSession(_GateSettings(baseline=str(base), gate_metric="judge_verdict"), {case.id: 5})
    assert gate_case(chosen, case, lost, None, options=alone) == [] and chosen.gate_results == []
    # a judge-graded grid is paired on SQuAD EM without a judge and on the verdicts with one
    judged = Case(case.model, case.dataset, "search_scaling", case.entry)
    judged_base = _baseline_for([judged], 5, 0, True, tmp_path / "judged.json")
    for judge, kept_results in (("none", 1), ("llm", 0)):
        s = _GateSession(_GateSettings(baseline=str(judged_base), judge=judge), {judged.id: 5})
        assert len(gate_case(s, judged, lost, None, options=alone)) == kept_results == len(s.gate_results)
    # the floor and the baseline both apply
    both = _GateSession(_GateSettings(baseline=str(base), min_accuracy=0.5), {case.id: 5})
    floor_msg, gate_msg = gate_case(both, case, lost, None, options=alone)
    assert floor_msg.endswith("accuracy 0.000 over 5 items is below the floor 0.500") and gate_msg == failure
