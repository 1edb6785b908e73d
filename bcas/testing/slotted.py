"""``SlottedServer``: a chat server whose timing is known, to prove the latency report (BCAS §6.1).

It serves ``slots`` requests at a time, each for exactly ``service_s`` seconds; a request
that finds every slot taken waits (first come, first served) for one to free, as a
llama.cpp server started with ``--parallel`` does.  With ``N`` requests sent at once the
``k``-th completes at ``ceil(k / slots) * service_s``: the deterministic queue (M/D/c
with all arrivals at time 0) the latency tests check the executor's waits and
percentiles against.

Each answer reports llama.cpp's ``timings`` (``prompt_ms``, ``predicted_ms``: the
service split at ``prompt_share``), and a streamed answer (``stream: true``) sends its
first word once the prompt part is over, so the time to first token is known too:
``queue + prompt_share * service_s``.  ``waits`` keeps each request's queueing time.
The replies are the ``reply`` function's (default: an echo); it stands in for no
capability, only for a server's timing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from bcas.testing.fault_server import FaultServer

PROMPT_SHARE = 0.25


class SlottedServer(FaultServer):
    """A :class:`~bcas.testing.fault_server.FaultServer` with ``slots`` slots of ``service_s`` seconds each."""

    def __init__(self, slots: int, service_s: float, *, prompt_share: float = PROMPT_SHARE, **options: Any) -> None:
        if slots < 1 or service_s <= 0 or not 0.0 < prompt_share < 1.0:
            raise ValueError(
                f"need slots >= 1, service_s > 0, 0 < prompt_share < 1; got {slots}, {service_s}, {prompt_share}"
            )
        super().__init__(**options)
        self.slots = slots
        self.service_s = service_s
        self.prompt_share = prompt_share
        self._free = threading.Semaphore(slots)
        self._order = threading.Lock()  # first come, first served among the waiting requests
        self.waits: list[float] = []

    def begin_service(self, body: dict[str, Any] | None) -> Callable[[], None]:
        arrived = time.perf_counter()
        with self._order:
            self._free.acquire()
        with self._lock:
            self.waits.append(time.perf_counter() - arrived)
        time.sleep(self.service_s * self.prompt_share)
        done = threading.Event()

        def finish() -> None:
            if done.is_set():
                return
            done.set()
            time.sleep(self.service_s * (1.0 - self.prompt_share))
            self._free.release()

        return finish

    def completion(self, body: dict[str, Any], text: str | None = None) -> dict[str, Any]:
        out = super().completion(body, text)
        usage = out["usage"]
        out["timings"] = {  # llama.cpp's shape: milliseconds of prompt processing and of generation
            "prompt_n": usage["prompt_tokens"],
            "prompt_ms": 1000.0 * self.service_s * self.prompt_share,
            "predicted_n": usage["completion_tokens"],
            "predicted_ms": 1000.0 * self.service_s * (1.0 - self.prompt_share),
        }
        return out


__all__ = ["PROMPT_SHARE", "SlottedServer"]
