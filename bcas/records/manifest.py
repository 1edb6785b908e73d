"""The run manifest file (``run.json``): where it is, how it is read and locked.

The harness writes the manifest (:mod:`bcas.run.manifest`); reports and
``compare`` read it.  Updates hold an ``fcntl`` lock on the run folder's ``.run.lock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MANIFEST_FILE = "run.json"
LOCK_FILE = ".run.lock"


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """Hold the run folder's manifest lock (exclusive)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run folder's manifest, or ``None`` when it has none (or an unreadable one)."""
    path = Path(run_dir) / MANIFEST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("sessions"), list) else None


def served_by_fingerprint(manifest: dict[str, Any] | None) -> dict[str, str]:
    """Model fingerprint -> the name of what answered (each session's ``models[*].served``; the latest wins)."""
    names: dict[str, str] = {}
    for session in (manifest or {}).get("sessions") or []:
        models = session.get("models") if isinstance(session, dict) else None
        for entry in (models or {}).values() if isinstance(models, dict) else ():
            if isinstance(entry, dict) and entry.get("served") and entry.get("fingerprint"):
                names[str(entry["fingerprint"])] = str(entry["served"])
    return names


def session_grids(manifest: dict[str, Any] | None) -> tuple[list[str], str | None]:
    """The grids the run's sessions ran (in order, each once) and the last session's ``holm_scope``:
    what a view of the records (``bcas report``, ``bcas view``) summarises them under."""
    grids: list[str] = []
    holm_scope = None
    for session in (manifest or {}).get("sessions") or []:
        settings = (session or {}).get("settings") or {}
        for name in settings.get("grids") or []:
            if str(name) not in grids:
                grids.append(str(name))
        holm_scope = settings.get("holm_scope", holm_scope)
    return grids, holm_scope


__all__ = ["LOCK_FILE", "MANIFEST_FILE", "locked", "read_manifest", "served_by_fingerprint", "session_grids"]
