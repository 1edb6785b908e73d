"""Say it at the start, and nothing behind the user's back (issue 18).

* Every bad ``--bcas-*`` option is one usage error naming the option and what it
  accepts, raised before collection: no model loaded, no file or folder written.
* ``--collect-only``, ``--help``, ``--markers`` and sessions stopped at start leave a
  run folder exactly as it was (file listing and modification times).
* Unknown cost is no number anywhere: records, summary.csv/json, index.html, terminal.
* Dataset files: ``--bcas-limit all``, a marker from the file's name, ``NAME=PATH``,
  files named alike in different folders kept apart.
* Markers: grid names and runner kinds (``kind_*``) never share a name; each marker is
  registered once.

The model is the ``mock`` backend (control flow only); retrieval is the real BM25 index.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import bcas.llm
from bcas.testing.project import budget_grid, codename_items, grid_project, preload, read_records, write_jsonl

# Beyond what every run touches: the start-of-session checks, the OpenAI-compatible client
# and its preflight, the gate, the manifest and the mock backend.
preload(
    "bcas.corpus",
    "bcas.gating",
    "bcas.harness.manifest",
    "bcas.run.checks",
    "bcas.llm.openai_compat",
    "bcas.llm.preflight",
    "bcas.testing.mock",
)

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))  # outside the project folder
    conftest = budget_grid("tiny", [pytester.path / "tiny.jsonl"], limit=4)
    grid_project(pytester.path, conftest, datasets={"tiny.jsonl": codename_items(10)})
    return pytester


MOCK = ["--bcas-model", "mock:gold", "--bcas-grid", "tiny", "-p", "no:cacheprovider"]


def _snapshot(folder: Path) -> dict[str, int]:
    """Every file and folder under ``folder`` with its modification time (ns); caches excluded."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] == "__pycache__" or "__pycache__" in rel.parts:
            continue
        out[str(rel)] = path.stat().st_mtime_ns
    return out


# -- 1. every option checked at session start ----------------------------------------------


def _files(project: pytest.Pytester) -> dict[str, str]:
    """Input files some bad options name (made before the snapshot, so they are not 'written')."""
    (project.path / "notgguf.gguf").write_bytes(b"not a model at all")
    (project.path / "afile.txt").write_text("a file, not a folder\n")
    (project.path / "broken.toml").write_text("[sheets.x\n")
    (project.path / "notabaseline.json").write_text('{"hello": 1}\n')
    return {"PATH": str(project.path)}


