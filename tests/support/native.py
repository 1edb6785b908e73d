"""Native extensions a run may load that cannot be imported a second time in one process.

An in-process pytester run restores ``sys.modules`` afterwards, so a module first imported
inside it is dropped and the next import initialises it again; torch's second initialisation
dies of SIGSEGV.  tests/conftest.py imports these before every test that uses ``pytester``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

NOT_REIMPORTABLE = (
    "torch",
    "faiss",
    "tokenizers",
    "safetensors",
    "pandas",
    "pyarrow",
)  # pandas before pyarrow, which keeps it


def installed() -> list[str]:
    """The names of :data:`NOT_REIMPORTABLE` installed here."""
    return [name for name in NOT_REIMPORTABLE if importlib.util.find_spec(name) is not None]


def preload_native() -> None:
    """Import every installed module of :data:`NOT_REIMPORTABLE` not yet loaded."""
    for name in installed():
        if name not in sys.modules:
            importlib.import_module(name)
