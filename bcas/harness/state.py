"""The bcas session state kept on the pytest config, in ``config.stash``.

One key per value, defined here so every reader and writer names the same key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from bcas.run.plan import Plan
from bcas.run.settings import Settings

if TYPE_CHECKING:
    from bcas.run.finalize import FinalResult
    from bcas.run.session import BcasSession

# The session's token: names its manifest entry, cost stops, gate and progress files
# (an xdist worker gets the controller's).
TOKEN = pytest.StashKey[str]()
# The settings read from the options at configure time.
SETTINGS = pytest.StashKey[Settings]()
# The run's plan (its cases), computed once from the settings.
PLAN = pytest.StashKey[Plan]()
# The session runtime, created on first use (the bcas_session fixture).
SESSION: pytest.StashKey[BcasSession] = pytest.StashKey()
# The preflight results of the run's servers (bcas.llm.preflight), for run.json.
PREFLIGHT = pytest.StashKey[list[dict[str, Any]]]()
# Label -> the name of what its server serves, for models served under another name (bcas.run.served).
SERVED = pytest.StashKey[dict[str, str]]()
# Whether any collected item runs a grid case.
ANY_CASE = pytest.StashKey[bool]()
# Cases run by the xdist workers (the controller runs none itself).
WORKER_CASES = pytest.StashKey[int]()
# Under xdist: the controller checked the cases its first worker collected (once a session).
CHECKED = pytest.StashKey[bool]()
# The session's final result, for the summary.
FINAL: pytest.StashKey[FinalResult | None] = pytest.StashKey()
# The one line of a session stopped by Ctrl-C or SIGTERM (bcas.harness.interrupt).
INTERRUPTED = pytest.StashKey[str]()


def token(config: pytest.Config | None, default: str = "run") -> str:
    """The session token, ``default`` without one (or without a config)."""
    return config.stash.get(TOKEN, default) if config is not None else default
