"""A case's accuracy and gate use the items this run evaluates, not every record in the folder.

A run folder can hold records of the same answer identity for more items than this run
takes: an unsharded run followed by one shard of it (``--bcas-shard K/N`` keeps the
dataset hash and the configuration ids of the unsharded run, ``bcas.shard``).  The
shard's case must be judged on its own items only.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import bcas
from bcas.llm import register_backend
from bcas.shard import shard_number
from bcas.testing.project import budget_grid, codename_items, write_jsonl


@pytest.fixture
def dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Twelve items (four on shard 1 of 2); the instant model (which answers "alpha") is right on shard 1's only."""
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BCAS_INSTANT_ANSWER", "alpha")
    rows = codename_items(12)
    for row in rows:
        if shard_number(str(row["id"]), 2) == 2:
            row["answers"] = ["beta"]
    assert sum(r["answers"] == ["alpha"] for r in rows) == 4
    path = write_jsonl(tmp_path / "twelve.jsonl", rows)
    exec(budget_grid("twelve", [path], (1,)), {})  # one BCAS configuration on BM25
    register_backend("instant", "bcas.testing.instant:create")
    return path


def test_a_shard_after_the_whole_run_is_gated_on_its_own_items(dataset: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    whole = bcas.evaluate(grids="twelve", models="instant", out=run)
    assert len(whole.records) == 12 and sum(bool(r["correct_em"]) for r in whole.records) == 4
    base = tmp_path / "base"
    shutil.copytree(run, base)  # the whole run, as the shard's baseline
    shard = bcas.evaluate(grids="twelve", models="instant", out=run, shard="1/2", min_accuracy=0.9, baseline=str(base))
    assert shard.written == 0  # every answer of shard 1 was resumed from the whole run
    # shard 1's items were all answered right: its accuracy clears the floor,
    assert shard.passed, shard.failures
    # and the paired test pairs the baseline with those four items alone
    assert shard.gate is not None and [row.n_paired for row in shard.gate.rows] == [4], shard.gate.rows
