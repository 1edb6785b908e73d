"""Through the plugin: three-way grading of a model that declines on some items, and pass@k,
pass^k, flips and cost-of-pass over ``--bcas-epochs 3`` checked against brute force."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest

from bcas.testing.decliner import seeded_right
from bcas.testing.project import backends, budget_grid, codename_items, grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

PRICES = """
default = "test"
[sheets.test]
description = "made-up prices for cost-of-pass"
search_per_call = 0.001
[sheets.test.models."seeded"]
input_per_mtok = 10.0
output_per_mtok = 40.0
[sheets.test.models."decliner"]
input_per_mtok = 10.0
output_per_mtok = 40.0
"""
BASE = ["--bcas-backend", "scripted", "--bcas-grid", "tiny", "--bcas-no-cache", "-p", "no:cacheprovider"]
BASE += ["--bcas-datasets", "codes.jsonl", "--bcas-prices", "prices.toml", "--bcas-limit", "all"]


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    conftest = backends({"scripted": "bcas.testing.decliner:create"}) + budget_grid("tiny", ["x"], (1,))
    grid_project(pytester.path, conftest, datasets={"codes.jsonl": codename_items(6)}, prices=PRICES)
    return pytester


def test_a_model_that_declines_gets_the_three_way_counts_and_f_score(suite: pytest.Pytester) -> None:
    run = suite.path / "run"
    result = suite.runpytest(*BASE, "--bcas-model", "decliner", "--bcas-report", str(run))
    result.assert_outcomes(passed=1)
    (row,) = json.loads((run / "summary.json").read_text())["rows"]
    # items 0, 3 decline; 1, 4 wrong; 2, 5 right
    assert (row["n_correct"], row["n_incorrect"], row["n_not_attempted"]) == (2, 2, 2)
    assert row["not_attempted_rate"] == pytest.approx(2 / 6)
    assert row["accuracy_given_attempted"] == pytest.approx(0.5)
    overall, given = 2 / 6, 2 / 4
    assert row["f_score"] == pytest.approx(2 * overall * given / (overall + given))  # 0.4
    assert "correct/incorrect/not attempted 2 / 2 / 2, F-score 40.0%" in result.stdout.str()


def test_the_three_way_judge_through_the_plugin_labels_the_declines_not_attempted(suite: pytest.Pytester) -> None:
    run = suite.path / "run"
    judged = ["--bcas-judge", "mock:gold", "--bcas-judge-three-way", "--bcas-report", str(run)]
    result = suite.runpytest(*BASE, "--bcas-model", "decliner", *judged)
    result.assert_outcomes(passed=1)
    records = sorted(read_records(run), key=lambda r: int(r["item_id"][1:]))
    labels = [r["judge"]["label"] for r in records]
    assert labels == ["not_attempted", "incorrect", "correct"] * 2, labels
    assert all(r["judge"]["grade_id"].endswith("|3way") for r in records)
    assert [r["judge_verdict"] for r in records] == [False, False, True] * 2
    (row,) = json.loads((run / "summary.json").read_text())["rows"]
    assert row["metric"] == "judge_verdict" and row["judge_n"] == 6
    assert (row["n_correct"], row["n_incorrect"], row["n_not_attempted"]) == (2, 2, 2), row
    assert "correct/incorrect/not attempted 2 / 2 / 2" in result.stdout.str()


def brute(outcomes: list[bool], k: int) -> tuple[float, float]:
    subsets = list(combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets), sum(all(s) for s in subsets) / len(subsets)


def test_three_epochs_give_pass_at_k_pass_hat_k_and_cost_of_pass_with_intervals(suite: pytest.Pytester) -> None:
    run = suite.path / "run"
    result = suite.runpytest(*BASE, "--bcas-model", "seeded", "--bcas-epochs", "3", "--bcas-report", str(run))
    result.assert_outcomes(passed=1)
    records = read_records(run)
    assert len(records) == 18
    by_item: dict[str, list[bool]] = {}
    for r in records:
        i = int(r["item_id"][1:])
        assert r["correct_em"] == seeded_right(i, r["seed"])  # the double answered as scripted
        by_item.setdefault(r["item_id"], []).append(bool(r["correct_em"]))
    flips = [len(set(v)) > 1 for v in by_item.values()]
    assert any(flips) and not all(flips)  # some items flip between epochs, some do not
    (row,) = json.loads((run / "summary.json").read_text())["rows"]
    assert row["pass_k"] == 3
    want_at = sum(brute(v, 3)[0] for v in by_item.values()) / 6
    want_hat = sum(brute(v, 3)[1] for v in by_item.values()) / 6
    assert row["pass_at_k"] == pytest.approx(want_at) and row["pass_hat_k"] == pytest.approx(want_hat)
    assert row["pass_at_k_lo"] <= row["pass_at_k"] <= row["pass_at_k_hi"]
    assert row["pass_hat_k_lo"] <= row["pass_hat_k"] <= row["pass_hat_k_hi"]
    assert row["flip_share"] == pytest.approx(sum(len(set(v)) > 1 for v in by_item.values()) / 6)
    cost = {i: sum(r["cost_usd"] for r in records if r["item_id"] == i) / 3 for i in by_item}
    wins = {i: sum(v) / 3 for i, v in by_item.items()}
    want_cop = (sum(cost.values()) / 6) / (sum(wins.values()) / 6)
    assert row["cost_of_pass"] == pytest.approx(want_cop)
    assert row["cost_of_pass_lo"] <= want_cop and (row["cost_of_pass_hi"] is None or want_cop <= row["cost_of_pass_hi"])
    assert row["tokens_of_pass"] > 0
    out = result.stdout.str()
    assert "pass@3 " in out and "pass^3 " in out and "cost-of-pass $" in out
    page = (run / "index.html").read_text()
    assert "pass@k % [95%]" in page
    # the cost-accuracy view on the cost of a correct answer shows the row's cost-of-pass
    cop = page.split('id="cop-0-points"')[1].split("</table>")[0]
    assert f'data-x="{row["cost_of_pass"]!r}"' in cop


def test_the_gate_uses_a_registered_metric_when_told(suite: pytest.Pytester) -> None:
    bad = suite.runpytest(*BASE, "--bcas-model", "decliner", "--bcas-gate-metric", "nosuch")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--bcas-gate-metric: unknown metric 'nosuch'; registered: " in bad.stderr.str()
    assert "evidence_complete" in bad.stderr.str()
    base = suite.path / "base"
    floor = ["--bcas-min-accuracy", "0.5"]
    # correct_em is 2/6 (fails the floor); attempted is 4/6 (passes it)
    suite.runpytest(*BASE, "--bcas-model", "decliner", *floor, "--bcas-report", str(base)).assert_outcomes(failed=1)
    run = suite.path / "run"
    again = suite.runpytest(
        *BASE, "--bcas-model", "decliner", *floor, "--bcas-gate-metric", "attempted", "--bcas-report", str(run),
        "--bcas-baseline", str(base),
    )  # fmt: skip
    again.assert_outcomes(passed=1)
    gate = json.loads((run / "gate-report.json").read_text())
    assert gate["metrics"] == ["attempted"]
    strict = suite.runpytest(
        *BASE, "--bcas-model", "decliner", "--bcas-min-accuracy", "0.9", "--bcas-gate-metric", "attempted",
        "--bcas-report", str(suite.path / "strict"),
    )  # fmt: skip
    strict.assert_outcomes(failed=1)
    assert "attempted accuracy 0.667 over 6 items is below the floor 0.900" in strict.stdout.str()
