"""Budget accounting of one BCAS trajectory (BCAS §3.3).

BCAS tracks two resources: the remaining search calls and the cumulative completion
budget.  ``BudgetLedger`` is pure bookkeeping (no I/O, no model): the loop asks it
what a turn may spend and tells it what the turn did.

Rules (the numbers come from :class:`bcas.config.Budget`):

* **Searches.**  ``max_searches`` is a hard tool constraint (``None`` = unlimited).
  :attr:`BudgetLedger.can_search` is false once ``searches_used == max_searches``;
  the loop then stops offering the search tool.  A repeated query is a search like
  any other (BCAS §3.4); only under ``AgentConfig.repeated_query="invalid"`` is it not
  run, and then, like a failed retrieval, it does not count as a search.
* **Completion tokens.**  ``max_total_tokens`` caps the cumulative *completion*
  tokens of the trajectory, counted from the provider-reported usage of every call
  (plan, action turns, reflections, the answer), reasoning tokens included (a
  reasoning model's hidden or ``<think>`` tokens are completion tokens as the provider
  reports them).  Each call may request what remains, ``tokens_left``, capped by
  ``per_turn_max_tokens`` only when that optional cap is set (it is off in the paper
  grids), so with a provider that honours ``max_tokens`` the budgeted steps never
  exceed ``max_total_tokens``.
* **Turns.**  The loop takes at most :func:`turn_bound` action turns: an explicit
  ``AgentConfig.max_turns``, else ``max_searches + max_invalid_turns`` (every action
  turn is a counted search, an unusable turn or the one ``ready_to_answer``, so the
  search budget already implies this bound) with limited searches, and the safety
  limit ``MAX_TURNS_SAFETY`` (64) with unlimited ones (and above it).  The safety
  limit only stops a model that keeps searching with short turns (64 turns of 250
  tokens spend a 16K budget); the budgets end every other trajectory.
* **Spent.**  The token budget counts as spent once fewer than
  ``forced_answer_tokens`` remain (a turn that short could not complete an action).
  From then on the loop takes no more action turns.
* **Forced answer allowance.**  The one final answer turn that runs when the budget
  is spent (or when the loop was cut short) may request ``forced_answer_tokens``
  beyond the budget; its step is flagged ``over_budget``.  Hence the documented
  bound: ``agent_tokens_out <= max_total_tokens + forced_answer_tokens``.
* **Calls made for the item by a component** (the ``llm`` reranker's one call per
  candidate) are ``rerank`` steps: in the totals and the cost, not in the budget.
* **Reasoning.**  A step keeps a reasoning model's reasoning text apart from its
  output (``Step.reasoning``, never parsed as an action) with the reasoning tokens
  the provider reported (``tokens_reasoning``; 0 when it reports none, the tokens
  then being inside ``tokens_out`` unsplit).

The totals (``searches_used``, ``tokens_in``, ``tokens_out``, ``llm_calls``) are
derived from the step list, so they always equal the sum of the steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bcas.config import AgentConfig, Budget

# Action turns allowed under the guarded rules (max_invalid_turns set) with unlimited
# searches and no explicit AgentConfig.max_turns (not in the paper, which bounds a
# trajectory by its budgets only).
MAX_TURNS_SAFETY = 64

# Kinds of step a trajectory is made of.
#   plan           the pre-planning call (BCAS §3.4, optional pre-planning)
#   search         an action turn whose action was search_database
#   ready          an action turn whose action was ready_to_answer
#   abstain        an action turn whose action was abstain (AgentConfig.abstain); the last turn
#   reflect        a reflection call (BCAS §3.4, optional reflection)
#   invalid        an action turn whose output could not be parsed into an offered action
#   answer         the final answer turn after the model answered or the searches ran out
#   forced_answer  the final answer turn forced by the loop (token budget spent,
#                  too many invalid turns, turn cap)
#   assess         MADARA assessment of one search's hits (``AgentConfig.assess``); one
#                  step standing for ``calls`` model calls, their tokens summed
#   rerank         the model calls the ``llm`` reranker made for one search (one per
#                  candidate, on the evaluated model): on the ledger and in the cost,
#                  but not charged to ``max_total_tokens`` (the paper's re-ranker is a
#                  cross-encoder outside the agent's completion budget)
#   generate       a model call of a method beside the loop (bcas.methods) that is not its final
#                  answer: an Iter-RetGen round, an IRCoT reasoning sentence, a Self-Ask step
#                  (a method's retrieval is a ``search`` step of its own, ``calls=0``)
STEP_KINDS = (
    "plan", "search", "ready", "abstain", "reflect", "invalid", "answer", "forced_answer", "assess", "rerank",
    "generate",
)  # fmt: skip
# Steps whose tokens are not the agent's completion tokens (not charged to the budget).
UNBUDGETED_KINDS = ("rerank",)
# Step flags (``Step.flag``); ``None`` for an ordinary step.
#   repeated_query  under AgentConfig.repeated_query="invalid": the query repeats an earlier
#                   one; not re-run, not counted as a search (by default a repeat is a search)
#   search_error    the retriever raised; not counted as a search
#   over_budget     the forced-answer allowance was used for this call
#   overrun         the provider reported more completion tokens than requested
#   assess_skipped  an assessment was not run: its worst-case tokens exceeded the budget left
STEP_FLAGS = ("repeated_query", "search_error", "over_budget", "overrun", "assess_skipped")


class BudgetError(RuntimeError):
    """A step was recorded that the budget does not allow (a bug in the caller)."""


@dataclass
class Step:
    """One model call (and, for a search turn, its retrieval) of a trajectory."""

    kind: str
    output: str = ""
    query: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    max_tokens: int = 0
    retrieved: tuple[str, ...] = ()
    docs: tuple[str, ...] = ()
    cached: bool = False
    latency_s: float = 0.0
    finish_reason: str = ""
    flag: str | None = None
    note: str = ""
    calls: int = 1
    reasoning: str = ""
    tokens_reasoning: int = 0

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ValueError(f"step kind must be one of {STEP_KINDS}, got {self.kind!r}")
        if self.flag is not None and self.flag not in STEP_FLAGS:
            raise ValueError(f"step flag must be None or one of {STEP_FLAGS}, got {self.flag!r}")

    @property
    def counts_as_search(self) -> bool:
        return self.kind == "search" and self.flag not in ("repeated_query", "search_error")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "query": self.query,
            "output": self.output,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "max_tokens": self.max_tokens,
            "retrieved": list(self.retrieved),
            "docs": list(self.docs),
            "cached": self.cached,
            "latency_s": self.latency_s,
            "finish_reason": self.finish_reason,
            "flag": self.flag,
            "note": self.note,
            "calls": self.calls,
            "reasoning": self.reasoning,
            "tokens_reasoning": self.tokens_reasoning,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        return cls(
            kind=data["kind"],
            output=data.get("output") or "",
            query=data.get("query"),
            tokens_in=int(data.get("tokens_in", 0)),
            tokens_out=int(data.get("tokens_out", 0)),
            max_tokens=int(data.get("max_tokens", 0)),
            retrieved=tuple(data.get("retrieved") or ()),
            docs=tuple(data.get("docs") or ()),
            cached=bool(data.get("cached", False)),
            latency_s=float(data.get("latency_s", 0.0)),
            finish_reason=data.get("finish_reason") or "",
            flag=data.get("flag"),
            note=data.get("note") or "",
            calls=int(data.get("calls", 1)),
            reasoning=data.get("reasoning") or "",
            tokens_reasoning=int(data.get("tokens_reasoning", 0)),
        )


@dataclass
class BudgetLedger:
    """Remaining searches and completion tokens of one trajectory, plus its steps."""

    budget: Budget
    steps: list[Step] = field(default_factory=list)

    # -- totals (always the sums of the steps) ---------------------------------------

    @property
    def searches_used(self) -> int:
        return sum(1 for s in self.steps if s.counts_as_search)

    @property
    def tokens_in(self) -> int:
        return sum(s.tokens_in for s in self.steps)

    @property
    def tokens_out(self) -> int:
        return sum(s.tokens_out for s in self.steps)

    @property
    def tokens_reasoning(self) -> int:
        """Reasoning tokens the provider reported (already inside ``tokens_out``)."""
        return sum(s.tokens_reasoning for s in self.steps)

    @property
    def agent_tokens_out(self) -> int:
        """Completion tokens of the agent's own calls (all but ``UNBUDGETED_KINDS``)."""
        return sum(s.tokens_out for s in self.steps if s.kind not in UNBUDGETED_KINDS)

    @property
    def budgeted_tokens_out(self) -> int:
        """Completion tokens charged against ``max_total_tokens`` (all but the allowance and unbudgeted steps)."""
        return sum(s.tokens_out for s in self.steps if s.flag != "over_budget" and s.kind not in UNBUDGETED_KINDS)

    @property
    def llm_calls(self) -> int:
        return sum(s.calls for s in self.steps)

    # -- what remains ------------------------------------------------------------------

    @property
    def searches_left(self) -> int | None:
        """Searches still allowed, or ``None`` when unlimited."""
        if self.budget.max_searches is None:
            return None
        return max(0, self.budget.max_searches - self.searches_used)

    @property
    def can_search(self) -> bool:
        left = self.searches_left
        return left is None or left > 0

    @property
    def tokens_left(self) -> int:
        return max(0, self.budget.max_total_tokens - self.budgeted_tokens_out)

    @property
    def tokens_spent(self) -> bool:
        """True once fewer than ``forced_answer_tokens`` completion tokens remain."""
        return self.tokens_left < self.budget.forced_answer_tokens

    @property
    def forced_allowance_used(self) -> bool:
        return any(s.flag == "over_budget" for s in self.steps)

    def turn_max_tokens(self) -> int:
        """``max_tokens`` of the next budgeted call: the tokens left, capped by the optional per-turn cap."""
        left = self.tokens_left
        if left <= 0:
            raise BudgetError("the completion-token budget is spent; only the forced answer may run")
        cap = self.budget.per_turn_max_tokens
        return left if cap is None else min(cap, left)

    def answer_max_tokens(self) -> tuple[int, bool]:
        """``(max_tokens, over_budget)`` of the final answer call.

        Within budget while it is not spent; otherwise the forced-answer allowance
        (once per trajectory).
        """
        if not self.tokens_spent:
            return self.turn_max_tokens(), False
        if self.forced_allowance_used:
            raise BudgetError("the forced-answer allowance was already used in this trajectory")
        return self.budget.forced_answer_tokens, True

    # -- recording ---------------------------------------------------------------------

    def record(self, step: Step) -> Step:
        """Add a finished step.  A search step beyond ``max_searches`` is refused."""
        if step.counts_as_search and not self.can_search:
            raise BudgetError(
                f"search #{self.searches_used + 1} exceeds max_searches={self.budget.max_searches}; "
                "the loop must not offer the search tool once the allowance is spent"
            )
        if step.flag == "over_budget" and self.forced_allowance_used:
            raise BudgetError("the forced-answer allowance was already used in this trajectory")
        if step.max_tokens and step.tokens_out > step.max_tokens and step.flag is None:
            step.flag = "overrun"
        self.steps.append(step)
        return step

    def record_search(self, query: str, hits: Sequence[Any], meter: Any, note: str = "") -> None:
        """A search's steps: the ``search`` (its hits' chunks and documents) and, when a reranker
        called the model for it (``meter``: :func:`bcas.llm.usage.metering`'s tally), a ``rerank``
        step with those calls, shown as cached only when every one of them came from the cache."""
        self.record(
            Step(kind="search", query=query, calls=0, retrieved=tuple(h.chunk_id for h in hits),
                 docs=tuple(h.doc_id for h in hits), note=note)
        )  # fmt: skip
        if meter.calls:
            self.record(
                Step(kind="rerank", query=query, tokens_in=meter.prompt_tokens, tokens_out=meter.completion_tokens,
                     calls=meter.calls, cached=meter.cached == meter.calls,
                     note=f"{meter.calls} re-ranking calls ({meter.cached} from cache)")
            )  # fmt: skip

    def status(self) -> dict[str, Any]:
        """What the next prompt tells the model about its budget."""
        return {
            "searches_used": self.searches_used,
            "searches_left": self.searches_left,
            "tokens_used": self.budgeted_tokens_out,
            "tokens_left": self.tokens_left,
        }


def turn_bound(budget: Budget, agent: AgentConfig) -> int:
    """The most action turns one trajectory takes (see the module docstring, "Turns")."""
    if agent.max_turns is not None:
        return agent.max_turns
    if agent.max_invalid_turns is None:
        return budget.max_total_tokens
    if budget.max_searches is not None:
        return min(MAX_TURNS_SAFETY, budget.max_searches + agent.max_invalid_turns)
    return MAX_TURNS_SAFETY
