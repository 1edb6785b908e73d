"""Priced spend: what a record cost, and the session's cost cap (``--bcas-max-cost USD``).

A record's spend is its answer's model calls and its judge's (tokens, and their cost
under the run's price sheet, BCAS §3.7); a cost the sheet cannot give is unknown, never 0.

The cap: before an item starts, the session's priced spend so far, plus what the items
in flight are expected to cost, plus what this item is expected to cost (the mean of the
case's finished items; before the first one finishes, the case runs one item at a time)
must stay within the cap.  The first item that would pass it stops the session: no new
item starts in any case or process (xdist workers share one ledger file under a lock),
items in flight finish and are recorded.  So the spend ends within about one item of
the cap (with ``--bcas-concurrency`` C, within the estimation error of C items in flight).
A stopped case is skipped with its reason, the stop is written to ``stops.jsonl`` and
shown in the report, and rerunning the same command resumes: recorded items are kept,
the rest run.  Items of a model the sheet cannot price count 0 (with a warning).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import fcntl
import itertools
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing only
    from bcas.records import Record
    from bcas.run.settings import Case

STOPS_FILE = "stops.jsonl"


def record_spend(rec: Record | dict[str, Any]) -> tuple[int, float | None]:
    """(tokens, cost in USD or None when unknown) of one record: the answer's model calls and its judge's."""
    # Read from the record's own fields: serializing the whole record (its steps and timing) per
    # finished item for four numbers was most of the progress line's cost.
    data = (
        rec if isinstance(rec, dict) else {k: getattr(rec, k) for k in ("tokens_in", "tokens_out", "cost_usd", "judge")}
    )
    tokens = int(data.get("tokens_in") or 0) + int(data.get("tokens_out") or 0)
    cost = data.get("cost_usd")
    judge = data.get("judge") or {}
    if isinstance(judge, dict) and judge.get("model"):
        tokens += int(judge.get("tokens_in") or 0) + int(judge.get("tokens_out") or 0)
        cost = None if cost is None or judge.get("cost_usd") is None else float(cost) + float(judge["cost_usd"])
    return tokens, None if cost is None else float(cost)


def cost_text(cost: float, unknown: int, priced: bool) -> str:
    """``$0.0123``; items the sheet could not price are named, never counted as 0."""
    if not priced:
        return "cost not priced"
    if unknown and not cost:
        return "cost unknown"
    return f"${cost:.4f}" + (f" + {unknown} unpriced" if unknown else "")


class CaseStopped(Exception):
    """The cost cap stopped a case before all its items ran (the pytest front door skips it)."""


class _Ledger:
    """The session's spend, shared by its processes: a small JSON file changed under an exclusive lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def state(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {"spent": 0.0, "reserved": {}, "stopped": False}
            yield data
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            tmp.replace(self.path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class CostGuard:
    """``--bcas-max-cost`` for one process of a session (see the module docstring)."""

    def __init__(
        self, cap: float | None, run_dir: Path, token: str, message: Callable[[str], None] | None = None
    ) -> None:
        self.cap = cap
        self.run_dir = Path(run_dir)
        self.token = token
        self.ledger = _Ledger(self.run_dir / f".spend.{token}.json")
        self.message = message or (lambda line: None)
        self.costs: dict[str, list[float]] = defaultdict(list)
        self.inflight: dict[str, int] = defaultdict(int)
        self.refused: dict[str, int] = defaultdict(int)
        self.unpriced: set[str] = set()
        self._first: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self._keys = itertools.count()

    def spent(self) -> float:
        with self.ledger.state() as state:
            return float(state["spent"])

    def before_case(self, case: Case, total: int, recorded: int) -> None:
        """Skip a case that still has items to run once the session has stopped at the cap."""
        if self.cap is None or recorded >= total:
            return
        with self.ledger.state() as state:
            stopped, spent = bool(state["stopped"]), float(state["spent"])
        if stopped:
            raise self._stop(case, recorded, total, spent)

    async def admit(self, case: Case) -> str | None:
        """A reservation key when the item may start; None once the cap stops the session."""
        if self.cap is None:
            return ""
        while not self.costs.get(case.id) and self.inflight[case.id]:
            # The case's first item is still running: no basis for an estimate yet, so wait for it.
            await self._first[case.id].wait()
        done = self.costs.get(case.id)
        expected = sum(done) / len(done) if done else None
        with self.ledger.state() as state:
            committed = float(state["spent"]) + sum(float(v) for v in state["reserved"].values())
            fits = committed + expected <= self.cap if expected is not None else committed < self.cap
            if state["stopped"] or not fits:
                state["stopped"] = True
                self.refused[case.id] += 1
                return None
            key = f"{os.getpid()}-{next(self._keys)}"
            state["reserved"][key] = expected or 0.0
        self.inflight[case.id] += 1
        return key

    def settle(self, case: Case, key: str, record: Record) -> None:
        """Book a finished item's cost and release its reservation."""
        if self.cap is None:
            return
        _, cost = record_spend(record)
        self.inflight[case.id] -= 1
        with self.ledger.state() as state:
            state["reserved"].pop(key, None)
            state["spent"] = float(state["spent"]) + (cost or 0.0)
        self.costs[case.id].append(cost or 0.0)
        self._first[case.id].set()
        if cost is None and case.model.label not in self.unpriced:
            self.unpriced.add(case.model.label)
            self.message(
                f"[bcas] warning: --bcas-max-cost cannot count {case.model.label}: the price sheet has "
                "no price for it, so its items count 0 against the cap"
            )

    def finish_case(self, case: Case, recorded: int, total: int) -> CaseStopped | None:
        """For a case the cap kept from running all its items: the stop, written to the run folder,
        to raise once the case's end is reported (the front door skips the case, resumable)."""
        if self.cap is not None and self.refused.get(case.id):
            return self._stop(case, recorded, total, self.spent())
        return None

    def _stop(self, case: Case, recorded: int, total: int, spent: float) -> CaseStopped:
        entry = {
            "session": self.token,
            "cap_usd": self.cap,
            "spent_usd": spent,
            "case_id": case.id,
            "recorded": recorded,
            "total": total,
            "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / STOPS_FILE, "a", encoding="utf-8") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            handle.write(json.dumps(entry) + "\n")
        return CaseStopped(
            f"--bcas-max-cost {self.cap:g} USD reached (session spend ${spent:.4f}): {recorded} of {total} "
            "items recorded; run the same command again to resume"
        )


def read_stops(run_dir: str | os.PathLike[str], token: str | None = None) -> list[dict[str, Any]]:
    """The stops written into a run folder (only session ``token``'s when given), oldest first."""
    path = Path(run_dir) / STOPS_FILE
    out: list[dict[str, Any]] = []
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and (token is None or entry.get("session") == token):
                out.append(entry)
    return out


def stop_lines(stops: list[dict[str, Any]]) -> list[str]:
    """The terminal summary's lines for a session the cap stopped."""
    if not stops:
        return []
    spent = max(float(s.get("spent_usd") or 0.0) for s in stops)
    return [
        f"stopped by --bcas-max-cost {float(stops[0].get('cap_usd') or 0):g} USD at ${spent:.4f} spent: "
        f"{len(stops)} case(s) not finished ({', '.join(str(s.get('case_id')) for s in stops[:5])}"
        f"{', ...' if len(stops) > 5 else ''}); run the same command again to resume"
    ]
