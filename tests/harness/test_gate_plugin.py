"""The regression gate through the pytest plugin, as a user meets it (pytester).

The model is a test double (bcas/testing/instant.py answers what ``BCAS_INSTANT_ANSWER``
says), so a run is right or wrong on purpose; retrieval is the real BM25 index. These
tests check the gate's control flow and what it tells the user, never a capability.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bcas.cli import main as bcas_main
from bcas.testing.project import backends, budget_grid, codename_items, grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

INSTANT_BACKEND = backends({"instant": "bcas.testing.instant:create"})

INSTANT = ["--bcas-backend", "instant", "--bcas-no-cache", "-p", "no:cacheprovider"]
# The scenario: the smoke grid's three HotpotQA cases, 5 items each.
SMOKE_HOTPOTQA = [*INSTANT, "--bcas-grid", "smoke", "-m", "hotpotqa"]
TINY = [*INSTANT, "--bcas-grid", "gate_tiny", "--bcas-limit", "40"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")  # the BM25 indexes, shared by the module's runs


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    conftest = INSTANT_BACKEND + budget_grid("gate_tiny", [pytester.path / "tiny.jsonl"])
    grid_project(pytester.path, conftest, datasets={"tiny.jsonl": codename_items(40)})
    return pytester


def _claim_all_correct(baseline: Path) -> None:
    """The user's edit: the baseline claims every item correct."""
    data = json.loads(baseline.read_text())
    for case in data["cases"].values():
        case["items"] = {k: True for k in case["items"]}
        case["metrics"]["correct_em"] = dict(case["items"])
    baseline.write_text(json.dumps(data))


def test_a_gate_that_cannot_fail_says_so_and_strict_stops_the_session(project: pytest.Pytester) -> None:
    base_dir = project.path / "base"
    five = ("--bcas-limit", "5")  # 5 paired items: the most that still cannot reach 0.05/3
    project.runpytest(*SMOKE_HOTPOTQA, *five, "--bcas-report", str(base_dir)).assert_outcomes(passed=3)
    baseline = project.path / "base.json"
    assert bcas_main(["gate", "write", str(base_dir), str(baseline)]) == 0
    _claim_all_correct(baseline)

    run_dir = project.path / "run"
    result = project.runpytest(*SMOKE_HOTPOTQA, *five, "--bcas-report", str(run_dir), "--bcas-baseline", str(baseline))
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    # Before the cases run: each case's Holm threshold is 0.05/3 and 5 items cannot reach it.
    assert out.count("CANNOT FAIL: instant-hotpotqa-") == 3
    assert "its Holm threshold is 0.01667" in out and "THE GATE CANNOT FAIL" in out
    assert out.index("THE GATE CANNOT FAIL") < out.index("5/5 items")
    # After: the regression gate section with the numbers and an overall verdict that says so.
    assert re.search(r"=+ regression gate =+", out)
    assert "overall: CANNOT FAIL: none of the 3 gated cases" in out
    current = {}
    for rec in read_records(run_dir):
        current.setdefault(rec["extra"]["case_id"], []).append(rec["correct_em"])
    report = json.loads((run_dir / "gate-report.json").read_text())
    assert report["overall"].startswith("CANNOT FAIL") and not report["failed"]
    assert len(report["rows"]) == 3
    for row in report["rows"]:
        assert row["n_paired"] == 5 and row["baseline_acc"] == 1.0
        assert row["worse_only"] == 5 - sum(current[row["case_id"]]) and row["better_only"] == 0
        assert row["min_drop"] is None and row["verdict"] == "pass (cannot fail)"
        assert row["p_value"] >= 2**-5 > 0.05 / 3
    html = (run_dir / "index.html").read_text()
    assert 'id="regression-gate"' in html and "CANNOT FAIL: none of the 3 gated cases" in html

    strict_dir = project.path / "strict"
    strict = project.runpytest(
        *SMOKE_HOTPOTQA, *five, "--bcas-report", str(strict_dir), "--bcas-baseline", str(baseline), "--bcas-gate-strict"
    )
    assert strict.ret == pytest.ExitCode.USAGE_ERROR
    err = strict.stderr.str()
    assert "3 of 3 gated cases cannot fail at alpha 0.05" in err and "--bcas-gate-strict" in err
    assert "--bcas-limit, e.g. 6" in err
    assert not (strict_dir / "records.jsonl").exists()  # nothing ran

    # Each case its own Holm family: alone at 0.05, losing 5 of 5 (p = 0.031) is a regression.
    per_case = project.runpytest(
        *SMOKE_HOTPOTQA,
        *five,
        "--bcas-report",
        str(project.path / "per_case"),
        "--bcas-baseline",
        str(baseline),
        "--bcas-gate-family",
        "case",
    )
    outcomes = per_case.parseoutcomes()
    lost_all = sum(1 for v in current.values() if not any(v))
    assert outcomes.get("failed", 0) == lost_all > 0
    assert "p = 0.03125 <= Holm first-step threshold 0.05" in per_case.stdout.str()


