"""What a CI user loses when a part of the regression gate breaks.

An accuracy floor that lets a worse case pass, a tolerance test whose documented size is
not what it does, a power command that misreads its options, a session-level Holm step
that ignores the level it was given, an items suggestion that leaves the case unable to
fail.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import multinomial

from bcas.cli import main as bcas_main
from bcas.gating.baseline import BaselineCase, GateResult, holm_session, min_detectable
from bcas.gating.case import floor_failure
from bcas.gating.plan import CasePlan, GateOptions, _items_needed, fingerprint_note
from bcas.gating.power import tango_exact_size
from bcas.stats import tango_pvalues
from tests.support.ascii_locale import ascii_locale

DOCS = Path(__file__).resolve().parents[2] / "docs" / "gating.md"


def _records(correct: list[bool], **extra) -> list[dict]:
    return [{"item_id": f"q{i}", "correct_em": ok, "prediction": "x", **extra} for i, ok in enumerate(correct)]


def test_a_case_below_its_floor_fails_with_the_numbers_and_one_at_it_passes():
    records = _records([True, True, False, False])  # 0.5
    message = floor_failure("smoke[bm25]", records, "correct_em", 0.6)
    assert message == ("regression gate: smoke[bm25]: correct_em accuracy 0.500 over 4 items is below the floor 0.600")
    assert floor_failure("smoke[bm25]", records, "correct_em", 0.5) is None  # at the floor: passes
    assert floor_failure("smoke[bm25]", records, "correct_em", 0.49) is None


def test_errored_or_empty_answers_count_against_the_floor_and_no_items_is_zero():
    records = _records([True, True]) + [{"item_id": "q9", "correct_em": True, "prediction": "", "error": "boom"}]
    message = floor_failure("c", records, "correct_em", 0.7)
    assert message is not None and "accuracy 0.667 over 3 items" in message
    assert floor_failure("c", [], "correct_em", 0.1) == (
        "regression gate: c: correct_em accuracy 0.000 over 0 items is below the floor 0.100"
    )


def test_ungraded_answers_count_against_the_judges_floor():
    """Under ``judge_verdict``, an answer the judge never graded (no verdict) is no pass: 3 of 5
    graded right and 2 ungraded is 0.600 over 5 items, below a 0.7 floor (not 3 of 3)."""
    graded = _records([True, True, True], judge_verdict=True)
    ungraded = [{"item_id": f"u{i}", "correct_em": True, "prediction": "x", "judge_verdict": None} for i in range(2)]
    for records in (graded + ungraded, ungraded + graded):
        message = floor_failure("c", records, "judge_verdict", 0.7)
        assert message == "regression gate: c: judge_verdict accuracy 0.600 over 5 items is below the floor 0.700"
        assert floor_failure("c", records, "judge_verdict", 0.6) is None
    assert floor_failure("c", graded, "judge_verdict", 1.0) is None  # all graded and right: at the floor
    assert floor_failure("c", ungraded, "judge_verdict", 0.1) is not None  # nothing graded: 0.000


def _independent_size(n: int, margin: float, alpha: float, grid: int) -> float:
    """The same maximum, by scipy's multinomial pmf over every rejecting table."""
    rejecting = [
        (w, b)
        for w in range(n + 1)
        for b in range(n + 1 - w)
        if tango_pvalues(np.array([w]), np.array([b]), n, margin)[0] <= alpha
    ]
    worst = 0.0
    for q in np.linspace(0.0, (1.0 - margin) / 2.0, grid):
        probs = [q + margin, q, max(1.0 - 2.0 * q - margin, 0.0)]
        total = sum(multinomial.pmf([w, b, n - w - b], n, probs) for w, b in rejecting)
        worst = max(worst, float(total))
    return worst


@pytest.mark.parametrize(
    ("n", "margin", "alpha", "grid"),
    [(12, 0.10, 0.05, 25), (20, 0.05, 0.05, 25), (10, 0.30, 0.10, 17), (12, 0.10, 0.05, 11), (3, 0.05, 0.05, 10)],
)  # the last: one table rejects, the largest probability at a nuisance value away from 0
def test_the_tolerance_tests_exact_size_is_the_largest_rejection_probability_on_its_null(n, margin, alpha, grid):
    expected = _independent_size(n, margin, alpha, grid)
    assert tango_exact_size(n, margin, alpha, grid=grid) == pytest.approx(expected, rel=1e-9)


def test_a_test_that_never_rejects_has_size_zero():
    assert tango_exact_size(3, 0.05, 0.001, grid=10) == 0.0


