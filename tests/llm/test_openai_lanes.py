"""The ``openai`` backend's requests in flight each on a lane of their own (``bcas.llm.openai_compat``,
``_LoopState``): httpcore's pool work per request stays constant, whatever the concurrency.

Counted, not timed: one pool of ``c`` connections scans and probes every pooled connection on
each request and each response (about 20 liveness probes a request at ``c = 8``); a lane's pool
holds one connection, so a request costs about two probes (taking it, giving it back)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from httpcore._async.http11 import AsyncHTTP11Connection

from bcas.llm.base import ChatRequest
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.testing.slotted import SlottedServer


def test_liveness_probes_per_request_do_not_grow_with_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    probes = 0
    real = AsyncHTTP11Connection.has_expired

    def counted(self: AsyncHTTP11Connection) -> bool:
        nonlocal probes
        probes += 1
        return real(self)

    monkeypatch.setattr(AsyncHTTP11Connection, "has_expired", counted)
    with SlottedServer(8, 0.02) as server:
        model = OpenAICompatModel("m", base_url=server.base_url, concurrency=8)

        async def main() -> list[str]:
            try:
                requests = [ChatRequest([{"role": "user", "content": f"q{i}"}]) for i in range(64)]
                return [r.text for r in await asyncio.gather(*(model.chat(q) for q in requests))]
            finally:
                await model.aclose()

        texts = asyncio.run(main())
        assert texts == [f"echo: q{i}" for i in range(64)]  # each answer to its own request
        assert server.requests == 64 and server.max_in_flight <= 8
    assert 0 < probes <= 3 * 64, f"{probes} liveness probes for 64 requests"  # one pool of 8: about 1,300


def test_lanes_are_reused_and_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    with SlottedServer(4, 0.01) as server:
        model = OpenAICompatModel("m", base_url=server.base_url, concurrency=4)

        async def main() -> tuple[int, bool]:
            for _ in range(3):  # three waves of four reuse the same four lanes
                await asyncio.gather(*(model.chat(ChatRequest([{"role": "user", "content": "x"}])) for _ in range(4)))
            state = model._state
            assert state is not None
            lanes = list(state.lanes)
            await model.aclose()
            return len(lanes), all(lane.is_closed for lane in lanes)

        made, closed = asyncio.run(main())
    assert made == 4 and closed


def test_the_endpoint_url_is_parsed_once_not_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx._urls

    parses = 0
    real = httpx._urls.urlparse

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal parses
        parses += 1
        return real(*args, **kwargs)

    with SlottedServer(4, 0.01) as server:
        model = OpenAICompatModel("m", base_url=server.base_url, concurrency=4)

        async def main() -> None:
            ask = ChatRequest([{"role": "user", "content": "x"}])
            await asyncio.gather(*(model.chat(ask) for _ in range(4)))  # the four lanes exist
            monkeypatch.setattr(httpx._urls, "urlparse", counted)
            try:
                await asyncio.gather(*(model.chat(ask) for _ in range(16)))
            finally:
                await model.aclose()

        asyncio.run(main())
    assert parses <= 2, f"{parses} URL parses for 16 requests on warm lanes"
