"""Proof: a grid run survives a faulty server with nothing lost, doubled or changed.

The upstream is real: ``llama_cpp.server`` serving SmolLM2-135M on loopback.  In front
of it a proxy (bcas.testing.FaultServer.proxy) answers exactly 20% of the chat requests
itself, on a seeded counter schedule, cycling through HTTP 500, HTTP 429 with
``Retry-After``, a held connection the client times out on, and a 200 whose JSON is
not a completion; the other 80% go through byte for byte.  The same grid runs twice
through the bcas pytest plugin with the ``openai`` backend, uncached and one item at a
time, from the same server state (so the upstream sees the same requests in the
same order): once through the proxy with no faults, once with them.  The records
must be the same set, each key once, equal in everything but timing, with the
retries counted in them: one per injected fault, plus repeats (retries after a real
answer outlasted the client's timeout), counted apart and bounded by the measured
upstream times.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from support import openai_client
from support.proofs import by_key, first_difference, write_project

from bcas import llm
from bcas.testing.project import preload, read_records
from bcas.testing.servers import FAULT_KINDS, FaultServer, LlamaCppServer

preload("bcas.llm.openai_compat")

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.server, pytest.mark.proof_stage]  # minutes: CI's required proof stage

ITEMS = 4
CONFIGS = ((1, False), (1, True))  # (max_searches, planning)
PER_TURN = 32


def _outside_records(proxy: FaultServer) -> int:
    """Repeats of the preflight's one-token request (its retries belong to no answer's record)."""
    bodies = proxy.upstream.repeated if proxy.upstream is not None else []
    return sum(1 for body in bodies if json.loads(body).get("max_tokens") == 1)


def _upstream_latency(server: LlamaCppServer) -> float:
    """Seconds the server takes for a request about as long as the grid's longest (~700 tokens)."""
    context = " ".join(f"Note {i}: the river flows north past the old mill." for i in range(48))
    url = f"{server.base_url}/chat/completions"
    warm_up = {"model": server.alias, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    httpx.post(url, json=warm_up, timeout=300).raise_for_status()
    body = {
        "model": server.alias,
        "messages": [{"role": "user", "content": context + " Which way does the river flow?"}],
        "max_tokens": 32,
        "temperature": 0.0,
    }
    started = time.perf_counter()
    httpx.post(url, json=body, timeout=300).raise_for_status()
    return time.perf_counter() - started


def _reset_upstream(server: LlamaCppServer) -> None:
    """Leave the server's KV cache holding a prompt no chat request shares a prefix with.

    llama.cpp reuses the longest common prefix of the previous prompt, and a prompt
    evaluated in other batch shapes can round differently; starting both runs from
    this same state makes the upstream's work identical in both.
    """
    body = {"prompt": "Reset.", "max_tokens": 1, "temperature": 0.0}
    httpx.post(f"{server.base_url}/completions", json=body, timeout=300).raise_for_status()


def _run(pytester: pytest.Pytester, base_url: str, report: Path) -> pytest.RunResult:
    return pytester.runpytest(
        "-p", "no:cacheprovider",
        "--bcas-backend", "openai", "--bcas-base-url", base_url, "--bcas-model", "smollm2",
        "--bcas-grid", "proof", "--bcas-no-cache", "--bcas-concurrency", "1",
        "--bcas-report", str(report),
        # The preflight's requests would draw on the proxy's fault schedule, which the
        # proof counts against the retries in the records: the proof checks the items.
        "--bcas-no-preflight",
    )  # fmt: skip


def test_grid_through_a_faulty_server_matches_the_fault_free_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, llama_server: LlamaCppServer
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    write_project(pytester.path, grid="proof", configs=CONFIGS, limit=ITEMS, per_turn=PER_TURN)
    # A read timeout about a real request's time: each held connection costs seconds,
    # and a real answer slower than it is a retry the proxy counts in ``repeats``.
    timeout = min(120.0, max(3.0, 2.0 * _upstream_latency(llama_server)))
    monkeypatch.setitem(openai_client.CLIENT_OPTIONS, "timeout", timeout)
    monkeypatch.setitem(llm.BACKENDS, "openai", "support.openai_client:create_openai")

    _reset_upstream(llama_server)
    started = time.perf_counter()
    with FaultServer.proxy(llama_server.base_url, rate=0.0) as clean_proxy:
        clean = _run(pytester, clean_proxy.base_url, tmp_path / "clean")
        clean.assert_outcomes(passed=len(CONFIGS))
        clean_repeats, clean_bound = clean_proxy.repeats, clean_proxy.repeat_bound(timeout)
        clean_outside = _outside_records(clean_proxy)
        clean_repeated = [b[-600:] for b in clean_proxy.upstream.repeated] if clean_proxy.upstream else []
    clean_s = time.perf_counter() - started

    _reset_upstream(llama_server)
    started = time.perf_counter()
    with FaultServer.proxy(llama_server.base_url, rate=0.2, seed=7, hold_s=timeout + 2.0, retry_after=0.2) as proxy:
        faulty = _run(pytester, proxy.base_url, tmp_path / "faulty")
        faulty.assert_outcomes(passed=len(CONFIGS))
        arrivals, faults, repeats = proxy.requests, dict(proxy.faults), proxy.repeats
        outside = _outside_records(proxy)
        repeat_bound = proxy.repeat_bound(timeout)
    faulty_s = time.perf_counter() - started

    # Every fault kind was met, at exactly 20% of the requests in each full block of ten.
    assert set(faults) == set(FAULT_KINDS), faults
    full_blocks = arrivals // 10
    assert full_blocks >= 2, f"only {arrivals} requests reached the proxy"
    in_full = sum(1 for number, kind in proxy.schedule.log if number < 10 * full_blocks and kind != "forward")
    assert in_full == 2 * full_blocks

    clean_records = read_records(tmp_path / "clean")
    faulty_records = read_records(tmp_path / "faulty")
    expected = len(CONFIGS) * ITEMS
    # 0 lost, 0 doubled: each (config, item) exactly once in the file itself.
    for records in (clean_records, faulty_records):
        keys = [(r["config_id"], r["item_id"]) for r in records]
        assert len(keys) == expected and len(set(keys)) == expected
        assert all(r["error"] is None and r["stop_reason"] != "error" for r in records)
    clean_by_key, faulty_by_key = by_key(clean_records), by_key(faulty_records)
    assert clean_by_key.keys() == faulty_by_key.keys()
    for key, record in clean_by_key.items():
        assert faulty_by_key[key] == record, f"{key}: {first_difference(record, faulty_by_key[key])}"

    # Each injected fault cost exactly one retry, and the records say so.  A client
    # timeout on a slow real answer (``repeats``: a retry of a request the server
    # already had) costs one more, in either run.  Repeats are counted apart from
    # faults and bounded: a retry of a forwarded request needs a full client timeout
    # spent waiting on it, so an answer the upstream gave in d seconds explains at most
    # floor(d / timeout) repeats (FaultServer.repeat_bound, from the measured upstream
    # times).  A client that retried answers it had in time (or retried for any other
    # reason) would exceed it, and ``retries = faults + repeats`` alone would not see it.
    faulty_retries = sum(r["retries"] for r in faulty_records)
    # The start-of-session check's one-token request is in no record: its repeats are not either.
    assert sum(r["retries"] for r in clean_records) == clean_repeats - clean_outside, clean_repeated
    assert clean_repeats <= clean_bound, (clean_repeats, clean_bound)
    assert faulty_retries - sum(faults.values()) == repeats - outside, (repeats, outside)
    assert repeats <= repeat_bound, (repeats, repeat_bound)
    assert any(r["retries"] > 0 for r in faulty_records)
    print(
        f"\n[fault proof] {arrivals} requests, {sum(faults.values())} faults injected {faults}, "
        f"{repeats} retries after real slowness (bound {repeat_bound}; fault-free run {clean_repeats}, bound "
        f"{clean_bound}; client timeout {timeout:.1f} s); "
        f"fault-free run {clean_s:.1f} s, faulty run {faulty_s:.1f} s; {expected} records equal"
    )
