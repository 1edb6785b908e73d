"""``--bcas-estimate``: the expected calls, tokens and cost of the selected cases, without running them.

Every selected case is planned as a run would plan it (the same items, minus those
already recorded in the run folder), then each item's pipeline is
replayed against the generation cache (:mod:`bcas.llm.cache`): a request the cache holds
returns its stored result, so an item whose every call is cached gives exactly the
tokens, calls and cost (under the run's price sheet, BCAS §3.7) the run would record.  A
backend that declares generation not worth caching (``cacheable = False``: instant and
free, the ``mock`` backend) is simply asked.  An item with a call the cache lacks stops
at that call and is extrapolated from the mean of the case's replayed items.  A case
with none replayed is based, in this order, on the model's replayed items of any other
case, its recorded answers in the run folder (any case), its calls in the generation
cache (any case) at an assumed number of calls per item, else the prompt sizes alone; the
table names the basis.  An index is opened at an item's first search, so an item whose
first call the cache lacks builds none (a replayed item reads the index its run built);
no model is called, nothing is written to the run folder.  With ``--bcas-shard`` (K/N or ``auto``) every item of the run is planned,
whatever K, and a second table gives each of the N shards' items, calls and expected
wall time (:mod:`bcas.harness.estimate_shards`), to size an array before submitting it.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bcas.harness import state
from bcas.harness.estimate_shards import shard_lines
from bcas.llm.base import ChatModel, ChatRequest, ChatResult, WrappedModel
from bcas.llm.cache import CachedModel
from bcas.registry import per_item
from bcas.run.context import CaseContext
from bcas.run.cost import record_spend
from bcas.run.pipelines import whole_case_kind
from bcas.run.session import BcasSession

# The cache misses of the item being replayed (each item runs in its own task, with its own list):
# pipelines and the judge turn a failed call into an error record or an unknown verdict, so the
# miss is noted where it happens.
_MISSES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("bcas_estimate_misses", default=None)


class NotCached(RuntimeError):
    """The generation cache has no result for a request the replayed item makes."""


class ReplayModel(WrappedModel):
    """Answers from the generation cache only; counts the calls it answers."""

    def __init__(self, model: ChatModel) -> None:
        self.cached = model if isinstance(model, CachedModel) else None
        self.inner = model.inner if isinstance(model, CachedModel) else model
        # Not worth caching (instant and free, the mock backend): asking it is the replay.
        self.ask = not getattr(self.inner, "cacheable", True)
        self.calls = 0
        self.latency_s = 0.0  # the measured latencies of the calls answered (a cache hit keeps its own)

    async def chat(self, request: ChatRequest) -> ChatResult:
        if self.ask:
            result = await self.inner.chat(request)
        else:
            hit = await self.cached.cache.aget(self.cached.key(request)) if self.cached else None
            if hit is None:
                misses = _MISSES.get()
                if misses is not None:
                    misses.append(self.inner.model_id)
                raise NotCached(f"no cached result for a {self.inner.model_id} request")
            result = hit
        self.calls += 1
        self.latency_s += float(result.latency_s or 0.0)
        return result


@dataclass
class CaseEstimate:
    case_id: str
    kind: str
    model: str
    items: int = 0  # items the run would start
    replayed: int = 0  # items whose every call the cache (or the free backend) answered
    calls: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0
    cost: float | None = 0.0
    known: list[tuple[float, float, float, float | None]] = field(default_factory=list)  # per replayed item
    basis: str = "replayed"
    # For the per-shard table (bcas.harness.estimate_shards): the item id of each planned (item, epoch),
    # its replayed calls (None: extrapolated), the measured latency of the replayed calls.
    item_ids: list[str] = field(default_factory=list)
    item_calls: list[float | None] = field(default_factory=list)
    latency_s: float = 0.0
    latency_calls: int = 0
    whole: bool = False  # a whole-case kind: runs on the one shard its case id hashes to

    def extrapolate(self, means: tuple[float, float, float, float | None] | None, basis: str) -> None:
        """Add the items that could not be replayed at ``means`` (calls, tokens in, tokens out, cost) each."""
        missing = self.items - self.replayed
        if not missing:
            return
        self.basis = basis
        if means is None:
            self.cost = None
            self.basis = "no basis"
            return
        self.calls += missing * means[0]
        self.tokens_in += missing * means[1]
        self.tokens_out += missing * means[2]
        self.cost = None if self.cost is None or means[3] is None else self.cost + missing * means[3]


def _means(rows: list[tuple[float, float, float, float | None]]) -> tuple[float, float, float, float | None] | None:
    if not rows:
        return None
    n = len(rows)
    costs = [r[3] for r in rows]
    cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None) / n
    return (sum(r[0] for r in rows) / n, sum(r[1] for r in rows) / n, sum(r[2] for r in rows) / n, cost)


class _LazyIndex:
    """A case's index, opened at its first search: an item whose first call the cache lacks stops
    before it searches, so an estimate of a case never run builds no index (an index a run built
    is read from its disk cache when a replayed item searches)."""

    engine_url = None  # the estimate records nothing: which engine served is not asked

    def __init__(self, open_index: Any) -> None:
        self._open = open_index
        self._index: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._index is None:
            self._index = self._open()
        return getattr(self._index, name)


class _EstimateSession(BcasSession):
    def retriever(self, dataset_name: str, rconfig: Any, model: Any) -> Any:
        return _LazyIndex(lambda: BcasSession.retriever(self, dataset_name, rconfig, model))


async def _estimate_case(sess: BcasSession, case: Any) -> CaseEstimate:
    est = CaseEstimate(case.id, case.entry.kind, case.model.label)
    plan = sess.plan_case(case)
    model = ReplayModel(sess.model(case.model))
    judge = sess.judge()
    if judge is not None and not isinstance(judge.model, ReplayModel):
        judge.model = ReplayModel(judge.model)
    if not per_item(case.entry.kind):  # a whole-case kind (the RSC probe) replayed against the cache
        kind = whole_case_kind(case.entry.kind)
        est.items = kind.whole_items(sess, case, plan.config)
        try:
            await kind.rehearse(sess, case, plan.config, model)
            est.replayed = est.items
        except NotCached:
            est.cost = None
            est.basis = "no basis"
        est.calls = model.calls
        est.whole, est.latency_s, est.latency_calls = True, model.latency_s, model.calls
        return est
    est.items = len(plan.todo)
    est.item_ids = [it.id for it, _ in plan.todo]
    est.item_calls = [None] * len(plan.todo)
    if not plan.todo:
        return est
    context = CaseContext(sess, case, plan.dataset, plan.identity, model)
    try:
        await context.prepare([it for it, _ in plan.todo])
    except NotCached:  # MADARA's routing probe on the calibration items
        est.extrapolate(None, "no basis")
        return est
    sem = asyncio.Semaphore(sess.settings.concurrency)

    async def one(position: int, item: Any, epoch: int) -> None:
        misses: list[str] = []
        _MISSES.set(misses)
        async with sem:
            record = await context.run_item(item, epoch)
            record = await sess.grade_and_price(record)  # as the executor would
        if misses:
            return
        _, cost = record_spend(record)
        judge_calls = len((record.judge or {}).get("verdicts") or []) if record.judge else 0
        row = (float(record.llm_calls + judge_calls), float(record.tokens_in), float(record.tokens_out), cost)
        est.known.append(row)
        est.item_calls[position] = row[0]

    await asyncio.gather(*(one(i, it, e) for i, (it, e) in enumerate(plan.todo)))
    est.latency_s, est.latency_calls = model.latency_s, model.calls
    est.replayed = len(est.known)
    means = _means(est.known)
    if means is not None:
        est.calls, est.tokens_in, est.tokens_out = (x * est.replayed for x in means[:3])
        est.cost = None if means[3] is None else means[3] * est.replayed
    est.extrapolate(means, "the case's replayed items")
    return est


def estimate(settings: Any, cases: list[Any]) -> list[CaseEstimate]:
    """Estimates of ``cases`` (in order); a second pass extrapolates cases with nothing replayed."""
    with tempfile.TemporaryDirectory(prefix="bcas-estimate-") as scratch:
        # An absent run folder is not created: resume keys come from an empty scratch folder instead.
        run_dir = settings.run_dir if Path(settings.run_dir).is_dir() else Path(scratch)
        # With a shard, every shard's items are planned: the per-shard table splits them (estimate_shards).
        sess = _EstimateSession(dataclasses.replace(settings, run_dir=run_dir, shard=None))
        try:
            out = [sess.loop.run_until_complete(_estimate_case(sess, case)) for case in cases]
            by_model: dict[str, list[Any]] | None = None  # the run folder's records, read once if needed
            for est, case in zip(out, cases, strict=True):
                if est.basis == "no basis" and per_item(est.kind) and est.replayed == 0 and est.items:
                    if by_model is None:
                        by_model = defaultdict(list)
                        for r in sess.store.records():
                            by_model[r.model].append(r)
                    _fallback(est, case, out, sess, by_model.get(est.model, []))
        finally:
            sess.close()
    return out


def _named(case_ids: list[str]) -> str:
    shown = sorted(set(case_ids))
    return ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


def assumed_calls(kind: str, config: Any) -> tuple[int, float]:
    """(model calls, completion tokens per call) an item makes when nothing of its model is known,
    a stated assumption: BCAS, one call per search (3 for an unlimited budget) and the answer, one
    more to plan and to reflect, each at its per-call cap (else 256); MADARA, three agents on every
    document at the scoring cap and the generation."""
    if kind == "bcas":
        b, a = config.budget, config.agent
        searches = b.max_searches if b.max_searches is not None else 3
        return int(searches) + 1 + int(a.planning) + int(a.reflection), float(b.per_turn_max_tokens or 256)
    return 3 * int(config.assess.n_docs) + 1, float(config.assess.score_max_tokens)


def _fallback(est: CaseEstimate, case: Any, out: list[CaseEstimate], sess: BcasSession, recorded: list[Any]) -> None:
    """A case with nothing replayed: the model's replayed items of any other case; else its
    recorded answers in the run folder (any case); else its calls in the generation cache (any
    case) at an assumed number of calls per item; else the prompt sizes alone.  The basis says which."""
    est.cost = 0.0  # nothing was replayed: the first pass's "unknown" is replaced by the basis found here
    rows = {other.case_id: other.known for other in out if other.model == est.model and other.known}
    if rows:
        similar = [row for known in rows.values() for row in known]
        est.basis = "replayed"
        return est.extrapolate(_means(similar), f"replayed items of {_named(list(rows))} (rough)")
    if recorded:  # the run folder's answers of this model
        spent = [(float(r.llm_calls), float(r.tokens_in), float(r.tokens_out), record_spend(r)[1]) for r in recorded]
        est.basis = "replayed"
        cases = [f"{r.model}-{r.dataset}-{r.label}" for r in recorded]
        return est.extrapolate(_means(spent), f"{len(recorded)} recorded answers of {_named(cases)} (rough)")
    plan = sess.plan_case(case)
    calls, out_per_call = assumed_calls(est.kind, plan.config)
    model = sess.model(case.model)
    cached = _cached_calls(model)
    if cached is not None:
        n, tin, tout = cached
        est.basis = "replayed"
        basis = f"{n} cached calls of {est.model} (any case), assuming {calls} calls per item (rough)"
        return est.extrapolate(
            (calls, calls * tin, calls * tout, _price(sess, est.model, calls * tin, calls * tout)), basis
        )
    items = [it for it, _ in plan.todo]
    chars = sum(len(it.question) + sum(len(d.text) for d in it.documents[:5]) for it in items) / max(len(items), 1)
    tin, tout = chars / 4 + PROMPT_TOKENS, out_per_call
    est.basis = "replayed"
    basis = (
        f"prompt sizes alone: {calls} calls per item, each the question and 5 documents at 4 characters a "
        f"token plus {PROMPT_TOKENS} of instructions in, its per-call cap out (nothing of {est.model} cached)"
    )
    est.extrapolate((calls, calls * tin, calls * tout, _price(sess, est.model, calls * tin, calls * tout)), basis)


PROMPT_TOKENS = 400  # the instructions of a prompt, a stated assumption of the prompt-size basis


def _cached_calls(model: Any) -> tuple[int, float, float] | None:
    """(calls, mean prompt tokens, mean completion tokens) of ``model``'s calls in the generation cache."""
    inner = model.inner if isinstance(model, ReplayModel) else model
    if not isinstance(inner, CachedModel) or not inner.cache.enabled:
        return None
    identity = inner.identity or inner.inner.model_id
    conn = inner.cache._connection()
    rows = conn.execute("SELECT result FROM generations WHERE model_id = ?", (identity,)).fetchall()
    if not rows:
        return None
    parsed = [json.loads(row[0]) for row in rows]
    tin = sum(float(p.get("prompt_tokens") or 0) for p in parsed) / len(parsed)
    tout = sum(float(p.get("completion_tokens") or 0) for p in parsed) / len(parsed)
    return len(parsed), tin, tout


