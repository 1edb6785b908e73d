"""The generation cache: hits cost no model call, it is shared safely between
processes, it can be turned off or moved, and a damaged file is reported clearly."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import time
from pathlib import Path

import pytest

from bcas.llm import load_model
from bcas.llm.base import ChatRequest, ChatResult
from bcas.llm.cache import CachedModel, CacheError, GenerationCache
from bcas.llm.openai_compat import OpenAICompatModel
from bcas.paths import cache_dir
from bcas.testing.servers import FaultServer


def _request(text: str = "hello", **fields: object) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], **fields)  # type: ignore[arg-type]


def _cached_model(server: FaultServer, db: Path) -> CachedModel:
    return CachedModel(OpenAICompatModel("test-model", base_url=server.base_url), GenerationCache(db))


def test_store_and_load_round_trip(tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path / "g.sqlite")
    result = ChatResult("text", 11, 3, "length", 0.25, logprobs=[{"a": -0.5}], retries=2, extra={"schema_mode": "none"})
    assert cache.get("k") is None
    cache.put("k", "model", result)
    loaded = cache.get("k")
    assert loaded is not None and loaded.cached is True
    assert (loaded.text, loaded.prompt_tokens, loaded.completion_tokens, loaded.finish_reason) == (
        "text",
        11,
        3,
        "length",
    )
    assert loaded.logprobs == [{"a": -0.5}] and loaded.retries == 2 and loaded.extra == {"schema_mode": "none"}
    assert len(cache) == 1
    journal = sqlite3.connect(tmp_path / "g.sqlite").execute("PRAGMA journal_mode").fetchone()[0]
    assert journal == "wal"


def test_hit_returns_identical_text_without_a_server_call(fault_server: FaultServer, tmp_path: Path) -> None:
    model = _cached_model(fault_server, tmp_path / "g.sqlite")
    first = asyncio.run(model.chat(_request("capital of France?")))
    second = asyncio.run(model.chat(_request("capital of France?")))
    assert first.cached is False and second.cached is True
    assert second.text == first.text == "echo: capital of France?"
    assert (second.prompt_tokens, second.completion_tokens) == (first.prompt_tokens, first.completion_tokens)
    assert fault_server.requests == 1
    # Any change of sampling parameter, seed or model is a different entry.
    asyncio.run(model.chat(_request("capital of France?", seed=1)))
    asyncio.run(model.chat(_request("capital of France?", max_tokens=9)))
    assert fault_server.requests == 3
    other = CachedModel(OpenAICompatModel("other-model", base_url=fault_server.base_url), model.cache)
    asyncio.run(other.chat(_request("capital of France?")))
    assert fault_server.requests == 4


def test_a_new_process_sees_the_same_entries(fault_server: FaultServer, tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    asyncio.run(_cached_model(fault_server, db).chat(_request("persisted")))
    reopened = _cached_model(fault_server, db)
    assert asyncio.run(reopened.chat(_request("persisted"))).cached is True
    assert fault_server.requests == 1


def test_identical_requests_in_flight_share_one_call(tmp_path: Path) -> None:
    with FaultServer(latency=0.2) as server:
        model = _cached_model(server, tmp_path / "g.sqlite")

        async def both() -> list[ChatResult]:
            return await asyncio.gather(model.chat(_request("same")), model.chat(_request("same")))

        results = asyncio.run(both())
        assert server.requests == 1
        assert sorted(r.cached for r in results) == [False, True]
        assert results[0].text == results[1].text


def test_failures_are_not_cached(fault_server: FaultServer, tmp_path: Path) -> None:
    from bcas.llm.base import ModelError
    from bcas.testing.servers import Fault

    model = _cached_model(fault_server, tmp_path / "g.sqlite")
    fault_server.script(Fault.error(400, "bad request"))
    with pytest.raises(ModelError):
        asyncio.run(model.chat(_request("x")))
    assert asyncio.run(model.chat(_request("x"))).cached is False
    assert fault_server.requests == 2


def test_bcas_no_cache_disables(fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BCAS_NO_CACHE", "1")
    model = _cached_model(fault_server, tmp_path / "g.sqlite")
    assert model.cache.enabled is False
    results = [asyncio.run(model.chat(_request("again"))) for _ in range(2)]
    assert [r.cached for r in results] == [False, False]
    assert fault_server.requests == 2
    assert not (tmp_path / "g.sqlite").exists()


def test_load_model_cache_option(fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cachedir"))
    default = load_model("openai", "test-model", base_url=fault_server.base_url)
    assert isinstance(default, CachedModel)
    assert default.cache.path == tmp_path / "cachedir" / "generations.sqlite"
    assert cache_dir() == tmp_path / "cachedir"
    elsewhere = load_model("openai", "test-model", base_url=fault_server.base_url, cache=str(tmp_path / "x.sqlite"))
    assert isinstance(elsewhere, CachedModel) and elsewhere.cache.path == tmp_path / "x.sqlite"
    raw = load_model("openai", "test-model", base_url=fault_server.base_url, cache=False)
    assert isinstance(raw, OpenAICompatModel)
    asyncio.run(default.chat(_request("via load_model")))
    assert asyncio.run(default.chat(_request("via load_model"))).cached is True
    assert fault_server.requests == 1


def test_corrupted_database_is_reported_with_its_path(tmp_path: Path) -> None:
    db = tmp_path / "generations.sqlite"
    db.write_bytes(b"this is not a SQLite database, just bytes left by a crash" * 200)
    cache = GenerationCache(db)
    with pytest.raises(CacheError) as error:
        cache.get("any")
    message = str(error.value)
    assert str(db) in message
    assert "delete the file" in message and "BCAS_CACHE_DIR" in message


def _write_entries(db: str, worker: int, count: int) -> None:
    cache = GenerationCache(db)
    for i in range(count):
        result = ChatResult(f"w{worker}-{i}", 1, 1, "stop", 0.0)
        cache.put(f"w{worker}-{i}", "m", result)
        cache.put("shared", "m", result)  # both processes overwrite one key concurrently
        assert cache.get(f"w{worker}-{i}") is not None
    cache.close()


def test_two_processes_write_the_same_database(tmp_path: Path) -> None:
    db = str(tmp_path / "shared.sqlite")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_entries, args=(db, w, 150)) for w in range(2)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
    assert [p.exitcode for p in workers] == [0, 0]
    cache = GenerationCache(db)
    assert len(cache) == 2 * 150 + 1
    for worker in range(2):
        hit = cache.get(f"w{worker}-149")
        assert hit is not None and hit.text == f"w{worker}-149"
    assert cache.get("shared") is not None


def _open_together(folder: str, rounds: int, start: float, gap: float) -> None:
    """Open a new cache file per round at the same instant as the other processes."""
    for i in range(rounds):
        while time.time() < start + i * gap:
            pass
        GenerationCache(Path(folder) / f"new{i}.sqlite").put("k", "m", ChatResult("x", 1, 1, "stop", 0.0))


def test_processes_opening_a_new_cache_at_the_same_instant_all_get_it(tmp_path: Path) -> None:
    """The switch to WAL mode can report "locked" at once to a process racing another for a new
    file (3 processes, 30 files: 5 of 90 openings failed before the switch was retried)."""
    context = multiprocessing.get_context("spawn")
    start = time.time() + 3.0  # after the spawned interpreters have imported bcas
    workers = [context.Process(target=_open_together, args=(str(tmp_path), 30, start, 0.1)) for _ in range(3)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=180)
    assert [p.exitcode for p in workers] == [0, 0, 0]
    assert all(len(GenerationCache(tmp_path / f"new{i}.sqlite")) == 1 for i in range(30))
