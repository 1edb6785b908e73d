"""Named retrieval models of one kind: the embedder and reranker tables (BCAS §3.5).

Embedders (``bcas.retrieval.dense``) and rerankers (``bcas.retrieval.rerank``) are
chosen by name the same way: a name is a registered factory, or ``NAME:PATH`` where
``NAME`` takes a local model folder and ``PATH`` is passed to it as ``path``.  One of
them needs a folder and is listed only as ``NAME:PATH``.  :class:`ModelTable` holds
that logic once; each module keeps its own factory dictionary and public functions.
:func:`weights_digest` identifies a model loaded from a folder by its weight files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def split_model_name(name: str) -> tuple[str, str | None]:
    """``NAME:ARGUMENT`` -> (NAME, ARGUMENT); a plain name -> (name, None)."""
    head, sep, rest = name.partition(":")
    return (head, rest or None) if sep else (name, None)


def weights_digest(folder: Path) -> str:
    """A short sha256 of a model folder's weight files: two folders with other weights differ.

    It goes into the model id, so into the index cache key.
    """
    h = hashlib.sha256()
    for f in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class ModelTable(Generic[T]):
    """Registered factories of one kind of retrieval model, and the ``NAME:PATH`` rule.

    ``kind`` names the models in messages (``embedder``); ``path_models`` take a local
    folder as ``NAME:PATH``; ``path_only`` is the one that needs it; ``error`` is the
    exception an unknown name raises.
    """

    kind: str
    factories: dict[str, Callable[..., T]]
    path_models: tuple[str, ...]
    path_only: str
    error: type[Exception]

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """A decorator registering a factory under ``name``."""

        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            self.factories[name] = factory
            return factory

        return decorate

    def known(self, name: str) -> bool:
        """Whether ``name`` is registered, or ``NAME:PATH`` of a registered model that takes a path."""
        if name in self.factories:
            return True
        head, path = split_model_name(name)
        return head in self.path_models and head in self.factories and path is not None

    def names(self) -> list[str]:
        """The names to offer a user, the path-taking models as ``NAME:PATH``."""
        plain = [n for n in self.factories if n != self.path_only]
        return sorted(plain + [f"{n}:PATH" for n in self.path_models])

    def create(self, name: str, **options: Any) -> T:
        """The named model (``NAME`` or ``NAME:PATH``); an unknown name raises ``error`` listing the known ones."""
        if name in self.factories:
            return self.factories[name](**options)
        if not self.known(name):
            raise self.error(f"unknown {self.kind} {name!r}; known {self.kind}s: {', '.join(self.names())}")
        head, path = split_model_name(name)
        return self.factories[head](path=path, **options)
