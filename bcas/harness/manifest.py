"""The pytest side of the run manifest ``run.json`` (:mod:`bcas.run.manifest` writes the file).

:class:`ManifestPlugin` writes the controller's session entry when its cases are known and
completes it when the session ends; :func:`resolved_options` says where each option's
value came from (command line, ini or default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pluggy import HookimplMarker

from bcas.harness import state
from bcas.harness.session_start import collected_cases
from bcas.harness.settings import _get, _opt_name
from bcas.run.manifest import finish_session, now, plain, session_entry, start_session
from bcas.run.options import OPTIONS
from bcas.run.settings import Settings

hookimpl = HookimplMarker("pytest")


def resolved_options(config: pytest.Config) -> dict[str, dict[str, Any]]:
    """Every bcas option's resolved value and where it came from."""
    out: dict[str, dict[str, Any]] = {}
    for name, _kind, _default, _help in OPTIONS:
        cli = config.getoption(_opt_name(name), default=None)
        if cli not in (None, []):
            source = "command line"
        else:
            ini = config.getini(_opt_name(name))
            source = "ini" if ini not in (None, "", [], False) else "default"
        try:
            value: Any = _get(config, name)
        except Exception as exc:  # noqa: BLE001 - a bad value already stopped the session; keep its text
            value = f"<invalid: {exc}>"
        out[name] = {"value": plain(value, name), "source": source}
    return out


class ManifestPlugin:
    """Writes the controller's session entry once its cases are known, completes it at the end.

    Registered by :mod:`bcas.harness.plugin` on the controller.  Nothing is written under
    ``--collect-only``, for a session without bcas cases, or when the session stops with a
    usage error before its cases (the checks run before this plugin's hooks).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started_at = now()
        self.started = False

    @property
    def settings(self) -> Settings:
        return self.config.stash[state.SETTINGS]

    def _start(self) -> None:
        if self.started or self.config.option.collectonly:
            return
        self.started = True
        options = resolved_options(self.config)
        found: list[dict[str, Any]] = self.config.stash.get(state.PREFLIGHT, [])
        preflight = list(found)
        entry = session_entry(self.config.stash[state.TOKEN], self.settings, options, preflight, self.started_at)
        start_session(Path(self.settings.run_dir), entry)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started_at = now()

    @hookimpl(trylast=True)  # after the plugin's own checks (a usage error there stops the session first)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if any("bcas_case" in getattr(getattr(item, "callspec", None), "params", {}) for item in session.items):
            self._start()

    @hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the controller collects nothing: a worker's collection tells it about cases."""
        if self.started:
            return
        if collected_cases(self.config.stash[state.PLAN].cases, ids):
            self._start()

    @hookimpl(trylast=True)  # after the report and the gate, which may still change the exit status
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.started:
            finish_session(Path(self.settings.run_dir), self.config.stash[state.TOKEN], int(session.exitstatus))
