"""A case's accuracy and gate use the items and epochs this run evaluates, not every record in the folder.

A run folder can hold records of the same answer identity for more items than this run
takes: an unsharded run followed by one shard of it (``--bcas-shard K/N`` keeps the
dataset hash and the configuration ids of the unsharded run, ``bcas.shard``).  The
shard's case must be judged on its own items only.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import bcas
from bcas.llm import register_backend
from bcas.llm.base import ChatRequest, ChatResult
from bcas.shard import shard_number
from bcas.testing.instant import InstantModel
from bcas.testing.project import budget_grid, codename_items, write_jsonl


@pytest.fixture
def dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Ten items (two on shard 1 of 2); the instant model (which answers "alpha") is right on shard 1's only."""
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    rows = codename_items(10)
    for row in rows:
        if shard_number(str(row["id"]), 2) == 2:
            row["answers"] = ["beta"]
    assert sum(r["answers"] == ["alpha"] for r in rows) == 2
    path = write_jsonl(tmp_path / "ten.jsonl", rows)
    exec(budget_grid("ten", [path], (1,)), {})  # one BCAS configuration on BM25
    register_backend("instant", "bcas.testing.instant:create")
    return path


def test_a_shard_after_the_whole_run_is_gated_on_its_own_items(dataset: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    whole = bcas.evaluate(grids="ten", models="instant", out=run)
    assert len(whole.records) == 10 and sum(bool(r["correct_em"]) for r in whole.records) == 2
    base = tmp_path / "base"
    shutil.copytree(run, base)  # the whole run, as the shard's baseline
    shard = bcas.evaluate(grids="ten", models="instant", out=run, shard="1/2", min_accuracy=0.9, baseline=str(base))
    assert shard.written == 0  # every answer of shard 1 was resumed from the whole run
    # shard 1's items were all answered right: its accuracy clears the floor,
    assert shard.passed, shard.failures
    # and the paired test pairs the baseline with those two items alone
    assert shard.gate is not None and [row.n_paired for row in shard.gate.rows] == [2], shard.gate.rows


class FirstEpochOnlyModel(InstantModel):
    """Right ("alpha") when asked with the run's seed 0, that is in epoch 0, and wrong in every later epoch."""

    async def chat(self, request: ChatRequest) -> ChatResult:
        result = await super().chat(request)
        if request.json_schema and "answer" in request.json_schema.get("properties", {}) and request.seed != 0:
            return replace(result, text=json.dumps({"answer": "beta"}))
        return result


def test_a_run_with_fewer_epochs_is_floored_on_its_own_epochs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Epochs 0-1 recorded earlier in the folder; a one-epoch run is judged on epoch 0 alone."""
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    path = write_jsonl(tmp_path / "three.jsonl", codename_items(3))
    exec(budget_grid("three", [path], (1,)), {})
    register_backend("first_epoch", lambda model=None, **options: FirstEpochOnlyModel(model, **options))
    run = tmp_path / "run"
    both = bcas.evaluate(grids="three", models="first_epoch", out=run, epochs=2, seed=0, no_cache=True)
    assert [sum(bool(r["correct_em"]) for r in both.records if r["epoch"] == e) for e in (0, 1)] == [3, 0]
    one = bcas.evaluate(grids="three", models="first_epoch", out=run, epochs=1, seed=0, min_accuracy=0.9)
    assert one.written == 0 and one.passed, one.failures
