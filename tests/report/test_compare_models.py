"""Comparing models: ``bcas compare`` of runs of different models on the same items is the
comparison (exit 0, paired, no warning); anything else that differs (the items, the
configuration) is refused in one line; two or more runs of different models combine into
one report with the paired model comparisons a report of one run makes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bcas.cli import main as bcas_main
from bcas.testing.project import grid_project, preload

preload()

pytest_plugins = ["pytester"]


def _run(pytester: pytest.Pytester, model: str, folder: str, *extra: str) -> Path:
    run_dir = pytester.path / folder
    args = ["--bcas-model", model, "--bcas-grid", "smoke", "-k", "bm25 and s1", "--bcas-limit", "5"]
    result = pytester.runpytest(*args, "--bcas-report", str(run_dir), "-p", "no:cacheprovider", *extra)
    result.assert_outcomes(passed=1)
    return run_dir


@pytest.fixture
def runs(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Path]:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(pytester.path)
    return {
        "gold": _run(pytester, "mock:gold", "gold"),
        "random": _run(pytester, "mock:random", "random"),
        "verbose": _run(pytester, "mock:verbose", "verbose"),
        "gold-seed1": _run(pytester, "mock:gold", "gold-seed1", "--bcas-seed", "1"),
        "gold-limit4": _run(pytester, "mock:gold", "gold-limit4", "--bcas-limit", "4"),
    }


def test_models_compare_and_other_differences_are_refused_in_one_line(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "cmp.html"
    assert bcas_main(["compare", str(runs["gold"]), str(runs["random"]), "--html", str(page)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "MISMATCH" not in out
    assert re.search(r"mock-gold vs mock-random\s+\S+\s+bm25/s1/t2k\s+5\s", out), out  # 5 paired items
    assert "compared despite" not in page.read_text().lower()

    assert bcas_main(["compare", str(runs["gold"]), str(runs["gold-limit4"])]) == 2  # the same model, other items
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "dataset hash differs" in err
    assert (
        bcas_main(["compare", str(runs["gold"]), str(runs["gold-seed1"])]) == 2
    )  # another seed: another configuration
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "configuration id differs" in err


def test_runs_of_several_models_combine_into_one_report(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "combined"
    assert (
        bcas_main(["compare", str(runs["gold"]), str(runs["random"]), str(runs["verbose"]), "--report", str(out_dir)])
        == 0
    )
    assert "model comparisons: 3" in capsys.readouterr().out
    summary = json.loads((out_dir / "summary.json").read_text())
    assert sorted(r["model"] for r in summary["rows"]) == ["mock-gold", "mock-random", "mock-verbose"]
    pairs = {(c["model"], c["reference"]): c for c in summary["model_comparisons"]}
    assert set(pairs) == {
        ("mock-gold", "mock-random"),
        ("mock-gold", "mock-verbose"),
        ("mock-random", "mock-verbose"),
    }
    one = pairs[("mock-gold", "mock-random")]
    rows = {r["model"]: r for r in summary["rows"]}
    assert one["n_paired"] == 5
    assert one["diff"] == pytest.approx(rows["mock-gold"]["accuracy"] - rows["mock-random"]["accuracy"])
    page = (out_dir / "index.html").read_text()
    assert "Models compared" in page and "mock-verbose" in page
    assert "compared despite" not in page and f"combined from {runs['gold']}" in page
    # Every view is the one `bcas report` writes of the combined records: the parquet export
    # too, and a rebuild changes no summary.
    written = (out_dir / "summary.json").read_bytes(), (out_dir / "summary.csv").read_bytes()
    assert (out_dir / "records.parquet").is_file()
    assert bcas_main(["report", str(out_dir)]) == 0
    capsys.readouterr()
    assert ((out_dir / "summary.json").read_bytes(), (out_dir / "summary.csv").read_bytes()) == written

    # Anything but the model differs: refused in one line, nothing written.
    refused = tmp_path / "refused"
    assert (
        bcas_main(
            ["compare", str(runs["gold"]), str(runs["random"]), str(runs["gold-seed1"]), "--report", str(refused)]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "configuration id differs" in err
    assert not refused.exists()
    assert (
        bcas_main(["compare", str(runs["gold"]), str(runs["random"]), str(runs["verbose"])]) == 2
    )  # three runs: one report
    assert "--report DIR" in capsys.readouterr().err
