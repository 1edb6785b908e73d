"""Where bcas keeps files it can rebuild: generation cache, retrieval indexes.

``BCAS_CACHE_DIR`` overrides the location; otherwise ``$XDG_CACHE_HOME/bcas`` or
``~/.cache/bcas``.  Everything under it may be deleted at any time.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "BCAS_CACHE_DIR"


def cache_dir(create: bool = True) -> Path:
    """The bcas cache folder (created unless ``create=False``)."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        path = Path(override).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "bcas"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
