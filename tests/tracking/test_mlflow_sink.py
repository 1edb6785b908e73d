"""The MLflow sink against real stores: a local SQLite store through the pytest plugin, and
a real ``mlflow server`` on loopback started here.

The promises: one MLflow run per bcas run with a nested run per case, the case metrics
equal to the run's own summary, a repeated or resumed run adds no MLflow run, and a
tracker that is down stops the session before any answer is made."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.skips import MLFLOW_IMPORTABLE, skip_if_no_mlflow

from bcas.testing.project import budget_grid, codename_items, grid_project, preload
from bcas.tracking import read_run_folder

if MLFLOW_IMPORTABLE:  # without the mlflow extra (README command 1 does not install it) the module skips
    preload(
        "bcas.tracking.mlflow_sink",
        "mlflow.tracking",
        "mlflow.entities",
        "mlflow.store.tracking.sqlalchemy_store",
        "mlflow.store.db.utils",
        "sqlalchemy.orm.dependency",
    )

pytest_plugins = ["pytester"]
pytestmark = skip_if_no_mlflow


def _items(n: int) -> list[dict]:
    rows = codename_items(n)
    for row in rows[::2]:  # half the items' answer is beta: the mock:random model gets some wrong
        row["answers"] = ["beta"]
        row["documents"][0]["text"] = row["documents"][0]["text"].replace("alpha", "beta")
    return rows


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_MLFLOW_EXPERIMENT", "bcas-tests")
    grid_project(
        pytester.path, budget_grid("tracked", [pytester.path / "tiny.jsonl"]), datasets={"tiny.jsonl": _items(6)}
    )
    return pytester


RUN = ["--bcas-model", "mock:gold", "--bcas-model", "mock:random", "--bcas-grid", "tracked", "-p", "no:cacheprovider"]


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty SQLite tracking store, made once: a new store runs MLflow's schema migrations
    (seconds on 2 cores), so each test starts from a copy of this one."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("store") / "mlruns.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


def fresh_store(empty_store: Path, folder: Path) -> str:
    """A copy of the empty store as ``folder/mlruns.db`` (where the default store goes); its URI."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(empty_store, folder / "mlruns.db")
    return f"sqlite:///{folder / 'mlruns.db'}"


def _runs(uri: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("bcas-tests")
    return [] if experiment is None else client.search_runs([experiment.experiment_id], max_results=1000)


def _check_published(uri: str, run_dir: Path) -> None:
    """One parent run for ``run_dir`` and one nested run per summary row, metrics equal to the summary's."""
    runs = _runs(uri)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.data.tags["bcas.run_dir"] == str(run_dir.resolve())
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == len(runs) - 1
    rows = json.loads((run_dir / "summary.json").read_text())["rows"]
    assert len(children) == len(rows) == 4  # 2 models x 2 configurations
    by_case = {r.data.tags["bcas.case"]: r for r in children}
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines() if line]
    for row in rows:
        child = by_case[f"{row['grid']}/{row['model']}/{row['dataset']}/{row['config_id']}"]
        for name in ("accuracy", "ci_lo", "ci_hi", "n", "mean_tokens_out"):
            assert child.data.metrics[name] == pytest.approx(row[name]), name
        mine = [r for r in records if r["model"] == row["model"] and r["config_id"] == row["config_id"]]
        assert child.data.metrics["tokens_out"] == sum(r["tokens_out"] for r in mine)
        assert child.data.tags["bcas.prompt_hash"] == mine[0]["prompt_hash"]
        assert child.data.tags["bcas.dataset_hash"] == mine[0]["dataset_hash"]
        assert child.data.tags["bcas.model_fingerprint"] == mine[0]["model_fingerprint"]
        assert child.data.params["config_id"] == row["config_id"]
        assert child.data.tags.get("bcas.items_note", "") == row["items_note"]  # "3 of N items" where N > 3
    accuracies = {round(r.data.metrics["accuracy"], 3) for r in children}
    assert len(accuracies) > 1  # the two models differ: each case got its own numbers
    assert parent.data.metrics["answers"] == len(records)
    assert parent.data.params["option.model"] == json.dumps(["mock:gold", "mock:random"])


