"""The real ``openai`` backend with proof-test client options (a short read timeout).

The fault-injecting proxy itself is ``bcas.testing.FaultServer.proxy``.
"""

from __future__ import annotations

from typing import Any

# Client options for the ``openai`` backend under proof tests: a read timeout the
# proxy's held connections can outlast in seconds rather than a minute.  A test sets
# them (monkeypatch) and points ``bcas.llm.BACKENDS["openai"]`` at the factory below.
CLIENT_OPTIONS: dict[str, Any] = {"timeout": 10.0, "backoff_base": 0.05, "backoff_max": 0.5}


def create_openai(model: str | None = None, **options: Any) -> Any:
    """The real ``openai`` backend (``OpenAICompatModel``) with ``CLIENT_OPTIONS`` applied."""
    from bcas.llm.openai_compat import create

    return create(model, **{**CLIENT_OPTIONS, **options})
