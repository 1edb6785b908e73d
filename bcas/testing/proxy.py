"""The fault-injecting proxy mode of :class:`bcas.testing.fault_server.FaultServer`.

``FaultSchedule``: requests are numbered in arrival order; in every block of ``block``
requests the proxy faults ``round(rate * block)`` positions drawn with
``random.Random(f"{seed}:{block number}")``, so the fault fraction is exactly ``rate``
over whole blocks and a run is reproducible.  The fault kinds cycle in order:

* ``"500"``: HTTP 500 with an OpenAI-shaped error object;
* ``"429"``: HTTP 429 with ``Retry-After: <retry_after>``;
* ``"timeout"``: hold the connection ``hold_s`` seconds (longer than the client's read
  timeout), then close it without answering;
* ``"malformed"``: HTTP 200 whose body is JSON but not a chat completion.

With ``rate * block <= 2`` and the kinds cycling, one request meets at most four faults
in a row and never two malformed bodies in a row, within the ``openai`` backend's
default retry limits.

``Upstream``: a faulted request never reaches the upstream, so the upstream sees exactly
the requests of a fault-free run, in the same order when the client sends one at a time.
A chat request whose body was already forwarded (a client retry after a *real* timeout)
is not sent again: it waits for, or reuses, the first answer and is counted in
``repeats`` (``repeat_bound`` caps how many the measured upstream times can explain).
Without that, a server that does not abandon requests when the client hangs up
(``llama_cpp.server``) would queue every retry behind the request it replaces, and would
compute the same prompt again from a different cache state, which can change greedy
output.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import math
import random
import threading
import time
from collections import Counter

import httpx

FAULT_KINDS = ("500", "429", "timeout", "malformed")


class FaultSchedule:
    """Which arriving chat request is forwarded and which gets which fault (module docstring)."""

    def __init__(self, rate: float = 0.2, seed: int = 0, block: int = 10, kinds: tuple[str, ...] = FAULT_KINDS) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown or not kinds:
            raise ValueError(f"kinds must be a non-empty subset of {FAULT_KINDS}, got {kinds}")
        self.rate, self.seed, self.block, self.kinds = rate, seed, block, tuple(kinds)
        self._lock = threading.Lock()
        self._blocks: dict[int, frozenset[int]] = {}
        self.arrivals = 0
        self.forwarded = 0
        self._faults_made = 0
        self.faults: Counter[str] = Counter()
        self.log: list[tuple[int, str]] = []  # (arrival number, "forward" or the fault kind)

    def _positions(self, block_no: int) -> frozenset[int]:
        positions = self._blocks.get(block_no)
        if positions is None:
            rng = random.Random(f"{self.seed}:{block_no}")
            positions = frozenset(rng.sample(range(self.block), round(self.rate * self.block)))
            self._blocks[block_no] = positions
        return positions

    def decide(self) -> str:
        """``"forward"`` or the fault kind for the next arriving chat request."""
        with self._lock:
            number = self.arrivals
            self.arrivals += 1
            if number % self.block in self._positions(number // self.block):
                kind = self.kinds[self._faults_made % len(self.kinds)]
                self._faults_made += 1
                self.faults[kind] += 1
            else:
                kind = "forward"
                self.forwarded += 1
            self.log.append((number, kind))
            return kind


class Upstream:
    """Forwarding to the real server, each distinct chat body at most once (module docstring)."""

    def __init__(self, base_url: str, timeout: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0))
        self._lock = threading.Lock()
        self._answers: dict[str, concurrent.futures.Future[tuple[int, bytes]]] = {}
        self.repeats = 0
        self.repeated: list[bytes] = []  # the bodies asked for again (for a failing test's message)
        self.upstream_s: list[float] = []  # upstream seconds of each chat request forwarded

    def forward(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """Status and body of the upstream's answer (``502`` when the upstream cannot be reached)."""
        suffix = path[path.index("/v1") + 3 :] if "/v1" in path else path
        keep = {k: v for k, v in headers.items() if k.lower() in ("content-type", "authorization", "accept")}
        try:
            response = self._client.request(method, self.base_url + suffix, content=body, headers=keep)
        except httpx.HTTPError as exc:
            return 502, json.dumps({"error": {"message": f"upstream failed: {type(exc).__name__}"}}).encode()
        return response.status_code, response.content

    def forward_once(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """Forward a chat request, or share the answer to an identical one already forwarded."""
        key = hashlib.sha256(body).hexdigest()
        with self._lock:
            future = self._answers.get(key)
            first = future is None
            if first:
                future = concurrent.futures.Future()
                self._answers[key] = future
            else:
                self.repeats += 1
                self.repeated.append(body)
        assert future is not None
        if first:
            started = time.perf_counter()
            answer = self.forward("POST", path, body, headers)
            with self._lock:
                self.upstream_s.append(time.perf_counter() - started)
            future.set_result(answer)
        return future.result()

    def repeat_bound(self, client_timeout: float, slack: float = 0.25) -> int:
        """Most repeats real slowness can explain: ``sum(floor((d + slack) / client_timeout))``.

        A client retries a forwarded request only after waiting ``client_timeout`` on it,
        so an answer the upstream took ``d`` seconds to give can be asked for again at most
        ``floor(d / client_timeout)`` times before it arrives (attempt ``i`` starts after
        ``i`` full timeouts).  ``slack`` covers the loopback time the client sees and the
        proxy does not.
        """
        with self._lock:
            return sum(math.floor((d + slack) / client_timeout) for d in self.upstream_s)

    def close(self) -> None:
        self._client.close()


__all__ = ["FAULT_KINDS", "FaultSchedule", "Upstream"]
