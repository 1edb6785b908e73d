"""A local Milvus Lite server on loopback: the search engine of tests, CI and one-machine runs.

``MilvusLiteServer(data_dir)`` starts ``python -m milvus_lite server --data-dir D --host
127.0.0.1 --port P`` (PyPI ``milvus-lite``) on a free port and waits until a client can
list its collections; ``url`` is what ``--bcas-retriever`` takes.  ``stop()`` ends the
process (and only it).  As a script it runs a server in the foreground::

    bcas index milvus --data-dir .bcas_cache/milvus --port 19530

Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bcas.processes import free_port, stop_process

START_TIMEOUT_S = 60.0


class EngineStartError(RuntimeError):
    """The local engine did not start; the message holds the end of its log."""


def milvus_lite_available() -> bool:
    """Whether ``milvus-lite`` and ``pymilvus`` are installed (``pip install 'bcas[search]'``)."""
    return all(importlib.util.find_spec(name) is not None for name in ("milvus_lite", "pymilvus"))


class MilvusLiteServer:
    """One ``milvus-lite server`` subprocess on 127.0.0.1 (see the module docstring)."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, port: int | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="bcas-milvus-") if data_dir is None else None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "milvus-lite.log"
        self.started_in_s: float | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("MilvusLiteServer is not running; call start()")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MilvusLiteServer:
        if not milvus_lite_available():
            raise EngineStartError(
                "milvus-lite is not installed: pip install 'bcas[search]' (bash .ci/search_engine.sh)"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        started = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "milvus_lite",
                    "server",
                    "--data-dir",
                    str(self.data_dir / "data"),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.perf_counter() - started
        return self

    def _wait_ready(self) -> None:
        from pymilvus import MilvusClient

        deadline = time.monotonic() + START_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise EngineStartError(f"milvus-lite exited with {self.process.returncode}:\n{self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", int(self.port or 0)), timeout=0.5):
                    pass
                client = MilvusClient(uri=self.url, timeout=5)
                client.list_collections()
                client.close()
                return
            except Exception as exc:  # noqa: BLE001 - not up yet: keep asking until the deadline
                last = f"{type(exc).__name__}: {exc}"
                time.sleep(0.1)
        raise EngineStartError(
            f"milvus-lite did not answer on {self.url} within {START_TIMEOUT_S:.0f} s ({last}):\n{self._log_tail()}"
        )

    def _log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> MilvusLiteServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
