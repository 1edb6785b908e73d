"""Top-level pytest configuration: opt-in gates for heavy cases.

``--runslow`` runs tests marked ``slow`` (heavy real-model cases); without it they
are skipped, so the default run stays fast and complete.  Tests marked ``vllm``,
``gpu`` or ``browser`` skip themselves when their requirement is absent.
"""

from __future__ import annotations

import os

import pytest

# The bcas plugin is also registered by its pytest11 entry point under this same name,
# so an installed package and a bare checkout both load it exactly once.
pytest_plugins = ["bcas.harness.plugin"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
