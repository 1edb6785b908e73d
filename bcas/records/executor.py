"""The one executor: items through a pipeline into a run's store.

Every run kind uses it -- the harness's BCAS and MADARA cases and
:func:`bcas.agent.evaluate.evaluate_bcas` alike -- so resume, grading, pricing and
appends behave the same everywhere:

1. ``jobs`` are ``(item, epoch)`` pairs not yet recorded (the caller leaves out what the
   store already holds, by answer identity);
2. at most ``concurrency`` are in flight; ``admit`` may refuse a job (the cost cap);
3. ``produce(item, epoch)`` is the pipeline: it returns the record of the answer and
   never loses an item (a failure becomes a record with ``stop_reason="error"``);
4. ``grade(record)`` (the LLM judge) runs on every record that has an answer: no error
   and a non-empty prediction (an empty or errored answer counts as wrong in every
   metric, so it is never sent to the judge);
5. ``price(record)`` sets the cost (never raises: an unpriced model's cost is ``None``);
6. the record is appended to the store (fsynced, off the event loop) and handed to
   ``on_record`` (progress, warnings).  Appends are group commits (:class:`_Appender`):
   the records that finish while a write is under way go out together in the next one
   (one write, one ``fsync``, one trip to a worker thread), so a wave of ``concurrency``
   items that finish together costs one or two writes, not ``concurrency``; each record
   is still on disk before ``on_record`` sees it.

Timing (BCAS §6.1, :mod:`bcas.llm.timing`): every job is submitted at once, so the time a
job waits for one of the ``concurrency`` slots is its queueing delay; it is recorded
apart (``timing.wait_s``) from the time ``produce`` took (``timing.service_s``), whose
model calls and searches the meter opened around ``produce`` counts.  The judge's calls
are outside it: grading is the evaluation's cost, not the answer's.  The level
``concurrency`` is kept in ``timing.concurrency``, a run condition outside the answer's
identity.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from bcas.records.schema import Record
from bcas.records.store import ResultStore
from bcas.timing import item_timing, timing

Job = tuple[Any, int]


class _Appender:
    """Group commit of records to a store (module docstring, step 6): ``append`` returns once
    the record is written; the records that arrive while a write is under way are written
    together by the next one, in arrival order."""

    def __init__(self, store: ResultStore) -> None:
        self.store = store
        self.pending: list[tuple[Record, asyncio.Future[None]]] = []
        self.writer: asyncio.Task[None] | None = None

    async def append(self, record: Record) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append((record, done))
        if self.writer is None:
            self.writer = asyncio.create_task(self._write())
        await done

    async def _write(self) -> None:
        try:
            while self.pending:
                batch, self.pending = self.pending, []
                try:
                    await asyncio.to_thread(self.store.append_many, [record for record, _ in batch])
                except Exception as exc:  # the items waiting on this write fail with its error
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                except BaseException:  # cancelled (the loop shuts down): so is every item still waiting
                    for _, done in batch + self.pending:
                        done.cancel()
                    raise
                else:
                    for _, done in batch:
                        if not done.done():
                            done.set_result(None)
        finally:
            self.writer = None


async def run_items(
    jobs: Iterable[Job],
    produce: Callable[[Any, int], Awaitable[Record]],
    store: ResultStore | None = None,
    *,
    grade: Callable[[Record], Awaitable[Record]] | None = None,
    price: Callable[[Record], Record] | None = None,
    concurrency: int = 1,
    admit: Callable[[], Awaitable[Any]] | None = None,
    settle: Callable[[Any, Record], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> list[Record]:
    """Run every job (module docstring); returns the records made, in completion order."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    appender = _Appender(store) if store is not None else None
    made: list[Record] = []
    batch = time.time()  # when these jobs were submitted: the throughput's clock starts here

    async def one(job: Job) -> None:
        item, epoch = job
        submitted = time.perf_counter()
        async with gate:
            started = time.perf_counter()
            token = await admit() if admit is not None else True
            if token is None:
                return
            with timing() as meter:
                record = await produce(item, epoch)
            service = time.perf_counter() - started
            spent = item_timing(meter, wait_s=started - submitted, service_s=service, concurrency=concurrency)
            record = record.replace(
                timing={**spent, "batch_start": round(batch, 3), "finished_at": round(time.time(), 3)}
            )
            if grade is not None and record.error is None and record.prediction:
                record = await grade(record)
            if price is not None:
                record = price(record)
            if settle is not None:
                settle(token, record)
        if appender is not None:
            await appender.append(record)
        made.append(record)
        if on_record is not None:
            on_record(record)

    await asyncio.gather(*(one(job) for job in jobs))
    return made


__all__ = ["Job", "run_items"]
