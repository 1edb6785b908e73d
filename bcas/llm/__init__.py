"""Model backends behind one contract (``ChatModel``), chosen by name.

Backends live in one :class:`~bcas.registry.Registry`, each a lazily imported factory
(choosing ``embedded`` never imports vllm, choosing ``vllm`` never imports llama_cpp)
plus what the harness needs to know about it, declared by the backend itself:

* ``label``: the model label when no model is named (``embedded``: ``smollm2-135m``);
* ``label_prefix``: put before a named model's label (``mock``: ``mock-``);
* ``concurrency``: default items in flight (1 for one in-process model whose turns reuse
  llama.cpp's cached prompt prefix; 8 for servers and engines that batch);
* ``needs_base_url``: the model is served (``--bcas-base-url``), preflighted and fingerprinted
  by what the server reports;
* ``identity``: how the model is fingerprinted (``gguf``, ``checkpoint``, ``served``,
  ``mock``; otherwise the model object's ``fingerprint()`` or ``<backend>:<model>``);
* ``one_per_process``: one in-process engine per process (xdist workers would compete
  for the device);
* ``requires``: requirement markers its cases carry (``vllm``: the ``vllm`` marker);
* ``models``: the only model names the backend knows (``mock``: gold, verbose, random),
  checked at session start;
* ``context_window``: the context length its models get by default, known before one
  loads (``embedded``: 8192); a served model's is read by the preflight.

``register_backend("name", "package.module:create", **meta)`` adds one (from a
``conftest.py``, a ``-p`` plugin or a package's ``bcas.plugins`` entry point).
``load_model`` is the one entry point; it wraps the model in the generation cache unless
``cache=False`` or the model is not cacheable.
"""

from __future__ import annotations

from typing import Any

from bcas.llm.base import ChatModel, ChatRequest, ChatResult, ContextWindowError, ModelError
from bcas.registry import Registry, RegistryError

BACKENDS: Registry[Any] = Registry("backend")
# context_window: the n_ctx create() gives a model by default (bcas.llm.embedded.DEFAULT_N_CTX), known
# before it loads; a loaded model's own ``context_window`` is the truth.
BACKENDS.register(
    "embedded",
    "bcas.llm.embedded:create",
    label="smollm2-135m",
    concurrency=1,
    identity="gguf",
    context_window=8192,
)
BACKENDS.register(
    "openai", "bcas.llm.multi_endpoint:create", concurrency=8, needs_base_url=True, identity="served"
)  # one server, or several for one model
BACKENDS.register(
    "vllm",
    "bcas.llm.vllm_engine:create",
    concurrency=8,
    identity="checkpoint",
    one_per_process=True,
    requires=("vllm",),
)
BACKENDS.register(
    "mock",
    "bcas.testing.mock:create",
    label="mock-gold",
    label_prefix="mock-",
    concurrency=8,
    identity="mock",
    models=("gold", "verbose", "random"),
)


def register_backend(name: str, target: Any, **meta: Any) -> None:
    """Register a backend factory (``"package.module:function"`` or a callable) with its metadata."""
    BACKENDS.register(name, target, **meta)


def backend_meta(name: str, key: str, default: Any = None) -> Any:
    """One declared property of a backend (see the module docstring)."""
    return BACKENDS.meta(name, key, default)


def load_model(
    backend: str = "embedded",
    model: str | None = None,
    *,
    cache: Any = True,
    identity: str | None = None,
    **options: Any,
) -> ChatModel:
    """Create a model of the named backend.

    ``cache``: ``True`` (default) uses the generation cache at its default path,
    a path string uses that SQLite file, ``False`` disables caching.  A model whose
    class sets ``cacheable = False`` (the ``mock`` backend) is never wrapped.
    ``identity``: the model's fingerprint (:mod:`bcas.llm.fingerprint`), which the
    cache keys on instead of the model's ``model_id`` (the harness always gives it).
    """
    try:
        factory = BACKENDS.get(backend)
    except RegistryError as exc:
        raise ModelError(str(exc)) from None
    chat_model: ChatModel = factory(model, **options)
    if cache is False or cache is None or not getattr(chat_model, "cacheable", True):
        return chat_model
    from bcas.llm.cache import CachedModel, GenerationCache

    store = cache if isinstance(cache, GenerationCache) else GenerationCache(None if cache is True else cache)
    return CachedModel(chat_model, store, identity=identity)


__all__ = [
    "BACKENDS",
    "ChatModel",
    "ChatRequest",
    "ChatResult",
    "ContextWindowError",
    "ModelError",
    "backend_meta",
    "load_model",
    "register_backend",
]
