"""The two front doors run one engine: ``bcas.evaluate`` and ``pytest benchmarks`` write the
same records for the same options, the API resumes, and ``import bcas.run`` needs no pytest."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bcas.testing.project import budget_grid, grid_project, read_records
from tests.support.mockruns import run_pytest

REPO = Path(__file__).resolve().parents[2]
TINY = budget_grid("tiny", ["hotpotqa"], (1, 2), limit=3)  # two BCAS configurations on BM25, 3 items


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_the_run_layer_and_the_api_import_no_pytest() -> None:
    done = _python(
        "import sys, bcas, bcas.run, bcas.run.session, bcas.run.plan, bcas.run.finalize, bcas.api\n"
        "assert 'pytest' not in sys.modules, 'pytest imported'\n"
        "assert callable(bcas.evaluate)\n"
    )
    assert done.returncode == 0, done.stderr
    light = _python("import sys, bcas\nassert 'bcas.api' not in sys.modules and 'bcas.run' not in sys.modules\n")
    assert light.returncode == 0, light.stderr  # ``import bcas`` stays light: evaluate loads on first use


def test_the_api_gates_a_run_without_pytest(tmp_path: Path) -> None:
    """``baseline=`` and ``min_accuracy=`` run the gate (bcas.gating) in a process that never loads pytest."""
    done = _python(
        "import sys, bcas\n"
        "from pathlib import Path\n"
        "from bcas.testing.project import budget_grid\n"
        f"exec({TINY!r}, {{}})\n"
        f"out = Path({str(tmp_path)!r})\n"
        "bcas.evaluate(grids='tiny', models='mock:gold', limit=3, seed=7, out=out / 'base')\n"
        "res = bcas.evaluate(grids='tiny', models='mock:random', limit=3, seed=7, out=out / 'gated',\n"
        "                    baseline=str(out / 'base'), min_accuracy=0.9, allow_mismatch=True)\n"
        "assert 'pytest' not in sys.modules, 'pytest imported'\n"
        "assert res.gate is not None and [r.n_paired for r in res.gate.rows] == [3, 3], res.gate\n"
        "assert all('mock:gold' in r.compared_with for r in res.gate.rows), res.gate.rows\n"
        "assert not res.passed and len(res.failures) == 2, res.failures\n"
        "assert all('below the floor 0.900' in f for fs in res.failures.values() for f in fs), res.failures\n"
        "assert (out / 'gated' / 'gate-report.json').is_file()\n"
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _register_tiny() -> None:
    namespace: dict[str, object] = {}
    exec(TINY, namespace)  # the same registration the pytest project's conftest runs


def _identity(rec: dict[str, object]) -> tuple[object, ...]:
    return tuple(rec[k] for k in ("model_fingerprint", "config_id", "dataset_hash", "item_id", "prompt_hash", "epoch"))


def _content(rec: dict[str, object]) -> tuple[object, ...]:
    return (rec["prediction"], rec["correct_em"], rec["f1"], rec["stop_reason"], rec["searches_used"], rec["grades"])


def test_api_and_pytest_write_identical_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bcas

    project = grid_project(tmp_path / "project", TINY)
    options = ["--bcas-grid", "tiny", "--bcas-model", "mock:gold", "--bcas-limit", "3", "--bcas-seed", "7"]
    done = run_pytest(project, *options, "--bcas-report", str(tmp_path / "by-pytest"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]

    _register_tiny()
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "api-cache"))  # its own cache: answers made afresh
    res = bcas.evaluate(grids=["tiny"], models=["mock:gold"], limit=3, seed=7, out=tmp_path / "by-api")

    by_pytest, by_api = read_records(tmp_path / "by-pytest"), read_records(tmp_path / "by-api")
    assert len(by_api) == len(by_pytest) == 6  # 2 configurations x 3 items
    assert {_identity(r): _content(r) for r in by_api} == {_identity(r): _content(r) for r in by_pytest}
    assert res.passed and res.written == 6 and len(res.frame) == 6
    assert {row.label for row in res.summary} == {"bm25/s1/t2k", "bm25/s2/t2k"}
    for name in ("records.jsonl", "run.json", "summary.csv", "summary.json", "index.html"):
        assert (tmp_path / "by-api" / name).is_file(), name
    manifest = json.loads((tmp_path / "by-api" / "run.json").read_text(encoding="utf-8"))
    entry = manifest["sessions"][-1]
    assert entry["status"] == "finished" and entry["records_written"] == 6
    assert entry["options"]["limit"] == {"value": "3", "source": "argument"}

    compare = subprocess.run(
        [sys.executable, "-m", "bcas", "compare", str(tmp_path / "by-pytest"), str(tmp_path / "by-api")],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compare.returncode == 0, compare.stderr
    assert "no flipped items" in compare.stdout, compare.stdout


def test_a_second_call_resumes_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bcas

    _register_tiny()
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    first = bcas.evaluate(grids="tiny", models="mock:gold", limit=2, out=tmp_path / "run")
    lines = (tmp_path / "run" / "records.jsonl").read_text(encoding="utf-8")
    again = bcas.evaluate(grids="tiny", models="mock:gold", limit=2, out=tmp_path / "run")
    assert first.written == 4 and again.written == 0
    assert (tmp_path / "run" / "records.jsonl").read_text(encoding="utf-8") == lines
    assert len(again.records) == 4 and again.passed
    sessions = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))["sessions"]
    assert [s["records_written"] for s in sessions] == [4, 0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit: expected a whole number >= 1 or 'all'"),
        ({"models": ["nosuch:thing"]}, "models: unknown backend 'nosuch'"),
        ({"grids": ["nosuch"]}, "grids: unknown grid 'nosuch'"),
        ({"seed": "x"}, "seed: expected a whole number, got 'x'"),
        ({"no_such_option": 1}, "no_such_option: not an option of bcas.evaluate"),
        ({"grid": "smoke"}, "grid: not an option of bcas.evaluate (use grids=)"),
        ({"limt": 2}, "limt: not an option of bcas.evaluate (did you mean 'limit'?)"),
        ({"prics": "list"}, "prics: not an option of bcas.evaluate (did you mean 'prices'?)"),
        ({"models": ["opneai:gpt-4o-mini"]}, "models: unknown backend 'opneai' (did you mean 'openai'?)"),
        (
            {"models": ["openai:m"], "base_url": "http://127.0.0.1:9/v1", "api_key_env": "sk-proj-abc123XYZ"},
            "api_key_env: the value looks like a key, not a variable name",
        ),
        ({"estimate": True}, "estimate: only the pytest front door has it"),
        ({"baseline": "/no/such/run"}, "baseline: "),
    ],
)
def test_a_bad_argument_is_one_line_naming_it(kwargs: dict[str, object], message: str, tmp_path: Path) -> None:
    import bcas

    arguments: dict[str, object] = {"models": ["mock:gold"], "out": tmp_path / "run", **kwargs}
    with pytest.raises(ValueError) as caught:
        bcas.evaluate(**arguments)  # type: ignore[arg-type]
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text, text
    assert not (tmp_path / "run").exists()  # nothing written before the options hold


def test_a_mistyped_sheet_or_dataset_is_answered_with_the_closest_name(tmp_path: Path) -> None:
    import bcas

    for kwargs, hint in (({"prices": "lsit"}, "(did you mean 'list'?)"), ({"datasets": "hotpotq"}, "'hotpotqa'?")):
        with pytest.raises(ValueError, match=re.escape(hint)):
            bcas.evaluate(models="mock:gold", out=tmp_path / "run", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "run").exists()


@pytest.mark.proof_stage  # the embedded model through the API, 20 s: CI's required proof stage runs it
def test_a_real_model_answers_through_the_api(tmp_path: Path, smollm2_gguf: Path) -> None:
    """The embedded backend (llama.cpp, SmolLM2-135M), one item, one configuration: a graded record."""
    import bcas

    namespace: dict[str, object] = {}
    exec(budget_grid("one", ["hotpotqa"], (1,), limit=1, tokens=256), namespace)
    res = bcas.evaluate(grids="one", models=f"embedded:{smollm2_gguf}", limit=1, out=tmp_path / "run")
    assert len(res.records) == 1 and res.written == 1
    record = res.records[0]
    assert record["error"] is None, record["error"]
    from bcas.run.settings import ModelSpec

    assert record["model"] == ModelSpec("embedded", str(smollm2_gguf)).label
    assert record["tokens_out"] > 0 and isinstance(record["correct_em"], bool)
    assert record["model_fingerprint"] and "mock" not in record["model_fingerprint"]


@pytest.mark.proof_stage  # the smoke grid twice on the embedded model: CI's required proof stage
def test_the_smoke_grid_through_both_doors_gives_the_same_answers(tmp_path: Path) -> None:
    """The issue's check: ``bcas.evaluate`` runs the smoke grid on ``mock:gold`` into a folder that
    ``compare`` accepts against ``pytest benchmarks`` with the same options, no flipped item
    (every case on 2WikiMultihopQA, whose 180 paragraphs embed in seconds, 1 item)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}  # the session's index cache
    same = ["--bcas-grid", "smoke", "--bcas-model", "mock:gold", "--bcas-datasets", "2wikimultihopqa"]
    command = [sys.executable, "-m", "pytest", "benchmarks", *same, "--bcas-limit", "1", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, "--bcas-report", str(tmp_path / "by-pytest")], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    script = (
        "import sys, bcas\n"
        "res = bcas.evaluate(grids=['smoke'], models=['mock:gold'], datasets=['2wikimultihopqa'], limit=1,\n"
        "                    out=sys.argv[1])\n"
        "assert res.passed, res\n"
        "print('written', res.written)\n"
    )
    api = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "by-api")], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert api.returncode == 0, api.stdout[-3000:] + api.stderr[-2000:]
    by_pytest, by_api = read_records(tmp_path / "by-pytest"), read_records(tmp_path / "by-api")
    assert len(by_api) == len(by_pytest) >= 3  # every smoke case run on the dataset, 1 item each
    assert len({r["label"] for r in by_api}) == len(by_api)
    assert {_identity(r): _content(r) for r in by_api} == {_identity(r): _content(r) for r in by_pytest}
    assert f"written {len(by_api)}" in api.stdout
    compare = subprocess.run(
        [sys.executable, "-m", "bcas", "compare", str(tmp_path / "by-pytest"), str(tmp_path / "by-api")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert compare.returncode == 0, compare.stderr
    assert "no flipped items" in compare.stdout, compare.stdout


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"gate_fallback_share": 1.5}, "gate_fallback_share must lie in [0, 1), got 1.5"),
        ({"gate_fallback_share": -0.1}, "gate_fallback_share must lie in [0, 1), got -0.1"),
        ({"gate_family": "run"}, "gate_family must be one of session, grid, case, got 'run'"),
    ],
)
def test_a_bad_gate_option_is_one_value_error_naming_the_keyword(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, object], message: str
) -> None:
    """The gate's options as :func:`bcas.evaluate` keywords: a bad value names the keyword, not the flag."""
    import bcas

    _register_tiny()
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    bcas.evaluate(grids="tiny", models="mock:gold", limit=3, seed=7, out=tmp_path / "base")
    with pytest.raises(ValueError) as caught:
        bcas.evaluate(grids="tiny", models="mock:gold", limit=3, seed=7, out=tmp_path / "gated",
                      baseline=str(tmp_path / "base"), gate_sequential=True, **options)  # fmt: skip
    assert str(caught.value) == message


