"""Model backends behind one contract (``ChatModel``), chosen by name.

Backends register a factory by dotted path, so choosing ``embedded`` never imports
vllm and choosing ``vllm`` never imports llama_cpp.  ``load_model`` is the one entry
point; it wraps the model in the generation cache unless ``cache=False``.
"""

from __future__ import annotations

import importlib
from typing import Any

from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ModelError

# name -> "module:factory"; the module is imported only when the backend is chosen.
BACKENDS: dict[str, str] = {
    "embedded": "bcas.llm.embedded:create",
    "openai": "bcas.llm.multi_endpoint:create",  # one server, or several for one model
    "vllm": "bcas.llm.vllm_engine:create",
    "mock": "bcas.testing.mock:create",
}


def register_backend(name: str, target: str) -> None:
    """Register a backend factory given as ``"package.module:function"``."""
    BACKENDS[name] = target


def load_model(backend: str = "embedded", model: str | None = None, *, cache: Any = True, **options: Any) -> ChatModel:
    """Create a model of the named backend.

    ``cache``: ``True`` (default) uses the generation cache at its default path,
    a path string uses that SQLite file, ``False`` disables caching.  A model whose
    class sets ``cacheable = False`` (the ``mock`` backend) is never wrapped.
    """
    try:
        target = BACKENDS[backend]
    except KeyError:
        raise ModelError(f"unknown backend {backend!r}; registered: {sorted(BACKENDS)}") from None
    module_name, func_name = target.split(":")
    factory = getattr(importlib.import_module(module_name), func_name)
    chat_model = factory(model, **options)
    if cache is False or cache is None or not getattr(chat_model, "cacheable", True):
        return chat_model
    from bcas.llm.cache import CachedModel, GenerationCache

    store = cache if isinstance(cache, GenerationCache) else GenerationCache(None if cache is True else cache)
    return CachedModel(chat_model, store)


__all__ = ["BACKENDS", "ChatModel", "ChatRequest", "ChatResult", "ModelError", "load_model", "register_backend"]
