"""bcas: an evaluation suite for budgeted agentic retrieval-augmented generation.

Two front doors run the same engine (:mod:`bcas.run`): the pytest plugin
(``pytest benchmarks --bcas-grid smoke``) and :func:`bcas.evaluate`.  Importing
``bcas`` loads neither: ``evaluate`` is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bcas.api import Results, evaluate

__all__ = ["Results", "evaluate"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from bcas import api

        return getattr(api, name)
    raise AttributeError(f"module 'bcas' has no attribute {name!r}")
