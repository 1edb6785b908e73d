"""The result-sink extension point: a name -> a factory of a :class:`ResultSink`.

``register_sink("name", "pkg.mod:Factory", option="name", default_target="...",
help="...")``: the factory is called with the target the user gave (a tracking URI, a
project name) and returns an object with ``check()`` (called once at session start; it
raises :class:`SinkError` with one line when the tracker cannot be reached) and
``publish(run_dir)`` (called once at the end, with the finished run folder).  Publishing
the same run folder again updates what was published before instead of adding a copy.
"""

from __future__ import annotations

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


register_sink(
    "mlflow",
    "bcas.tracking.mlflow_sink:MlflowSink",
    default_target="sqlite:///mlruns.db",
    help="publish the run to MLflow: one MLflow run per bcas run, a nested run per case "
    "(params, tags, metrics with intervals, the run folder as artifacts); URI of the "
    "tracking store or server (default sqlite:///mlruns.db); needs the mlflow extra",
)
