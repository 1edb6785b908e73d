"""Checked once, before anything runs (issue 46, item 6).

A grid that cannot run on the data given stops the session with one usage error naming
the option that fixes it (``--bcas-calibration-n`` on the command line,
``calibration_n`` for :func:`bcas.evaluate`), not one traceback per case, and nothing
is written; the calibration probe's model calls are said before its first answer.
Control flow on the ``mock`` backend; the window check on the embedded backend's declared
window (no model is loaded before it refuses).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bcas
from bcas.grids import get_grid
from bcas.run.options import OptionError
from bcas.run.plan_checks import calibration_notes, check_cases, probe_calls
from bcas.run.settings import Case, ModelSpec, build_settings

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "bcas/resources/data/conflictqa_strategyqa.jsonl"


def _items(path: Path, n: int) -> Path:
    path.write_text("".join(SHIPPED.read_text(encoding="utf-8").splitlines(keepends=True)[:n]), encoding="utf-8")
    return path


@pytest.mark.parametrize("workers", ["0", "2"])  # without xdist: after collection; with it: at session start
def test_the_madara_grid_on_50_items_stops_the_pytest_session_with_one_line(tmp_path: Path, workers: str) -> None:
    data, run = _items(tmp_path / "mine.jsonl", 50), tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "BCAS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--bcas-grid", "madara",
            "--bcas-model", "mock:gold", "--bcas-datasets", str(data), "--bcas-report", str(run), "-n", workers,
        ],  # fmt: skip
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, out
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --bcas-calibration-n: grid madara"), out
    assert "mine has 50" in errors[0] and "at most 49" in errors[0], out
    assert "Traceback" not in out and "calibration_n" not in out, out
    assert not run.exists()  # stopped before anything was written


def _benchmarks(tmp_path: Path, data: Path, run: Path, workers: str, *more: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "BCAS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [
            sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--bcas-grid", "smoke,madara",
            "--bcas-model", "mock:gold", "--bcas-datasets", str(data), "--bcas-report", str(run), "--bcas-limit", "2",
            "-n", workers, *more,
        ],  # fmt: skip
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


# with xdist: the controller checks what its workers collected; four pytest runs of two grids
# (31-39 s each on a fresh clone): CI's required proof stage runs them
@pytest.mark.proof_stage
@pytest.mark.parametrize("workers", ["0", "2"])
def test_only_the_selected_cases_are_checked_and_their_probes_said(tmp_path: Path, workers: str) -> None:
    """``-m smoke`` leaves the MADARA grid's cases out: the 100 items they would hold out of a
    50-item file are not checked (the smoke cases run) and no probe is said; ``-k`` selecting the
    routed case alone, with a calibration size of 5, says its one probe and runs it."""
    data = _items(tmp_path / "mine.jsonl", 50)
    left_out = _benchmarks(tmp_path, data, tmp_path / "smoke", workers, "-m", "smoke")
    out = left_out.stdout + left_out.stderr
    assert left_out.returncode == 0, out[-3000:]
    assert "[bcas] calibration:" not in out and not [line for line in out.splitlines() if line.startswith("ERROR")]
    rows = json.loads((tmp_path / "smoke" / "summary.json").read_text(encoding="utf-8"))["rows"]
    assert len(rows) == 7 and {r["grid"] for r in rows} == {"smoke"}
    routed = _benchmarks(
        tmp_path, data, tmp_path / "routed", workers, "-k", "madara/madara", "--bcas-calibration-n", "5"
    )
    out = routed.stdout + routed.stderr
    assert routed.returncode == 0, out[-3000:]
    said = [line for line in out.splitlines() if line.startswith("[bcas] calibration:")]
    assert len(said) == 1 and "probes 5 calibration items before mock-gold-mine-madara/madara/cal5's" in said[0], out
    rows = json.loads((tmp_path / "routed" / "summary.json").read_text(encoding="utf-8"))["rows"]
    assert [(r["grid"], r["label"], r["items_note"]) for r in rows] == [
        ("madara", "madara/madara/cal5", "2 of 50 items; 5 held for calibration")
    ]


def test_the_same_grid_through_the_api_is_one_value_error_naming_the_keyword(tmp_path: Path) -> None:
    data, run = _items(tmp_path / "mine.jsonl", 50), tmp_path / "run"
    with pytest.raises(ValueError) as caught:
        bcas.evaluate(grids="madara", models="mock:gold", datasets=[str(data)], out=run)
    message = str(caught.value)
    assert message.startswith("calibration_n: grid madara") and "--bcas-" not in message, message
    assert "\n" not in message
    assert not run.exists()


def test_a_smaller_calibration_size_lets_it_run_and_says_its_calls_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``calibration_n=5`` the 50 items suffice: the routed case's probe is announced, with
    the calls it may make, before its first answer."""
    data, run = _items(tmp_path / "mine.jsonl", 50), tmp_path / "run"
    settings = build_settings({"grid": "madara", "model": ["mock:gold"], "datasets": str(data),
                               "calibration-n": 5, "report": str(run)}, tmp_path)  # fmt: skip
    from bcas.run.plan import make_plan

    cases = make_plan(settings).cases
    check_cases(settings, cases)  # enough items now: no error
    notes = calibration_notes(settings, cases)
    assert len(notes) == 1, notes  # one probe: the routed case's (the treatments calibrate on nothing)
    assert "probes 5 calibration items" in notes[0] and "madara/madara" in notes[0]
    assert f"up to {5 * 121:,} model calls" in notes[0] and "(--bcas-calibration-n)" in notes[0]
    # The figure of the issue: 100 calibration items of 10 documents, three agents.
    entry = get_grid("madara").entries[-1]
    assert probe_calls(entry.config, 10) * 100 == 12_100


