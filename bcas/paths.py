"""Where bcas keeps files it can rebuild: generation cache, retrieval indexes.

``BCAS_CACHE_DIR`` overrides the location; otherwise ``$XDG_CACHE_HOME/bcas`` or
``~/.cache/bcas``.  ``BCAS_INDEX_DIR`` moves the retrieval indexes alone (a team's shared
index folder beside each run's own generation cache).  Everything under them may be
deleted at any time.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "BCAS_CACHE_DIR"
INDEX_DIR_ENV = "BCAS_INDEX_DIR"


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


def index_dir() -> Path:
    """The retrieval index cache: ``BCAS_INDEX_DIR``, else ``<cache folder>/indexes`` (not created here)."""
    override = os.environ.get(INDEX_DIR_ENV)
    return Path(override).expanduser() if override else cache_dir() / "indexes"
