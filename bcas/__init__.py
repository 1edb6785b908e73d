"""bcas: an evaluation suite for budgeted agentic retrieval-augmented generation.

Two front doors run the same engine (:mod:`bcas.run`): the pytest plugin
(``pytest benchmarks --bcas-grid smoke``) and :func:`bcas.evaluate` (:func:`bcas.estimate`: what
it would spend, without running it).  Importing ``bcas`` loads neither: both are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bcas.api import Results, estimate, evaluate

__all__ = ["Results", "estimate", "evaluate"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from bcas import api

        return getattr(api, name)
    raise AttributeError(f"module 'bcas' has no attribute {name!r}")