def test_sqlite_store_one_run_nested_cases_and_no_duplicate_on_rerun(
    project: pytest.Pytester, tmp_path: Path, empty_store: Path
) -> None:
    uri = fresh_store(empty_store, tmp_path)
    run_dir = tmp_path / "run"
    args = [*RUN, "--bcas-report", str(run_dir), f"--bcas-mlflow={uri}"]
    first = project.runpytest(*args)
    first.assert_outcomes(passed=4)
    first.stdout.fnmatch_lines(["mlflow: run * (4 cases) in experiment 'bcas-tests' at sqlite:*"])
    _check_published(uri, run_dir)
    ids = sorted(r.info.run_id for r in _runs(uri))
    from mlflow.tracking import MlflowClient

    parent = next(r for r in _runs(uri) if "mlflow.parentRunId" not in r.data.tags)
    artifacts = {a.path for a in MlflowClient(tracking_uri=uri).list_artifacts(parent.info.run_id)}
    assert {"records.jsonl", "summary.json", "index.html", "run.json"} <= artifacts

    again = project.runpytest(*args)  # the same command: every answer resumed, the same MLflow runs
    again.assert_outcomes(passed=4)
    assert sorted(r.info.run_id for r in _runs(uri)) == ids
    _check_published(uri, run_dir)


@pytest.mark.parametrize("name", ["it's a \\ run", 'it\'s a "quoted" run'], ids=["quote", "both-quotes"])
def test_a_run_folder_whose_path_has_a_quote_is_published_once(
    project: pytest.Pytester, tmp_path: Path, name: str, empty_store: Path
) -> None:
    """The run is found again by its folder's path in a search filter: a quote in the path
    (``it's``, or both marks) must not break the filter, or publishing the run again adds a
    second run."""
    uri = fresh_store(empty_store, tmp_path)
    run_dir = tmp_path / name
    args = [*RUN, "--bcas-report", str(run_dir), f"--bcas-mlflow={uri}"]
    project.runpytest(*args).assert_outcomes(passed=4)
    ids = sorted(r.info.run_id for r in _runs(uri))
    project.runpytest(*args).assert_outcomes(passed=4)
    assert sorted(r.info.run_id for r in _runs(uri)) == ids
    _check_published(uri, run_dir)


PRICES_COIN_ONLY = """
default = "coin-only"
[sheets.coin-only]
description = "prices coin only: mock-random, a test double, has no cost"
[sheets.coin-only.models."coin"]
input_per_mtok = 10.0
output_per_mtok = 40.0
"""


def test_a_run_whose_cost_is_partly_unknown_logs_no_total_cost(
    project: pytest.Pytester, tmp_path: Path, empty_store: Path
) -> None:
    """One model priced (the ``coin`` double, priced by the project's sheet), the other not (the
    ``mock`` backend's, a test double, which the report shows without a cost): each priced case
    logs its cost, the unpriced ones none, and the run logs no total (a sum of the priced cases
    alone would pass for the run's cost)."""
    uri = fresh_store(empty_store, tmp_path)
    run_dir = tmp_path / "run"
    (project.path / "prices.toml").write_text(PRICES_COIN_ONLY)
    conftest = project.path / "conftest.py"
    conftest.write_text(
        conftest.read_text(encoding="utf-8")
        + "\nfrom bcas.llm import register_backend\nregister_backend('coin', 'bcas.testing.coin:create')\n",
        encoding="utf-8",
    )
    models = ["--bcas-model", "coin", "--bcas-model", "mock:random", "--bcas-grid", "tracked", "-p", "no:cacheprovider"]
    args = [*models, "--bcas-report", str(run_dir), "--bcas-prices", "prices.toml", f"--bcas-mlflow={uri}"]
    project.runpytest(*args).assert_outcomes(passed=4)
    runs = _runs(uri)
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    cost = sorted((r.data.params["model"], r.data.metrics.get("cost_usd") or 0.0) for r in runs if r is not parent)
    assert [(m, c > 0) for m, c in cost] == [("coin", True)] * 2 + [("mock-random", False)] * 2, cost
    assert not any("cost_usd" in r.data.metrics for r in runs if r.data.params.get("model") == "mock-random")
    assert "cost_usd" not in parent.data.metrics, parent.data.metrics
    assert parent.data.metrics["answers"] == 24  # the totals that are known are logged


