"""Top-level pytest configuration: opt-in gates for heavy cases.

``--runslow`` runs tests marked ``slow`` (heavy real-model cases); without it they
are skipped, so the default run stays fast and complete.  ``--runproofs`` runs the
heavy end-to-end proofs marked ``proof_stage`` (a grid killed with SIGKILL and resumed, a
faulty server, an engine crash, most pairs of the answer-invariance proof), which ``.ci/run`` runs as a required stage of their own
on every submission.  Tests marked ``vllm``, ``gpu`` or ``browser`` skip themselves when
their requirement is absent.
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
    parser.addoption(
        "--runproofs", action="store_true", default=False, help="also run the heavy proofs marked proof_stage"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gates = (
        ("slow", "--runslow", "slow: run with --runslow"),
        ("proof_stage", "--runproofs", "heavy proof: CI's required proof stage runs it (--runproofs)"),
    )
    for marker, option, reason in gates:
        if config.getoption(option):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
