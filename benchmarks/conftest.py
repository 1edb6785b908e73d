"""Cases under benchmarks/ are produced by the bcas plugin from the chosen grids."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A grid case runs as long as its items take (hours on a paper grid): no per-test timeout."""
    for item in items:
        if HERE in item.path.resolve().parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(0))
