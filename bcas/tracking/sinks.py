"""The result-sink extension point: a name -> a factory of a :class:`ResultSink`.

``register_sink("name", "pkg.mod:Factory", option="name", default_target="...",
help="...")``: the factory is called with the target the user gave (a tracking URI, a
project name) and returns an object with ``check()`` (called once at session start; it
raises :class:`SinkError` with one line when the tracker cannot be reached) and
``publish(run_dir)`` (called once at the end, with the finished run folder).  Publishing
the same run folder again updates what was published before instead of adding a copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from bcas.registry import Registry


class SinkError(RuntimeError):
    """A sink that cannot be used: the message is one line a user can act on."""


class ResultSink(Protocol):
    """What a sink factory returns."""

    def check(self) -> None:
        """Reach the tracker now (session start); raise :class:`SinkError` when it is down."""

    def publish(self, run_dir: Path) -> str:
        """Publish the run folder; returns a line naming where it went."""


SINKS: Registry[Any] = Registry("result sink")


def register_sink(name: str, factory: Any, *, default_target: str, help: str, option: str | None = None) -> None:
    """One sink: ``--bcas-<option or name> [TARGET]`` chooses it (``default_target`` without a value)."""
    SINKS.register(name, factory, option=option or name, default_target=default_target, help=help)


def open_sink(name: str, target: str | None) -> ResultSink:
    """The sink ``name`` for ``target`` (its default target when ``None``)."""
    factory = SINKS.get(name)
    chosen = target or SINKS.meta(name, "default_target")
    sink: ResultSink = factory(chosen)
    return sink


def sink_option(name: str) -> str:
    """The option that chooses sink ``name``: ``--bcas-<it>``, and the keyword of ``bcas.evaluate``
    with ``_`` for ``-``."""
    return str(SINKS.meta(name, "option", name))


def open_sinks(chosen: Mapping[str, str | None]) -> dict[str, ResultSink]:
    """Open each chosen sink (name -> target, ``None``: its default target) and reach its
    tracker now, before any answer is paid for; a sink that cannot be used raises
    :class:`SinkError` with one line.  Both front doors call this at the start of a run."""
    opened: dict[str, ResultSink] = {}
    for name, target in chosen.items():
        sink = open_sink(name, target)
        sink.check()
        opened[name] = sink
    return opened


def publish_all(opened: Mapping[str, ResultSink], run_dir: Path) -> list[str]:
    """Publish the finished run folder to every opened sink; one line per sink.  A publish
    that fails is its line, never an exception: the answers are on disk and publishing
    again with the same option updates what is there."""
    lines = []
    for name, sink in opened.items():
        try:
            lines.append(sink.publish(run_dir))
        except Exception as exc:
            lines.append(f"{name}: not published ({type(exc).__name__}: {exc}); publish again with the same option")
    return lines


register_sink(
    "mlflow",
    "bcas.tracking.mlflow_sink:MlflowSink",
    default_target="sqlite:///mlruns.db",
    help="publish the run to MLflow: one MLflow run per bcas run, a nested run per case "
    "(params, tags, metrics with intervals, the run folder as artifacts); URI of the "
    "tracking store or server (default sqlite:///mlruns.db); needs the mlflow extra",
)