def test_a_sequential_run_resumes_only_with_the_share_it_began_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback share is recorded with the session's options (run.json); a later session into the
    same run folder with another share is refused in one line, the same share (given or by default) resumes."""
    import bcas

    _register_tiny()
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    common = dict(grids="tiny", models="mock:gold", limit=3, seed=7)
    bcas.evaluate(**common, out=tmp_path / "base")  # type: ignore[arg-type]
    gated = dict(common, out=tmp_path / "gated", baseline=str(tmp_path / "base"), gate_sequential=True)
    bcas.evaluate(**gated, gate_fallback_share=0.5)  # type: ignore[arg-type]
    for other in (0.2, None):
        extra = {} if other is None else {"gate_fallback_share": other}
        with pytest.raises(ValueError) as caught:
            bcas.evaluate(**gated, **extra)  # type: ignore[arg-type]
        assert str(caught.value) == (
            "gate_fallback_share 0.2 differs from the 0.5 this run folder's earlier sequential session used: a "
            "resumed case is decided again from its records with the value given, so resume with 0.5 or write "
            "into a new run folder"
        )
    assert bcas.evaluate(**gated, gate_fallback_share="0.5").gate is not None  # type: ignore[arg-type]
    bcas.evaluate(**dict(gated, out=tmp_path / "fresh"))  # type: ignore[arg-type]  # default share, new folder
    assert bcas.evaluate(**dict(gated, out=tmp_path / "fresh"), gate_fallback_share=0.2).gate is not None  # type: ignore[arg-type]
    assert bcas.evaluate(**dict(common, out=tmp_path / "gated", baseline=str(tmp_path / "base"))).gate is not None  # type: ignore[arg-type]  # fixed-n: no share


@pytest.mark.parametrize(
    ("changed", "words"),
    [
        ({"alpha": 0.05}, "alpha 0.05 differs from the 0.1"),
        ({"gate_family": "case"}, "gate_family case differs from the grid"),
        ({"max_drop": 0}, "max_drop 0 differs from the 5"),
        ({"gate_metric": "correct_em"}, "gate_metric correct_em differs from the (each grid's own)"),
        ({"gate_fallback_share": 0.3}, "gate_fallback_share 0.3 differs from the 0.2"),
    ],
)
def test_a_sequential_run_resumes_only_with_every_option_that_decides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changed: dict[str, object], words: str
) -> None:
    """Every option the sequential decision is recomputed with on resume (level, Holm family, tolerance,
    metric, fallback share) is checked against the run folder's earlier sequential session: each one
    changed alone is refused, naming it and both values; the same options resume."""
    import bcas

    _register_tiny()
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    common = dict(grids="tiny", models="mock:gold", limit=3, seed=7)
    bcas.evaluate(**common, out=tmp_path / "base")  # type: ignore[arg-type]
    began = dict(alpha=0.1, gate_family="grid", max_drop=5, gate_fallback_share=0.2)
    gated = dict(common, out=tmp_path / "gated", baseline=str(tmp_path / "base"), gate_sequential=True)
    bcas.evaluate(**gated, **began)  # type: ignore[arg-type]
    with pytest.raises(ValueError) as caught:
        bcas.evaluate(**gated, **{**began, **changed})  # type: ignore[arg-type]
    assert str(caught.value).startswith(words + " this run folder's earlier sequential session used")
    assert bcas.evaluate(**gated, **began).gate is not None  # type: ignore[arg-type]
