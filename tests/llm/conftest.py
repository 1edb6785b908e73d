"""Fixtures shared by the served-model tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from bcas.testing.project import budget_grid, codename_items, grid_project


@pytest.fixture
def one_search_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    """A project with one grid, ``tiny``: one BCAS case (one search, a 400-token budget) on
    one short item, its own generation cache: seconds of a 135M model's time."""
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    conftest = budget_grid("tiny", [pytester.path / "tiny.jsonl"], (1,), limit=1, tokens=400)
    grid_project(pytester.path, conftest, datasets={"tiny.jsonl": codename_items(1, distractor=False)})
    return pytester
