"""Several servers of one model (bcas.llm.multi_endpoint): least-in-flight routing and fail-over.

The servers are real HTTP servers on loopback (bcas.testing.servers.FaultServer) whose
faults are scripted; the routing rule is also checked on its own with set counters.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bcas.llm import load_model
from bcas.llm.base import ChatRequest, ModelError
from bcas.llm.multi_endpoint import MultiEndpointModel, split_base_urls
from bcas.llm.openai_compat import EndpointUnavailable, OpenAICompatModel
from bcas.testing.project import budget_grid, codename_items, grid_project, preload, read_records
from bcas.testing.servers import Fault, FaultServer, free_port

# httpx maps httpcore's exceptions through classes it loads on first use; an in-process
# pytester run (another file's) that loads httpcore first would leave httpx holding classes
# of a discarded module copy, and transport errors would escape unmapped.  Load it (and
# what this file's own pytester run touches) now.
preload()

FAST = {"backoff_base": 0.01, "backoff_max": 0.02, "timeout": 5.0, "max_retries": 1}


def _request(text: str = "hello") -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},), max_tokens=8)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def two_servers():
    with FaultServer() as a, FaultServer() as b:
        yield a, b


def test_base_urls_from_repeats_and_comma_lists() -> None:
    assert split_base_urls(["http://a:1/v1/, http://b:2/v1", "http://a:1/v1", "http://c:3/v1"]) == [
        "http://a:1/v1",
        "http://b:2/v1",
        "http://c:3/v1",
    ]
    assert split_base_urls(None) == [] and split_base_urls("http://a:1/v1") == ["http://a:1/v1"]
    one = load_model("openai", "m", base_url="http://127.0.0.1:9/v1", cache=False)
    several = load_model("openai", "m", base_url="http://127.0.0.1:9/v1,http://127.0.0.1:10/v1", cache=False)
    assert isinstance(one, OpenAICompatModel) and isinstance(several, MultiEndpointModel)
    assert several.base_urls == ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]


def test_pick_prefers_fewest_in_flight_then_fewest_given_and_skips_down_endpoints() -> None:
    model = MultiEndpointModel("m", ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1", "http://127.0.0.1:11/v1"])
    clock = _Clock()
    model.clock = clock
    a, b, c = model.endpoints
    a.in_flight, b.in_flight, c.in_flight = 2, 1, 1
    b.assigned, c.assigned = 5, 3
    assert model.pick(set()) == 2  # b and c tie on in-flight; c has been given fewer
    c.in_flight = 3
    assert model.pick(set()) == 1
    b.down_until = clock.now + 10
    assert model.pick(set()) == 0  # b is down: the least busy of the others
    assert model.pick({0, 2}) == 1  # only b is left untried: a down endpoint is still tried
    clock.now += 11
    assert model.pick(set()) == 1  # up again after its down time
    assert model.pick({0, 1, 2}) is None


def test_concurrent_requests_spread_over_the_endpoints(two_servers: tuple[FaultServer, FaultServer]) -> None:
    a, b = two_servers
    a.latency = b.latency = 0.1
    model = MultiEndpointModel("m", [a.base_url, b.base_url], **FAST)

    async def run() -> list:
        try:
            return await asyncio.gather(*(model.chat(_request(f"q{i}")) for i in range(8)))
        finally:
            await model.aclose()

    results = asyncio.run(run())
    assert a.requests == 4 and b.requests == 4
    assert a.max_in_flight == 4 and b.max_in_flight == 4  # both carried their share at once
    assert sorted(r.text for r in results) == sorted(f"echo: q{i}" for i in range(8))
    assert {r.extra["endpoint"] for r in results} == {a.base_url, b.base_url}


def test_a_busy_endpoint_gets_no_new_request_while_another_is_free(
    two_servers: tuple[FaultServer, FaultServer],
) -> None:
    a, b = two_servers
    a.script(Fault.slow(3.0))  # a's first request stays in flight
    model = MultiEndpointModel("m", [a.base_url, b.base_url], **FAST)

    async def run() -> list[str]:
        try:
            stuck = asyncio.ensure_future(model.chat(_request("slow")))
            while a.in_flight == 0:  # the slow request has reached a
                await asyncio.sleep(0.01)
            served = [(await model.chat(_request(f"q{i}"))).extra["endpoint"] for i in range(5)]
            await stuck
            return served
        finally:
            await model.aclose()

    assert asyncio.run(run()) == [b.base_url] * 5
    assert a.requests == 1 and b.requests == 5


def test_a_failing_endpoint_is_marked_down_and_its_request_answered_elsewhere(
    two_servers: tuple[FaultServer, FaultServer],
) -> None:
    a, b = two_servers
    a.script(default=Fault.error(503, "overloaded"))
    model = MultiEndpointModel("m", [a.base_url, b.base_url], down_s=60, **FAST)
    clock = _Clock()
    model.clock = clock

    async def ask(n: int) -> list:
        return [await model.chat(_request(f"q{i}")) for i in range(n)]

    loop = asyncio.new_event_loop()
    try:
        first = loop.run_until_complete(ask(1))[0]
        assert first.text == "echo: q0" and first.extra["endpoint"] == b.base_url
        assert first.extra["failed_over"] == [a.base_url] and first.retries == 1
        assert a.requests == 2  # its own try and one retry, then the request moved on
        loop.run_until_complete(ask(4))
        assert a.requests == 2 and b.requests == 5  # down: a gets nothing while b answers
        assert model.stats()[0]["down"] and model.stats()[0]["failures"] == 1
        a.script(default=Fault.ok())  # a recovers; after its down time it gets requests again
        clock.now += 61
        later = loop.run_until_complete(ask(2))
        # Back up, and the one given fewer requests so far: a takes the next ones (no failure, no fail-over).
        assert a.requests == 4 and [r.extra["endpoint"] for r in later] == [a.base_url] * 2
        assert not model.stats()[0]["down"] and all("failed_over" not in r.extra for r in later)
    finally:
        loop.run_until_complete(model.aclose())
        loop.close()


def test_a_refused_connection_fails_over(fault_server: FaultServer) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    model = MultiEndpointModel("m", [dead, fault_server.base_url], **FAST)
    result = asyncio.run(model.chat(_request()))
    assert result.extra["endpoint"] == fault_server.base_url and result.extra["failed_over"] == [dead]
    assert "connection error" in model.endpoints[0].last_error


def test_a_refused_request_is_not_sent_elsewhere(two_servers: tuple[FaultServer, FaultServer]) -> None:
    a, b = two_servers
    a.script(Fault.error(400, "max_tokens is too large"))
    model = MultiEndpointModel("m", [a.base_url, b.base_url], **FAST)
    with pytest.raises(ModelError, match="max_tokens is too large") as caught:
        asyncio.run(model.chat(_request()))
    assert not isinstance(caught.value, EndpointUnavailable)
    assert a.requests == 1 and b.requests == 0 and not model.stats()[0]["down"]


def test_every_endpoint_failing_names_each(two_servers: tuple[FaultServer, FaultServer]) -> None:
    a, b = two_servers
    a.script(default=Fault.error(500, "disk full"))
    b.script(default=Fault.drop())
    model = MultiEndpointModel("m", [a.base_url, b.base_url], **FAST)
    with pytest.raises(ModelError) as caught:
        asyncio.run(model.chat(_request()))
    message = str(caught.value)
    assert "every endpoint of model 'm' failed" in message
    assert f"{a.base_url}: " in message and "disk full" in message and f"{b.base_url}: " in message


def test_servers_of_one_model_must_serve_the_same_model() -> None:
    from types import SimpleNamespace

    from bcas.harness.session_start import _same_model_everywhere
    from bcas.run.settings import ModelSpec

    settings = SimpleNamespace(models=[ModelSpec("openai", "m", "http://a:1/v1,http://b:2/v1")])
    agree = [
        {"base_url": "http://a:1/v1", "model": "m", "served_id": "m-7b"},
        {"base_url": "http://b:2/v1", "model": "m", "served_id": "m-7b"},
    ]
    _same_model_everywhere(settings, agree)  # one served model: fine
    differ = [agree[0], {**agree[1], "served_id": "other-1b"}]
    with pytest.raises(pytest.UsageError, match="http://b:2/v1 serves 'other-1b'"):
        _same_model_everywhere(settings, differ)


# -- through the plugin: repeated --bcas-base-url, preflight of each, manifest ------------------

pytest_plugins = ["pytester"]


def test_the_plugin_spreads_a_run_over_repeated_base_urls(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    two_servers: tuple[FaultServer, FaultServer],
) -> None:
    a, b = two_servers
    a.latency = b.latency = 0.05
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    conftest = budget_grid("multi", [pytester.path / "tiny.jsonl"], (1,), limit=6)
    grid_project(pytester.path, conftest, datasets={"tiny.jsonl": codename_items(6, distractor=False)})
    run_dir = pytester.path / "run"
    result = pytester.runpytest(
        "--bcas-backend",
        "openai",
        "--bcas-model",
        "openai:served",
        "--bcas-base-url",
        a.base_url,
        "--bcas-base-url",
        b.base_url,
        "--bcas-grid",
        "multi",
        "--bcas-no-cache",
        "--bcas-allow-errors",
        "--bcas-report",
        str(run_dir),
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    for server in (a, b):  # each endpoint was preflighted (a 1-token request) and then served the run
        assert any((r.body or {}).get("max_tokens") == 1 for r in server.log)
        assert sum((r.body or {}).get("max_tokens") != 1 for r in server.log) >= 1
    manifest = json.loads((run_dir / "run.json").read_text())
    entry = manifest["sessions"][0]["models"]["served"]
    assert entry["endpoints"] == [a.base_url, b.base_url]
    assert entry["fingerprint"].startswith("served:served")
    records = read_records(run_dir)
    assert len(records) == 6 and len({r["model_fingerprint"] for r in records}) == 1