def _price(sess: BcasSession, label: str, tokens_in: float, tokens_out: float) -> float | None:
    if sess.prices is None:
        return None
    try:
        return float(sess.prices.cost(label, int(tokens_in), int(tokens_out)))
    except Exception:  # noqa: BLE001 - an unpriced model: its cost is unknown, never 0
        return None


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.6f}"


def lines(estimates: list[CaseEstimate], settings: Any) -> list[str]:
    """The terminal's estimate table and its total."""
    sheet = "pricing off" if getattr(settings, "prices", None) is None else f"price sheet {settings.prices}"
    out = [
        f"expected spend of {len(estimates)} selected case(s) ({sheet}; generation cache; nothing was run)",
        f"{'case':<48}{'items':>7}{'replayed':>10}{'calls':>9}{'tokens in':>12}{'tokens out':>12}{'cost $':>14}",
    ]
    for e in estimates:
        note = (
            ""
            if e.replayed == e.items
            else "  (no basis: nothing of this model cached)"
            if e.basis == "no basis"
            else f"  (rest from {e.basis})"
        )
        out.append(
            f"{e.case_id[:47]:<48}{e.items:>7}{e.replayed:>10}{e.calls:>9.0f}{e.tokens_in:>12,.0f}"
            f"{e.tokens_out:>12,.0f}{_cost(e.cost):>14}{note}"
        )
    priced = [e.cost for e in estimates if e.cost is not None]
    unknown = [e.case_id for e in estimates if e.cost is None]
    out.append(
        f"total: {sum(e.items for e in estimates)} items, {sum(e.calls for e in estimates):,.0f} calls, "
        f"{sum(e.tokens_in for e in estimates):,.0f} tokens in, {sum(e.tokens_out for e in estimates):,.0f} "
        f"tokens out, cost ${sum(priced):.6f}" + (f" + {len(unknown)} case(s) of unknown cost" if unknown else "")
    )
    if getattr(settings, "shard", None) is not None:
        out.extend(shard_lines(estimates, settings))
    return out


class EstimatePlugin:
    """Replaces the run loop: prints the estimate of the collected cases and runs none of them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if self.config.option.collectonly:
            return None  # --collect-only lists the cases; the estimate needs a session that would run them
        cases = [
            item.callspec.params["bcas_case"]
            for item in session.items
            if isinstance(item, pytest.Function)  # only a function is parametrised
            and "bcas_case" in getattr(getattr(item, "callspec", None), "params", {})
        ]
        settings = self.config.stash[state.SETTINGS]
        tr = self.config.pluginmanager.getplugin("terminalreporter")
        rows = lines(estimate(settings, cases), settings) if cases else ["no bcas cases selected"]
        if tr is not None:
            tr.ensure_newline()
            tr.section("bcas estimate")
            for line in rows:
                tr.write_line(line)
        return True


def register(config: pytest.Config) -> None:
    """``--bcas-estimate``: refuse ``-n`` (the estimate runs in one process) and take over the run loop."""
    if getattr(config.option, "numprocesses", None) not in (None, 0):
        raise pytest.UsageError("--bcas-estimate runs in one process; drop -n")
    config.pluginmanager.register(EstimatePlugin(config), "bcas-estimate")
