"""The estimate of a run before it runs (``--bcas-estimate``): calls, searches, tokens, cost and wall time.

Per case, from the call structure its run kind declares (:mod:`bcas.callshape`: the BCAS
loop's :func:`bcas.agent.shape.loop_shape`, each method's ``*_shape`` beside its calls,
:func:`bcas.assess.pipeline.treatment_shape`, :func:`bcas.assess.rsc.probe.probe_shape`)
and its budgets, times the items the run would start (those of its plan not yet recorded
in the run folder).  Nothing is run: no model is loaded, no index is built; the datasets
are read (to count the items and size their prompts) and the run folder's records (for
speed).  Calibration (the routed MADARA pipeline's RSC probe, once per model and dataset,
and the ``rsc`` kind's probe) is a row of its own, marked as such.

Tokens.  A call's prompt is :data:`PROMPT_TOKENS` of instructions plus the question,
plus the passages the structure shows it (``CallShape.passages``) at the dataset's mean
document length (at most a chunk, ``RetrievalConfig.chunk_tokens``), at
:data:`CHARS_PER_TOKEN` characters a token; completion tokens are the calls' allowances
within the token budget (an upper bound).  Cost: the run's price sheet on those tokens.

Wall time, a range, from measured speed (:class:`Speed`; calls an item made at once, whose
wall times overlap, count at their share of the item's service time): the case's own recorded items
when it has some, else the run folder's records of the model (each call's and each search's
measured time; the 10th to 90th percentile of a
call, half the fastest to twice the slowest below :data:`FEW_CALLS` calls; per item, the
harness's time up to the slowest item's, twice it below :data:`FEW_CALLS` items), else the
generation cache's recorded latencies of the model's calls, else, for
the ``mock`` backend, near zero (:data:`INSTANT`); otherwise unknown (run a few items
first: their records become the basis).  A case's range is

    items / in flight x (calls_min x call_lo + searches_min x search_lo + harness_lo,
                         calls_hi x call_hi + searches x search_hi + harness_hi)

where ``calls_hi`` is the larger of the expected calls and the budgets' bound (``calls``
at the structure's count).  The expected calls of a stepwise case (the loop, IRCoT, Self-Ask)
are its recorded items' mean, kept within ``[calls_min, calls_max]``, where ``calls_max``
counts every action turn up to the loop's turn bound (a reply that could not be used takes a
turn and a call, and a recorded case shows how often its model does that).

with ``in flight = min(--bcas-concurrency, items)``.  An index build is not in it (the
index is built once, before the first search; its own line says how long, BCAS §3.5).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bcas.callshape import CallShape
from bcas.registry import per_item
from bcas.run.pipelines import run_kind, whole_case_kind

PROMPT_TOKENS = 400
"""Tokens of a prompt's instructions (system prompt, format), a stated assumption."""
CHARS_PER_TOKEN = 4.0
"""Characters per token of a question or passage, a stated assumption."""
UNMEASURED_SEARCH_S = (0.0005, 0.5)
"""One search's time when none was measured (a BM25 lookup to a dense query on a CPU)."""
INSTANT = (0.0, 0.005)
"""A call of the ``mock`` backend (a test double: no model time)."""
HARNESS_S = (0.0, 0.05)
"""Per item, what is neither a call nor a search (prompts, parsing, grading, the record) when unmeasured."""


@dataclass(frozen=True)
class Speed:
    """Measured time of one model's calls, searches and per-item harness work (seconds)."""

    source: str
    call: tuple[float, float]
    search: tuple[float, float] = UNMEASURED_SEARCH_S
    harness: tuple[float, float] = HARNESS_S


@dataclass
class CaseEstimate:
    case_id: str
    kind: str
    model: str
    items: int = 0  # items the run would start
    calls: float = 0.0  # expected: the budgets' bound, or where the case's recorded items landed
    calls_min: float = 0.0  # when the model stops at its first chance
    calls_max: float = 0.0  # the most the structure allows (the loop: every action turn up to its bound)
    calls_budget: float = 0.0  # when the budgets are spent (the expectation with nothing recorded)
    searches: float = 0.0
    searches_min: float = 0.0
    searches_max: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0  # at most
    cost: float | None = 0.0
    judge_calls: float = 0.0
    wall: tuple[float, float] | None = None
    speed: str = "unknown"
    note: str = ""
    calibration: bool = False  # a probe of calibration items, not an evaluated case
    dataset_items: int = 0  # the evaluated dataset's file holds this many (0: not read)
    held_out: int = 0  # of them, held for calibration
    # For the per-shard table (bcas.harness.estimate_shards).
    item_ids: list[str] = field(default_factory=list)
    item_calls: list[float | None] = field(default_factory=list)
    latency_s: float = 0.0
    latency_calls: int = 0
    whole: bool = False
    basis: str = "call structure"
    rerank: int = 0  # the llm reranker's calls per search (in calls)