def _power(argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert bcas_main(["gate", "power", *argv]) == 0
    return buf.getvalue()


def test_the_documented_exact_sizes_are_what_gate_power_prints():
    """docs/gating.md: 'its exact size at nominal 0.05 is 0.057-0.075 for 20-200 items'."""
    out = _power(["--tango-size", "--cases", "1", "--n", "5"])
    assert "Exact size of the tolerance test at nominal 0.05 (true drop = tolerance):" in out
    assert "| paired items | 5 pts | 10 pts |\n|---:|---:|---:|\n| 20 |" in out
    rows = re.findall(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", out, flags=re.M)
    assert [int(n) for n, _, _ in rows] == [20, 50, 100, 200]
    for n, five, ten in rows:
        assert float(five) == pytest.approx(tango_exact_size(int(n), 0.05, 0.05), abs=5e-5)
        assert float(ten) == pytest.approx(tango_exact_size(int(n), 0.10, 0.05), abs=5e-5)
    sizes = [float(v) for _, five, ten in rows for v in (five, ten)]
    documented = re.search(r"exact size at\s+nominal 0\.05 is ([\d.]+)-([\d.]+) for 20-200 items", DOCS.read_text())
    assert documented, "docs/gating.md no longer states the tolerance test's exact size"
    assert f"{min(sizes):.3f}" == documented.group(1) and f"{max(sizes):.3f}" == documented.group(2)
    assert "Exact size" not in _power(["--cases", "1", "--n", "5"])  # only when asked


def test_gate_power_reads_its_level_and_families_from_the_command_line():
    out = _power(["--alpha", "0.01", "--cases", "1,2", "--n", "5,40"])
    assert "alpha 0.01:" in out and "| paired items | 1 gated case | 2 gated cases |" in out
    # at 0.01 with 40 items: 8 discordant items are needed (2**-7 > 0.01 >= 2**-8... one-sided exact)
    k, drop = min_detectable(40, 0.01)
    assert f"| 40 | {drop * 100:.1f} |" in out
    assert "| 5 | cannot fail | cannot fail |" in out
    # the share flipping the other way is read as a number and changes the power table only
    other = _power(["--alpha", "0.01", "--cases", "1,2", "--n", "5,40", "--p-better", "0.2"])
    assert "when 20% of items also flip the other way" in other and "when 5% of items" in out
    assert other.split("True drop")[0] == out.split("True drop")[0]


def test_a_bad_gate_power_option_names_the_command(capsys):
    assert bcas_main(["gate", "power", "--alpha", "often"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: bcas gate power: ") and "--alpha" in line


def _result(case: str, p: float, family: str = "session", size: int = 2, alpha: float = 0.05) -> GateResult:
    return GateResult(
        case_id=case, key=case, n_paired=50, current_acc=0.5, baseline_acc=0.7, worse_only=10, better_only=0,
        p_value=p, threshold=alpha / size, failed_now=p <= alpha / size, family=family, family_size=size, alpha=alpha,
    )  # fmt: skip


def test_the_session_holm_step_uses_the_level_it_is_given():
    results = [_result("a", 0.02), _result("b", 0.03)]
    # at the results' own 0.05: Holm rejects both (0.02 <= 0.025, then 0.03 <= 0.05)
    assert [r.case_id for r in holm_session(results)] == ["a", "b"]
    # at a session level of 0.01 neither is rejected, however the results were made
    assert holm_session(results, alpha=0.01) == []
    # and a looser level rejects what the carried one would not
    strict = [_result("a", 0.04, alpha=0.01), _result("b", 0.12, alpha=0.01)]
    assert holm_session(strict) == [] and [r.case_id for r in holm_session(strict, alpha=0.1)] == ["a"]


def _plan(n: int, threshold: float) -> CasePlan:
    return CasePlan(case_id="c", grid="smoke", metric="correct_em", key="k", n_paired=n, threshold=threshold)


@pytest.mark.parametrize(("n", "threshold"), [(0, 0.05), (1, 0.05), (5, 0.05 / 7), (3, 0.05 / 30), (5, 0.001)])
def test_the_suggested_item_count_lets_the_case_fail_and_is_the_fewest_below_64(n, threshold):
    suggested = _items_needed(_plan(n, threshold), GateOptions())
    assert min_detectable(suggested, threshold)[0] is not None  # a user who follows it gets a case that can fail
    if suggested <= 64:
        assert suggested == max(1, n) or min_detectable(suggested - 1, threshold)[0] is None


def test_the_suggestion_above_64_overshoots_the_fewest_by_at_most_a_quarter():
    threshold = 1e-21  # needs 70 discordant items
    fewest = next(m for m in range(1, 500) if min_detectable(m, threshold)[0] is not None)
    suggested = _items_needed(_plan(1, threshold), GateOptions())
    assert fewest > 64 and fewest <= suggested <= int(fewest * 1.25) + 1


def test_the_suggestion_counts_the_tolerance():
    threshold = 0.05 / 7
    fewest = {
        drop: next(m for m in range(1, 500) if min_detectable(m, threshold, drop)[0] is not None)
        for drop in (0.0, 0.20)
    }
    assert fewest[0.0] != fewest[0.20]  # the tolerance changes what the case needs
    assert _items_needed(_plan(1, threshold), GateOptions(max_drop=0.20)) == fewest[0.20]
    assert _items_needed(_plan(1, threshold), GateOptions()) == fewest[0.0]


def test_a_baseline_of_another_model_is_named_with_its_fingerprint_only_when_it_has_one():
    case = BaselineCase(key="k", model="m", fingerprint="gguf:abc", dataset="d", config_id="c", dataset_hash="h",
                        label="l", items={}, digests={})  # fmt: skip
    assert fingerprint_note(case) == " (gguf:abc)"
    assert fingerprint_note(replace(case, fingerprint="")) == ""


def test_gate_write_without_its_arguments_names_the_command(capsys):
    assert bcas_main(["gate", "write"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: bcas gate write: ") and "RUN" in line


def _run_records(tmp_path: Path, order: list[int], flip: str | None = None) -> Path:
    from bcas.records import Record, ResultStore

    root = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    store = ResultStore(root)
    for i in order:
        case, item = divmod(i, 4)
        store.append(
            Record(
                run_id="r", config_id=f"cfg{case}", model="m", dataset="toy", dataset_hash="dh", item_id=f"q{item}",
                question="?", answers=["a"], prediction="a", correct_em=(f"{case}:{item}" != flip) and item % 2 == 0,
                f1=1.0, label=f"case{case}", model_fingerprint="fp", prompt_hash="ph",
            )
        )  # fmt: skip
    return root


def test_a_baseline_written_twice_from_the_same_outcomes_is_the_same_file(tmp_path, capsys):
    """A committed baseline diffs only where outcomes changed, whatever order the records were written in."""
    first, second, changed = tmp_path / "out" / "new" / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    assert (
        bcas_main(["gate", "write", str(_run_records(tmp_path, list(range(8)))), str(first)]) == 0
    )  # a new nested folder
    assert capsys.readouterr().out == (
        f"wrote {first}: 2 cases, 4 items each; `bcas gate power` prints the drop each case size can detect\n"
    )
    assert bcas_main(["gate", "write", str(_run_records(tmp_path, list(reversed(range(8))))), str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    assert bcas_main(["gate", "write", str(_run_records(tmp_path, list(range(8)), flip="1:2")), str(changed)]) == 0
    before, after = first.read_text().splitlines(), changed.read_text().splitlines()
    assert len(before) == len(after) > 10  # one field per line
    differing = [i for i, (x, y) in enumerate(zip(before, after, strict=True)) if x != y]
    # the flipped case's accuracy and its item's outcomes, nothing of the other case
    start = before.index('  "m|toy|cfg1|dh": {')
    assert differing and len(differing) <= 4 and all(i > start for i in differing)


def test_gate_write_from_a_missing_run_is_one_error_line(tmp_path, capsys):
    assert bcas_main(["gate", "write", str(tmp_path / "nope"), str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(tmp_path / "nope") in err and err.count("\n") == 1
    assert not (tmp_path / "b.json").exists()


def test_a_failure_message_names_the_tolerance_only_when_there_is_one():
    plain = _result("a", 0.001)
    assert plain.message().endswith("significantly worse")
    assert "threshold 0.025 " in plain.message() and "threshold 0.01 " in plain.message(threshold=0.01)
    tolerant = GateResult(**{**plain.__dict__, "max_drop": 0.05})
    assert tolerant.message().endswith("significantly worse by more than 5 points")


def test_the_power_table_header_names_one_case_in_the_singular():
    out = _power(["--cases", "1,2", "--n", "5"])
    assert "| 1 gated case | 2 gated cases |" in out


def test_a_case_that_cannot_fail_says_why_in_numbers():
    from bcas.gating.plan import _cannot_fail_text

    plan = CasePlan(case_id="smoke[s1]", grid="smoke", metric="correct_em", key="k", n_paired=5, family="session",
                    family_size=7, threshold=0.05 / 7)  # fmt: skip
    assert _cannot_fail_text(plan) == (
        "smoke[s1]: 5 paired items; its Holm threshold is 0.007143 (7 gated cases in family session) "
        "and even 5 of 5 items lost cannot reach it"
    )


def test_a_saved_plan_is_the_plan_loaded_and_leaves_no_temporary_file(tmp_path):
    from bcas.gating.plan import GatePlan, load_plan, plan_path

    plan = GatePlan("base.json", GateOptions(alpha=0.01), {"c": _plan(40, 0.01)}, {"c": {"q1": True}})
    run_dir = tmp_path / "reports" / "run"
    path = plan.save(run_dir, "tok", worker="gw1")
    assert path == plan_path(run_dir, "tok") and path.exists()
    again = plan.save(run_dir, "tok")  # saved again (the controller after a worker): replaced, not refused
    assert again == path and sorted(p.name for p in run_dir.iterdir()) == [path.name]
    loaded = load_plan(run_dir, "tok")
    assert loaded is not None and loaded.to_dict() == plan.to_dict() and loaded.cases["c"].n_paired == 40


def test_gate_write_names_each_case_size_it_wrote(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert (
        bcas_main(["gate", "write", str(_run_records(tmp_path, list(range(7)))), str(out)]) == 0
    )  # 4 items and 3 items
    assert f"wrote {out}: 2 cases, 3/4 items each;" in capsys.readouterr().out


def test_the_terminal_summary_lines_up_each_cases_numbers_under_its_column():
    """What a CI log shows of the gate: the settings, a header, one aligned line per case
    (blanks where nothing was computed, '-' for no detectable drop), the first ten cases
    not gated and a count of the rest, the legend and the overall verdict."""
    from bcas.gating.report import GateReport, GateRow

    fail = GateRow(case_id="smoke/" + "x" * 50, grid="smoke", family="session", family_size=2, n_paired=200,
                   baseline_acc=0.5, current_acc=0.43, worse_only=21, better_only=7, p_value=0.01234,
                   holm_threshold=0.025, p_holm=0.02468, min_drop=0.025, verdict="FAIL")  # fmt: skip
    blank = GateRow(case_id="smoke/b", grid="smoke", family="session", family_size=2, n_paired=3,
                    baseline_acc=None, current_acc=None, worse_only=None, better_only=None, p_value=None,
                    holm_threshold=None, p_holm=None, min_drop=None, verdict="pass (cannot fail)")  # fmt: skip
    not_gated = [(f"c{i}", "no baseline") for i in range(12)]
    report = GateReport(baseline="base.json", alpha=0.05, family="session", test="mcnemar-exact",
                        metrics=["correct_em", "judge_verdict"], rows=[fail, blank], not_gated=not_gated)  # fmt: skip
    lines = report.lines()
    assert lines[0] == (
        "baseline base.json; mcnemar-exact on correct_em, judge_verdict; alpha 0.05, Holm over each session family"
    )
    header = "case" + " " * 40 + "    n  base%   cur% b-only c-only         p  Holm thr   Holm p min drop  verdict"
    assert lines[1] == header
    assert lines[2] == (
        "smoke/" + "x" * 37 + " " + "  200   50.0   43.0     21      7    0.0123     0.025   0.0247      2.5  FAIL"
    )
    assert lines[3] == "smoke/b" + " " * 37 + "    3" + " " * 65 + "-  pass (cannot fail)"  # 7 blank columns
    assert {len(line) - len(line.split("  ")[-1]) for line in lines[1:4]} == {len(header) - len("verdict")}
    assert lines[4:14] == [f"not gated: c{i}: no baseline" for i in range(10)]
    assert lines[14] == "not gated: ... and 2 more"
    assert lines[15] == (
        "b-only: items only the baseline got right; c-only: only the current run; Holm thr: alpha over "
        "the cases left at the case's rank (the step-down stops at the first p above its threshold, so "
        "FAIL <=> Holm p <= alpha); min drop: the smallest accuracy drop (points) the case could call "
        "significant, '-' when none"
    )
    assert lines[16] == "overall: FAIL: 1 of 2 gated cases significantly worse than the baseline"


def test_ten_cases_not_gated_are_all_named_with_no_count_after_them():
    from bcas.gating.report import GateReport

    report = GateReport(baseline="b", alpha=0.05, family="session", test="t", metrics=["correct_em"], rows=[],
                        not_gated=[(f"c{i}", "why") for i in range(10)])  # fmt: skip
    named = [line for line in report.lines() if line.startswith("not gated")]
    assert named == [f"not gated: c{i}: why" for i in range(10)]
    eleven = replace(report, not_gated=[(f"c{i}", "why") for i in range(11)])
    named = [line for line in eleven.lines() if line.startswith("not gated")]
    assert named == [*(f"not gated: c{i}: why" for i in range(10)), "not gated: ... and 1 more"]


def test_the_refusal_names_the_first_case_whose_identity_differs_and_counts_the_rest():
    """A user told why the gate refused must learn which case and what differs, without the
    internal 'refused: ' prefix, and how many more cases there are."""
    from bcas.gating.plan import GatePlan

    def case(cid, refused, reason="refused: the prompt differs"):
        return CasePlan(case_id=cid, grid="smoke", metric="correct_em", key=cid, reason=reason if refused else "",
                        refused=refused)  # fmt: skip

    plan = GatePlan(baseline="b", options=GateOptions(), cases={"a": case("a", False), "b": case("b", True)})
    assert plan.refusal() == "the gate refuses to compare answers of different identity: b: the prompt differs"
    three = GatePlan(baseline="b", options=GateOptions(),
                     cases={k: case(k, True, f"refused: {k} differs") for k in ("x", "y", "z")})  # fmt: skip
    assert three.refusal() == (
        "the gate refuses to compare answers of different identity: x: x differs (and 2 more cases)"
    )
    assert GatePlan(baseline="b", options=GateOptions(), cases={"a": case("a", False)}).refusal() is None
    two = GatePlan(baseline="b", options=GateOptions(), cases={k: case(k, True, f"refused: {k} differs") for k in "xy"})
    assert two.refusal() == "the gate refuses to compare answers of different identity: x: x differs (and 1 more cases)"


def test_a_finished_case_is_tested_under_its_planned_metric_family_and_grid():
    """The result written for the session's Holm step must carry the case's own key, grid,
    family and metric: a judge-graded grid tested on SQuAD EM, or a case filed under another
    family, changes which cases fail."""
    from bcas.gating.plan import GatePlan, case_result

    cp = CasePlan(case_id="bcas/c1", grid="bcas", metric="judge_verdict", key="k1", n_paired=4, family="bcas",
                  family_size=3, threshold=0.05 / 3, baseline_model="other-model")  # fmt: skip
    plan = GatePlan(baseline="b.json", options=GateOptions(alpha=0.05), cases={"bcas/c1": cp},
                    items={"bcas/c1": {"q1": True, "q2": True, "q3": True, "q4": False}})  # fmt: skip
    # EM says every answer is right; the judge says q1 and q2 are wrong
    records = [{"item_id": f"q{i}", "prediction": "x", "correct_em": True, "judge_verdict": i > 2} for i in range(1, 5)]
    result = case_result(plan, "bcas/c1", records)
    assert result is not None
    assert (result.key, result.grid, result.family, result.family_size, result.metric) == (
        "k1", "bcas", "bcas", 3, "judge_verdict")  # fmt: skip
    assert (result.worse_only, result.better_only, result.baseline) == (2, 1, "other-model")
    ungated = GatePlan(baseline="b.json", options=GateOptions(), cases={"x": CasePlan("x", "g", "correct_em", "k",
                       reason="no baseline")})  # fmt: skip
    assert case_result(ungated, "x", records) is None


def test_a_paired_result_counts_every_cell_of_the_paired_table():
    """All four cells non-empty: both right 3, only the current run 2, only the baseline 4,
    both wrong 1.  A slip in any count changes both accuracies, the discordant pair the
    test sees, and so the verdict."""
    from bcas.gating.baseline import paired_result

    base = {f"q{i}": ok for i, ok in enumerate([1, 1, 1, 0, 0, 1, 1, 1, 1, 0])}
    now = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    records = [{"item_id": f"q{i}", "prediction": "x", "correct_em": bool(ok)} for i, ok in enumerate(now)]
    records.append({"item_id": "q99", "prediction": "x", "correct_em": True})  # not in the baseline: not paired
    r = paired_result("smoke/c", "k", records, {k: bool(v) for k, v in base.items()}, 3)
    assert r is not None
    assert (r.n_paired, r.current_acc, r.baseline_acc, r.worse_only, r.better_only) == (10, 0.5, 0.7, 4, 2)
    # the defaults: alpha 0.05 in one family named "session", no grid, the same model; a family
    # of three cases, so the first-step threshold is alpha / 3 (alpha * 3 or alpha alone is wrong)
    assert (r.alpha, r.threshold, r.family, r.family_size, r.grid, r.baseline) == (
        0.05, pytest.approx(0.05 / 3), "session", 3, "", "")  # fmt: skip
    # one-sided towards a loss: P(at least 4 of the 6 discordant items go to the baseline) = 22/64
    assert r.test == "one-sided exact McNemar" and r.p_value == pytest.approx(22 / 64) and r.failed_now is False
    with_drop = paired_result("smoke/c", "k", records, {k: bool(v) for k, v in base.items()}, 1, max_drop=0.1)
    assert with_drop.max_drop == 0.1 and with_drop.min_drop != r.min_drop  # the tolerance moves the detectable drop
    one = paired_result("c", "k", records[:1], {"q0": True}, 1)
    assert one is not None and one.n_paired == 1 and one.current_acc == 1.0
    assert paired_result("c", "k", records, {"other": True}, 1) is None  # nothing shared: nothing to test


def _gated(cid: str, n: int, *, can_fail: bool, drop: float | None = None, model: str = "") -> CasePlan:
    return CasePlan(case_id=cid, grid="smoke", metric="correct_em", key=cid, n_paired=n, family="session",
                    family_size=7, threshold=0.05 / 7, min_discordant=3 if can_fail else None, min_drop=drop,
                    baseline_model=model)  # fmt: skip


def test_the_strict_gate_names_the_cases_that_cannot_fail_and_what_would_let_them():
    """--bcas-gate-strict stops the session with this: the first five cases that cannot fail,
    '...' when there are more, the item count that would let the first one fail, and the
    three ways out."""
    from bcas.gating.plan import GatePlan

    stuck = {f"s{i}": _gated(f"s{i}", 2, can_fail=False) for i in range(6)}
    stuck["s0"] = replace(stuck["s0"], family_size=30, threshold=0.05 / 30)
    plan = GatePlan(baseline="b.json", options=GateOptions(), cases=stuck)
    message = plan.usage_problem()
    each = "{}: 2 paired items; its Holm threshold is {} ({} gated cases in family session) and even 2 of 2 items lost cannot reach it"  # noqa: E501
    needed = _items_needed(stuck["s0"], GateOptions())  # the first case's, at its lower threshold
    assert needed > _items_needed(stuck["s1"], GateOptions())
    assert message == (
        "regression gate: 6 of 6 gated cases cannot fail at alpha 0.05: "
        + "; ".join(each.format(f"s{i}", *(("0.001667", 30) if i == 0 else ("0.007143", 7))) for i in range(5))
        + f"; .... Give each case more items (--bcas-limit, e.g. {needed}), fewer gated cases per Holm family "
        "(--bcas-gate-family), or a larger --bcas-alpha"
    )
    five = GatePlan(baseline="b.json", options=GateOptions(), cases=dict(list(stuck.items())[1:]))
    assert "; ..." not in five.usage_problem() and five.usage_problem().count("cannot reach it") == 5
    fine = GatePlan(baseline="b.json", options=GateOptions(), cases={"ok": _gated("ok", 50, can_fail=True, drop=0.1)})
    assert fine.usage_problem() is None
    none = GatePlan(baseline="b.json", options=GateOptions(), cases={"x": CasePlan("x", "g", "m", "", reason="r")})
    assert none.usage_problem() == (
        "regression gate: the baseline b.json matches none of the 1 collected cases (same model, dataset, "
        "configuration and item subset), so it gates nothing"
    )


def test_the_gate_says_before_the_cases_run_what_it_can_catch():
    from bcas.gating.plan import GatePlan

    cases = {
        "a": _gated("a", 50, can_fail=True, drop=0.12),
        "b": _gated("b", 80, can_fail=True, drop=0.08, model="qwen (fp abc)"),
        "c": _gated("c", 2, can_fail=False),
        **{f"n{i}": CasePlan(f"n{i}", "smoke", "correct_em", "", reason="no baseline") for i in range(6)},
    }
    lines = GatePlan(baseline="b.json", options=GateOptions(), cases=cases).lines()
    assert lines[0] == (
        "regression gate: baseline b.json; one-sided exact McNemar on the grid's primary metric, alpha 0.05, "
        "Holm over each session family; 3 of 9 collected cases gated"
    )
    assert lines[1:7] == [f"  not gated: n{i}: no baseline" for i in range(5)] + ["  not gated: ... and 1 more"]
    assert lines[7] == "  b: compared with the baseline's model qwen (fp abc)"
    assert lines[8].startswith("  CANNOT FAIL: c: 2 paired items;")
    assert lines[9:] == ["  2 gated cases can fail; the smallest drop each can detect: 8.0-12.0 points"]
    five = {k: v for k, v in cases.items() if k != "n5"}
    assert "  not gated: ... and 0 more" not in GatePlan(baseline="b.json", options=GateOptions(), cases=five).lines()
    stuck = GatePlan(baseline="b.json", options=GateOptions(), cases={"c": _gated("c", 2, can_fail=False)}).lines()
    assert stuck[-1] == "  THE GATE CANNOT FAIL: no gated case can reach significance, whatever the model does"


def test_a_baseline_records_file_is_read_past_blank_lines_and_a_torn_last_line_only(tmp_path):
    """A records file of an interrupted run ends in a torn line: that line is not a record, and
    every line before it is read (a blank line does not end the file); a bad line in the middle
    is the file's damage, named by its line number."""
    from bcas.gating.baseline import BaselineError, _read_records

    good = tmp_path / "records.jsonl"
    good.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3, "torn')
    assert _read_records(good) == [{"a": 1}, {"a": 2}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n\n{"a": oops}\n{"a": 3}\n')
    with pytest.raises(BaselineError) as damaged:
        _read_records(bad)
    assert str(damaged.value) == f"{bad}:3: invalid JSON (Expecting value)"


def test_the_gate_tests_each_grid_on_its_own_metric_and_files_cases_by_the_chosen_family():
    """A BCAS grid graded by a judge is gated on the judge's verdict when a judge runs and on
    SQuAD EM otherwise; a grid that declares a metric keeps it; an unknown grid uses SQuAD EM.
    The Holm family is the grid, the case or the session, as asked."""
    from types import SimpleNamespace

    from bcas.gating.baseline import BaselineError, check_baseline
    from bcas.gating.plan import family_of, primary_metric
    from bcas.grids import GRIDS

    judged = next(name for name, g in GRIDS.items() if g.primary_metric == "judge")
    declared = next((name, g.primary_metric) for name, g in GRIDS.items() if g.primary_metric not in ("judge", None))
    assert primary_metric(judged, judge=True) == "judge_verdict" and primary_metric(judged) == "correct_em"
    assert primary_metric(declared[0]) == declared[1]
    assert primary_metric("no-such-grid", judge=True) == "correct_em"
    case = SimpleNamespace(grid="smoke", id="smoke/bm25")
    assert family_of(GateOptions(family="grid"), case) == "grid smoke"
    assert family_of(GateOptions(family="case"), case) == "case smoke/bm25"
    assert family_of(GateOptions(), case) == "session"
    check_baseline(None)  # no baseline: nothing to check
    with pytest.raises(BaselineError, match="accepted: a run folder"):
        check_baseline("/no/such/baseline.json")


def test_a_baseline_run_with_non_ascii_answers_reads_under_an_ascii_locale(tmp_path, monkeypatch):
    """A baseline written on one machine gates runs on another: a C-locale CI runner must read
    its records (UTF-8) as written.  ``io.text_encoding`` stands for the locale's default here."""
    import json

    from bcas.gating.baseline import _read_records

    rec = {"item_id": "q1", "prediction": "Zürich", "answers": ["Zürich"]}
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf-8")
    ascii_locale(monkeypatch)
    assert _read_records(path) == [rec]


def test_a_hand_edited_baseline_with_non_ascii_names_reads_under_an_ascii_locale(tmp_path, monkeypatch):
    """A committed baseline file is JSON in UTF-8 whoever edited it: a C-locale CI runner reads a
    model label outside ASCII as written."""
    import json

    from bcas.gating.baseline import build_baseline, load_baseline_cases

    rec = {"model": "Zürich-7B", "dataset": "ds", "config_id": "c", "dataset_hash": "h", "item_id": "q1",
           "correct_em": True}  # fmt: skip
    path = tmp_path / "base.json"
    path.write_text(json.dumps(build_baseline([rec]), ensure_ascii=False), encoding="utf-8")
    ascii_locale(monkeypatch)
    assert [c.model for c in load_baseline_cases(path)] == ["Zürich-7B"]


def test_two_workers_saving_the_plan_at_once_each_complete_their_write(tmp_path, monkeypatch):
    """xdist workers write the session's plan to the same file: each writes its own temporary file
    and renames it, so a worker whose write lands between another's write and rename does not
    take that file away from it."""
    from bcas.gating.plan import GatePlan

    plan = GatePlan(baseline="b", options=GateOptions(), cases={})
    real_replace = Path.replace
    interleaved = []

    def replace_after_the_other_worker(self, target):
        if not interleaved:
            interleaved.append(self.name)
            plan.save(tmp_path, "tok", worker="gw1")  # the other worker's whole save, mid-way through ours
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", replace_after_the_other_worker)
    saved = plan.save(tmp_path, "tok", worker="gw0")
    assert saved.is_file() and not list(tmp_path.glob("*.tmp"))


def _bcase(key: str, dataset_hash: str, items: dict, digests: dict, model: str = "m") -> BaselineCase:
    return BaselineCase(key=key, model=model, fingerprint="", dataset="ds", config_id="cfg", dataset_hash=dataset_hash,
                        label="l", items=items, digests=digests)  # fmt: skip


def test_the_baseline_case_of_the_same_item_subset_is_chosen_and_paired_by_id():
    """The same subset (equal dataset hash) pairs every shared item by id, wherever it is listed;
    across subsets only items whose content digest agrees pair, and the case pairing most wins
    (the first of a tie): a wrong choice compares the run with other items' outcomes."""
    from bcas.gating.baseline import match_baseline

    digests = {"q1": "d1", "q2": "d2", "q3": "d3"}
    other = _bcase("other", "h-other", {"q1": True, "q2": True}, {"q1": "d1", "q2": "changed"})
    more = _bcase("more", "h-more", {"q1": False, "q2": False, "q3": True}, {"q1": "d1", "q2": "d2", "q3": "x"})
    tie = _bcase("tie", "h-tie", {"q1": True, "q2": True}, {"q1": "d1", "q2": "d2"})
    exact = _bcase("exact", "h", {"q1": True, "q3": False}, {})
    found, paired, note = match_baseline([other, more, tie, exact], "m", "ds", "cfg", "h", digests)
    assert (found.key, paired, note) == ("exact", {"q1": True, "q3": False}, "")
    found, paired, _ = match_baseline([other, more, tie], "m", "ds", "cfg", "h", digests)
    assert (found.key, paired) == ("more", {"q1": False, "q2": False})
    found, _, _ = match_baseline([other, tie, more], "m", "ds", "cfg", "h", digests)
    assert found.key == "tie"  # two paired items each: the first listed stays
    assert match_baseline([exact], "m", "ds", "cfg", "h", {"q9": "d9"})[0] is None  # the subset, none of its items
    assert match_baseline([other], "m", "ds", "cfg", "h", {"q2": "d2"}) == (
        None,
        {},
        "no item of this case's subset is in the baseline with the same content "
        "(a baseline written before item digests pairs only the same item subset)",
    )
    assert match_baseline([other], "m", "ds", "other-cfg", "h", digests) == (
        None,
        {},
        "the baseline has no case of this dataset and configuration",
    )


def test_an_items_content_digest_is_the_documented_recipe_for_every_version():
    """Baselines store these digests: another recipe (escaping, length, the answers left out)
    would make every stored baseline unpairable across item subsets."""
    import hashlib
    import json

    from bcas.gating.baseline import case_key, item_digest

    def recipe(question, answers):
        text = json.dumps([str(question), [str(a) for a in answers or ()]], ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    assert item_digest("Où est Zürich?", ["Zürich", 8]) == recipe("Où est Zürich?", ["Zürich", 8])
    assert item_digest("q", None) == recipe("q", []) != item_digest("q", ["a"])
    assert len(item_digest("q", ["a"])) == 16
    assert case_key({"model": "m", "dataset": "ds"}) == "m|ds||"  # an old baseline's missing fields are empty


def test_a_baseline_file_holds_every_field_the_gate_and_readers_use():
    """``bcas gate write``'s file is read by later sessions and other versions: each case keeps its
    identity (model, fingerprint, prompt, dataset, label, configuration, subset), its items in
    every boolean metric the records had, their digests, its size and accuracy."""
    from bcas.gating.baseline import BASELINE_VERSION, build_baseline, case_key, item_digest

    base = {"model": "m", "model_fingerprint": "fp", "prompt_hash": "ph", "dataset": "ds", "label": "lab",
            "config_id": "cfg", "dataset_hash": "h"}  # fmt: skip
    recs = [
        {**base, "item_id": "q1", "question": "Q1?", "answers": ["a"], "correct_em": True, "custom_pass": False},
        {**base, "item_id": "q2", "question": "Q2?", "answers": ["b"], "correct_em": False, "custom_pass": True},
    ]
    data = build_baseline(recs)
    assert data["version"] == BASELINE_VERSION
    (key,) = data["cases"]
    assert key == case_key(recs[0])
    case = data["cases"][key]
    assert {k: case[k] for k in base} == base
    assert case["items"] == {"q1": True, "q2": False} and case["n"] == 2 and case["accuracy"] == 0.5
    assert case["metrics"]["custom_pass"] == {"q1": False, "q2": True}  # a boolean field the records add
    assert case["metrics"]["correct_em"] == case["items"]
    assert case["digests"] == {"q1": item_digest("Q1?", ["a"]), "q2": item_digest("Q2?", ["b"])}
    assert build_baseline([])["cases"] == {}


def test_a_baseline_holds_the_derived_metrics_and_a_case_without_em_outcomes_is_empty():
    """A gate on a metric derived from the records (answers attempted, gold evidence found) needs
    the baseline to hold it though no record field has its name; a case whose records carry no
    EM outcome (a judge's verdicts only) is written with no items and accuracy 0, not a crash."""
    from bcas.gating.baseline import build_baseline

    key = {"model": "m", "dataset": "ds", "config_id": "cfg", "dataset_hash": "h"}
    recs = [{**key, "item_id": "q1", "prediction": "a", "answers": ["a"], "correct_em": True,
             "extra": {"evidence_recall": 0.5}}]  # fmt: skip
    metrics = build_baseline(recs)["cases"]["m|ds|cfg|h"]["metrics"]
    assert (metrics["attempted"], metrics["gold_found"], metrics["evidence_complete"]) == (
        {"q1": True}, {"q1": True}, {"q1": False})  # fmt: skip
    (verdicts_only,) = build_baseline([{**key, "item_id": "q1", "judge_verdict": True}])["cases"].values()
    assert (verdicts_only["n"], verdicts_only["accuracy"], verdicts_only["items"]) == (0, 0.0, {})
    assert verdicts_only["metrics"]["judge_verdict"] == {"q1": True}


def test_a_written_baseline_loads_back_as_the_cases_it_was_written_from(tmp_path):
    """Write then read: each case comes back with its identity and items; a field an older file
    lacks reads as empty; a case that never recorded the metric is left out, the others kept."""
    import json

    from bcas.gating.baseline import build_baseline, load_baseline_cases

    full = {"model": "m", "model_fingerprint": "fp", "prompt_hash": "ph", "dataset": "ds", "label": "lab",
            "config_id": "cfg", "dataset_hash": "h"}  # fmt: skip
    recs = [{**full, "item_id": "q1", "question": "Q?", "answers": ["a"], "correct_em": True}]
    data = build_baseline(recs)
    data["cases"] = {"no-metric": {"items": {}, "metrics": {}}, **data["cases"],
                     "old": {"items": {"q1": False}, "metrics": {"correct_em": {"q1": False}, "judge_verdict": {"q1": True}}}}  # fmt: skip
    path = tmp_path / "base.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    judged = load_baseline_cases(path, "judge_verdict")  # only the last case recorded verdicts
    assert [(c.key, c.items) for c in judged] == [("old", {"q1": True})]
    loaded = {c.key: c for c in load_baseline_cases(path)}
    new = loaded[next(k for k in data["cases"] if k not in ("no-metric", "old"))]
    assert (new.model, new.fingerprint, new.prompt_hash, new.dataset, new.label, new.config_id, new.dataset_hash) == (
        "m", "fp", "ph", "ds", "lab", "cfg", "h")  # fmt: skip
    assert new.items == {"q1": True} and new.digests == data["cases"][new.key]["digests"]
    old = loaded["old"]
    assert (old.model, old.fingerprint, old.prompt_hash, old.dataset, old.label, old.config_id, old.dataset_hash) == (
        "", "", "", "", "", "", "")  # fmt: skip
    assert old.items == {"q1": False}


def test_an_item_of_several_epochs_passes_when_at_least_half_pass():
    from bcas.gating.baseline import item_outcomes

    recs = [{"item_id": "a", "correct_em": v} for v in (True, False, False)]
    recs += [{"item_id": "b", "correct_em": v} for v in (True, False)]
    assert item_outcomes(recs) == {"a": False, "b": True}


def test_a_broken_baseline_file_names_the_file_case_and_field(tmp_path):
    import json

    from bcas.gating.baseline import BaselineError, load_baseline_cases

    path = tmp_path / "base.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(BaselineError) as bad:
        load_baseline_cases(path)
    assert str(bad.value).startswith(f"{path}: invalid JSON (")
    path.write_text(json.dumps({"cases": {"k": {"items": [1]}}}), encoding="utf-8")
    with pytest.raises(BaselineError) as items:
        load_baseline_cases(path)
    assert str(items.value) == f"{path}: case 'k': field 'items' must be an object of item id -> true/false"
    path.write_text(json.dumps({"cases": {"k": {"items": {}, "metrics": {"judge_verdict": 3}}}}), encoding="utf-8")
    with pytest.raises(BaselineError) as metric:
        load_baseline_cases(path, "judge_verdict")
    assert str(metric.value) == f"{path}: case 'k': metric 'judge_verdict' must be an object of item id -> true/false"


def test_one_paired_item_can_fail_a_gate_at_one_half():
    from bcas.gating.baseline import min_detectable

    assert min_detectable(1, 0.5) == (1, 1.0)
    assert min_detectable(0, 0.5) == (None, None)
