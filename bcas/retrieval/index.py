"""On-disk index cache: build once per (collection, index parameters, model), load after.

BCAS searches a dataset-specific index (§3.5, §3.7); building it (embedding thousands
of chunks on CPU) takes minutes, loading it takes well under a second per component.

Layout: ``<root>/<component>-<key>/`` holds the component's files and a
``manifest.json`` listing every file with its size and sha256.  ``root`` is
``bcas.paths.index_dir()`` (``$BCAS_INDEX_DIR``, else ``$BCAS_CACHE_DIR/indexes``) unless a
folder is given.  ``key`` is the sha256 of the component name, the collection hash (sha256
of chunk ids, titles and texts), the component's parameters (for example stemmer and
phrase slop; embedder model id and faiss index kind) and the cache format version.

Writes are atomic: a component is written into a private temporary folder, the
manifest last, and the folder is renamed into place; a concurrent writer that loses
the race discards its copy.  A folder whose manifest is missing or unreadable, whose
files are missing, differ in size or checksum, or fail to load is reported with an
``IndexCacheWarning``, deleted and rebuilt: a damaged cache is never used.

Checksums cost a pass over every byte, minutes for the gigabytes of a million-passage
index, so a folder whose checksums passed records its files' size, modification and
change times and inode in ``.verified``; while those are unchanged a load checks the
sizes only.  Any write to a file changes its times (a stamp is only written for
files last changed more than ``STAMP_MIN_AGE_S`` earlier, so a write after the check
cannot share the old timestamps), and then the checksums are verified again.

Large components stream straight into their folder (:meth:`IndexCache.load_or_write`);
a build that may run for hours (embedding a corpus) keeps its finished parts in
``<root>/.work-<component>-<key>/`` so that a killed build resumes where it stopped
(:meth:`IndexCache.work_folder`); the work folder is removed once the component is
stored, and deleting it by hand discards the partial work.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")

CACHE_FORMAT_VERSION = 1
MANIFEST = "manifest.json"
VERIFIED = ".verified"
STAMP_MIN_AGE_S = 2.0
STALE_TMP_SECONDS = 24 * 3600

log = logging.getLogger(__name__)


class IndexCacheWarning(UserWarning):
    """A cached index was damaged or partial and is being rebuilt."""


class CacheCorrupt(Exception):
    """Internal: a cache folder failed verification."""


def default_index_root() -> Path:
    from bcas.paths import index_dir

    return index_dir()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_key(component: str, collection: str, params: dict[str, Any]) -> str:
    blob = json.dumps(
        {"component": component, "collection": collection, "params": params, "format": CACHE_FORMAT_VERSION},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def write_manifest(folder: Path, meta: dict[str, Any]) -> None:
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST):
        rel = path.relative_to(folder).as_posix()
        files[rel] = {"size": path.stat().st_size, "sha256": _sha256_file(path)}
    (folder / MANIFEST).write_text(json.dumps({**meta, "files": files}, indent=1, sort_keys=True))


def verify_manifest(folder: Path) -> dict[str, Any]:
    """Check every file the manifest lists; raise ``CacheCorrupt`` naming the first fault."""
    try:
        manifest: dict[str, Any] = json.loads((folder / MANIFEST).read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CacheCorrupt(f"manifest missing or unreadable ({exc})") from None
    if manifest.get("format") != CACHE_FORMAT_VERSION:
        raise CacheCorrupt(f"cache format {manifest.get('format')!r} != {CACHE_FORMAT_VERSION}")
    if not files:
        raise CacheCorrupt("manifest lists no files")
    for rel, entry in files.items():
        path = folder / rel
        if not path.is_file():
            raise CacheCorrupt(f"{rel} is missing")
        if path.stat().st_size != entry["size"]:
            raise CacheCorrupt(f"{rel} has {path.stat().st_size} bytes, manifest says {entry['size']}")
    signature = _signature(folder, [MANIFEST, *sorted(files)])
    try:
        if json.loads((folder / VERIFIED).read_text()) == signature:
            return manifest
    except (OSError, ValueError):
        pass
    for rel, entry in files.items():
        path = folder / rel
        if _sha256_file(path) != entry["sha256"]:
            raise CacheCorrupt(f"{rel} fails its sha256 checksum")
    _write_stamp(folder, signature)
    return manifest


def _signature(folder: Path, names: list[str]) -> list[list[Any]]:
    out = []
    for rel in names:
        st = (folder / rel).stat()
        out.append([rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    return out


def _write_stamp(folder: Path, signature: list[list[Any]]) -> None:
    """Record verified files (only those changed long enough ago that a later write gets new times)."""
    newest = max(max(entry[2], entry[3]) for entry in signature)
    if time.time_ns() - newest < STAMP_MIN_AGE_S * 1e9:
        return
    tmp = folder / f"{VERIFIED}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(signature))
        os.replace(tmp, folder / VERIFIED)
    except OSError:  # a read-only cache still loads; it is verified in full each time
        tmp.unlink(missing_ok=True)


class IndexCache:
    """Load-or-build of index components under one root folder."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_index_root()

    def folder(self, component: str, collection: str, params: dict[str, Any]) -> Path:
        return self.root / f"{component}-{cache_key(component, collection, params)}"

    def lookup(self, component: str, collection: str, params: dict[str, Any], load: Callable[[Path], T]) -> T | None:
        """The cached component when its folder verifies and loads; a damaged one is deleted (``None``)."""
        final = self.folder(component, collection, params)
        if not final.exists():
            return None
        started = time.perf_counter()
        try:
            verify_manifest(final)
            obj = load(final)
        except Exception as exc:  # any failure to verify or load means: do not trust, rebuild
            warnings.warn(
                f"index cache {final} is damaged or partial ({exc}); deleting and rebuilding it",
                IndexCacheWarning,
                stacklevel=4,
            )
            shutil.rmtree(final, ignore_errors=True)
            return None
        log.info("loaded %s index from %s in %.2fs", component, final, time.perf_counter() - started)
        return obj

    def new_folder(self, component: str) -> Path:
        """A private temporary folder under the root, for :meth:`commit`."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._clean_stale_tmp()
        tmp = self.root / f".tmp-{component}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        return tmp

    def commit(
        self,
        tmp: Path,
        component: str,
        collection: str,
        params: dict[str, Any],
        *,
        build_seconds: float,
        info: dict[str, Any] | None = None,
    ) -> Path:
        """Write ``tmp``'s manifest (``info``: what the build realised) and rename it into place.

        When another process stored the same component first, theirs is kept and ``tmp``
        is discarded.  Returns the final folder.
        """
        final = self.folder(component, collection, params)
        meta = {
            "format": CACHE_FORMAT_VERSION,
            "component": component,
            "collection": collection,
            "params": params,
            "build_seconds": round(build_seconds, 3),
        }
        if info:
            meta["info"] = info
        try:
            write_manifest(tmp, meta)
            try:
                os.rename(tmp, final)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log.info("built %s index in %.2fs, stored at %s", component, build_seconds, final)
        return final

    def work_folder(self, component: str, collection: str, params: dict[str, Any]) -> Path:
        """A folder that survives a killed build of this component, so the next build resumes from it."""
        folder = self.root / f".work-{component}-{cache_key(component, collection, params)}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def load_or_write(
        self,
        component: str,
        collection: str,
        params: dict[str, Any],
        *,
        write: Callable[[Path], dict[str, Any] | None],
        load: Callable[[Path], T],
    ) -> tuple[T, bool]:
        """The component from the cache when intact (``(obj, True)``), else built and loaded (``(obj, False)``).

        ``write(folder)`` fills a fresh folder (the build streams straight to disk; it
        returns what the build realised, for the manifest's ``info``); the component is
        then loaded from its final folder.
        """
        cached = self.lookup(component, collection, params, load)
        if cached is not None:
            return cached, True
        with self.build_lock(component, collection, params):
            cached = self.lookup(component, collection, params, load)  # another process may have built it meanwhile
            if cached is not None:
                return cached, True
            tmp = self.new_folder(component)
            started = time.perf_counter()
            try:
                info = write(tmp)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            final = self.commit(
                tmp, component, collection, params, build_seconds=time.perf_counter() - started, info=info
            )
        return load(final), False

    @contextmanager
    def build_lock(self, component: str, collection: str, params: dict[str, Any]) -> Iterator[None]:
        """Hold the one build of this component across processes sharing the cache.

        Two runs that need the same missing component at once (two pytest workers, two
        terminals) would otherwise share its work folder and remove it under each other;
        the second waits here and then finds the first one's result in the cache.  The
        lock is an advisory ``flock`` on a file beside the folder, released when the
        holder exits, even by ``kill -9``; where ``fcntl`` is missing, builds are unlocked.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f".lock-{component}-{cache_key(component, collection, params)}"
        with path.open("a") as fh:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _clean_stale_tmp(self) -> None:
        now = time.time()
        for tmp in self.root.glob(".tmp-*"):
            try:
                if now - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                    shutil.rmtree(tmp, ignore_errors=True)
            except OSError:
                pass
