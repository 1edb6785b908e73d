"""Generation cache: a SQLite file of finished chat results, keyed by request.

The key is ``ChatRequest.cache_key(identity)``: a hash of the model's identity, the
messages, the sampling parameters, the seed, the schema and the logprob request.  The
identity is the model's fingerprint when the caller gives one (the harness does:
:mod:`bcas.llm.fingerprint`, so another model served under the same name finds none of
the first one's answers), else its backend-agnostic ``model_id``.  With temperature 0 and a fixed seed (the ``ChatRequest`` defaults) a rerun
returns the same text without spending model time.

Safe across processes and pytest-xdist workers: the database runs in WAL mode
(readers never block the writer), every write is one short autocommit statement
(``INSERT OR REPLACE``), and a writer waits ``busy_timeout`` for the lock instead of
failing.  Connections are opened per process, so a forked worker never reuses its
parent's handle.

Location: ``$BCAS_CACHE_DIR/generations.sqlite`` (see ``bcas.paths.cache_dir``) or any
path given.  ``BCAS_NO_CACHE=1`` disables reads and writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bcas.llm.base import ChatModel, ChatRequest, ChatResult, WrappedModel
from bcas.paths import cache_dir
from bcas.timing import record_call

CACHE_FILENAME = "generations.sqlite"
NO_CACHE_ENV = "BCAS_NO_CACHE"
BUSY_TIMEOUT_MS = 60_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    result TEXT NOT NULL,
    created REAL NOT NULL
)
"""


@dataclasses.dataclass
class CacheTally:
    """Lookups and hits of the generation cache made while a :func:`tally` block runs."""

    lookups: int = 0
    hits: int = 0


_TALLY: contextvars.ContextVar[CacheTally | None] = contextvars.ContextVar("bcas_cache_tally", default=None)


@contextlib.contextmanager
def tally() -> Iterator[CacheTally]:
    """Count the cache lookups and hits of the calls made inside (tasks started inside count too)."""
    counts = CacheTally()
    token = _TALLY.set(counts)
    try:
        yield counts
    finally:
        _TALLY.reset(token)


def _count(hit: bool) -> None:
    counts = _TALLY.get()
    if counts is not None:
        counts.lookups += 1
        counts.hits += int(hit)


class CacheError(RuntimeError):
    """The cache database cannot be used; the message names the file and the fix."""


def default_cache_path() -> Path:
    return cache_dir() / CACHE_FILENAME


