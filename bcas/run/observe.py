"""What a front door is told while cases run: notes, and each case's progress.

The pytest front door shows them in its terminal (:mod:`bcas.harness.progress`); the
Python API keeps quiet by default (:data:`QUIET`) or passes an observer of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from bcas.records import Record

if TYPE_CHECKING:
    from bcas.run.settings import Case


class CaseTracker(Protocol):
    """One running case's progress."""

    def item_done(self, record: Record) -> None: ...

    def stopped(self) -> None: ...

    def finish(self, outcome: object, grid: str, label: str) -> object: ...


class Observer(Protocol):
    """Told of notes and warnings (``message``) and of every case that starts (``start``)."""

    def message(self, text: str) -> None: ...

    def start(self, case: Case, total: int, resumed: int, priced: bool = True) -> CaseTracker: ...


class _QuietTracker:
    def item_done(self, record: Record) -> None:
        return None

    def stopped(self) -> None:
        return None

    def finish(self, outcome: object, grid: str, label: str) -> object:
        return None


class QuietObserver:
    """Shows nothing."""

    def message(self, text: str) -> None:
        return None

    def start(self, case: Case, total: int, resumed: int, priced: bool = True) -> CaseTracker:
        return _QuietTracker()


class PrintObserver(QuietObserver):
    """Prints notes and one line per finished case (the Python API's ``progress=True``)."""

    def message(self, text: str) -> None:
        print(text, flush=True)

    def start(self, case: Case, total: int, resumed: int, priced: bool = True) -> CaseTracker:
        return _PrintTracker(case.id, total, resumed)


class _PrintTracker(_QuietTracker):
    def __init__(self, case_id: str, total: int, resumed: int) -> None:
        self.case_id, self.total, self.resumed, self.done = case_id, total, resumed, 0

    def item_done(self, record: Record) -> None:
        self.done += 1

    def finish(self, outcome: object, grid: str, label: str) -> object:
        print(f"[bcas] {self.case_id}: {self.done} item(s) run, {self.resumed} resumed of {self.total}", flush=True)
        return None


QUIET = QuietObserver()
