"""Engine thread counts: the usable cores shared among workers and engines, never more in total."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bcas.llm.base import ModelError
from bcas.llm.threads import engine_threads, usable_cores


@pytest.mark.parametrize(
    ("cores", "workers", "engines", "expected"),
    [(2, None, 1, 2), (2, "2", 1, 1), (8, "2", 2, 2), (16, "4", 1, 4), (2, "4", 2, 1), (12, "", 3, 4)],
)
def test_threads_share_the_cores(cores: int, workers: str | None, engines: int, expected: int) -> None:
    env = {} if workers is None else {"PYTEST_XDIST_WORKER_COUNT": workers}
    threads = engine_threads(engines=engines, env=env, cores=cores)
    assert threads == expected
    # What oversubscription would cost: every engine of every worker at once stays within the cores
    # (one thread each at the least, when there are more engines than cores).
    assert threads * int(workers or 1) * engines <= max(cores, int(workers or 1) * engines)


def test_the_affinity_mask_counts_not_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert usable_cores() == 1
    assert engine_threads(env={}) == 1


def test_bcas_threads_overrides_and_is_checked() -> None:
    assert engine_threads(engines=3, env={"BCAS_THREADS": "6", "PYTEST_XDIST_WORKER_COUNT": "4"}, cores=2) == 6
    for bad in ("0", "-1", "two"):
        with pytest.raises(ModelError, match="BCAS_THREADS"):
            engine_threads(env={"BCAS_THREADS": bad})


def test_a_second_embedded_engine_gets_its_share(smollm2_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bcas.llm import embedded

    monkeypatch.delenv("BCAS_THREADS", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    monkeypatch.setattr(embedded, "engine_threads", lambda engines: engine_threads(engines, cores=4))
    open_before = len(embedded._LIVE)
    first = embedded.EmbeddedModel(smollm2_gguf, n_ctx=256)
    second = embedded.EmbeddedModel(smollm2_gguf, n_ctx=256)
    try:
        # n_threads is what each engine process reports llama.cpp's context was given.
        assert first.n_threads == max(1, 4 // (open_before + 1))
        assert second.n_threads == max(1, 4 // (open_before + 2))
        assert second.n_threads < first.n_threads or first.n_threads == 1
    finally:
        first.close()
        second.close()
    assert len(embedded._LIVE) == open_before
