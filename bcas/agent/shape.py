"""The calls of one BCAS trajectory, for the estimate (``--bcas-estimate``, :mod:`bcas.callshape`).

What the loop (:mod:`bcas.agent.loop`) would call for one item under a configuration, counted
from its budgets without running it: the shape :mod:`bcas.run.estimate` prices.
"""

from __future__ import annotations

from bcas.callshape import CallShape
from bcas.config import RunConfig

ASSUMED_SEARCHES = 3
"""Searches the estimate assumes of an item under unlimited searches (a stated assumption)."""


def loop_shape(config: RunConfig) -> CallShape:
    """The calls of one trajectory (the estimate's, :mod:`bcas.callshape`), from :meth:`bcas.agent.loop._Run.turns`:
    the plan (``planning``), one action turn per search until the searches run out, a reflection
    every ``reflect_every`` action turns (``reflection``), the answer turn; a treatment on the search
    tool (``AgentConfig.assess``) adds its three agents per hit (PDE its extractions).  The model
    may choose ``ready_to_answer`` at its first turn: then plan, one action turn and the answer.
    At most (``calls_max``): every action turn up to the turn bound (:func:`bcas.agent.budget.turn_bound`),
    the turns a reply that could not be used (or a refused repeat) took included, and their reflections."""
    from bcas.agent.budget import turn_bound

    b, a = config.budget, config.agent
    searches = ASSUMED_SEARCHES if b.max_searches is None else int(b.max_searches)
    k = config.retrieval.k
    reflections = (searches - 1) // a.reflect_every if a.reflection and searches > 0 else 0
    per_search = 0.0
    if a.assess != "none":
        per_search = 3.0 * k + (k if a.assess == "pde" else 0)
    calls = int(a.planning) + searches + reflections + 1 + searches * per_search
    turns = max(turn_bound(b, a), searches)
    most = int(a.planning) + turns + ((turns - 1) // a.reflect_every if a.reflection else 0) + 1 + searches * per_search
    least = int(a.planning) + (1 if searches else 0) + 1
    per = b.max_total_tokens if b.per_turn_max_tokens is None else b.per_turn_max_tokens
    shown = k * (searches * (searches - 1) / 2 + searches)  # action turn j shows j searches' passages; the answer all
    note = "the model's ready_to_answer ends it early" + (
        f"; unlimited searches: {ASSUMED_SEARCHES} assumed" if b.max_searches is None else ""
    )
    return CallShape(
        calls=float(calls), calls_min=float(least), calls_max=float(most), searches=float(searches), searches_min=0.0,
        out_tokens=float(min(b.max_total_tokens, per * calls) + b.forced_answer_tokens), passages=shown, note=note,
    )  # fmt: skip