def prompt_tokens(shape: CallShape, question_chars: float, passage_chars: float) -> float:
    """An item's prompt tokens under ``shape`` (module docstring)."""
    return shape.calls * (PROMPT_TOKENS + question_chars / CHARS_PER_TOKEN) + shape.passages * (
        passage_chars / CHARS_PER_TOKEN
    )


def _sizes(items: list[Any], chunk_tokens: int) -> tuple[float, float, float]:
    """(mean question characters, mean passage characters (at most a chunk), mean documents) of ``items``."""
    if not items:
        return 0.0, 0.0, 0.0
    question = sum(len(it.question) for it in items) / len(items)
    docs = [len(d.text) for it in items for d in it.documents]
    passage = min(sum(docs) / len(docs), chunk_tokens * CHARS_PER_TOKEN) if docs else chunk_tokens * CHARS_PER_TOKEN
    return question, passage, sum(len(it.documents) for it in items) / len(items)


def _documents(config: Any, mean_docs: float) -> float:
    """Documents a MADARA item is assessed on: ``n_docs`` retrieved, or the item's own (at most ``n_docs``)."""
    assess = config.assess
    if assess.doc_source == "retrieval":
        return float(assess.n_docs)
    return float(min(mean_docs, assess.n_docs))


FEW_CALLS = 20
"""Below this many measured times the range is half the fastest to twice the slowest: a few calls
on a shared machine measure little (a stated rule of the estimate)."""


def _percentiles(values: list[float]) -> tuple[float, float]:
    """The 10th to 90th percentile of ``values``; with fewer than :data:`FEW_CALLS`, widened."""
    if len(values) < FEW_CALLS:
        return min(values) / 2, max(values) * 2
    qs = statistics.quantiles(values, n=10, method="inclusive")
    return qs[0], qs[-1]


def speed_of_records(records: list[Any], source: str) -> Speed | None:
    """The speed measured by ``records`` (live calls only; a cache replay measures nothing)."""
    calls: list[float] = []
    searches: list[float] = []
    harness: list[float] = []
    for r in records:
        timing = r.timing or {}
        if timing.get("source") != "live":
            continue
        walls = [float(c.get("wall_s") or 0.0) for c in timing.get("calls") or []]
        service = float(timing.get("service_s") or 0.0)
        if service > 0 and sum(walls) > service:
            # Calls made at once (MADARA's agents on an item's documents) overlap: what the item spends
            # on each is its share of the item's service time, not its own wall time.
            walls = [w * service / sum(walls) for w in walls]
        calls.extend(walls)
        searches.extend(float(s) for s in timing.get("search_times") or [])
        if timing.get("harness_s") is not None:
            harness.append(float(timing["harness_s"]))
    if not calls and not harness:
        return None
    calls.sort(), searches.sort(), harness.sort()
    # Per item, the harness's share up to the slowest measured (the first item of a process opens the index).
    return Speed(
        source,
        _percentiles(calls) if calls else INSTANT,  # no call timed: a test double's (the mock's) instant calls
        _percentiles(searches) if searches else UNMEASURED_SEARCH_S,
        _harness_range(harness) if harness else HARNESS_S,
    )


def _harness_range(harness: list[float]) -> tuple[float, float]:
    """Per item, none to the slowest measured harness time; below :data:`FEW_CALLS` items, twice it
    (the rule of :func:`_percentiles`: a few items on a shared machine measure little)."""
    return 0.0, max(harness) * (2.0 if len(harness) < FEW_CALLS else 1.0)


