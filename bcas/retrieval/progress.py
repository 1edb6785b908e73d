"""When the retrieval layer draws tqdm progress bars: only when asked and only on a terminal.

A bar redraws itself with carriage returns; in a CI log, a file or a pipe every redraw
stays as text, so a standard error that is not a terminal gets no bar.  What an index
build will embed, about how long it takes and its progress with an ETA are plain lines
besides (:class:`EmbedProgress`), sent to the session's progress (:func:`build_notes`)
on a terminal or in a log alike.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar


def bars_off(progress: bool) -> bool:
    """tqdm's ``disable``: true unless ``progress`` is asked for and standard error is a terminal."""
    return not progress or not sys.stderr.isatty()


# -- what an index build says, whatever the terminal ------------------------------------------

_NOTES: ContextVar[Callable[[str], None] | None] = ContextVar("bcas_build_notes", default=None)


@contextlib.contextmanager
def build_notes(write: Callable[[str], None]) -> Iterator[None]:
    """Send the lines of the index builds made inside the ``with`` block to ``write`` (the session's
    progress: a terminal line or a log line); without it, to the ``bcas.retrieval`` logger."""
    token = _NOTES.set(write)
    try:
        yield
    finally:
        _NOTES.reset(token)


def note(text: str) -> None:
    write = _NOTES.get()
    if write is not None:
        write(text)
    else:
        logging.getLogger("bcas.retrieval").info(text)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class EmbedProgress:
    """An embedding's lines: before the bulk starts, what it will embed and about how long (from
    the first batch's speed, :data:`PROBE_CHUNKS` chunks); then one line at each tenth with the
    chunks done and an ETA at the speed so far.  ``done``: chunks a resumed build already has."""

    PROBE_CHUNKS = 64

    def __init__(self, what: str, total: int, done: int = 0, clock: Callable[[], float] = time.perf_counter) -> None:
        self.what, self.total, self.done, self.clock = what, int(total), int(done), clock
        self.started = clock()
        self.first = int(done)
        self.announced = False
        self.next_tenth = 1
        note(
            f"{what}: {self.total - self.first:,} chunks to embed" + (f" ({self.first:,} done before)" if done else "")
        )

    def rate(self) -> float | None:
        spent = self.clock() - self.started
        return (self.done - self.first) / spent if spent > 0 and self.done > self.first else None

    def update(self, n: int) -> None:
        self.done += int(n)
        rate = self.rate()
        left = self.total - self.done
        if not self.announced:
            self.announced = True
            if rate and left > 0:
                note(f"{self.what}: about {_duration(left / rate)} at {rate:.1f} chunks/s (the first batch's speed)")
            return
        tenth = (self.done - self.first) * 10 // max(self.total - self.first, 1)
        if tenth >= self.next_tenth and left > 0:
            self.next_tenth = tenth + 1
            eta = f", ETA {_duration(left / rate)}" if rate else ""
            note(f"{self.what}: {self.done:,}/{self.total:,} chunks ({100 * self.done // self.total}%){eta}")
