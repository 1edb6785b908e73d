"""Result sinks: a finished run folder published to where a team already tracks experiments.

A sink is one registration in :data:`SINKS` (``register_sink``); the pytest front door adds
``--bcas-<option> [TARGET]`` for each one and ``bcas.evaluate`` the keyword ``<option>=``;
both check the chosen sinks at the start (:func:`open_sinks`: a tracker that is down stops
the run before any answer is paid for) and publish the run folder at the end
(:func:`publish_all`).  The built-in sink is MLflow (:mod:`bcas.tracking.mlflow_sink`).
"""

from bcas.tracking.folder import CaseResult, RunFolder, read_run_folder
from bcas.tracking.sinks import (
    SINKS,
    ResultSink,
    SinkError,
    open_sink,
    open_sinks,
    publish_all,
    register_sink,
    sink_option,
)

__all__ = [
    "SINKS",
    "CaseResult",
    "ResultSink",
    "RunFolder",
    "SinkError",
    "open_sink",
    "open_sinks",
    "publish_all",
    "read_run_folder",
    "register_sink",
    "sink_option",
]