def test_a_regression_fails_with_its_numbers_in_message_summary_report_and_junit(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_dir = project.path / "gold"
    project.runpytest(*TINY, "--bcas-report", str(base_dir)).assert_outcomes(passed=2)
    assert all(r["correct_em"] for r in read_records(base_dir))

    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")  # every answer wrong now
    run_dir = project.path / "worse"
    junit = project.path / "junit.xml"
    result = project.runpytest(
        *TINY, "--bcas-report", str(run_dir), "--bcas-baseline", str(base_dir), f"--junitxml={junit}"
    )
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "2 gated cases can fail; the smallest drop each can detect: 15.0-15.0 points" in out
    for piece in (
        "correct_em accuracy 0.000 vs baseline 1.000 on 40 shared items",
        "baseline-only correct 40",
        "current-only correct 0",
        "one-sided exact McNemar p = 9.095e-13",
        "threshold 0.025",
        "2 gated cases in family session",
    ):
        assert piece in out, piece
    assert "overall: FAIL: 2 of 2 gated cases significantly worse" in out

    report = json.loads((run_dir / "gate-report.json").read_text())
    assert report["failed"] and [r["verdict"] for r in report["rows"]] == ["FAIL", "FAIL"]
    html = (run_dir / "index.html").read_text()
    assert "FAIL: 2 of 2 gated cases" in html and '<tr class="sig">' in html

    cases = ET.parse(junit).getroot().iter("testcase")
    props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
    assert len(props) == 2
    for p in props:
        assert p["bcas_gate"] == "FAIL" and p["bcas_gate_n_paired"] == "40"
        assert p["bcas_gate_baseline_acc"] == "1.0000" and p["bcas_gate_current_acc"] == "0.0000"
        assert p["bcas_gate_baseline_only"] == "40" and p["bcas_gate_current_only"] == "0"
        assert float(p["bcas_gate_p"]) == pytest.approx(2**-40) and p["bcas_gate_holm_threshold"] == "0.025"

    # A tolerance: a 100-point drop is significantly larger than 50 points.
    tolerant = project.runpytest(
        *TINY,
        "--bcas-report",
        str(project.path / "tolerant"),
        "--bcas-baseline",
        str(base_dir),
        "--bcas-max-drop",
        "50",
    )
    tolerant.assert_outcomes(failed=2)
    assert "Tango score test, drop > 50 pts p = " in tolerant.stdout.str()
    assert "significantly worse by more than 50 points" in tolerant.stdout.str()


def test_mock_gold_baseline_against_mock_random_run_fails_with_the_numbers(project: pytest.Pytester) -> None:
    mock = ["--bcas-grid", "gate_tiny", "--bcas-limit", "40", "-p", "no:cacheprovider"]
    gold_dir = project.path / "gold"
    project.runpytest("--bcas-model", "mock:gold", *mock, "--bcas-report", str(gold_dir)).assert_outcomes(passed=2)
    # A baseline written for one model refuses to gate another ...
    refused = project.runpytest(
        "--bcas-model",
        "mock:random",
        *mock,
        "--bcas-report",
        str(project.path / "no"),
        "--bcas-baseline",
        str(gold_dir),
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    err = refused.stderr.str()
    assert "refuses to compare answers of different identity" in err
    assert "model fingerprint mock:gold (mock-gold, baseline) vs mock:random (this run)" in err
    assert not (project.path / "no" / "records.jsonl").exists()
    # ... unless told to, and then the override is written into the report.
    run_dir = project.path / "random"
    result = project.runpytest(
        "--bcas-model",
        "mock:random",
        *mock,
        "--bcas-report",
        str(run_dir),
        "--bcas-baseline",
        str(gold_dir),
        "--bcas-allow-mismatch",
    )
    out = result.stdout.str()
    assert "compared with the baseline's model mock-gold (mock:gold)" in out
    assert "compared despite --bcas-allow-mismatch: model fingerprint mock:gold" in out
    assert "compared despite --bcas-allow-mismatch" in (run_dir / "index.html").read_text()
    correct: dict[str, int] = {}
    for rec in read_records(run_dir):
        correct[rec["extra"]["case_id"]] = correct.get(rec["extra"]["case_id"], 0) + bool(rec["correct_em"])
    assert len(correct) == 2
    for case_id, k in correct.items():
        lost = 40 - k
        assert lost >= 6  # a random span is rarely the answer; 6 lost items reach 0.05/2
        assert (
            f"{case_id}: correct_em accuracy {k / 40:.3f} vs baseline 1.000 (mock-gold (mock:gold) [compared "
            f"despite --bcas-allow-mismatch: model fingerprint mock:gold (mock-gold, baseline) vs mock:random "
            f"(this run)]) on 40 shared "
            f"items; baseline-only correct {lost}, current-only correct 0; one-sided exact McNemar "
            f"p = {2.0**-lost:.4g} <= Holm first-step threshold 0.025"
        ) in out
    result.assert_outcomes(failed=2)


def test_gate_new_model_gates_another_model_and_fails_without_a_traceback(project: pytest.Pytester) -> None:
    """--bcas-gate-new-model: the baseline's model against a new one, no --bcas-allow-mismatch; a prompt
    difference is still refused; a failing case is its one message line, not pytest's traceback."""
    mock = ["--bcas-grid", "gate_tiny", "--bcas-limit", "40", "-p", "no:cacheprovider"]
    gold_dir = project.path / "gold"
    project.runpytest("--bcas-model", "mock:gold", *mock, "--bcas-report", str(gold_dir)).assert_outcomes(passed=2)
    refused = project.runpytest(
        "--bcas-model", "mock:random", *mock, "--bcas-report", str(project.path / "no"), "--bcas-baseline", str(gold_dir)
    )  # fmt: skip
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "(a new model against the baseline's: --bcas-gate-new-model)" in refused.stderr.str()
    run_dir = project.path / "random"
    new = ["--bcas-model", "mock:random", *mock, "--bcas-baseline", str(gold_dir), "--bcas-gate-new-model"]
    result = project.runpytest(*new, "--bcas-report", str(run_dir))
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "[new model: --bcas-gate-new-model]" in out and "allow-mismatch" not in out
    failures = [ln for ln in out.splitlines() if ln.startswith("regression gate: ")]
    assert len(failures) == 2 and all("one-sided exact McNemar" in ln for ln in failures)
    assert "Traceback" not in out and "def test_case" not in out and "pytest.fail" not in out
    assert "E   " not in out  # pytest's error-line prefix: no assertion rewriting, no source
    # the prompt is not what is compared: a baseline recorded under another prompt is still refused
    baseline = project.path / "baseline.json"
    assert bcas_main(["gate", "write", str(gold_dir), str(baseline)]) == 0
    data = json.loads(baseline.read_text())
    for case in data["cases"].values():
        case["prompt_hash"] = "0" * 16
    baseline.write_text(json.dumps(data))
    other = project.runpytest(*new[:-3], "--bcas-baseline", str(baseline), "--bcas-gate-new-model")
    assert other.ret == pytest.ExitCode.USAGE_ERROR
    assert "prompt hash 0000000000000000 (baseline)" in other.stderr.str()


def test_an_equal_run_passes_and_can_fail(project: pytest.Pytester) -> None:
    base_dir = project.path / "base"
    project.runpytest(*TINY, "--bcas-report", str(base_dir)).assert_outcomes(passed=2)
    result = project.runpytest(
        *TINY, "--bcas-report", str(project.path / "same"), "--bcas-baseline", str(base_dir), "--bcas-gate-strict"
    )
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "CANNOT FAIL" not in out and "overall: PASS" in out


@pytest.mark.proof_stage  # a pytest run with two workers inside a worker, 13 s: CI's required proof stage runs it
def test_xdist_workers_plan_and_the_controller_reports(project: pytest.Pytester, monkeypatch) -> None:
    base_dir = project.path / "base"
    project.runpytest(*TINY, "--bcas-report", str(base_dir)).assert_outcomes(passed=2)
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")
    run_dir = project.path / "xd"
    result = project.runpytest_subprocess(
        *TINY, "--bcas-report", str(run_dir), "--bcas-baseline", str(base_dir), "-n", "2"
    )
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "overall: FAIL: 2 of 2 gated cases" in out and "threshold 0.025" in out
    assert len(list(run_dir.glob("gate-plan.*.json"))) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bcas-alpha", "1.5"], "--bcas-alpha must lie strictly between 0 and 1"),
        (["--bcas-gate-family", "run"], "--bcas-gate-family must be one of session, grid, case"),
        (["--bcas-max-drop", "120"], "--bcas-max-drop is in accuracy points"),
    ],
)
def test_bad_gate_options_are_usage_errors(project: pytest.Pytester, args: list[str], message: str) -> None:
    result = project.runpytest(*TINY, *args, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_unreadable_baseline_is_a_usage_error_before_anything_runs(project: pytest.Pytester) -> None:
    bad = project.path / "bad.json"
    bad.write_text('{"cases": {"k": {"items": {"q1": "yes"}}}}')
    run_dir = project.path / "bad_run"
    result = project.runpytest(*TINY, "--bcas-report", str(run_dir), "--bcas-baseline", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{bad}: case 'k': item 'q1'" in result.stderr.str()
    assert not (run_dir / "records.jsonl").exists()


def test_the_gate_decides_p_equal_to_alpha_as_significant_in_place_and_in_holm_step_down(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exact boundaries: p == alpha / m fails a case in place; Holm's adjusted p == alpha rejects at session end.

    Two gated cases (one family of two) on 6 items; the current run gets every item wrong.
    Case A's baseline got all 6 right: p = 2^-6.  Case B's baseline got 5 right: p = 2^-5.
    With alpha = 2^-5: A's in-place threshold is alpha / 2 = 2^-6 = its p; B passes in place
    (2^-5 > 2^-6) but Holm's step-down adjusts it to max(2 * 2^-6, 2^-5) = alpha exactly.
    """
    from bcas.stats import mcnemar_exact_one_sided

    p_a, p_b = mcnemar_exact_one_sided(0, 6), mcnemar_exact_one_sided(0, 5)
    assert (p_a, p_b) == (2.0**-6, 2.0**-5)  # the tables hit these values exactly
    alpha = 2.0 * p_a
    assert alpha == p_b

    six = [*INSTANT, "--bcas-grid", "gate_tiny", "--bcas-limit", "6"]
    base_dir = project.path / "gold6"
    project.runpytest(*six, "--bcas-report", str(base_dir)).assert_outcomes(passed=2)
    baseline = project.path / "six.json"
    assert bcas_main(["gate", "write", str(base_dir), str(baseline)]) == 0
    data = json.loads(baseline.read_text())
    key_a, key_b = sorted(data["cases"])
    first_item = sorted(data["cases"][key_b]["items"])[0]
    data["cases"][key_b]["items"][first_item] = False
    data["cases"][key_b]["metrics"]["correct_em"][first_item] = False
    baseline.write_text(json.dumps(data))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")  # every answer wrong now

    at = project.runpytest(*six, "--bcas-report", str(project.path / "at"), "--bcas-baseline", str(baseline),
                           "--bcas-alpha", repr(alpha))  # fmt: skip
    at.assert_outcomes(failed=1, passed=1)  # A at p == alpha / 2 fails where it runs
    assert at.ret != 0
    out = at.stdout.str()
    assert f"p = {p_a:.4g} <= Holm first-step threshold {alpha / 2:.4g}" in out
    report = json.loads((project.path / "at" / "gate-report.json").read_text())
    assert report["failed"] and {r["verdict"] for r in report["rows"]} == {"FAIL"}
    # B is rejected by the step-down alone, at an adjusted p equal to alpha.
    (step_down,) = report["holm_failures"]
    assert "Holm step-down" in step_down and f"p = {p_b:.4g}" in step_down
    assert sorted(r["p_holm"] for r in report["rows"]) == [alpha, alpha]

    below = math.nextafter(alpha, 0.0)  # the largest alpha below the boundary: nothing is significant
    under = project.runpytest(*six, "--bcas-report", str(project.path / "under"), "--bcas-baseline", str(baseline),
                              "--bcas-alpha", repr(below))  # fmt: skip
    under.assert_outcomes(passed=2)
    assert under.ret == 0
    report = json.loads((project.path / "under" / "gate-report.json").read_text())
    assert not report["failed"] and not report["holm_failures"]
