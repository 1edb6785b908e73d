"""The engine writes each case's end into ``cases.jsonl``: passed, failed with its
violations, error with the exception's first line, incomplete when interrupted, and the
latest line of a case is the one that counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bcas.api import raw_options
from bcas.records.case_status import read_case_statuses
from bcas.run.outcome import CaseOutcome
from bcas.run.plan import make_plan
from bcas.run.session import BcasSession
from bcas.run.settings import Case, build_settings


@pytest.fixture
def session_cases(tmp_path: Path) -> tuple[BcasSession, list[Case]]:
    settings = build_settings(raw_options("smoke", "mock:gold", None, 2, str(tmp_path / "run"), {}), tmp_path)
    return BcasSession(settings, token="t1"), list(make_plan(settings).cases)


def _ends(session: BcasSession, case, result) -> None:  # type: ignore[no-untyped-def]
    async def run(_case):  # type: ignore[no-untyped-def]
        if isinstance(result, BaseException):
            raise result
        return result

    session._run_case = run  # type: ignore[method-assign]
    try:
        session.run_case(case)
    except BaseException:  # noqa: BLE001 - the exception is re-raised to the front door; its status is what we read
        pass


def test_each_end_of_a_case_is_written_and_the_latest_counts(session_cases: tuple[BcasSession, list[Case]]) -> None:
    session, cases = session_cases
    first, second, third = cases[:3]
    _ends(session, first, CaseOutcome(first.id, [], 2, 0, 0.1))
    _ends(session, second, CaseOutcome(second.id, [], 2, 0, 0.1, ["1 items not recorded: ['q']"]))
    _ends(session, third, RuntimeError("the server went away\ntraceback lines"))
    by_case = {s.case_id: s for s in read_case_statuses(session.settings.run_dir)}
    assert (by_case[first.id].status, by_case[first.id].reason) == ("passed", "")
    assert (by_case[second.id].status, by_case[second.id].reason) == ("failed", "1 items not recorded: ['q']")
    assert (by_case[third.id].status, by_case[third.id].reason) == ("error", "RuntimeError: the server went away")
    assert (by_case[first.id].grid, by_case[first.id].model, by_case[first.id].label) == (
        "smoke",
        "mock-gold",
        first.entry.label,
    )
    _ends(session, first, KeyboardInterrupt())  # the same case again, interrupted: the latest line wins
    latest = {s.case_id: s for s in read_case_statuses(session.settings.run_dir)}[first.id]
    assert latest.status == "incomplete" and "interrupted" in latest.reason
    session.close()