def speed_of_cache(path: Path, identity: str) -> Speed | None:
    """The recorded latencies of ``identity``'s calls in the generation cache at ``path`` (read only)."""
    if not path.is_file():
        return None
    import sqlite3

    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            rows = conn.execute(
                "SELECT result FROM generations WHERE model_id = ? ORDER BY created DESC LIMIT 2000", (identity,)
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    latencies = sorted(float(json.loads(row[0]).get("latency_s") or 0.0) for row in rows)
    latencies = [x for x in latencies if x > 0]
    if not latencies:
        return None
    return Speed(f"{len(latencies)} cached calls", _percentiles(latencies))


def _wall(est: CaseEstimate, speed: Speed | None, concurrency: int) -> None:
    if speed is None or not est.items:
        est.wall = (0.0, 0.0) if not est.items else None
        return
    in_flight = 1 if est.whole else max(1, min(concurrency, est.items))
    per_item = est.items / in_flight
    n = max(est.items, 1)
    lo = est.calls_min / n * speed.call[0] + est.searches_min / n * speed.search[0] + speed.harness[0]
    calls_hi = max(est.calls, est.calls_budget)  # the turn bound's wasted turns are in the calls only when recorded
    hi = calls_hi / n * speed.call[1] + est.searches_max / n * speed.search[1] + speed.harness[1]
    est.wall = (per_item * lo, per_item * hi)
    est.speed = speed.source
    est.latency_s = est.calls * (speed.call[0] + speed.call[1]) / 2  # for the per-shard table
    est.latency_calls = int(round(est.calls))


def with_reranking(shape: CallShape, config: Any, pool_cap: int) -> CallShape:
    """``shape`` with the ``llm`` reranker's calls on each search (one per candidate, at most ``pool_cap``:
    the collection's documents), each a one-token reply over one passage."""
    from bcas.retrieval.rerank import rerank_calls_per_search

    r = config.retrieval
    per = min(rerank_calls_per_search(r.mode, r.reranker, r.candidates, r.k), max(pool_cap, 0))
    if not per or not shape.searches:
        return shape
    searches_min = shape.searches if shape.searches_min is None else shape.searches_min
    rerank = CallShape(
        calls=per * shape.searches, calls_min=per * searches_min, out_tokens=per * shape.searches,
        passages=per * shape.searches,
    )  # fmt: skip
    merged = shape.plus(rerank)
    return dataclasses.replace(merged, searches=shape.searches, searches_min=shape.searches_min, rerank=per)


def _fill(est: CaseEstimate, shape: CallShape, items: int, question: float, passage: float) -> None:
    est.items = items
    est.calls = est.calls_budget = shape.calls * items
    est.calls_min = shape.low * items
    est.calls_max = shape.high * items
    est.searches = est.searches_max = shape.searches * items
    est.searches_min = (shape.searches if shape.searches_min is None else shape.searches_min) * items
    est.tokens_in = prompt_tokens(shape, question, passage) * items
    est.tokens_out = shape.out_tokens * items
    est.note = shape.note
    est.rerank = shape.rerank


def _observed(est: CaseEstimate, records: list[Any]) -> None:
    """Where in [calls_min, calls_max] the case's items land, and their tokens: the means of its
    recorded items (the run folder's, same model and configuration), the calls kept within the
    structure's bounds; the budgets' bound when none is recorded."""
    if not records or not est.items:
        if est.calls_min != est.calls_budget:
            est.basis = "budgets' bound"
        return
    n = len(records)
    # The prompt and completion tokens the case's items spent (the structure's are a prompt-size guess and a cap).
    est.tokens_in = sum(r.tokens_in for r in records) / n * est.items
    est.tokens_out = sum(r.tokens_out for r in records) / n * est.items
    calls = sum(r.llm_calls for r in records) / n * est.items
    searches = sum(r.searches_used for r in records) / n * est.items
    est.calls = min(max(calls, est.calls_min), est.calls_max)
    est.searches = min(max(searches, est.searches_min), est.searches_max)
    est.basis = f"{n} recorded item(s) of the case"


def _price(prices: Any, label: str, est: CaseEstimate) -> None:
    if prices is None:
        est.cost = None
        return
    try:
        est.cost = float(prices.cost(label, int(est.tokens_in), int(est.tokens_out), int(est.searches)))
    except Exception:  # noqa: BLE001 - an unpriced model: its cost is unknown, never 0
        est.cost = None


def estimate(settings: Any, cases: list[Any]) -> list[CaseEstimate]:
    """Estimates of ``cases`` (in order), each calibration row after the first case that needs it."""
    from bcas.grids import get_grid
    from bcas.run.session import BcasSession

    with tempfile.TemporaryDirectory(prefix="bcas-estimate-") as scratch:
        # An absent run folder is not created: resume keys come from an empty scratch folder instead.
        run_dir = settings.run_dir if Path(settings.run_dir).is_dir() else Path(scratch)
        # With a shard, every shard's items are planned: the per-shard table splits them (estimate_shards).
        sess = BcasSession(dataclasses.replace(settings, run_dir=run_dir, shard=None))
        try:
            speeds = _speeds(sess, settings, cases)
            recorded: dict[tuple[str, str], list[Any]] = {}  # (model, configuration): the run folder's answers
            for r in sess.store.records():
                if r.stop_reason != "error":
                    recorded.setdefault((r.model, r.config_id), []).append(r)
            out: list[CaseEstimate] = []
            probed: set[tuple[str, str]] = set()
            judge = 0 if settings.judge == "none" else settings.judge_repeats * (3 if settings.judge_three_way else 1)
            for case in cases:
                kind = run_kind(case.entry.kind)
                est = CaseEstimate(case.id, case.entry.kind, case.model.label)
                plan = sess.plan_case(case)
                config = plan.config
                whole = sess.collection(case.dataset)
                pool = 10**9 if settings.corpus else sum(len(it.documents) for it in whole.items)
                if not per_item(case.entry.kind):
                    count = whole_case_kind(case.entry.kind).whole_items(sess, case, config)
                    items = list(sess.calibration(case.dataset, config.assess.calibration_n).items)[:count]
                    est.whole = est.calibration = True
                else:
                    items = [it for it, _ in plan.todo]
                    est.item_ids = [it.id for it, _ in plan.todo]
                    est.judge_calls = float(judge * len(items))
                    est.dataset_items = len(whole.items)
                    est.held_out = get_grid(case.grid).holdout_for(settings.calibration_n)
                own = [] if est.whole else recorded.get((case.model.label, plan.identity.config_id), [])
                q, p, docs = _sizes(items or list(plan.dataset.items), config.retrieval.chunk_tokens)
                shape = kind.shape(case.entry.kind, config, _documents(config, docs))
                if shape is None:
                    est.basis, est.cost, est.items = "no call structure", None, len(items)
                    est.note = f"run kind {case.entry.kind} declares no call structure"
                else:
                    _fill(est, with_reranking(shape, config, pool), len(items), q, p)
                    if not est.whole:
                        _observed(est, own)
                    _price(sess.prices, case.model.label, est)
                est.item_calls = [None if shape is None else est.calls / max(est.items, 1) for _ in est.item_ids]
                # A case's own recorded items measure its calls' speed (a MADARA treatment's one-token
                # scores and a loop's long prompts differ); else the model's, over the run folder.
                speed = speed_of_records(own, f"{len(own)} recorded item(s) of the case") if own else None
                _wall(est, speed or speeds.get(case.model.label), settings.concurrency)
                out.append(est)
                calibration = kind.calibration_shape(config, 0.0) if per_item(case.entry.kind) else None
                key = (case.model.label, case.dataset)
                if calibration is not None and est.items and key not in probed:
                    probed.add(key)
                    out.append(_calibration_row(sess, case, config, speeds.get(case.model.label), pool))
        finally:
            sess.close()
    return out


def _calibration_row(sess: Any, case: Any, config: Any, speed: Speed | None, pool: int) -> CaseEstimate:
    """The routed pipeline's RSC probe on the calibration items, once per model and dataset."""
    kind = run_kind(case.entry.kind)
    items = list(sess.calibration(case.dataset, config.assess.calibration_n).items)[: config.assess.calibration_n]
    q, p, docs = _sizes(items, config.retrieval.chunk_tokens)
    shape = kind.calibration_shape(config, _documents(config, docs))
    est = CaseEstimate(
        f"calibration: RSC probe {case.model.label}-{case.dataset}", "rsc", case.model.label, calibration=True
    )
    if shape is not None:
        _fill(est, with_reranking(shape, config, pool), len(items), q, p)
    est.whole = True
    _price(sess.prices, case.model.label, est)
    _wall(est, speed, sess.settings.concurrency)
    return est


def _speeds(sess: Any, settings: Any, cases: list[Any]) -> dict[str, Speed]:
    """Per model label: the run folder's records, else the generation cache, else mock's instant calls."""
    from bcas.llm.cache import cache_disabled_by_env, default_cache_path
    from bcas.records.schema import is_test_double

    by_model: dict[str, list[Any]] = {}
    for r in sess.store.records():
        by_model.setdefault(r.model, []).append(r)
    out: dict[str, Speed] = {}
    for case in cases:
        label = case.model.label
        if label in out:
            continue
        fingerprint = sess.fingerprint(case.model)
        measured = speed_of_records(
            by_model.get(label, []), f"{len(by_model.get(label, []))} records in the run folder"
        )
        if measured is None and is_test_double(fingerprint):
            measured = Speed("mock: instant", INSTANT, (0.0, 0.05), HARNESS_S)
        if measured is None and settings.cache and not cache_disabled_by_env():
            measured = speed_of_cache(default_cache_path(), fingerprint)
        if measured is not None:
            out[label] = measured
    return out


__all__ = ["CaseEstimate", "Speed", "estimate", "prompt_tokens", "speed_of_cache", "speed_of_records"]
