"""Result sinks: a finished run folder published to where a team already tracks experiments.

A sink is one registration in :data:`SINKS` (``register_sink``); the pytest front door adds
``--bcas-<option> [TARGET]`` for each one, checks it at session start (a tracker that is
down stops the session before any answer is paid for) and publishes the run folder at the
end.  The built-in sink is MLflow (:mod:`bcas.tracking.mlflow_sink`).
"""

from bcas.tracking.folder import CaseResult, RunFolder, read_run_folder
from bcas.tracking.sinks import SINKS, ResultSink, SinkError, open_sink, register_sink

__all__ = [
    "SINKS",
    "CaseResult",
    "ResultSink",
    "RunFolder",
    "SinkError",
    "open_sink",
    "read_run_folder",
    "register_sink",
]
