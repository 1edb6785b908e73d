"""Evidence and trajectory metrics through the plugin: records, summary, terminal and HTML.

The two layouts of the issue: a FlashRAG HotpotQA dataset with its corpus, and an
official-layout HotpotQA file (whose items carry their own paragraphs), on ``mock:gold``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bcas.testing.project import budget_grid, grid_project, preload, read_records

preload()

TESTS_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS_DIR))
from support import official  # noqa: E402

pytest_plugins = ["pytester"]

MOCK = ["--bcas-model", "mock:gold", "--bcas-grid", "tiny", "--bcas-no-cache", "-p", "no:cacheprovider"]


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    grid_project(pytester.path, budget_grid("tiny", ["hotpotqa"], (2,)))
    return pytester


def check_run(result: pytest.RunResult, run: Path, n: int) -> list[dict]:
    result.assert_outcomes(passed=1)
    records = read_records(run)
    assert len(records) == n
    for r in records:
        extra = r["extra"]
        assert extra["gold_documents"] >= 1
        curve = extra["recall_at_step"]
        assert len(curve) == r["searches_used"] >= 1
        assert curve[-1] == pytest.approx(extra["evidence_recall"])
        assert len(extra["gold_hits"]) == len(curve)
    summary = json.loads((run / "summary.json").read_text())
    (row,) = summary["rows"]
    assert row["gold_n"] == n
    assert row["evidence_recall"] == pytest.approx(sum(r["extra"]["evidence_recall"] for r in records) / n)
    assert row["recall_at_step"] and row["recall_at_step"][-1] == pytest.approx(row["evidence_recall"])
    csv_head = (run / "summary.csv").read_text().splitlines()[0].split(",")
    assert {"evidence_recall", "recall_at_step", "f_score", "pass_at_k", "cost_of_pass"} <= set(csv_head)
    out = result.stdout.str()
    assert "beyond accuracy:" in out and "evidence recall" in out
    html = (run / "index.html").read_text()
    assert 'id="beyond-accuracy"' in html and 'class="trajectory"' in html
    return records


def test_flashrag_dataset_with_its_corpus(suite: pytest.Pytester) -> None:
    dataset, corpus, items = official.flashrag_pair(suite.path / "data", n=2)
    run = suite.path / "run"
    result = suite.runpytest(
        *MOCK, "--bcas-datasets", f"flashrag:{dataset}", "--bcas-corpus", str(corpus), "--bcas-report", str(run)
    )
    records = check_run(result, run, 2)
    assert all(r["extra"]["gold_documents"] == 2 for r in records)
    # each item's searches found one of its two gold documents, and the report marks what they found
    assert [r["extra"]["evidence_recall"] for r in records] == [0.5, 0.5]
    assert "★" in (run / "index.html").read_text()


def test_official_hotpotqa_file(suite: pytest.Pytester) -> None:
    path = official.hotpotqa(suite.path / "data" / "hotpot_dev_distractor_v1.json", n=2)
    run = suite.path / "run"
    result = suite.runpytest(*MOCK, "--bcas-datasets", f"hotpotqa:{path}", "--bcas-report", str(run))
    records = check_run(result, run, 2)
    # A registered metric is a comparison's outcome too.
    from bcas.report.compare import compare_runs, load_run

    (comp,), _ = compare_runs(load_run(str(run)), load_run(str(run)), "gold_found")
    found = sum(r["extra"]["evidence_recall"] > 0 for r in records) / 2
    assert comp.n == 2 and comp.acc_a == comp.acc_b == found and comp.diff == 0.0


def test_unmappable_gold_is_counted_and_reported(suite: pytest.Pytester) -> None:
    path = official.hotpotqa(suite.path / "data" / "hotpot.json", n=2)
    rows = json.loads(path.read_text())
    rows[0]["supporting_facts"].append(["A page not in the context", 0])
    path.write_text(json.dumps(rows))
    run = suite.path / "run"
    result = suite.runpytest(*MOCK, "--bcas-datasets", f"hotpotqa:{path}", "--bcas-report", str(run))
    result.assert_outcomes(passed=1)
    by_id = {r["item_id"]: r for r in read_records(run)}
    assert by_id[rows[0]["_id"]]["extra"]["gold_unmapped"] == 1
    assert by_id[rows[0]["_id"]]["extra"]["gold_unmapped_refs"] == ["A page not in the context"]
    assert "gold_unmapped" not in by_id[rows[1]["_id"]]["extra"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["rows"][0]["gold_unmapped"] == 1
    assert "1 gold refs unmapped" in result.stdout.str()
    assert "tiny: 1 gold evidence references name no document of the searched collection" in result.stdout.str()
