"""Resume, as a user meets it: the same command again reuses exactly the answers whose
identity is current, and answers the rest.

An answer's identity includes the prompt-template hash (``bcas.identity``): answers a
run folder holds from an older prompt are not the current prompt's answers.  An answer
recorded as an error is no answer: the rerun retries it.  The run folder is edited as
an older run (or a transient failure) would have left it; the model is a test double
(bcas/testing/instant.py, control flow only) and the retrieval is the real BM25 index.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bcas.testing.project import backends, budget_grid, codename_items, grid_project, preload, read_records

preload()

pytest_plugins = ["pytester"]

ITEMS = 3
RUN = ["--bcas-backend", "instant", "--bcas-no-cache", "-p", "no:cacheprovider", "--bcas-grid", "again"]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    data = pytester.path / "again.jsonl"
    conftest = backends({"instant": "bcas.testing.instant:create"}) + budget_grid(
        "again", [data], searches=(1,), limit=ITEMS
    )
    grid_project(pytester.path, conftest, datasets={data.name: codename_items(ITEMS)})
    return pytester


def _rewrite(run_dir: Path, edit) -> list[dict]:
    """Rewrite ``records.jsonl`` with ``edit(record)`` applied to each record (as an older run left it)."""
    records = [edit(dict(r)) for r in read_records(run_dir)]
    (run_dir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return records


def test_answers_of_an_older_prompt_are_answered_again(project: pytest.Pytester, monkeypatch) -> None:
    run_dir = project.path / "run"
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "beta")  # the older prompt's answers: all wrong
    project.runpytest(*RUN, "--bcas-report", str(run_dir)).assert_outcomes(passed=1)
    current = {r["prompt_hash"] for r in read_records(run_dir)}
    assert len(current) == 1 and len(read_records(run_dir)) == ITEMS
    _rewrite(run_dir, lambda r: {**r, "prompt_hash": "0123456789abcdef"})  # written under another template

    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    result = project.runpytest(*RUN, "--bcas-report", str(run_dir))
    result.assert_outcomes(passed=1)
    records = read_records(run_dir)
    fresh = [r for r in records if r["prompt_hash"] in current]
    # Every item answered again under the current prompt; none of the older answers reused.
    assert sorted(r["item_id"] for r in fresh) == sorted({r["item_id"] for r in records})
    assert len(fresh) == ITEMS and all(r["correct_em"] and r["prediction"] == "alpha" for r in fresh)


def test_an_error_record_is_retried_by_the_rerun(project: pytest.Pytester) -> None:
    run_dir = project.path / "run"
    project.runpytest(*RUN, "--bcas-report", str(run_dir)).assert_outcomes(passed=1)
    failed_item = sorted(r["item_id"] for r in read_records(run_dir))[0]

    def transient_failure(rec: dict) -> dict:
        if rec["item_id"] != failed_item:
            return rec
        return {**rec, "error": "ConnectError: connection reset by peer", "stop_reason": "error", "prediction": "",
                "correct_em": False, "f1": 0.0}  # fmt: skip

    _rewrite(run_dir, transient_failure)
    project.runpytest(*RUN, "--bcas-report", str(run_dir)).assert_outcomes(passed=1)
    records = read_records(run_dir)
    mine = [r for r in records if r["item_id"] == failed_item]
    # The error stays in the file (append-only) and a real answer follows it; the other items are not rerun.
    assert [r["error"] is None for r in mine] == [False, True]
    assert mine[-1]["prediction"] == "alpha" and mine[-1]["correct_em"]
    assert len(records) == ITEMS + 1
    # The summary counts the answer, not the error.
    (row,) = json.loads((run_dir / "summary.json").read_text())["rows"]
    assert row["errors"] == 0 and row["correct"] == ITEMS and row["n"] == ITEMS
