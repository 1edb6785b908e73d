"""Child server processes on loopback: a free port to give one, and stopping one.

The local servers bcas starts (milvus-lite for the search engine, llama.cpp's server for
tests and benchmarks) bind a port on 127.0.0.1 and are stopped the same way.
"""

from __future__ import annotations

import socket
import subprocess
from typing import Any

STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(process: subprocess.Popen[Any] | None, timeout: float = STOP_TIMEOUT_S) -> None:
    """Terminate ``process`` if it still runs; kill it if it has not exited ``timeout`` seconds later."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)
