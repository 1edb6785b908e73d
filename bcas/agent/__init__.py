"""The BCAS agent: budgeted search loop, ledger and action protocol (BCAS §3.1-§3.4)."""

from bcas.agent.budget import STEP_FLAGS, STEP_KINDS, BudgetError, BudgetLedger, Step
from bcas.agent.evaluate import evaluate_bcas
from bcas.agent.loop import STOP_REASONS, run_bcas
from bcas.agent.protocol import (
    ANSWER_TOOL,
    SEARCH_TOOL,
    TOOLS,
    Action,
    ActionParseError,
    action_schema,
    answer_schema,
    parse_action,
    parse_answer,
)
from bcas.agent.trajectory import Trajectory

__all__ = [
    "ANSWER_TOOL",
    "SEARCH_TOOL",
    "STEP_FLAGS",
    "STEP_KINDS",
    "STOP_REASONS",
    "TOOLS",
    "Action",
    "ActionParseError",
    "BudgetError",
    "BudgetLedger",
    "Step",
    "Trajectory",
    "action_schema",
    "answer_schema",
    "evaluate_bcas",
    "parse_action",
    "parse_answer",
    "run_bcas",
]
