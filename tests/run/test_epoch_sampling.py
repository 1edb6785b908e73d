"""``--bcas-seed`` reaches the sampling of every epoch (``--bcas-epochs``), through either front door.

Epoch 0 samples with the run's seed and every later epoch with a seed derived from it
(``bcas.identity.epoch_seed``): two runs with different seeds must not share any
epoch's sampling, or their "independent" tries are the same tries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import bcas
from bcas.llm import register_backend
from bcas.llm.base import ChatRequest, ChatResult
from bcas.testing.instant import InstantModel
from bcas.testing.project import budget_grid, codename_items, write_jsonl

SEEN: list[int | None] = []  # the sampling seed of every request the model received


class SeedRecordingModel(InstantModel):
    async def chat(self, request: ChatRequest) -> ChatResult:
        SEEN.append(request.seed)
        return await super().chat(request)


def _create(model: str | None = None, **options: object) -> SeedRecordingModel:
    return SeedRecordingModel(model, **options)


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    path = write_jsonl(tmp_path / "two.jsonl", codename_items(2))
    exec(budget_grid("two", [path], (1,)), {})
    register_backend("seedrec", _create)
    return "two"


def _seeds_by_epoch(grid: str, seed: int, out: Path) -> dict[int, set[int | None]]:
    res = bcas.evaluate(grids=grid, models="seedrec", out=out, seed=seed, epochs=3, no_cache=True)
    assert len(res.records) == 2 * 3
    return {e: {r["seed"] for r in res.records if r["epoch"] == e} for e in range(3)}


def test_different_run_seeds_share_no_epoch_s_sampling(grid: str, tmp_path: Path) -> None:
    SEEN.clear()
    one = _seeds_by_epoch(grid, 1, tmp_path / "one")
    requested_one = set(SEEN)
    SEEN.clear()
    two = _seeds_by_epoch(grid, 2, tmp_path / "two")
    requested_two = set(SEEN)
    assert one[0] == {1} and two[0] == {2}  # epoch 0: the run's seed
    for epoch in (1, 2):
        assert len(one[epoch]) == len(two[epoch]) == 1  # one seed per epoch, whatever the item
        assert one[epoch] != two[epoch], epoch
    assert len(one[1] | one[2] | one[0]) == 3  # every epoch its own
    # what the records say is what the model was asked with
    assert requested_one == one[0] | one[1] | one[2] and requested_two == two[0] | two[1] | two[2]
