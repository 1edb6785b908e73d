"""Running a user's agent against its item's bridge: a Python callable or a command, under a timeout.

* A **callable** (``module:function``, or an agent registered in :data:`bcas.registry.AGENTS`)
  is called as ``function(question, endpoints)`` (:class:`bcas.bridge.Endpoints`) and returns
  the answer.  A plain function runs in a worker thread, so the bridge (on the case's event
  loop) keeps answering it; a coroutine function is awaited on the case's loop and must not
  block it.  Past the timeout the agent is abandoned (a thread cannot be stopped: it keeps
  running until it returns, but the bridge is closed under it).
* A **command** runs as a child process with the endpoints in its environment
  (:meth:`bcas.bridge.Endpoints.env`), the question on stdin and the answer on stdout (its
  last non-empty line); past the timeout it is killed.

What the agent does is never in doubt: a crash (an exception, a non-zero exit status), a
timeout or no answer (``None``, an empty string, nothing on stdout) is an
:class:`AgentOutcome` with its ``error``, which the run kind turns into an error record.
The agent's code is the user's; bcas runs it as given and executes nothing a model wrote.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bcas.bridge.ledger import BridgeLedger
from bcas.bridge.session import Endpoints
from bcas.config import BridgedAgent
from bcas.records import Answer
from bcas.registry import AGENTS

STDERR_TAIL = 2000  # characters of a failed command's stderr kept in its error record


@dataclass(frozen=True)
class AgentOutcome:
    """What an agent gave: its answer, or why there is none (``error``: ``crash``, ``timeout``, ``no answer``)."""

    answer: str = ""
    error: str | None = None
    detail: str = ""  # a traceback or the command's stderr tail

    @property
    def reason(self) -> str:
        return "" if self.error is None else self.error.split(":", 1)[0]


def load_callable(target: str) -> Callable[..., Any]:
    """The function ``module:function`` names, or the agent registered under ``target``."""
    if ":" not in target:
        if target in AGENTS:
            found: Callable[..., Any] = AGENTS.get(target)
            return found
        raise ValueError(f"callable: {target!r} is neither 'module:function' nor a registered agent {AGENTS.names()}")
    module, _, name = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"callable: {target} is a {type(obj).__name__}, not a function")
    return obj  # type: ignore[no-any-return]


def _answer_of(value: Any) -> AgentOutcome:
    text = "" if value is None else str(value).strip()
    if not text:
        return AgentOutcome(error="no answer: the agent returned nothing")
    return AgentOutcome(answer=text)


async def run_callable(spec: BridgedAgent, question: str, endpoints: Endpoints) -> AgentOutcome:
    try:
        function = load_callable(spec.callable)
    except Exception as exc:  # noqa: BLE001 - an agent that cannot be loaded is an error record
        return AgentOutcome(error=f"crash: cannot load {spec.callable}: {type(exc).__name__}: {exc}")
    try:
        if inspect.iscoroutinefunction(function):
            value = await asyncio.wait_for(function(question, endpoints), spec.timeout_s)
        else:
            value = await asyncio.wait_for(asyncio.to_thread(function, question, endpoints), spec.timeout_s)
    except TimeoutError:
        return AgentOutcome(error=f"timeout: the agent ran past {spec.timeout_s:g} s")
    except Exception as exc:  # noqa: BLE001 - the agent's crash is the record's error, never the case's
        return AgentOutcome(error=f"crash: {type(exc).__name__}: {exc}", detail=traceback.format_exc(limit=8))
    return _answer_of(value)


async def run_command(spec: BridgedAgent, question: str, endpoints: Endpoints) -> AgentOutcome:
    env = {**os.environ, **endpoints.env()}
    try:
        process = await asyncio.create_subprocess_exec(
            *spec.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
    except OSError as exc:
        return AgentOutcome(error=f"crash: cannot start {spec.command[0]}: {exc}")
    try:
        out, err = await asyncio.wait_for(process.communicate(question.encode()), spec.timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        return AgentOutcome(error=f"timeout: the agent ran past {spec.timeout_s:g} s (killed)")
    stderr = err.decode(errors="replace")[-STDERR_TAIL:]
    if process.returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no stderr"
        return AgentOutcome(error=f"crash: exit status {process.returncode}: {last}", detail=stderr)
    lines = [line.strip() for line in out.decode(errors="replace").splitlines() if line.strip()]
    if not lines:
        return AgentOutcome(error="no answer: the agent printed nothing on stdout", detail=stderr)
    return AgentOutcome(answer=lines[-1], detail=stderr)


async def run_agent(spec: BridgedAgent, question: str, endpoints: Endpoints) -> AgentOutcome:
    """Run the agent ``spec`` names on ``question`` against ``endpoints`` (see the module docstring)."""
    if spec.callable:
        return await run_callable(spec, question, endpoints)
    return await run_command(spec, question, endpoints)


def answer_of_bridge(bridge: BridgeLedger, outcome: AgentOutcome, spec: BridgedAgent, latency_s: float) -> Answer:
    """The record's answer of a bridged agent: its prediction, and the bridge's ledger as its trajectory.

    Totals are the sums of the steps (every model call a ``generate`` step, every search a
    ``search`` step); what the bridge refused (searches past ``max_searches``, calls past
    ``max_total_tokens``) is in ``extra.bridge``.  A crash, a timeout or no answer is
    ``stop_reason="error"`` with the reason in ``error``.
    """
    ledger = bridge.ledger
    config = bridge.config
    extra: dict[str, Any] = {
        "agent": spec.label,
        "agent_code": spec.code_id,
        "agent_tokens_out": ledger.agent_tokens_out,
        "budget": dataclasses.asdict(config.budget),
        "bridge": {
            "dialects": list(spec.dialects),
            "refused_searches": list(bridge.refused_searches),
            "refused_calls": bridge.refused_calls,
        },
    }
    if outcome.detail:
        extra["agent_log"] = outcome.detail[-STDERR_TAIL:]
    return Answer(
        prediction=outcome.answer if outcome.error is None else "",
        method="agent",
        model=str(getattr(bridge.model, "model_id", "")),
        label=config.label,
        searches_used=ledger.searches_used,
        tokens_in=ledger.tokens_in,
        tokens_out=ledger.tokens_out,
        tokens_reasoning=ledger.tokens_reasoning,
        llm_calls=ledger.llm_calls,
        early_stop=outcome.error is None,
        stop_reason="answered" if outcome.error is None else "error",
        latency_s=round(latency_s, 6),
        error=outcome.error,
        steps=[s.to_dict() for s in ledger.steps],
        extra=extra,
    )


__all__ = ["AgentOutcome", "answer_of_bridge", "load_callable", "run_agent", "run_callable", "run_command"]
