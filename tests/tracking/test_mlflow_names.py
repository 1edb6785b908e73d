"""What a user reads in MLflow: case runs named by their configuration's label, the
configuration hash as a tag, only the options that were set, the backend that answered
(``mock``, not the option's default ``embedded``) and no cost for a model that has no
price (a test double: the report shows "—", MLflow logs no number, never 0.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.skips import MLFLOW_IMPORTABLE, skip_if_no_mlflow

from bcas.testing.project import budget_grid, codename_items, grid_project, preload
from bcas.tracking import read_run_folder

if MLFLOW_IMPORTABLE:
    preload("bcas.tracking.mlflow_sink", "mlflow.tracking", "mlflow.entities", "mlflow.store.db.utils")

pytest_plugins = ["pytester"]

COSTS = {"cost_usd", "mean_cost_usd", "cost_of_pass", "cost_of_pass_lo", "cost_of_pass_hi"}


@skip_if_no_mlflow
def test_case_runs_are_named_by_label_with_set_options_the_backend_and_no_cost(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_MLFLOW_EXPERIMENT", "names")
    grid_project(
        pytester.path, budget_grid("named", [pytester.path / "tiny.jsonl"]), datasets={"tiny.jsonl": codename_items(4)}
    )
    uri, run_dir = f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path / "run"
    result = pytester.runpytest(
        "--bcas-model",
        "mock:gold",
        "--bcas-grid",
        "named",
        "--bcas-report",
        str(run_dir),
        f"--bcas-mlflow={uri}",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2)
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("names").experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    cases = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    rows = {r["label"]: r for r in json.loads((run_dir / "summary.json").read_text())["rows"]}
    assert set(cases) == set(rows) == {"bm25/s1/t2k", "bm25/s2/t2k"}  # the label, not a hash
    for label, case in cases.items():
        assert case.data.tags["bcas.config_id"] == rows[label]["config_id"]  # the hash is a tag
        assert case.data.params["backend"] == "mock"
        assert case.data.tags["bcas.status"] == "passed"
        assert not COSTS & set(case.data.metrics), case.data.metrics  # no price: no cost, not 0.0
        assert case.data.metrics["accuracy"] == pytest.approx(rows[label]["accuracy"])
    assert "cost_usd" not in parent.data.metrics
    assert parent.data.tags["bcas.model.mock-gold.backend"] == "mock"
    options = {k for k in parent.data.params if k.startswith("option.")}
    assert {"option.model", "option.grid", "option.report"} <= options
    assert not {"option.backend", "option.alpha", "option.seed", "option.judge"} & options  # defaults: not set


def test_a_priced_model_logs_its_cost_and_an_unpriced_one_none(tmp_path: Path) -> None:
    """The pure reading of a run folder: a priced row's cost is a metric, an unknown cost is none,
    as summary.json has them (a test double unpriced by the installed sheet, or priced by the user's)."""
    row = {"grid": "g", "model": "m", "dataset": "d", "label": "bm25/s1/t2k", "config_id": "abc", "n": 2}
    rows = [
        {**row, "cost_usd": 0.25, "model_fingerprint": "sha256:1"},
        {**row, "model": "u", "cost_usd": None, "model_fingerprint": "sha256:2"},
        {**row, "model": "mock-gold", "cost_usd": None, "model_fingerprint": "mock:gold"},
        {**row, "model": "mock-priced", "cost_usd": 0.5, "model_fingerprint": "mock:gold"},
    ]
    (tmp_path / "summary.json").write_text(json.dumps({"rows": rows}))
    folder = read_run_folder(tmp_path)
    costs = {c.params["model"]: c.metrics.get("cost_usd") for c in folder.cases}
    assert costs == {"m": 0.25, "u": None, "mock-gold": None, "mock-priced": 0.5}
    assert {c.name for c in folder.cases} == {"bm25/s1/t2k"}
    assert "cost_usd" not in folder.metrics  # one unknown cost: no total
