"""What a user reads in MLflow: case runs named ``model · dataset · configuration``
(unique within the run: a label in two grids gets its grid), the parent named by its grids
and models unless the user names it, the configuration hash as a tag, only the options that were set, the backend that answered
(``mock``, not the option's default ``embedded``) and no cost for a model that has no
price (a test double: the report shows "—", MLflow logs no number, never 0.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.skips import MLFLOW_IMPORTABLE, skip_if_no_mlflow

from bcas.testing.project import budget_grid, codename_items, grid_project, preload
from bcas.tracking import read_run_folder
from bcas.tracking.folder import case_names, run_name

if MLFLOW_IMPORTABLE:
    preload("bcas.tracking.mlflow_sink", "mlflow.tracking", "mlflow.entities", "mlflow.store.db.utils")

pytest_plugins = ["pytester"]

COSTS = {"cost_usd", "mean_cost_usd", "cost_of_pass", "cost_of_pass_lo", "cost_of_pass_hi"}


def _publish(pytester: pytest.Pytester, tmp_path: Path, *extra: str) -> tuple[str, Path]:
    """Two grids sharing the label bm25/s1/t2k, on two test doubles, published to a SQLite store."""
    tiny = pytester.path / "tiny.jsonl"
    conftest = budget_grid("named", [tiny]) + budget_grid("again", [tiny], searches=(1,))
    grid_project(pytester.path, conftest, datasets={"tiny.jsonl": codename_items(2)})
    uri, run_dir = f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path / "run"
    result = pytester.runpytest(
        "--bcas-model",
        "mock:gold",
        "--bcas-model",
        "mock:random",
        "--bcas-grid",
        "named,again",
        "--bcas-report",
        str(run_dir),
        f"--bcas-mlflow={uri}",
        "-p",
        "no:cacheprovider",
        *extra,
    )
    result.assert_outcomes(passed=6)
    return uri, run_dir


@skip_if_no_mlflow
def test_runs_are_named_model_dataset_configuration_with_set_options_the_backend_and_no_cost(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_MLFLOW_EXPERIMENT", "names")
    uri, run_dir = _publish(pytester, tmp_path)
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("names").experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.run_name == "again + named · mock-gold + mock-random"  # summary.json's order
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    cases = {r.info.run_name: r for r in children}
    assert len(cases) == len(children) == 6  # unique within the parent
    assert set(cases) == {
        f"{model} · tiny · {label}"
        for model in ("mock-gold", "mock-random")
        for label in ("bm25/s2/t2k", "bm25/s1/t2k · named", "bm25/s1/t2k · again")
    }
    rows = {(r["model"], r["grid"], r["label"]): r for r in json.loads((run_dir / "summary.json").read_text())["rows"]}
    for case in cases.values():
        row = rows[(case.data.params["model"], case.data.params["grid"], case.data.params["label"])]
        assert case.data.tags["bcas.config_id"] == row["config_id"]  # the hash is a tag
        assert case.data.params["backend"] == "mock"
        assert case.data.tags["bcas.status"] == "passed"
        assert not COSTS & set(case.data.metrics), case.data.metrics  # no price: no cost, not 0.0
        assert case.data.metrics["accuracy"] == pytest.approx(row["accuracy"])
    assert "cost_usd" not in parent.data.metrics
    assert parent.data.tags["bcas.model.mock-gold.backend"] == "mock"
    options = {k for k in parent.data.params if k.startswith("option.")}
    assert {"option.model", "option.grid", "option.report"} <= options
    assert not {"option.backend", "option.alpha", "option.seed", "option.judge"} & options  # defaults: not set

    # Published again under a name the user gives: the same runs, the parent renamed.
    monkeypatch.setenv("BCAS_MLFLOW_RUN_NAME", "baseline, week 49")
    from bcas.tracking.mlflow_sink import MlflowSink

    MlflowSink(uri).publish(run_dir)
    again = client.search_runs([client.get_experiment_by_name("names").experiment_id])
    assert len(again) == len(runs)
    (renamed,) = [r for r in again if "mlflow.parentRunId" not in r.data.tags]
    assert (renamed.info.run_id, renamed.info.run_name) == (parent.info.run_id, "baseline, week 49")


def test_case_names_tell_colliding_cases_apart_whatever_their_order() -> None:
    def case(grid: str, label: str, config_id: str, model: str = "m") -> dict[str, str]:
        return {"grid": grid, "model": model, "dataset": "d", "label": label, "config_id": config_id}

    cases = [
        case("g1", "bm25/s1", "aaaa1111"),
        case("g2", "bm25/s1", "aaaa1111"),  # one configuration in two grids
        case("g1", "x", "bbbb2222"),
        case("g1", "x", "cccc3333"),  # two configurations of one label in one grid
        case("g1", "y", "dddd4444ffff"),
        case("g1", "y", "dddd4444eeee"),  # ... whose ids share their first 8 characters
        case("g1", "bm25/s1", "aaaa1111", model="other"),
    ]
    names = case_names(cases)
    assert names == [
        "m · d · bm25/s1 · g1",
        "m · d · bm25/s1 · g2",
        "m · d · x · g1 [bbbb2222]",
        "m · d · x · g1 [cccc3333]",
        "m · d · y · g1 [dddd4444] #2",  # by configuration id: ...ffff after ...eeee
        "m · d · y · g1 [dddd4444]",
        "other · d · bm25/s1",
    ]
    assert case_names(cases[::-1]) == names[::-1]  # the same case gets the same name in any order
    assert run_name(["g", "g", "h"], ["a", "b", "c", "d", "e"]) == "g + h · a + b + c + 2 more"


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
    assert [c.name for c in folder.cases] == [f"{m} · d · bm25/s1/t2k" for m in costs]
    assert folder.name == "g · m + u + mock-gold + 1 more"
    assert "cost_usd" not in folder.metrics  # one unknown cost: no total