def test_a_budget_the_window_cannot_hold_is_refused_naming_the_model(tmp_path: Path) -> None:
    """search_scaling's 16K token budget on a model of 8,192 tokens: its items could only end at
    the window; the smoke grid's 2K budgets fit the same window."""
    settings = build_settings({"grid": "search_scaling,smoke", "model": ["mock:gold"]}, tmp_path)
    model = ModelSpec("mock", "gold")
    scaling = [Case(model, "hotpotqa", "search_scaling", e) for e in get_grid("search_scaling").entries]
    smoke = [Case(model, "hotpotqa", "smoke", e) for e in get_grid("smoke").entries if e.kind == "bcas"]
    check_cases(settings, smoke, {model.label: 8192})
    check_cases(settings, scaling, {model.label: 32_768})  # a window that holds it
    with pytest.raises(OptionError) as caught:
        check_cases(settings, scaling, {model.label: 8192})
    assert caught.value.option == "model" and "16,048" in caught.value.message


def test_the_api_refuses_the_paper_budget_on_the_embedded_default(tmp_path: Path) -> None:
    """The embedded backend declares SmolLM2's 8,192-token window: no model is loaded to refuse."""
    run = tmp_path / "run"
    with pytest.raises(ValueError) as caught:
        bcas.evaluate(grids="search_scaling", models="embedded", datasets="hotpotqa", limit=1, out=run)
    assert str(caught.value).startswith("models: ") and "8,192" in str(caught.value)
    assert not run.exists()


def test_the_calls_said_up_front_are_the_calls_the_probe_makes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The RSC probe on ``mock:gold`` (every chain scored, so every perturbation re-scored): the
    bound printed before the run is the probe's own count of its calls (``rsc/*.json``)."""
    import json
    import re

    data, run = _items(tmp_path / "mine.jsonl", 8), tmp_path / "run"
    bcas.evaluate(grids="rsc", models="mock:gold", datasets=[str(data)], calibration_n=3, out=run, progress=True)
    said = re.search(r"up to ([\d,]+) model calls", capsys.readouterr().out)
    assert said, "no calibration line before the run"
    (profile,) = (run / "rsc").glob("*--*[0-9a-f].json")
    made = json.loads(profile.read_text())["usage"]["llm_calls"]
    assert int(said.group(1).replace(",", "")) == made == 3 * 121


def test_the_old_first_example_stops_in_one_line_naming_the_model(tmp_path: Path) -> None:
    """``search_scaling -k s3`` on the embedded default (issue 47: 30 minutes, two items ended at
    the context window with no search) stops before any model loads."""
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "BCAS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--bcas-grid", "search_scaling",
            "-m", "hotpotqa", "-k", "s3", "--bcas-limit", "2", "--bcas-report", str(run),
        ],  # fmt: skip
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, out
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --bcas-model: smollm2-135m has a context window of 8,192")
    assert "Traceback" not in out and not run.exists()