# (id, arguments, words the one error line must hold: the option and what it accepts)
BAD_OPTIONS: list[tuple[str, list[str], tuple[str, ...]]] = [
    (
        "model-missing-gguf",
        ["--bcas-model", "missing.gguf", "--bcas-grid", "tiny"],
        ("--bcas-model", "missing.gguf", "no GGUF file", "BACKEND:MODEL"),
    ),
    (
        "model-not-gguf",
        ["--bcas-model", "PATH/notgguf.gguf", "--bcas-grid", "tiny"],
        ("--bcas-model", "is not a GGUF file"),
    ),
    (
        "model-mock-variant",
        ["--bcas-model", "mock:golden", "--bcas-grid", "tiny"],
        ("--bcas-model", "unknown mock model 'golden'", "mock:gold, mock:verbose, mock:random"),
    ),
    (
        "model-unknown-backend",
        ["--bcas-model", "nosuch:foo", "--bcas-grid", "tiny"],
        ("--bcas-model", "unknown backend 'nosuch'; known: embedded, mock, openai, vllm"),
    ),
    ("backend", ["--bcas-backend", "nosuch"], ("--bcas-backend", "unknown backend 'nosuch'; known: embedded, mock")),
    (
        "base-url",
        ["--bcas-backend", "openai", "--bcas-base-url", "localhost:8000", "--bcas-model", "m"],
        ("--bcas-base-url", "http://"),
    ),
    (
        "judge-bogus",
        [*MOCK, "--bcas-judge", "bogus"],
        ("--bcas-judge", "unknown backend 'bogus'", "none, same", "embedded", "mock", "openai", "vllm"),
    ),
    ("judge-openai-no-url", [*MOCK, "--bcas-judge", "openai:gpt-4o-mini"], ("--bcas-judge", "--bcas-judge-base-url")),
    ("judge-missing-gguf", [*MOCK, "--bcas-judge", "embedded:missing.gguf"], ("--bcas-judge", "no GGUF file")),
    ("limit-negative", [*MOCK, "--bcas-limit", "-1"], ("--bcas-limit", ">= 1", "'all'")),
    ("limit-zero", [*MOCK, "--bcas-limit", "0"], ("--bcas-limit", ">= 1", "'all'")),
    ("limit-word", [*MOCK, "--bcas-limit", "every"], ("--bcas-limit", ">= 1", "'all'")),
    ("seed-negative", [*MOCK, "--bcas-seed", "-3"], ("--bcas-seed", "from 0 to")),
    ("seed-word", [*MOCK, "--bcas-seed", "x"], ("--bcas-seed", "a whole number")),
    ("epochs", [*MOCK, "--bcas-epochs", "0"], ("--bcas-epochs", ">= 1")),
    ("judge-repeats", [*MOCK, "--bcas-judge-repeats", "0"], ("--bcas-judge-repeats", ">= 1")),
    ("calibration-n", [*MOCK, "--bcas-calibration-n", "0"], ("--bcas-calibration-n", ">= 1")),
    ("rerank-candidates", [*MOCK, "--bcas-rerank-candidates", "0"], ("--bcas-rerank-candidates", ">= 1")),
    ("calibration-n-word", [*MOCK, "--bcas-calibration-n", "few"], ("--bcas-calibration-n", "a whole number")),
    ("concurrency", [*MOCK, "--bcas-concurrency", "0"], ("--bcas-concurrency", ">= 1")),
    ("min-accuracy", [*MOCK, "--bcas-min-accuracy", "1.5"], ("--bcas-min-accuracy", "from 0 to 1")),
    (
        "api-key-env-unset",
        [*MOCK, "--bcas-api-key-env", "BCAS_TEST_NO_SUCH_KEY_VARIABLE"],
        ("--bcas-api-key-env", "'BCAS_TEST_NO_SUCH_KEY_VARIABLE'", "not set or empty"),
    ),
    ("baseline-missing", [*MOCK, "--bcas-baseline", "missing.json"], ("--bcas-baseline", "not found", "a run folder")),
    (
        "baseline-format",
        [*MOCK, "--bcas-baseline", "PATH/notabaseline.json"],
        ("--bcas-baseline", "not a bcas baseline"),
    ),
    (
        "prices-typo",
        [*MOCK, "--bcas-prices", "prices.tmol"],
        ("--bcas-prices", "no sheet 'prices.tmol'", "batch", "none (no pricing"),
    ),
    ("prices-missing-file", [*MOCK, "--bcas-prices", "nowhere/prices.toml"], ("--bcas-prices", "does not exist")),
    ("prices-bad-toml", [*MOCK, "--bcas-prices", "PATH/broken.toml"], ("--bcas-prices", "not valid TOML")),
    (
        "require-prices-off",
        [*MOCK, "--bcas-prices", "none", "--bcas-require-prices"],
        ("--bcas-require-prices", "pricing is off"),
    ),
    (
        "report-under-a-file",
        [*MOCK, "--bcas-report", "PATH/afile.txt/run"],
        ("--bcas-report", "afile.txt is a file", "can be created"),
    ),
    (
        "report-is-a-file",
        [*MOCK, "--bcas-report", "PATH/afile.txt"],
        ("--bcas-report", "is not a folder", "can be created"),
    ),
    ("grid", ["--bcas-model", "mock:gold", "--bcas-grid", "nonesuch"], ("--bcas-grid", "unknown grid", "smoke")),
    (
        "require-judge",
        ["--bcas-model", "mock:gold", "--bcas-grid", "ablation", "--bcas-require-judge"],
        ("--bcas-require-judge", "grid ablation", "LLM judge in the paper (BCAS §3.6)", "--bcas-judge"),
    ),
    ("holm-scope", [*MOCK, "--bcas-holm-scope", "model"], ("--bcas-holm-scope", "cell, grid", "'model'")),
    ("datasets", [*MOCK, "--bcas-datasets", "missing.jsonl"], ("--bcas-datasets", "missing.jsonl", "no such file")),
]


