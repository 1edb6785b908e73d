"""The result sinks in a pytest session: ``--bcas-<sink> [TARGET]`` options, a check at
session start (before any answer is paid for) and the publish at the end.

The sinks themselves are :data:`bcas.tracking.SINKS`; this module only reads the option
of each registered sink, opens the chosen ones on the controller (never on an xdist
worker) and hands them the finished run folder after the run's files are written.
"""

from __future__ import annotations

import pytest

from bcas.harness import state
from bcas.tracking import SINKS, ResultSink, SinkError, open_sinks, publish_all, sink_option

OPENED = pytest.StashKey[dict[str, ResultSink]]()
PUBLISHED = pytest.StashKey[list[str]]()


def _dest(name: str) -> str:
    return "bcas_" + sink_option(name).replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    """One ``--bcas-<option> [TARGET]`` per registered sink."""
    group = parser.getgroup("bcas")
    for name in SINKS.names():
        meta = SINKS.meta(name)
        group.addoption(
            f"--bcas-{sink_option(name)}",
            nargs="?",
            const=meta.get("default_target"),
            default=None,
            dest=_dest(name),
            metavar="TARGET",
            help=meta.get("help", f"publish the run to the {name} sink"),
        )
        parser.addini(_dest(name), f"target of the {name} result sink (as --bcas-{sink_option(name)})")


class TrackingPlugin:
    """Opens the chosen sinks at session start and publishes the run folder at session finish."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def _chosen(self) -> dict[str, str]:
        out = {}
        for name in SINKS.names():
            target = getattr(self.config.option, _dest(name), None) or self.config.getini(_dest(name)) or None
            if target is not None:
                out[name] = str(target)
        return out

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = self.config
        if hasattr(config, "workerinput") or config.option.collectonly:
            return
        try:
            config.stash[OPENED] = open_sinks(self._chosen())
        except SinkError as exc:
            raise pytest.UsageError(str(exc)) from None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = self.config
        opened = config.stash.get(OPENED, {})
        result = config.stash.get(state.FINAL, None)
        if not opened or result is None:
            return
        config.stash[PUBLISHED] = publish_all(opened, result.records_path.parent)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for line in self.config.stash.get(PUBLISHED, []):
            terminalreporter.write_line(line)


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(TrackingPlugin(config), "bcas-tracking")
