"""A stand-in for ``vllm serve`` on loopback, for playing the deploy/ launch scripts locally.

``vllm serve MODEL --host H --port P --served-model-name NAME [...]`` starts a
:class:`bcas.testing.FaultServer` on port P that lists NAME at ``/v1/models`` and answers
every chat request as the ``mock`` backend's ``random`` variant would
(:func:`bcas.testing.mock_server.mock_reply`).  On SIGTERM (the launch script's exit trap)
it appends ``<port> <chat requests> <chat requests other than 1-token probes>`` to
``$FAKE_VLLM_LOG`` and exits.  It stands
in for no capability: it lets a test run the scripts' control flow (start, health check,
shard, merge, gate) without a GPU.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from bcas.testing.fault_server import FaultServer
from bcas.testing.mock_server import mock_reply


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="vllm")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default=None)
    args, _ = parser.parse_known_args(argv)
    server = FaultServer(reply=mock_reply("random"), model=args.served_model_name or args.model, port=args.port)
    server.start()
    done = threading.Event()

    def stop(*_: Any) -> None:
        log = os.environ.get("FAKE_VLLM_LOG")
        if log:
            with Path(log).open("a", encoding="utf-8") as fh:
                # Chat requests, and those beyond a preflight's 1-token probe (the run's own calls).
                asked = [r for r in server.log if r.path.endswith("/chat/completions")]
                calls = sum(1 for r in asked if (r.body or {}).get("max_tokens") != 1)
                fh.write(f"{args.port} {len(asked)} {calls}\n")
        done.set()

    signal.signal(signal.SIGTERM, stop)
    while not done.wait(0.2):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