@pytest.mark.parametrize(("args", "words"), [(c[1], c[2]) for c in BAD_OPTIONS], ids=[c[0] for c in BAD_OPTIONS])
def test_bad_option_stops_the_session_at_once_and_writes_nothing(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], words: tuple[str, ...]
) -> None:
    subs = _files(project)
    args = [a.replace("PATH", subs["PATH"]) for a in args]
    loaded: list[tuple] = []

    def no_model(*a: object, **k: object) -> None:
        loaded.append(a)
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(bcas.llm, "load_model", no_model)
    before = _snapshot(project.path)
    started = time.perf_counter()
    result = project.runpytest(*args)
    print(f"{args}: stopped after {time.perf_counter() - started:.2f} s")  # a figure, not asserted
    err, out = result.stderr.str(), result.stdout.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out + err
    errors = [line for line in err.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, err
    for word in words:
        assert word in errors[0], (word, errors[0])
    assert "Traceback" not in err + out
    assert not loaded
    assert _snapshot(project.path) == before  # nothing written, no folder created


def test_good_spellings_of_the_same_options_are_accepted(project: pytest.Pytester) -> None:
    # The control for the table above: the accepted forms pass the same checks.
    gguf = project.path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    report = project.path / "not" / "yet" / "there"
    for extra in (
        ["--bcas-limit", "all"],
        ["--bcas-limit", "3", "--bcas-seed", "7"],
        ["--bcas-prices", "batch"],
        ["--bcas-prices", "none"],
        ["--bcas-judge", "mock:gold"],
        ["--bcas-judge", "same"],
        ["--bcas-require-judge"],  # the smoke grid is no paper grid: no judge needed
        ["--bcas-grid", "ablation", "--bcas-require-judge", "--bcas-judge", "mock:gold"],
        ["--bcas-holm-scope", "cell"],
        ["--bcas-report", str(report)],
        ["--bcas-model", f"embedded:{gguf}"],
    ):
        result = project.runpytest(*MOCK, "--collect-only", "-q", *extra)
        assert result.ret == pytest.ExitCode.OK, (extra, result.stderr.str())
    assert not (project.path / "not").exists()


# -- 2. unknown cost is no number ----------------------------------------------------------


def test_unpriced_model_shows_no_number_for_cost_anywhere(project: pytest.Pytester) -> None:
    sheet = project.path / "mine.toml"
    sheet.write_text('[sheets.mine.models."gpt-4o-mini"]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n')
    run_dir = project.path / "run"
    result = project.runpytest(*MOCK, "-k", "s1", "--bcas-prices", str(sheet), "--bcas-report", str(run_dir))
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert all(r["cost_usd"] is None for r in read_records(run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [row["cost_usd"] for row in summary["rows"]] == [None]
    header, row = (run_dir / "summary.csv").read_text().splitlines()[:2]
    assert row.split(",")[header.split(",").index("cost_usd")] == ""
    table = out[out.index("bcas summary") :].splitlines()
    head = next(line for line in table if line.startswith("grid"))
    line = next(line for line in table if line.startswith("tiny"))
    assert head.rstrip().endswith("cost $") and line.rstrip().endswith("—"), line
    # A test double has no price by nature: no warning (the report's banner says so); a served
    # model the sheet misses is warned of (tests/llm/test_preflight.py).
    assert "no price for mock-gold" not in out
    html = (run_dir / "index.html").read_text()
    # what the page shows, figures' data included: the Vega library inlined beside them is code, not numbers
    shown = re.sub(r"<script(?![^>]*application/json)[^>]*>.*?</script>", "", html, flags=re.DOTALL)
    assert "0.0000" not in shown

    # The same run under a sheet that prices the mock at 0 (the packaged one prices no test double):
    # the control shows a number.
    zero = project.path / "zero.toml"
    zero.write_text('[sheets.zero.models."mock"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n')
    priced = project.runpytest(
        *MOCK, "-k", "s1", "--bcas-prices", str(zero), "--bcas-report", str(project.path / "priced")
    )
    assert "0.0000" in priced.stdout.str()[priced.stdout.str().index("bcas summary") :]


def test_prices_none_turns_pricing_off(project: pytest.Pytester) -> None:
    run_dir = project.path / "off"
    result = project.runpytest(*MOCK, "-k", "s1", "--bcas-prices", "none", "--bcas-report", str(run_dir))
    result.assert_outcomes(passed=1)
    assert all(r["cost_usd"] is None and r.get("price_sheet") is None for r in read_records(run_dir))
    assert "no price for" not in result.stdout.str()  # off is not a missing price: no warning


# -- 3. no side effects outside a real run ---------------------------------------------------


def test_collect_help_markers_and_failed_starts_leave_the_run_folder_untouched(project: pytest.Pytester) -> None:
    run_dir = project.path / "run"
    project.runpytest(*MOCK, "--bcas-report", str(run_dir)).assert_outcomes(passed=2)
    baseline = project.path / "base.json"
    from bcas.cli import main as bcas_main

    assert bcas_main(["gate", "write", str(run_dir), str(baseline)]) == 0
    assert {"records.jsonl", "index.html", "summary.csv", "summary.json", "run.json"} <= {
        p.name for p in run_dir.iterdir()
    }
    before = _snapshot(project.path)
    time.sleep(0.05)  # a rewrite would show in the modification times
    runs = {
        "collect-only": project.runpytest(*MOCK, "--bcas-report", str(run_dir), "--collect-only", "-q"),
        "collect-only, gated": project.runpytest(
            *MOCK, "--bcas-report", str(run_dir), "--bcas-baseline", str(baseline), "--collect-only", "-q"
        ),
        "help": project.runpytest(*MOCK, "--bcas-report", str(run_dir), "--help"),
        "markers": project.runpytest(*MOCK, "--bcas-report", str(run_dir), "--markers"),
        "deselected": project.runpytest(*MOCK, "--bcas-report", str(run_dir), "-m", "nothing_has_this"),
        "bad option": project.runpytest(*MOCK, "--bcas-report", str(run_dir), "--bcas-limit", "-1"),
        "strict gate": project.runpytest(
            *MOCK,
            "--bcas-report",
            str(run_dir),
            "--bcas-baseline",
            str(baseline),
            "--bcas-gate-strict",
            "--bcas-limit",
            "2",
        ),
        "closed server": project.runpytest(
            "--bcas-backend",
            "openai",
            "--bcas-base-url",
            f"http://127.0.0.1:{_closed_port()}/v1",
            "--bcas-model",
            "m",
            "--bcas-grid",
            "tiny",
            "--bcas-report",
            str(run_dir),
            "-p",
            "no:cacheprovider",
        ),
    }
    codes = {name: r.ret for name, r in runs.items()}
    assert codes == {
        "collect-only": 0,
        "collect-only, gated": 0,
        "help": 0,
        "markers": 0,
        "deselected": pytest.ExitCode.NO_TESTS_COLLECTED,
        "bad option": pytest.ExitCode.USAGE_ERROR,
        "strict gate": pytest.ExitCode.USAGE_ERROR,
        "closed server": pytest.ExitCode.USAGE_ERROR,
    }
    assert "bcas summary" not in runs["collect-only"].stdout.str()
    assert _snapshot(project.path) == before
    fresh = project.path / "fresh"
    project.runpytest(*MOCK, "--bcas-report", str(fresh), "--collect-only", "-q")
    assert not fresh.exists()


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- 4. dataset files: whole dataset, markers, names -----------------------------------------


def test_limit_all_runs_every_item_and_the_default_is_the_grids(project: pytest.Pytester) -> None:
    project.runpytest(*MOCK, "-k", "s1", "--bcas-report", str(project.path / "d")).assert_outcomes(passed=1)
    assert len(read_records(project.path / "d")) == 4  # the tiny grid's limit
    project.runpytest(
        *MOCK, "-k", "s1", "--bcas-limit", "all", "--bcas-report", str(project.path / "a")
    ).assert_outcomes(passed=1)
    assert len(read_records(project.path / "a")) == 10


def test_dataset_file_marker_name_and_files_named_alike(project: pytest.Pytester) -> None:
    mine = write_jsonl(project.path / "my.jsonl", codename_items(3, tag="m"))
    one = write_jsonl(project.path / "x" / "data.jsonl", codename_items(3, tag="x"))
    two = write_jsonl(project.path / "y" / "data.jsonl", codename_items(3, tag="y"))
    result = project.runpytest(*MOCK, "--collect-only", "-q", "--bcas-datasets", str(mine), "-m", "my")
    ids = [line for line in result.stdout.lines if "test_case[" in line]
    assert len(ids) == 2 and all("mock-gold-my-" in line for line in ids), result.stdout.str()

    result = project.runpytest(*MOCK, "--collect-only", "-q", "--bcas-datasets", f"{one},{two}", "-m", "y-data")
    ids = [line for line in result.stdout.lines if "test_case[" in line]
    assert len(ids) == 2 and all("mock-gold-y-data-" in line for line in ids), result.stdout.str()

    run_dir = project.path / "named"
    result = project.runpytest(
        *MOCK, "-k", "s1", "--bcas-datasets", f"{one},{two},mine={mine}", "--bcas-report", str(run_dir)
    )
    result.assert_outcomes(passed=3)
    by_name: dict[str, set[str]] = {}
    for rec in read_records(run_dir):
        by_name.setdefault(rec["dataset"], set()).add(rec["question"])
    assert sorted(by_name) == ["mine", "x-data", "y-data"]
    assert all(len(questions) == 3 for questions in by_name.values())  # never pooled
    rows = json.loads((run_dir / "summary.json").read_text())["rows"]
    assert sorted(r["dataset"] for r in rows) == ["mine", "x-data", "y-data"]


# -- 5. a session without grid cases ---------------------------------------------------------


def test_grid_given_to_a_session_without_cases_warns(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_unit="def test_one():\n    assert 1 + 1 == 2\n")
    warned = pytester.runpytest("--bcas-grid", "smoke", "-p", "no:cacheprovider")
    warned.assert_outcomes(passed=1)
    assert "--bcas-grid smoke is ignored: no collected test runs grid cases" in warned.stdout.str()
    assert "python3 -m pytest benchmarks --bcas-grid smoke" in warned.stdout.str()
    quiet = pytester.runpytest("-p", "no:cacheprovider")
    quiet.assert_outcomes(passed=1)
    assert "is ignored" not in quiet.stdout.str()


# -- 7. markers ----------------------------------------------------------------------------


def test_grid_and_kind_markers_are_distinct(project: pytest.Pytester) -> None:
    args = [
        "--bcas-model",
        "mock:gold",
        "--bcas-grid",
        "smoke,madara",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    grid = [line for line in project.runpytest(*args, "-m", "madara").stdout.lines if "test_case[" in line]
    kind = [line for line in project.runpytest(*args, "-m", "kind_madara").stdout.lines if "test_case[" in line]
    from bcas.grids import GRIDS

    # -m madara: the madara grid's cases only; kind_madara adds the smoke grid's MADARA treatments.
    smoke_kinds = [entry.kind for _, entry in GRIDS["smoke"].cases()]
    assert smoke_kinds.count("madara") > 0
    assert len(grid) == len(GRIDS["madara"].cases())
    assert len(kind) == len(grid) + smoke_kinds.count("madara")
    bcas_kind = [line for line in project.runpytest(*args, "-m", "kind_bcas").stdout.lines if "test_case[" in line]
    assert len(bcas_kind) == smoke_kinds.count("bcas") and not any("madara/" in line for line in bcas_kind)


def test_each_marker_is_registered_once_in_the_repository() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    ).stdout
    names = [
        line.split(":")[0].removeprefix("@pytest.mark.").split("(")[0]
        for line in out.splitlines()
        if line.startswith("@pytest.mark.")
    ]
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert not repeated, repeated
    for name in ("slow", "gpu", "vllm", "judge", "smoke", "madara", "kind_madara", "kind_bcas", "kind_rsc", "hotpotqa"):
        assert name in names, name
    assert "bcas" not in names  # a runner kind is only ever kind_bcas
