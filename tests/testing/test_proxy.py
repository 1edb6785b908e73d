"""``FaultServer`` as a fault-injecting proxy (bcas.testing.proxy), in front of a scripted
upstream: the schedule, forwarding byte for byte, each fault kind, repeats shared."""

from __future__ import annotations

import httpx
import pytest

from bcas.testing.servers import FAULT_KINDS, FaultSchedule, FaultServer


def test_schedule_faults_exactly_rate_per_block_and_cycles_kinds() -> None:
    schedule = FaultSchedule(rate=0.2, seed=3, block=10)
    kinds = [schedule.decide() for _ in range(50)]
    for b in range(5):
        assert sum(k != "forward" for k in kinds[10 * b : 10 * b + 10]) == 2
    faults = [k for k in kinds if k != "forward"]
    assert faults == [FAULT_KINDS[i % 4] for i in range(10)]
    again = FaultSchedule(rate=0.2, seed=3, block=10)
    assert [again.decide() for _ in range(50)] == kinds  # reproducible
    with pytest.raises(ValueError, match="rate"):
        FaultSchedule(rate=1.5)


def test_proxy_forwards_and_injects() -> None:
    with (
        FaultServer(model="up") as upstream,
        FaultServer.proxy(upstream.base_url, rate=0.5, seed=1, block=4, hold_s=0.2, retry_after=0.05) as proxy,
    ):
        with httpx.Client(timeout=5.0) as client:
            models = client.get(f"{proxy.base_url}/models").json()
            assert models["data"][0]["id"] == "up"  # relayed
            statuses = []
            for i in range(8):
                body = {"model": "up", "messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 4}
                try:
                    r = client.post(f"{proxy.base_url}/chat/completions", json=body, timeout=0.1 + 0.5)
                    statuses.append((r.status_code, bool(r.json().get("choices"))))
                except httpx.HTTPError:
                    statuses.append(("dropped", False))
        kinds = [k for _, k in proxy.schedule.log]
    assert len(kinds) == 8 and kinds.count("forward") == 4
    assert upstream.requests == 4  # faulted requests never reach the upstream
    for kind, status in zip(kinds, statuses, strict=True):
        expected = {
            "forward": (200, True),
            "500": (500, False),
            "429": (429, False),
            "timeout": ("dropped", False),
            "malformed": (200, False),
        }[kind]
        assert status == expected, (kind, status)
    assert sum(proxy.faults.values()) == 4 and proxy.requests == 8


def test_a_repeated_body_is_forwarded_once() -> None:
    with FaultServer(model="up") as upstream, FaultServer.proxy(upstream.base_url, rate=0.0) as proxy:
        body = {"model": "up", "messages": [{"role": "user", "content": "same"}], "max_tokens": 4}
        with httpx.Client(timeout=5.0) as client:
            first = client.post(f"{proxy.base_url}/chat/completions", json=body).json()
            second = client.post(f"{proxy.base_url}/chat/completions", json=body).json()
    assert first == second and upstream.requests == 1 and proxy.repeats == 1