def cache_disabled_by_env() -> bool:
    return os.environ.get(NO_CACHE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _switch_to_wal(conn: sqlite3.Connection) -> Any:
    """Put the database in WAL mode (persistent: a file already in it needs no lock); the row of
    ``PRAGMA journal_mode``.  Processes opening a new file at the same instant can get "database
    is locked" from the switch without SQLite's busy handler waiting (measured: three processes
    opening 30 new files together, 5 of the 90 openings failed within a millisecond), so a locked
    switch is retried until ``BUSY_TIMEOUT_MS`` (0 of 90 failed)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            if mode is not None and str(mode[0]).lower() == "wal":
                return mode
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if ("locked" not in message and "busy" not in message) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class GenerationCache:
    """A process-safe SQLite store of ``ChatResult``s.

    ``path``: the database file (default ``$BCAS_CACHE_DIR/generations.sqlite``).
    ``enabled``: ``False`` makes every lookup miss and every store a no-op; the
    default honours ``BCAS_NO_CACHE``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, enabled: bool | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self.enabled = (not cache_disabled_by_env()) if enabled is None else enabled
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None

    def __repr__(self) -> str:
        return f"GenerationCache({str(self.path)!r}, enabled={self.enabled})"

    # -- connection ---------------------------------------------------------------

    def _fail(self, exc: sqlite3.Error) -> CacheError:
        message = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and ("locked" in message or "busy" in message):
            return CacheError(
                f"generation cache {self.path} stayed locked for {BUSY_TIMEOUT_MS / 1000:.0f} s ({message}); "
                f"another process holds a long write transaction, or the file is on a file system without "
                f"working locks (use a local path via BCAS_CACHE_DIR)"
            )
        if isinstance(exc, sqlite3.OperationalError) and "unable to open" in message:
            return CacheError(
                f"generation cache {self.path} cannot be opened ({message}); check that its folder is "
                f"writable, or point BCAS_CACHE_DIR elsewhere"
            )
        return CacheError(
            f"generation cache {self.path} is not a usable SQLite database ({message}); it is probably "
            f"corrupted: delete the file (and its -wal/-shm companions) to start an empty cache, point "
            f"BCAS_CACHE_DIR at another folder, or set BCAS_NO_CACHE=1"
        )

    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        if self._conn is not None and self._pid == pid:
            return self._conn
        # A connection inherited through fork belongs to the parent: never touch it.
        self._conn = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = _switch_to_wal(conn)
            if mode is None or str(mode[0]).lower() != "wal":
                raise sqlite3.DatabaseError(f"could not switch to WAL journal mode (got {mode!r})")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        self._conn, self._pid = conn, pid
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # -- synchronous API -----------------------------------------------------------

    def get(self, key: str) -> ChatResult | None:
        """The stored result for ``key`` (with ``cached=True``), or ``None``."""
        if not self.enabled:
            return None
        with self._lock:
            try:
                row = self._connection().execute("SELECT result FROM generations WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                raise self._fail(exc) from exc
        if row is None:
            return None
        try:
            data = json.loads(row[0])
        except json.JSONDecodeError as exc:
            raise CacheError(
                f"generation cache {self.path}: entry {key[:12]}… is not valid JSON ({exc}); the file is "
                f"damaged: delete it or point BCAS_CACHE_DIR elsewhere"
            ) from exc
        result = ChatResult.from_dict(data, cached=True)
        result.extra = dict(data.get("extra") or {})
        return result

    def put(self, key: str, model_id: str, result: ChatResult) -> None:
        """Store ``result`` under ``key`` (last writer wins; entries are identical anyway)."""
        if not self.enabled:
            return
        data = result.to_dict()
        data["extra"] = _jsonable(result.extra)
        blob = json.dumps(data, ensure_ascii=False, sort_keys=True)
        with self._lock:
            try:
                self._connection().execute(
                    "INSERT OR REPLACE INTO generations (key, model_id, result, created) VALUES (?, ?, ?, ?)",
                    (key, model_id, blob, time.time()),
                )
            except sqlite3.Error as exc:
                raise self._fail(exc) from exc

    def __len__(self) -> int:
        if not self.enabled:
            return 0
        with self._lock:
            try:
                return int(self._connection().execute("SELECT COUNT(*) FROM generations").fetchone()[0])
            except sqlite3.Error as exc:
                raise self._fail(exc) from exc

    # -- async wrappers (SQLite may wait for a lock: keep the event loop free) ------

    async def aget(self, key: str) -> ChatResult | None:
        if not self.enabled:
            return None
        return await asyncio.to_thread(self.get, key)

    async def aput(self, key: str, model_id: str, result: ChatResult) -> None:
        if not self.enabled:
            return
        await asyncio.to_thread(self.put, key, model_id, result)


def _jsonable(extra: dict[str, Any]) -> dict[str, Any]:
    """Keep only the JSON-serialisable entries of ``extra``."""
    kept: dict[str, Any] = {}
    for name, value in extra.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        kept[name] = value
    return kept


class CachedModel(WrappedModel):
    """Wraps a ``ChatModel``: a cache hit returns the stored result (``cached=True``)
    without calling the inner model; a miss calls it and stores the result.

    Identical requests in flight at the same time share one inner call (the sharers
    get ``cached=True``).  A hit keeps the latency measured when the result was
    produced.  ``identity``: what the keys are made of (the model's fingerprint);
    default the inner model's ``model_id``.
    """

    def __init__(self, inner: ChatModel, cache: GenerationCache, identity: str | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.identity = identity
        self._inflight: dict[str, asyncio.Future[ChatResult]] = {}

    def key(self, request: ChatRequest) -> str:
        """The cache key of ``request`` for this model."""
        return request.cache_key(self.identity or self.inner.model_id)

    def __repr__(self) -> str:
        return f"CachedModel({self.inner!r}, {self.cache!r})"

    async def chat(self, request: ChatRequest) -> ChatResult:
        if not self.cache.enabled:
            return await self.inner.chat(request)
        key = self.key(request)
        looked_up = time.perf_counter()
        hit = await self.cache.aget(key)
        _count(hit is not None)
        if hit is not None:
            record_call(hit, replay_s=time.perf_counter() - looked_up)  # the recorded times, not the replay's
            return hit
        pending = self._inflight.get(key)
        if pending is not None and pending.get_loop() is asyncio.get_running_loop():
            try:
                result = await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if pending.cancelled() and (task is None or not task.cancelling()):
                    return await self.chat(request)  # the first caller was cancelled, not us
                raise
            shared = _copy(result)
            shared.cached = True  # produced once for an identical request in flight
            record_call(shared, replay_s=time.perf_counter() - looked_up)
            return shared
        future: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await self.inner.chat(request)
            await self.cache.aput(key, self.identity or self.inner.model_id, result)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it, nobody else must
            raise
        else:
            future.set_result(result)
            return result
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.cache.close()


def _copy(result: ChatResult) -> ChatResult:
    return dataclasses.replace(result, extra=dict(result.extra))
