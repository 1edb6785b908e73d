"""--bcas-gate-sequential through the pytest plugin, as a user meets it (pytester): the instant
test double answers what ``BCAS_INSTANT_ANSWER`` says, so the current run is wrong on purpose."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bcas.testing.project import backends, budget_grid, codename_items, grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

TINY = ["--bcas-backend", "instant", "--bcas-no-cache", "-p", "no:cacheprovider", "--bcas-grid", "seq_tiny"]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    conftest = backends({"instant": "bcas.testing.instant:create"}) + budget_grid(
        "seq_tiny", [pytester.path / "tiny.jsonl"]
    )
    grid_project(pytester.path, conftest, datasets={"tiny.jsonl": codename_items(40)})
    return pytester


# Two gated cases, every answer wrong: the KT mixture gives e = 28.7, 53.3, 99.9 after 6, 7, 8 straight
# losses; over 20 items the exact boundary at 0.05 x 0.8 / 2 is 28.97 (after 7; Ville's 2/(0.05 x 0.8) = 50),
# at 0.05 x 0.5 / 2 36.28 (after 7; Ville's 80 would take 8).
@pytest.mark.parametrize(
    ("share", "stops", "how"),
    [
        (
            [],
            7,
            "stopped after 7 of 20 items: regression shown (e = 53.31, threshold 28.97 = the exact boundary at "
            "0.05 x 0.8 / 2 over 20 items)",
        ),
        (
            ["--bcas-gate-fallback-share", "0.5"],
            7,
            "stopped after 7 of 20 items: regression shown (e = 53.31, threshold 36.28 = the exact boundary at "
            "0.05 x 0.5 / 2 over 20 items)",
        ),
    ],
)
def test_the_plugin_stops_each_case_once_decided_and_says_how(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, share: list[str], stops: int, how: str
) -> None:
    base_dir = project.path / "gold"
    project.runpytest(*TINY, "--bcas-report", str(base_dir)).assert_outcomes(passed=2)
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")  # every answer wrong now
    run_dir, junit = project.path / "worse", project.path / "junit.xml"
    result = project.runpytest(
        *TINY, "--bcas-report", str(run_dir), "--bcas-baseline", str(base_dir), "--bcas-gate-sequential",
        *share, f"--junitxml={junit}",
    )  # fmt: skip
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert out.count("sequential gate: " + how) >= 2
    assert len(read_records(run_dir)) < 2 * 20  # the grid runs 20 of the 40 items  # the remaining items were never run
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
    assert [p["bcas_gate_sequential"] for p in props] == [how, how]
    assert [p["bcas_gate_items_used"] for p in props] == [str(stops), str(stops)]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1", "--bcas-gate-fallback-share must lie in [0, 1), got 1.0"),
        ("-0.2", "--bcas-gate-fallback-share must lie in [0, 1), got -0.2"),
        ("half", "--bcas-gate-fallback-share: expected a number, got 'half'"),
    ],
)
def test_a_bad_fallback_share_is_a_one_line_usage_error(project: pytest.Pytester, value: str, message: str) -> None:
    result = project.runpytest(*TINY, "--bcas-gate-sequential", "--bcas-gate-fallback-share", value, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.str().splitlines() if "fallback-share" in line] == [f"ERROR: {message}"]


def test_resuming_with_another_share_is_a_usage_error_and_the_same_share_resumes(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_dir, run_dir = project.path / "gold", project.path / "worse"
    project.runpytest(*TINY, "--bcas-report", str(base_dir)).assert_outcomes(passed=2)
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")
    gated = [*TINY, "--bcas-report", str(run_dir), "--bcas-baseline", str(base_dir), "--bcas-gate-sequential"]
    project.runpytest(*gated, "--bcas-gate-fallback-share", "0.5").assert_outcomes(failed=2)
    records = len(read_records(run_dir))
    again = project.runpytest(*gated)
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "ERROR: --bcas-gate-fallback-share 0.2 differs from the 0.5 this run folder's earlier sequential session "
        "used: a resumed case is decided again from its records with the value given, so resume with 0.5 or "
        "write into a new run folder"
    ) in again.stderr.str().splitlines()
    assert len(read_records(run_dir)) == records  # refused before anything ran
    resumed = project.runpytest(*gated, "--bcas-gate-fallback-share", "0.5")
    resumed.assert_outcomes(failed=2)
    assert "stopped after 7 of 20 items" in resumed.stdout.str() and len(read_records(run_dir)) == records
    assert "threshold 36.28 = the exact boundary at 0.05 x 0.5 / 2 over 20 items" in resumed.stdout.str()
