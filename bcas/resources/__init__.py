"""Files installed with the package: the dataset samples and the price sheets.

``resource_path("data")`` is the folder of the shipped samples and
``resource_path("prices.toml")`` the price sheets.  They are package data, so a
non-editable ``pip install`` has them; in a checkout ``fixtures/data`` and
``fixtures/prices.toml`` are links to the same files.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def resource_path(name: str) -> Path:
    """The filesystem path of the packaged resource ``name`` (a file or folder)."""
    return Path(str(files(__name__).joinpath(name)))
