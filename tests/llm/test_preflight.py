"""A user's own model server, first contact: preflight, pricing that never loses an
answer, and the real error surfacing (issue "first contact must work").

The preflight unit tests talk to the scriptable loopback server (``FaultServer``); the
end-to-end test runs the docs' own-server recipe (docs/models.md), as written, against a real
llama.cpp server on loopback with a model name that no price sheet knows.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.recipes import readme_recipe, recipe_server

from bcas.llm.preflight import PreflightError, preflight
from bcas.records import ModelPrice, PriceSheet, Record, reprice_record
from bcas.testing.project import grid_project, preload, read_records
from bcas.testing.servers import Fault, FaultServer, free_port

preload()

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    port = free_port()
    with socket.socket() as probe:  # nothing listens there
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    return port


# -- preflight against a scripted server ------------------------------------------------


def test_listed_model_passes_with_its_identity() -> None:
    with FaultServer(model="served-model") as server:
        result = preflight(server.base_url, "served-model")
    assert result.served == ["served-model"]
    assert result.warnings == []
    assert result.served_id == "served-model"
    assert [r.path for r in server.log] == ["/v1/chat/completions"]
    assert server.log[0].body["max_tokens"] == 1


def test_unlisted_name_that_is_answered_anyway_is_a_warning() -> None:
    # llama.cpp's server lists one alias and answers every name with its model.
    with FaultServer(model="smollm2") as server:
        result = preflight(server.base_url, "Qwen/Qwen3-8B")
    assert len(result.warnings) == 1
    assert "smollm2" in result.warnings[0] and "Qwen/Qwen3-8B" in result.warnings[0]


def test_404_for_the_model_lists_what_the_server_serves() -> None:
    with FaultServer(model="meta-llama/Llama-3.1-8B", strict_models=True) as server:
        url = server.base_url
        with pytest.raises(PreflightError) as info:
            preflight(url, "Qwen/Qwen3-8B")
    message = str(info.value)
    assert url in message and "Qwen/Qwen3-8B" in message
    assert "HTTP 404" in message and "it serves: meta-llama/Llama-3.1-8B" in message


def test_closed_port_is_refused_with_url_and_model() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(PreflightError) as info:
        preflight(url, "m")
    assert url in str(info.value) and "connection refused" in str(info.value)


def test_401_names_the_key_variable_never_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-wrong-" + "7" * 24
    monkeypatch.setenv("BCAS_TEST_SERVER_KEY", secret)
    with FaultServer(model="m", api_key="sk-right") as server:
        with pytest.raises(PreflightError) as info:
            preflight(server.base_url, "m", api_key_env="BCAS_TEST_SERVER_KEY")
    message = str(info.value)
    assert "HTTP 401" in message and "$BCAS_TEST_SERVER_KEY" in message
    assert secret not in message and "***" in message


def test_the_right_key_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BCAS_TEST_SERVER_KEY", "sk-right")
    with FaultServer(model="m", api_key="sk-right") as server:
        assert preflight(server.base_url, "m", api_key_env="BCAS_TEST_SERVER_KEY").served == ["m"]


def test_malformed_reply_and_timeout_are_named() -> None:
    with FaultServer(model="m") as server:
        server.script(Fault.malformed())
        with pytest.raises(PreflightError, match="malformed reply to a 1-token request"):
            preflight(server.base_url, "m")
        server.script(Fault.slow(3.0))
        with pytest.raises(PreflightError, match="timed out"):
            preflight(server.base_url, "m", timeout=0.5)


def test_a_transient_server_error_is_asked_again_twice_then_named() -> None:
    with FaultServer(model="m") as server:
        server.script(Fault.error(503, "loading"))
        assert preflight(server.base_url, "m").served == ["m"]  # the second attempt answered
        assert server.requests == 2
        server.reset()
        server.script(*[Fault.error(500, "CUDA out of memory")] * 3)
        with pytest.raises(PreflightError, match="HTTP 500: CUDA out of memory"):
            preflight(server.base_url, "m")
        assert server.requests == 3


def test_a_client_error_is_not_asked_again() -> None:
    with FaultServer(model="m") as server:
        server.script(Fault.error(400, "max_tokens too large"))
        with pytest.raises(PreflightError, match="HTTP 400: max_tokens too large"):
            preflight(server.base_url, "m")
        assert server.requests == 1


# -- pricing never loses an answer ------------------------------------------------------


def _record(model: str) -> Record:
    return Record(
        run_id="r",
        config_id="c",
        model=model,
        dataset="d",
        dataset_hash="h",
        item_id="i",
        question="q",
        answers=["a"],
        prediction="a",
        correct_em=True,
        f1=1.0,
        tokens_in=1000,
        tokens_out=100,
        searches_used=2,
    )


def test_unpriced_model_gets_null_cost_and_a_note_not_an_exception() -> None:
    sheet = PriceSheet("list", {"gpt-4o-mini": ModelPrice(0.15, 0.6)}, search_per_call=0.001)
    priced = reprice_record(_record("gpt-4o-mini"), sheet)
    assert priced.cost_usd == pytest.approx((1000 * 0.15 + 100 * 0.6) / 1e6 + 2 * 0.001)
    unpriced = reprice_record(_record("qwen3-8b"), sheet)
    assert unpriced.cost_usd is None and unpriced.price_sheet == "list"
    assert unpriced.extra["price_missing"] == {"model": "qwen3-8b", "sheet": "list"}
    # repricing under a sheet that knows it fills the cost and clears the note
    fixed = reprice_record(unpriced, PriceSheet("list", {"qwen3-8b": ModelPrice(0.1, 0.2)}))
    assert fixed.cost_usd is not None and "price_missing" not in fixed.extra


def test_summary_shows_unknown_cost_as_null_never_zero() -> None:
    from bcas.report.summary import summarize

    recs = [_record("qwen3-8b").replace(item_id=str(i)).to_dict() for i in range(3)]
    assert summarize(recs)[0].cost_usd is None
    recs[0]["cost_usd"] = recs[1]["cost_usd"] = recs[2]["cost_usd"] = 0.5
    assert summarize(recs)[0].cost_usd == pytest.approx(1.5)


def test_case_failure_lists_the_distinct_errors() -> None:
    from types import SimpleNamespace

    from bcas.config import RunConfig
    from bcas.run.invariants import check_invariants

    records = [
        {"item_id": f"q{i}", "stop_reason": "error", "error": "ModelError: connection refused to http://x/v1"}
        for i in range(3)
    ] + [{"item_id": "q3", "stop_reason": "error", "error": "ModelError: HTTP 400: prompt too long"}]
    case = SimpleNamespace(entry=SimpleNamespace(kind="madara"))
    ds = SimpleNamespace(items=[SimpleNamespace(id=f"q{i}") for i in range(4)])
    (problem,) = check_invariants(case, ds, RunConfig(), records, allow_errors=False)
    assert "4 items ended in error, 2 distinct" in problem
    assert "3x ModelError: connection refused to http://x/v1" in problem
    assert "1x ModelError: HTTP 400: prompt too long" in problem


# -- the plugin stops the session before any case ---------------------------------------


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(pytester.path)
    return pytester


def _own_server_args(url: str, model: str, run_dir: Path) -> list[str]:
    return [
        "--bcas-backend",
        "openai",
        "--bcas-base-url",
        url,
        "--bcas-model",
        model,
        "--bcas-grid",
        "smoke",
        "-k",
        "bm25 and s1",
        "--bcas-limit",
        "2",
        "--bcas-report",
        str(run_dir),
        "-p",
        "no:cacheprovider",
    ]


def test_closed_port_stops_the_session_naming_the_url(project: pytest.Pytester) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    run_dir = project.path / "run"
    started = time.perf_counter()
    result = project.runpytest(*_own_server_args(url, "Qwen/Qwen3-8B", run_dir))
    elapsed = time.perf_counter() - started
    print(f"closed port: session stopped after {elapsed:.2f} s")  # measured figure, not asserted
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "preflight failed" in err and url in err and "connection refused" in err and "Qwen/Qwen3-8B" in err
    assert not run_dir.exists()  # no record, no folder


def test_404_stops_the_session_listing_the_served_models(project: pytest.Pytester) -> None:
    with FaultServer(model="meta-llama/Llama-3.1-8B", strict_models=True) as server:
        result = project.runpytest(*_own_server_args(server.base_url, "Qwen/Qwen3-8B", project.path / "run"))
        chat_requests = server.requests
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "it serves: meta-llama/Llama-3.1-8B" in result.stderr.str()
    assert chat_requests == 1  # the preflight's one request; no case ran
    assert not (project.path / "run").exists()


def test_401_stops_the_session_naming_the_variable(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-user-" + "x1" * 16
    monkeypatch.setenv("MY_SERVER_KEY", secret)
    with FaultServer(model="m", api_key="sk-other") as server:
        args = _own_server_args(server.base_url, "m", project.path / "run") + ["--bcas-api-key-env", "MY_SERVER_KEY"]
        result = project.runpytest(*args)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "HTTP 401" in out and "$MY_SERVER_KEY" in out
    assert secret not in out


def test_no_preflight_skips_the_check(project: pytest.Pytester) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = project.runpytest(
        *_own_server_args(url, "m", project.path / "run"), "--bcas-no-preflight", "--collect-only", "-q"
    )
    assert result.ret == pytest.ExitCode.OK


def test_require_prices_stops_at_session_start(project: pytest.Pytester) -> None:
    with FaultServer(model="m") as server:
        result = project.runpytest(
            *_own_server_args(server.base_url, "Qwen/Qwen3-8B", project.path / "run"), "--bcas-require-prices"
        )
        assert server.requests == 0  # stopped before the preflight and before any case
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no price for model 'qwen3-8b'" in result.stderr.str()


# -- the docs' recipe, as written, against a real llama.cpp server ----------------------


@pytest.mark.server
@pytest.mark.proof_stage  # a served model through a whole run, half a minute: CI's required proof stage
def test_readme_recipe_runs_an_unpriced_model_to_completion(smollm2_gguf: Path, tmp_path: Path) -> None:
    recipe = readme_recipe("python3 -m pytest")
    assert "http://127.0.0.1:8000/v1" in recipe and "Qwen/Qwen3-8B" in recipe
    run_dir = tmp_path / "run"
    # As written, plus: only the smoke grid's BM25 single-search case on 2 items, into a scratch folder.
    env = {**os.environ, "BCAS_CACHE_DIR": str(tmp_path / "cache")}
    with recipe_server(smollm2_gguf) as server:
        command = recipe.replace("http://127.0.0.1:8000/v1", server.base_url).replace("python3", sys.executable, 1)
        command += f" -k 'bm25 and s1' --bcas-limit 2 --bcas-report {run_dir} -p no:cacheprovider"
        proc = subprocess.run(command, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    # The context the recipe starts the server with is read and recorded, and fits the smoke grid.
    session = json.loads((run_dir / "run.json").read_text())["sessions"][-1]
    assert session["models"]["qwen3-8b"]["context_window"] == 8192
    assert "context window of" not in out  # no configuration of the smoke grid needs more
    assert "answered for it anyway" in out  # llama.cpp serves its one model under any name: a warning
    assert "no price for qwen3-8b in sheet" in out  # one warning for the model
    records = read_records(run_dir)
    assert len(records) == 2
    assert all(r["cost_usd"] is None and r["model"] == "qwen3-8b" for r in records)
    assert all(r["error"] is None and r["tokens_out"] > 0 for r in records)
    html = (run_dir / "index.html").read_text()
    assert "no price for qwen3-8b in sheet" in html
    summary = json.loads((run_dir / "summary.json").read_text())
    assert all(row["cost_usd"] is None for row in summary["rows"])
