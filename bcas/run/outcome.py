"""What a case runs and what it produced: its plan (items to run, answer identity) and its outcome.

:meth:`bcas.run.session.BcasSession.plan_case` builds a :class:`CasePlan`; ``run_case``
returns a :class:`CaseOutcome`, whose records the invariants and the gate read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bcas.config import RunConfig
from bcas.run.plan import CaseIdentity

if TYPE_CHECKING:
    from bcas.data import Dataset
    from bcas.items import Item


@dataclass
class CasePlan:
    """A case's items to run (``todo``) out of those it wants, and its answer identity (:mod:`bcas.run.plan`)."""

    dataset: Dataset
    identity: CaseIdentity
    wanted: list[tuple[Item, int]]
    todo: list[tuple[Item, int]]

    @property
    def config(self) -> RunConfig:
        return self.identity.config

    @property
    def fingerprint(self) -> str:
        return self.identity.fingerprint

    @property
    def prompt_hash(self) -> str:
        return self.identity.prompt_hash

    @property
    def skipped(self) -> int:
        return len(self.wanted) - len(self.todo)


@dataclass
class CaseOutcome:
    case_id: str
    records: list[dict[str, Any]]
    ran: int
    skipped: int
    wall_s: float
    violations: list[str] = field(default_factory=list)
    stopped: str | None = None  # the cost cap's message when it cut the case short
    file_items: int = 0  # the dataset's file holds this many items (0: not known)
    held_out: int = 0  # of them, held for calibration (MADARA Algorithm 2), never evaluated