def test_default_store_is_sqlite_in_the_current_folder(
    project: pytest.Pytester, tmp_path: Path, empty_store: Path
) -> None:
    run_dir = tmp_path / "run"
    fresh_store(empty_store, project.path)  # the default store's place, so the runs below are found there
    project.runpytest(*RUN, "--bcas-report", str(run_dir), "--bcas-mlflow").assert_outcomes(passed=4)
    _check_published(f"sqlite:///{project.path / 'mlruns.db'}", run_dir)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_tracker_down_stops_the_session_before_any_answer(project: pytest.Pytester, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = project.runpytest(*RUN, "--bcas-report", str(run_dir), f"--bcas-mlflow=http://127.0.0.1:{_free_port()}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if "MLflow" in line]
    assert len(errors) == 1 and "is not reachable" in errors[0]
    assert "Traceback" not in result.stderr.str()
    assert not (run_dir / "records.jsonl").exists()  # nothing was answered, nothing paid for


def test_a_path_where_the_uri_goes_is_named(project: pytest.Pytester, tmp_path: Path) -> None:
    result = project.runpytest(*RUN, "--bcas-mlflow", "mlruns.db")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'mlruns.db' is not a tracking URI*--bcas-mlflow=URI*"])


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[str]:
    """A real ``mlflow server`` on a free loopback port (its own SQLite store and artifact
    folder), stopped at the end."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        f"sqlite:///{tmp_path / 'server.db'}",
        "--artifacts-destination",
        str(tmp_path / "server-artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"mlflow server did not start: {(tmp_path / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        import os
        import signal

        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and its uvicorn workers
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_the_server_this_extra_installs_can_start() -> None:
    """``bcas[mlflow]`` gives a working ``mlflow server``: its application imports in a fresh
    interpreter.  The server test itself is in the slow stage; a dependency the server needs
    and mlflow-skinny does not require (aiohttp, for mlflow.assistant) fails here, in the
    default run, instead of after it."""
    done = subprocess.run(
        [sys.executable, "-c", "import mlflow.server.fastapi_app"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-1500:]


@pytest.mark.slow  # the server takes 30-50 s to start on 2 busy cores
def test_real_mlflow_server_on_loopback(project: pytest.Pytester, tmp_path: Path, mlflow_server: str) -> None:
    run_dir = tmp_path / "run"
    args = [*RUN, "--bcas-report", str(run_dir), f"--bcas-mlflow={mlflow_server}"]
    project.runpytest(*args).assert_outcomes(passed=4)
    _check_published(mlflow_server, run_dir)
    ids = sorted(r.info.run_id for r in _runs(mlflow_server))
    project.runpytest(*args).assert_outcomes(passed=4)
    assert sorted(r.info.run_id for r in _runs(mlflow_server)) == ids
    stored = {p.name for p in (tmp_path / "server-artifacts").rglob("*") if p.is_file()}
    assert {"records.jsonl", "summary.json", "index.html"} <= stored  # uploaded through the server


def test_run_folder_keeps_api_keys_out(tmp_path: Path) -> None:
    """The options become params, but never one that names an API key."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps({"rows": []}))
    options = {"api-key-env": {"value": "SECRET_ENV", "source": "command line"}, "seed": {"value": 0}}
    (run_dir / "run.json").write_text(json.dumps({"sessions": [{"options": options, "seed": 0, "epochs": 1}]}))
    folder = read_run_folder(run_dir)
    assert "SECRET_ENV" not in json.dumps([folder.params, folder.tags])
    assert folder.params["option.seed"] == "0"
    assert "cost_usd" not in folder.metrics  # no case, no total: never a made-up 0


# The Python front door: ``bcas.evaluate(..., mlflow=URI)`` opens, checks and publishes
# through the same code as ``--bcas-mlflow`` (bcas.tracking.open_sinks, publish_all).


@pytest.fixture
def api_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The tracked grid of the pytest tests, registered in this process under its own name."""
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_MLFLOW_EXPERIMENT", "bcas-tests")
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "tiny.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _items(6)), encoding="utf-8")
    name = f"tracked-api-{tmp_path.name}"
    exec(budget_grid(name, [data]), {})
    return name


def test_api_publishes_one_run_and_a_resumed_call_adds_none(api_grid: str, tmp_path: Path, empty_store: Path) -> None:
    import bcas

    uri = fresh_store(empty_store, tmp_path)
    run_dir = tmp_path / "run"
    first = bcas.evaluate(api_grid, ["mock:gold", "mock:random"], out=run_dir, mlflow=uri)
    assert first.written == 24 and len(first.published) == 1
    assert first.published[0].startswith("mlflow: run ") and "(4 cases)" in first.published[0]
    _check_published(uri, run_dir)
    ids = sorted(r.info.run_id for r in _runs(uri))

    again = bcas.evaluate(api_grid, ["mock:gold", "mock:random"], out=run_dir, mlflow=uri)
    assert again.written == 0  # every answer resumed ...
    assert sorted(r.info.run_id for r in _runs(uri)) == ids  # ... into the same MLflow runs
    _check_published(uri, run_dir)


def test_api_mlflow_true_is_the_default_store(api_grid: str, tmp_path: Path, empty_store: Path) -> None:
    import bcas

    fresh_store(empty_store, tmp_path)  # the default store's place: the runs below must be found there
    res = bcas.evaluate(api_grid, ["mock:gold", "mock:random"], out=tmp_path / "run", mlflow=True)
    assert len(res.published) == 1
    _check_published(f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path / "run")
    plain = bcas.evaluate(api_grid, "mock:gold", out=tmp_path / "plain", mlflow=False)
    assert plain.published == []
    # the default store of another folder, in the same process: its own file, not the first one's
    other = tmp_path / "elsewhere"
    fresh_store(empty_store, other)
    os.chdir(other)  # the fixture's monkeypatch.chdir restores the folder
    bcas.evaluate(api_grid, "mock:gold", out=other / "run", mlflow=True)
    assert len([r for r in _runs(f"sqlite:///{other / 'mlruns.db'}") if "mlflow.parentRunId" not in r.data.tags]) == 1
    _check_published(f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path / "run")  # the first store unchanged


def test_api_tracker_down_fails_before_any_answer(api_grid: str, tmp_path: Path) -> None:
    import bcas

    run_dir = tmp_path / "run"
    with pytest.raises(ValueError) as raised:
        bcas.evaluate(api_grid, "mock:gold", out=run_dir, mlflow=f"http://127.0.0.1:{_free_port()}")
    message = str(raised.value)
    assert "\n" not in message and message.startswith("MLflow tracking server http://127.0.0.1:")
    assert "is not reachable" in message
    assert not (run_dir / "records.jsonl").exists()  # nothing was answered, nothing paid for
    with pytest.raises(ValueError, match=r"^mlflow: expected True \(the default target\) or a target"):
        bcas.evaluate(api_grid, "mock:gold", out=run_dir, mlflow=3)
    with pytest.raises(ValueError, match=r"^mlflow: 'mlruns.db' is not a tracking URI") as not_uri:
        bcas.evaluate(api_grid, "mock:gold", out=run_dir, mlflow="mlruns.db")
    assert "test path" not in str(not_uri.value)  # the command line's hint has no place in a call
