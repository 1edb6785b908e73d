"""BudgetLedger: pure search and completion-token accounting (BCAS §3.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bcas.agent.budget import BudgetError, BudgetLedger, Step
from bcas.config import Budget


def test_unlimited_searches_never_run_out() -> None:
    ledger = BudgetLedger(Budget(max_searches=None, max_total_tokens=1000))
    for i in range(50):
        ledger.record(Step("search", query=f"q{i}", tokens_out=1))
    assert ledger.searches_left is None
    assert ledger.can_search
    assert ledger.searches_used == 50


def test_search_allowance_is_a_hard_limit() -> None:
    ledger = BudgetLedger(Budget(max_searches=2, max_total_tokens=1000))
    ledger.record(Step("search", query="a"))
    assert ledger.searches_left == 1 and ledger.can_search
    ledger.record(Step("search", query="b"))
    assert ledger.searches_left == 0 and not ledger.can_search
    with pytest.raises(BudgetError, match="exceeds max_searches=2"):
        ledger.record(Step("search", query="c"))


def test_repeated_and_failed_searches_do_not_count() -> None:
    ledger = BudgetLedger(Budget(max_searches=1, max_total_tokens=1000))
    ledger.record(Step("search", query="a", flag="repeated_query"))
    ledger.record(Step("search", query="a", flag="search_error"))
    assert ledger.searches_used == 0 and ledger.can_search


def test_turn_cap_is_min_of_per_turn_and_remaining() -> None:
    ledger = BudgetLedger(
        Budget(max_searches=3, max_total_tokens=500, per_turn_max_tokens=200, forced_answer_tokens=10)
    )
    assert ledger.turn_max_tokens() == 200
    ledger.record(Step("search", query="a", tokens_out=200, max_tokens=200))
    ledger.record(Step("search", query="b", tokens_out=200, max_tokens=200))
    assert ledger.tokens_left == 100
    assert ledger.turn_max_tokens() == 100
    ledger.record(Step("ready", tokens_out=95, max_tokens=100))
    assert ledger.tokens_left == 5
    assert ledger.tokens_spent  # fewer than forced_answer_tokens remain
    assert ledger.answer_max_tokens() == (10, True)


def test_forced_allowance_is_used_once_and_not_charged_to_the_budget() -> None:
    ledger = BudgetLedger(Budget(max_searches=1, max_total_tokens=50, per_turn_max_tokens=50, forced_answer_tokens=8))
    ledger.record(Step("ready", tokens_out=50, max_tokens=50))
    tokens, over = ledger.answer_max_tokens()
    assert (tokens, over) == (8, True)
    ledger.record(Step("forced_answer", tokens_out=8, max_tokens=8, flag="over_budget"))
    assert ledger.budgeted_tokens_out == 50
    assert ledger.tokens_out == 58
    with pytest.raises(BudgetError, match="allowance was already used"):
        ledger.answer_max_tokens()
    with pytest.raises(BudgetError):
        ledger.turn_max_tokens()


def test_provider_overrun_is_flagged() -> None:
    ledger = BudgetLedger(Budget(max_total_tokens=100))
    step = ledger.record(Step("search", query="x", tokens_out=30, max_tokens=20))
    assert step.flag == "overrun"
    assert ledger.searches_used == 1  # an overrun search is still a search


def test_status_reports_what_the_prompt_shows() -> None:
    ledger = BudgetLedger(Budget(max_searches=3, max_total_tokens=1000))
    ledger.record(Step("search", query="a", tokens_out=120))
    assert ledger.status() == {"searches_used": 1, "searches_left": 2, "tokens_used": 120, "tokens_left": 880}


def test_step_round_trips_and_rejects_unknown_kinds() -> None:
    step = Step(
        "search", output="{}", query="q", tokens_in=3, tokens_out=4, retrieved=("c1",), docs=("d1",), cached=True
    )
    assert Step.from_dict(step.to_dict()) == step
    with pytest.raises(ValueError, match="step kind"):
        Step("dance")
    with pytest.raises(ValueError, match="step flag"):
        Step("search", flag="weird")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["search", "ready", "plan", "reflect", "invalid"]), st.integers(0, 500), st.integers(0, 50)
        ),
        max_size=40,
    )
)
def test_totals_are_sums_of_steps(spec: list[tuple[str, int, int]]) -> None:
    ledger = BudgetLedger(Budget(max_searches=None, max_total_tokens=10**9))
    for kind, tin, tout in spec:
        ledger.record(Step(kind, query="q" if kind == "search" else None, tokens_in=tin, tokens_out=tout))
    assert ledger.tokens_in == sum(t for _, t, _ in spec)
    assert ledger.tokens_out == sum(t for _, _, t in spec)
    assert ledger.llm_calls == len(spec)
    assert ledger.searches_used == sum(1 for k, _, _ in spec if k == "search")
