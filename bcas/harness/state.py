"""The bcas session state kept on the pytest config, in ``config.stash``.

One key per value, defined here so every reader and writer names the same key.  The
session runtime and the final result are typed ``Any``: their modules
(``bcas.harness.runner``, ``bcas.harness.finalize``) read this one, and an import back
would be a cycle.
"""

from __future__ import annotations

from typing import Any

import pytest

from bcas.harness.settings import Settings

# The session's token: names its manifest entry, cost stops, gate and progress files
# (an xdist worker gets the controller's).
TOKEN = pytest.StashKey[str]()
# The settings read from the options at configure time.
SETTINGS = pytest.StashKey[Settings]()
# The session runtime (a bcas.harness.runner.BcasSession), created on first use.
SESSION = pytest.StashKey[Any]()
# The preflight results of the run's servers (bcas.llm.preflight), for run.json.
PREFLIGHT = pytest.StashKey[list[dict[str, Any]]]()
# How many collected items run a grid case.
N_CASES = pytest.StashKey[int]()
# Whether any collected item runs a grid case.
ANY_CASE = pytest.StashKey[bool]()
# Cases run by the xdist workers (the controller runs none itself).
WORKER_CASES = pytest.StashKey[int]()
# The session's final result (a bcas.harness.finalize.FinalResult), for the summary.
FINAL = pytest.StashKey[Any]()
# The one line of a session stopped by Ctrl-C or SIGTERM (bcas.harness.interrupt).
INTERRUPTED = pytest.StashKey[str]()


def token(config: pytest.Config | None, default: str = "run") -> str:
    """The session token, ``default`` without one (or without a config)."""
    return config.stash.get(TOKEN, default) if config is not None else default
