"""The MLflow sink: one MLflow run per bcas run, a nested run per case.

Where a bcas run goes (the issue's design, MLflow's own data model): the parent run holds
the run's options as params, its answer identity as tags (model fingerprints, served
names, dataset hashes), the run totals (cases, answers, tokens, cost) as metrics and the
run folder (records, summary, report, manifest) as artifacts; the parent is named by its
grids and models (``smoke · mock-gold + coin``) unless the user names it
(``BCAS_MLFLOW_RUN_NAME``); each case is a nested run named ``model · dataset · label``
(``mock-gold · hotpotqa · bm25/s3/t2k/plan``, unique within the parent), with its configuration and
backend as params, its identity as tags (``bcas.case``, model fingerprint, dataset hash,
prompt hash, config id), its status and reason as tags (``bcas.status``:
passed/failed/incomplete/error) and its summary metrics with their intervals; a case
that did not pass logs no accuracy, and a model without a price no cost.  A run is found again by its tag ``bcas.run_dir`` (the
run folder's absolute path), a case by ``bcas.case`` under its parent, so publishing a
resumed or repeated run updates the runs it made before instead of adding new ones.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bcas.tracking.folder import CaseResult, read_run_folder
from bcas.tracking.sinks import SinkError

EXPERIMENT_ENV = "BCAS_MLFLOW_EXPERIMENT"
RUN_NAME_ENV = "BCAS_MLFLOW_RUN_NAME"
DEFAULT_EXPERIMENT = "bcas"
MLFLOW_MISSING = "the MLflow sink needs mlflow: pip install 'bcas[mlflow]'"


def _clause(tag: str, value: str) -> str:
    """A search-filter clause matching tag ``tag`` equal to ``value``.  MLflow's filter takes a
    quoted string verbatim (no escapes): quote with the mark ``value`` lacks; a value with
    both marks is matched by ``LIKE`` with each mark as a one-character wildcard, and the
    runs found are then compared exactly (:meth:`MlflowSink._find`)."""
    if "'" not in value:
        return f"tags.`{tag}` = '{value}'"
    if '"' not in value:
        return f'tags.`{tag}` = "{value}"'
    return f"tags.`{tag}` LIKE '{value.replace(chr(39), '_').replace(chr(34), '_')}'"


def absolute_sqlite(uri: str) -> str:
    """A SQLite store URI with its file made absolute (``sqlite:///mlruns.db`` in the current folder).

    MLflow keeps one store per URI in a process: a relative URI used from two folders in one
    process (two ``bcas.evaluate`` calls, a notebook that changes directory) would publish
    the second run into the first folder's file.  The absolute path names the one file.
    """
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return uri
    path = uri[len(prefix) :]
    if not path or path.startswith("/") or path == ":memory:":
        return uri
    return prefix + str(Path(path).resolve())


class MlflowSink:
    """Publish run folders to the MLflow tracking store or server at ``uri``."""

    def __init__(self, uri: str, experiment: str | None = None, run_name: str | None = None) -> None:
        if "://" not in uri and not uri.startswith("databricks"):
            raise SinkError(
                f"--bcas-mlflow: {uri!r} is not a tracking URI (sqlite:///mlruns.db, http://host:5000); "
                "write --bcas-mlflow=URI when a test path follows"
            )
        self.uri = absolute_sqlite(uri)
        self.experiment = experiment or os.environ.get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT
        self.run_name = run_name or os.environ.get(RUN_NAME_ENV) or None  # None: the grids and models
        self._client: Any = None

    def _mlflow(self) -> Any:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise SinkError(MLFLOW_MISSING) from exc
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    def check(self) -> None:
        """Reach the store now: a server that does not answer its health check, or a store
        that cannot be opened, is one line before any case runs."""
        if self.uri.startswith(("http://", "https://")):
            try:
                with urllib.request.urlopen(self.uri.rstrip("/") + "/health", timeout=10) as response:
                    response.read()
            except (urllib.error.URLError, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", exc)
                raise SinkError(f"MLflow tracking server {self.uri} is not reachable: {reason}") from exc
        client = self._mlflow()
        try:
            self._experiment_id(client)
        except SinkError:
            raise
        except Exception as exc:  # the store's own error types differ by backend
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SinkError(f"MLflow tracking store {self.uri} cannot be used: {first}") from exc

    def _experiment_id(self, client: Any) -> str:
        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            return str(found.experiment_id)
        location = None
        if self.uri.startswith("sqlite:///"):  # artifacts beside the database, not in the current folder
            db = Path(self.uri[len("sqlite:///") :])
            location = (db.resolve().parent / "mlartifacts").as_uri()
        return str(client.create_experiment(self.experiment, artifact_location=location))

    def _find(self, client: Any, experiment_id: str, tags: dict[str, str]) -> Any:
        """The run whose tags hold ``tags`` exactly, or None."""
        query = " and ".join(_clause(tag, value) for tag, value in tags.items())
        runs = client.search_runs([experiment_id], filter_string=query, max_results=1000)
        return next((r for r in runs if all(r.data.tags.get(t) == v for t, v in tags.items())), None)

    def publish(self, run_dir: Path) -> str:
        """Create or update the MLflow runs of ``run_dir``; returns a line naming the parent run."""
        folder = read_run_folder(run_dir)
        client = self._mlflow()
        experiment_id = self._experiment_id(client)
        name = self.run_name or folder.name
        parent = self._find(client, experiment_id, {"bcas.run_dir": str(folder.run_dir)})
        if parent is None:
            parent = client.create_run(experiment_id, tags=folder.tags, run_name=name)
        parent_id = str(parent.info.run_id)
        tags = {**folder.tags, "mlflow.runName": name}  # a run published before takes the name too
        self._log(client, parent_id, folder.params, tags, folder.metrics, parent.data.params)
        for case in folder.cases:
            self._publish_case(client, experiment_id, parent_id, case)
        for path in folder.artifacts:
            client.log_artifact(parent_id, str(path))
        client.set_terminated(parent_id, "FINISHED")
        return f"mlflow: run {parent_id} ({len(folder.cases)} cases) in experiment {self.experiment!r} at {self.uri}"

    def _publish_case(self, client: Any, experiment_id: str, parent_id: str, case: CaseResult) -> None:
        run = self._find(client, experiment_id, {"mlflow.parentRunId": parent_id, "bcas.case": case.key})
        if run is None:
            tags = {**case.tags, "mlflow.parentRunId": parent_id}
            run = client.create_run(experiment_id, tags=tags, run_name=case.name or case.key)
        run_id = str(run.info.run_id)
        tags = {**case.tags, "mlflow.runName": case.name} if case.name else case.tags  # a run published before
        self._log(client, run_id, case.params, tags, case.metrics, run.data.params)
        client.set_terminated(run_id, "FINISHED")

    @staticmethod
    def _log(
        client: Any,
        run_id: str,
        params: dict[str, str],
        tags: dict[str, str],
        metrics: dict[str, float],
        existing: dict[str, str],
    ) -> None:
        from mlflow.entities import Metric, Param, RunTag

        # A param is write-once in MLflow: a resumed run keeps the first value it logged.
        new_params = [Param(k, v) for k, v in params.items() if k not in existing]
        run_tags = [RunTag(k, v) for k, v in tags.items()]
        stamp = int(time.time() * 1000)
        run_metrics = [Metric(k, v, stamp, 0) for k, v in metrics.items()]
        client.log_batch(run_id, metrics=run_metrics, params=new_params, tags=run_tags)
