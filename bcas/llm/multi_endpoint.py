"""One model served by several OpenAI-compatible servers (``--bcas-base-url`` given more than once).

A run that outgrows one server starts more of them (one ``vllm serve`` per GPU or per
machine) and lists them all: ``--bcas-base-url http://a:8000/v1 --bcas-base-url
http://b:8000/v1`` or a comma list ``http://a:8000/v1,http://b:8000/v1``.
:class:`MultiEndpointModel` holds one :class:`~bcas.llm.openai_compat.OpenAICompatModel`
per server and routes every request:

* to the endpoint with the fewest requests in flight (this model's own requests:
  queued on the endpoint's client and on the wire); ties go to the endpoint that
  has been given the fewest requests so far, then to the one listed first.  Each
  endpoint keeps its own ``concurrency`` cap, so N endpoints carry N times the
  requests of one;
* when an endpoint fails a request after its own retries (connection errors,
  timeouts, HTTP 429/5xx, malformed bodies: :class:`EndpointUnavailable`), it is
  marked down for ``down_s`` seconds and the request is sent to another endpoint.
  A down endpoint gets requests only when every endpoint not yet tried for this
  request is down too (the one whose down time ends first), so a run never stops
  while a server may still answer.  A request that every endpoint failed raises
  :class:`~bcas.llm.base.ModelError` naming each endpoint's last error;
* a request the server refused (any other 4xx) is not sent elsewhere: another
  server of the same model would refuse it too.

``ChatResult.extra["endpoint"]`` names the server that answered (its URL without any
credentials) and ``extra["failed_over"]`` the ones that failed it first; ``retries``
adds one per fail-over.  The endpoints must serve the same model: the preflight
checks each (:mod:`bcas.harness.plugin`) and refuses endpoints that report different
served ids; the model's fingerprint (:mod:`bcas.llm.fingerprint`) is the first
endpoint's.  The generation cache keys on the model id, so any endpoint's answer is
reused by all.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ModelError
from bcas.llm.openai_compat import DEFAULT_BASE_URL, EndpointUnavailable, OpenAICompatModel

DOWN_S = 30.0  # how long a failed endpoint gets no requests while others are up
ENDPOINT_RETRIES = 2  # each endpoint's own retries before the request fails over


def split_base_urls(value: str | Iterable[str] | None) -> list[str]:
    """The endpoint URLs of ``value``: a URL, a comma list, or several of either; duplicates dropped."""
    if value is None:
        return []
    parts = [value] if isinstance(value, str) else list(value)
    urls: list[str] = []
    for part in parts:
        for url in str(part).split(","):
            url = url.strip().rstrip("/")
            if url and url not in urls:
                urls.append(url)
    return urls


def _shown(url: str) -> str:
    """``url`` without user:password or query (what logs and results may carry)."""
    parts = urlsplit(url)
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")) if parts.scheme else url


@dataclass
class Endpoint:
    """One server of the model, with its routing state."""

    model: OpenAICompatModel
    url: str
    in_flight: int = 0
    assigned: int = 0
    answered: int = 0
    failures: int = 0
    down_until: float = 0.0
    last_error: str = ""

    def up(self, now: float) -> bool:
        return self.down_until <= now


class MultiEndpointModel(ChatModel):
    """A served model reached through several endpoints (see the module docstring).

    ``options`` go to every endpoint's :class:`OpenAICompatModel` (``concurrency`` is
    per endpoint); ``max_retries`` defaults to :data:`ENDPOINT_RETRIES`, so a dead
    server is left after seconds, not after a minute of back-off.
    """

    supports_json_schema = True
    supports_logprobs = True
    supports_tools = True

    def __init__(self, model: str, base_urls: Sequence[str], *, down_s: float = DOWN_S, **options: Any) -> None:
        urls = split_base_urls(base_urls)
        if not urls:
            raise ModelError("MultiEndpointModel needs at least one base URL")
        if down_s < 0:
            raise ModelError(f"down_s must be >= 0, got {down_s}")
        options.setdefault("max_retries", ENDPOINT_RETRIES)
        self.endpoints = [Endpoint(OpenAICompatModel(model, base_url=url, **options), _shown(url)) for url in urls]
        first = self.endpoints[0].model
        self.model = first.model
        self.model_id = first.model_id
        self.down_s = down_s
        self.clock = time.monotonic

    def __repr__(self) -> str:
        return f"MultiEndpointModel({self.model!r}, endpoints={[e.url for e in self.endpoints]!r})"

    @property
    def base_urls(self) -> list[str]:
        return [e.url for e in self.endpoints]

    @property
    def context_window(self) -> int | None:  # type: ignore[override]
        """The smallest context window the endpoints report (a request must fit wherever it is sent)."""
        windows = [w for w in (e.model.context_window for e in self.endpoints) if w]
        return min(windows) if windows else None

    def pick(self, tried: set[int]) -> int | None:
        """Index of the endpoint for the next attempt, or ``None`` when every one was tried."""
        now = self.clock()
        left = [i for i in range(len(self.endpoints)) if i not in tried]
        if not left:
            return None
        up = [i for i in left if self.endpoints[i].up(now)]
        if up:
            return min(up, key=lambda i: (self.endpoints[i].in_flight, self.endpoints[i].assigned, i))
        return min(left, key=lambda i: (self.endpoints[i].down_until, i))

    async def chat(self, request: ChatRequest) -> ChatResult:
        tried: set[int] = set()
        failed: list[str] = []
        while True:
            index = self.pick(tried)
            if index is None:
                reasons = "; ".join(f"{e.url}: {e.last_error}" for e in self.endpoints)
                raise ModelError(f"every endpoint of model {self.model!r} failed the request: {reasons}")
            endpoint = self.endpoints[index]
            tried.add(index)
            endpoint.in_flight += 1
            endpoint.assigned += 1
            try:
                result = await endpoint.model.chat(request)
            except EndpointUnavailable as exc:
                endpoint.failures += 1
                endpoint.last_error = str(exc)
                endpoint.down_until = self.clock() + self.down_s
                failed.append(endpoint.url)
                continue
            finally:
                endpoint.in_flight -= 1
            endpoint.answered += 1
            endpoint.down_until = 0.0  # it answers: up again, whatever an earlier request saw
            result.extra["endpoint"] = endpoint.url
            if failed:
                result.extra["failed_over"] = failed
                result.retries += len(failed)
            return result

    def stats(self) -> list[dict[str, Any]]:
        """Per endpoint: URL, requests given, answered, failures, whether it is down now."""
        now = self.clock()
        return [
            {
                "url": e.url,
                "assigned": e.assigned,
                "answered": e.answered,
                "failures": e.failures,
                "down": not e.up(now),
            }
            for e in self.endpoints
        ]

    async def aclose(self) -> None:
        for endpoint in self.endpoints:
            await endpoint.model.aclose()


def create(
    model: str | None = None, *, base_url: str | Sequence[str] | None = None, **options: Any
) -> OpenAICompatModel | MultiEndpointModel:
    """Factory of backend ``openai``: one server, or several (a comma list or a list of URLs)."""
    if model is None:
        raise ModelError("the openai backend needs a model name (the one the server serves)")
    urls = split_base_urls(base_url) or [DEFAULT_BASE_URL]
    if len(urls) == 1:
        return OpenAICompatModel(model, base_url=urls[0], **options)
    return MultiEndpointModel(model, urls, **options)


__all__ = ["DOWN_S", "ENDPOINT_RETRIES", "Endpoint", "MultiEndpointModel", "create", "split_base_urls"]
