"""What one run of the BCAS loop did (BCAS §3.4): the item, the ledger of steps, the answer and why it stopped."""

from __future__ import annotations

from dataclasses import dataclass, field

from bcas.agent.budget import BudgetLedger, Step
from bcas.config import RunConfig
from bcas.data import Item
from bcas.llm.base import ChatRequest


@dataclass
class Trajectory:
    """Everything one run of the loop did; :func:`bcas.agent.records.record_from_trajectory` makes its record."""

    item: Item
    config: RunConfig
    model: str
    ledger: BudgetLedger
    prediction: str = ""
    stop_reason: str = ""
    error: str | None = None
    plan: str | None = None
    latency_s: float = 0.0
    retries: int = 0
    action_turns: int = 0
    invalid_turns: int = 0
    repeated_queries: int = 0
    context_note: str | None = None  # why the loop stopped with context_window
    cite: list[str] | None = None  # AgentConfig.cite: the ids the answer cited, as written
    cited_docs: list[str] = field(default_factory=list)  # the documents of the cited passages shown
    cite_unseen: int = 0  # cited ids of no passage shown
    # The opaque id each passage was shown under -> its chunk id (the record's ``passage_ids``).
    passage_ids: dict[str, str] = field(default_factory=dict)
    requests: list[ChatRequest] = field(default_factory=list, repr=False)

    @property
    def steps(self) -> list[Step]:
        return self.ledger.steps

    @property
    def searches_used(self) -> int:
        return self.ledger.searches_used

    @property
    def tokens_in(self) -> int:
        return self.ledger.tokens_in

    @property
    def tokens_out(self) -> int:
        return self.ledger.tokens_out

    @property
    def tokens_reasoning(self) -> int:
        return self.ledger.tokens_reasoning

    @property
    def llm_calls(self) -> int:
        return self.ledger.llm_calls

    @property
    def early_stop(self) -> bool:
        """The model chose to answer before any budget or limit forced it to."""
        return self.stop_reason == "answered"

    @property
    def forced_answer(self) -> bool:
        return any(s.kind == "forced_answer" for s in self.steps)

    @property
    def valid_turn_rate(self) -> float | None:
        """Share of action turns that parsed into an offered action (``None`` without turns)."""
        if not self.action_turns:
            return None
        return (self.action_turns - self.invalid_turns) / self.action_turns
