"""The evidence metrics and the abstention rate with the embedded model (SmolLM2-135M; ``slow``).

One item per run: the embedded model reads ~175 prompt tokens/s on a CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bcas.testing.project import budget_grid, grid_project

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO = TESTS_DIR.parent
sys.path.insert(0, str(TESTS_DIR))
from support import official  # noqa: E402
from support.mockruns import run_pytest  # noqa: E402

pytestmark = pytest.mark.slow


def check(proc: subprocess.CompletedProcess[str], run: Path) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    assert records
    for r in records:
        assert r["extra"]["gold_documents"] >= 1
        assert isinstance(r["extra"]["evidence_recall"], float)
        assert len(r["extra"]["recall_at_step"]) == r["searches_used"]
    (row,) = json.loads((run / "summary.json").read_text())["rows"]
    assert row["gold_n"] == len(records) and row["evidence_recall"] is not None
    assert "beyond accuracy:" in proc.stdout and "evidence recall" in proc.stdout
    assert 'id="beyond-accuracy"' in (run / "index.html").read_text()


def test_embedded_model_on_flashrag_with_corpus_and_on_official_hotpotqa(tmp_path: Path) -> None:
    project = grid_project(tmp_path / "p", budget_grid("tiny", ["hotpotqa"], (2,)))
    dataset, corpus, _ = official.flashrag_pair(project / "data", n=2)
    hotpot = official.hotpotqa(project / "data" / "hotpot_dev_distractor_v1.json", n=2)
    base = ["--bcas-grid", "tiny", "--bcas-limit", "1", "--bcas-no-cache"]
    env = {"HF_HUB_OFFLINE": "1"}
    flash = project / "flash"
    proc = run_pytest(
        project, *base, "--bcas-datasets", f"flashrag:{dataset}", "--bcas-corpus", str(corpus),
        "--bcas-report", str(flash), timeout=1800, env=env,
    )  # fmt: skip
    check(proc, flash)
    official_run = project / "official"
    proc = run_pytest(
        project, *base, "--bcas-datasets", f"hotpotqa:{hotpot}", "--bcas-report", str(official_run),
        timeout=1800, env=env,
    )  # fmt: skip
    check(proc, official_run)


def run_grid(grid: str, run: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """``pytest benchmarks --bcas-grid GRID --bcas-limit 1`` on the embedded default into ``run`` (it must pass)."""
    env = {"BCAS_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "pytest", "benchmarks", "--bcas-grid", grid, "--bcas-limit", "1",
               "--bcas-no-cache", "--bcas-report", str(run), "-q", "-p", "no:cacheprovider"]  # fmt: skip
    proc = subprocess.run(command, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc


def test_embedded_abstention_rate_on_the_smoke_grid(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_grid("smoke", run, tmp_path / "cache")
    rows = json.loads((run / "summary.json").read_text())["rows"]
    for row in rows:
        assert row["n_correct"] + row["n_incorrect"] + row["n_not_attempted"] == row["n"]
        assert row["not_attempted_rate"] is not None
    assert proc.stdout.count("correct/incorrect/not attempted") >= len({(r["dataset"], r["label"]) for r in rows})


def test_embedded_model_on_the_evidence_grid(tmp_path: Path) -> None:
    """The ``evidence`` grid (a cite list, an abstain action) end to end on the real model, 1 item."""
    run = tmp_path / "run"
    run_grid("evidence", run, tmp_path / "cache")
    records = {r["label"]: r for r in map(json.loads, (run / "records.jsonl").read_text().splitlines())}
    assert set(records) == {"bm25/s2/t2k", "bm25/s2/t2k/cite", "bm25/s2/t2k/abstain"}
    cited = records["bm25/s2/t2k/cite"]
    assert cited["config"]["agent"]["cite"] is True and isinstance(cited["extra"]["cite"], list)
    if cited["stop_reason"] == "answered":  # an answer decoded under the cite schema scores its citations
        assert cited["extra"]["citation_recall"] is not None
    abstained = records["bm25/s2/t2k/abstain"]
    assert abstained["config"]["agent"]["abstain"] is True
    rows = {row["label"]: row for row in json.loads((run / "summary.json").read_text())["rows"]}
    abstain_row = rows["bm25/s2/t2k/abstain"]
    assert abstain_row["n_correct"] + abstain_row["n_incorrect"] + abstain_row["n_not_attempted"] == 1
    if abstained["stop_reason"] == "abstained":
        assert abstain_row["n_not_attempted"] == 1
    assert len({r["config_id"] for r in records.values()}) == 3
    print(
        "evidence grid, 1 item:",
        {
            label: (r["stop_reason"], r["extra"].get("cite"), r["extra"].get("citation_recall"))
            for label, r in records.items()
        },
    )
