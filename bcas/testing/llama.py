"""``LlamaCppServer``: a real ``llama_cpp.server`` subprocess serving a local GGUF on a
free loopback port, ready-checked through ``GET /v1/models``.  Nothing here reaches
beyond 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from bcas.processes import free_port, stop_process


def _child_env() -> dict[str, str]:
    """This environment, with bcas importable even when it is not installed."""
    env = dict(os.environ)
    source_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source_root, env.get("PYTHONPATH", "")) if p)
    return env


class ServerStartError(RuntimeError):
    """The llama.cpp server did not come up; the message carries its log tail."""


class LlamaCppServer:
    """``llama_cpp.server`` on 127.0.0.1 serving one GGUF, in a subprocess.

    ``launcher`` is the module run with ``python -m``: by default
    ``bcas.llm.llama_server``, which is ``llama_cpp.server`` with llama.cpp's extra CPU
    weight buffers off (they crash on AMX CPUs); ``"llama_cpp.server"`` runs it as is.

    The model is served under ``alias`` (the name clients send as ``model``).  Output
    goes to a log file (``log_path``) whose tail is shown when start-up fails.

    ``args``: the server's arguments in full, as a user would type them after ``python
    -m LAUNCHER`` (a recipe of docs/models.md); ``{port}`` in them becomes the free port chosen.
    Given, they replace the model, alias, context and thread arguments built here.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        alias: str = "smollm2",
        n_ctx: int = 2048,
        n_threads: int | None = None,
        ready_timeout: float = 180.0,
        extra_args: Iterable[str] = (),
        launcher: str = "bcas.llm.llama_server",
        args: Iterable[str] | None = None,
    ) -> None:
        if model_path is None:
            from bcas.llm.embedded import default_gguf_path

            model_path = default_gguf_path()
        self.model_path = Path(model_path)
        self.alias = alias
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.ready_timeout = ready_timeout
        self.extra_args = list(extra_args)
        self.launcher = launcher
        self.args = list(args) if args is not None else None
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("LlamaCppServer is not running")
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        if self.args is not None:
            return [sys.executable, "-m", self.launcher, *(a.replace("{port}", str(port)) for a in self.args)]
        cmd = [
            sys.executable, "-m", self.launcher,
            "--model", str(self.model_path),
            "--model_alias", self.alias,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--interrupt_requests", "false",
        ]  # fmt: skip
        if self.n_threads is not None:
            cmd += ["--n_threads", str(self.n_threads)]
        return cmd + self.extra_args

    def start(self) -> LlamaCppServer:
        if not self.model_path.is_file():
            raise ServerStartError(f"GGUF model not found: {self.model_path}")
        last_error = ""
        for _ in range(3):  # the free port may be taken between probing and binding
            self.port = free_port()
            handle, name = tempfile.mkstemp(prefix="bcas-llama-server-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
            self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
            self.process = subprocess.Popen(
                self.command(self.port),
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=_child_env(),
            )
            try:
                self._wait_ready()
                return self
            except ServerStartError as exc:
                last_error = str(exc)
                self.stop()
                if "address already in use" not in last_error.lower():
                    break
        raise ServerStartError(last_error)

    def _log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(
                    f"llama_cpp.server exited with code {self.process.returncode} before becoming ready "
                    f"(is the 'server' extra installed? pip install 'bcas[server]'); log tail:\n{self._log_tail()}"
                )
            try:
                response = httpx.get(url, timeout=2.0)
                if response.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise ServerStartError(
            f"llama_cpp.server did not answer GET {url} within {self.ready_timeout:.0f} s; log tail:\n{self._log_tail()}"
        )

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> LlamaCppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
