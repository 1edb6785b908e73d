"""The harness's run kinds: how one grid entry's case runs (``GridEntry.kind``).

A run kind is an :class:`ItemKind` or a :class:`WholeCaseKind` registered in :data:`bcas.registry.RUN_KINDS` (one
registration; the registry's metadata says whether it writes records per item, which
prompt folders shape its answers and how an unnamed entry is labelled).  A per-item kind
turns one item into its record (:meth:`ItemKind.answer`); grading, pricing and appending
are the executor's (:func:`bcas.records.executor.run_items`).  A whole-case kind (the
RSC probe) runs its case at once and writes its own artefact.

Built in: ``bcas`` (the BCAS agent loop, BCAS §3), ``madara`` (a MADARA treatment or the
routed pipeline, MADARA §4-§5), ``rsc`` (the RSC probe, MADARA §3) and one kind per method
beside the loop (``closed_book``, ``retrieve_read``, ``iter_retgen``, ``ircot``, ``self_ask``
and any registered with :func:`bcas.methods.register_method`), all answered by :data:`METHOD`.
"""

from __future__ import annotations

import time
import traceback
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from bcas.callshape import CallShape
from bcas.grading import score_prediction
from bcas.identity import epoch_seed
from bcas.llm.base import ModelError
from bcas.llm.cache import tally
from bcas.records import Answer, AnswerIdentity, Grades, Record, build_record
from bcas.registry import ROUTED_METHOD, RUN_KINDS, RegistryError, documents_needed
from bcas.run.settings import Case, ModelSpec, Settings

if TYPE_CHECKING:  # typing only: what the engine hands a run kind
    from bcas.assess.rsc.probe import ProbeRun
    from bcas.assess.rsc.profile import RSCProfile
    from bcas.config import RetrievalConfig, RunConfig
    from bcas.data import Dataset
    from bcas.items import Item
    from bcas.llm.base import ChatModel
    from bcas.records import PriceSheet
    from bcas.retrieval.engine import EngineRetriever
    from bcas.retrieval.retriever import Retriever

    SearchIndex = Retriever | EngineRetriever  # what a case searches: a local index or a search engine


class KindSession(Protocol):
    """What a run kind asks of the session running its case (:class:`bcas.run.session.BcasSession`)."""

    settings: Settings
    worker: str | None
    rsc_profiles: dict[tuple[str, str], RSCProfile]  # per (model label, dataset): probed once a session
    prices: PriceSheet | None  # the run's price sheet (None: --bcas-prices none)

    def progress(self, text: str) -> None: ...

    def model(self, spec: ModelSpec) -> ChatModel: ...

    def calibration(self, name: str, calibration_n: int) -> Dataset: ...

    def retriever(self, dataset_name: str, rconfig: RetrievalConfig, model: ChatModel | None) -> SearchIndex: ...

    def item_retriever(
        self, dataset_name: str, item: Item, rconfig: RetrievalConfig, model: ChatModel | None
    ) -> SearchIndex: ...

    def titles(self, name: str) -> dict[str, str]: ...

    def with_evidence_recall(self, name: str, item: Item, record: Answer) -> Answer: ...


class AnswerKey(Protocol):
    """The case's part of an answer's identity (:class:`bcas.run.plan.CaseIdentity`)."""

    @property
    def config_id(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def prompt_hash(self) -> str: ...


class KindContext(Protocol):
    """The case a run kind answers items of (:class:`bcas.run.context.CaseContext`)."""

    session: KindSession
    case: Case
    dataset: Dataset
    config: RunConfig
    model: ChatModel
    retriever: SearchIndex | None
    profile: RSCProfile | None
    extra_base: dict[str, object]

    @property
    def identity(self) -> AnswerKey: ...

    async def session_rsc_profile(self) -> RSCProfile: ...

    def retriever_for(self, item: Item) -> SearchIndex | None: ...


class RunKind:
    """What every run kind shares; register an :class:`ItemKind` or a :class:`WholeCaseKind`."""

    def needs_retriever(self, config: RunConfig) -> bool:
        """Whether the case needs the dataset's retriever (default: MADARA's ``doc_source``)."""
        return bool(config.assess.doc_source == "retrieval")

    def calibrates(self, config: RunConfig) -> bool:
        """Whether the case draws calibration items (``config.assess.calibration_n``; default: no)."""
        return False

    async def prepare(self, ctx: KindContext, todo: list[Item]) -> None:
        """Per-case set-up before its items run (``ctx``: the case's :class:`CaseContext`)."""

    def finish(self, ctx: KindContext, item: Item, answer: Answer) -> Answer:
        """The answer with what the case adds to it before it is recorded (default: unchanged)."""
        return answer

    def check(self, config: RunConfig, records: list[dict[str, Any]]) -> list[str]:
        """The kind's own invariants over a finished case's records (default: none)."""
        return []

    def shape(self, name: str, config: RunConfig, documents: float) -> CallShape | None:
        """The calls of one item of kind ``name`` (``--bcas-estimate``, :mod:`bcas.callshape`);
        ``documents``: the documents an item brings (MADARA's ``doc_source="item"``).  Default: none declared."""
        return None

    def calibration_shape(self, config: RunConfig, documents: float) -> CallShape | None:
        """The calls of one calibration item the case probes before its items (default: none)."""
        return None


class ItemKind(RunKind, ABC):
    """A kind that answers items one by one into records (``per_item=True``)."""

    @abstractmethod
    async def answer(self, ctx: KindContext, item: Item, config: RunConfig) -> Answer:
        """The answer to one item under ``config`` (its record is built by :func:`run_item_record`)."""


class WholeCaseKind(RunKind, ABC):
    """A kind that runs its case at once and writes its own artefact (``per_item=False``)."""

    @abstractmethod
    async def run_whole(self, session: KindSession, case: Case, config: RunConfig) -> tuple[int, int, list[str]]:
        """Run the case; returns (items run, items skipped, violations)."""

    @abstractmethod
    def whole_items(self, session: KindSession, case: Case, config: RunConfig) -> int:
        """How many items the case covers (for the cost estimate)."""


def run_kind(name: str) -> RunKind:
    """The registered run kind ``name`` (an unknown name raises, listing the registered ones)."""
    kind: RunKind = RUN_KINDS.get(name)
    return kind


def item_kind(name: str) -> ItemKind:
    """Run kind ``name``, which must answer items one by one."""
    kind = run_kind(name)
    if not isinstance(kind, ItemKind):
        raise RegistryError(f"run kind {name!r} answers no single items: it runs whole cases")
    return kind


def whole_case_kind(name: str) -> WholeCaseKind:
    """Run kind ``name``, which must run whole cases."""
    kind = run_kind(name)
    if not isinstance(kind, WholeCaseKind):
        raise RegistryError(f"run kind {name!r} runs item by item, not whole cases")
    return kind


class BcasKind(ItemKind):
    """The BCAS agent loop (BCAS §3): search budget, token budget, planning, reflection."""

    def needs_retriever(self, config: RunConfig) -> bool:
        return True

    async def prepare(self, ctx: KindContext, todo: list[Item]) -> None:
        """A case in the ``tools`` action format stops before its first item when the model cannot call tools."""
        if ctx.config.agent.action_format == "tools" and not getattr(ctx.model, "supports_tools", False):
            raise ModelError(
                f"{ctx.case.id}: action_format 'tools' needs native tool calling, which model {ctx.case.model.label} "
                f"lacks: {getattr(ctx.model, 'tools_problem', '')}"
            )

    def shape(self, name: str, config: RunConfig, documents: float) -> CallShape | None:
        from bcas.agent.shape import loop_shape

        return loop_shape(config)

    async def answer(self, ctx: KindContext, item: Item, config: RunConfig) -> Answer:
        from bcas.agent import run_bcas
        from bcas.agent.records import answer_of_trajectory

        retriever = ctx.retriever_for(item)  # the case's index, or the item's own (scope "item")
        if retriever is None:
            raise RegistryError(f"{ctx.case.id}: the bcas run kind needs a retriever")
        trajectory = await run_bcas(item, ctx.model, retriever, config, task=ctx.dataset.task)
        answer = answer_of_trajectory(trajectory)
        titles = ctx.session.titles(ctx.case.dataset)
        steps = [
            {**step, "titles": [titles.get(d, d) for d in step.get("docs") or []]} if step.get("docs") else step
            for step in answer.steps
        ]
        return answer.replace(
            steps=steps, extra={**answer.extra, "agent_tokens_out": trajectory.ledger.agent_tokens_out}
        )

    def finish(self, ctx: KindContext, item: Item, answer: Answer) -> Answer:
        with_recall: Answer = ctx.session.with_evidence_recall(ctx.case.dataset, item, answer)
        return with_recall

    def check(self, config: RunConfig, records: list[dict[str, Any]]) -> list[str]:
        """Searches within the search budget; agent completion tokens within the token
        budget plus the forced-answer allowance (BCAS §3.3)."""
        b = config.budget
        problems = []
        for r in records:
            if b.max_searches is not None and int(r.get("searches_used") or 0) > b.max_searches:
                problems.append(f"{r.get('item_id')}: searches_used {r.get('searches_used')} > {b.max_searches}")
            agent_out = int((r.get("extra") or {}).get("agent_tokens_out", r.get("tokens_out") or 0))
            if agent_out > b.max_total_tokens + b.forced_answer_tokens:
                problems.append(
                    f"{r.get('item_id')}: completion tokens {agent_out} > budget {b.max_total_tokens} "
                    f"+ forced-answer allowance {b.forced_answer_tokens}"
                )
        return problems


class MadaraKind(ItemKind):
    """A MADARA treatment, or the routed pipeline that probes and routes (MADARA §4-§5)."""

    def calibrates(self, config: RunConfig) -> bool:
        """The routed pipeline probes the calibration items before it routes (Algorithm 2)."""
        return bool(config.assess.method == ROUTED_METHOD)

    async def prepare(self, ctx: KindContext, todo: list[Item]) -> None:
        if ctx.config.assess.method == ROUTED_METHOD and todo:
            ctx.profile = await ctx.session_rsc_profile()

    def shape(self, name: str, config: RunConfig, documents: float) -> CallShape | None:
        from bcas.assess.pipeline import treatment_shape

        return treatment_shape(config.assess.method, config.assess, documents)

    def calibration_shape(self, config: RunConfig, documents: float) -> CallShape | None:
        """The routed pipeline's RSC probe, once a session per model and dataset (Algorithm 2, lines 1-6)."""
        if config.assess.method != ROUTED_METHOD:
            return None
        from bcas.assess.rsc.probe import probe_shape

        return probe_shape(config, documents)

    async def answer(self, ctx: KindContext, item: Item, config: RunConfig) -> Answer:
        from bcas.assess import answer_madara

        return await answer_madara(
            item, ctx.model, ctx.retriever_for(item), config, dataset=ctx.dataset, profile=ctx.profile
        )

    def finish(self, ctx: KindContext, item: Item, answer: Answer) -> Answer:
        with_recall: Answer = ctx.session.with_evidence_recall(ctx.case.dataset, item, answer)
        return with_recall

    def check(self, config: RunConfig, records: list[dict[str, Any]]) -> list[str]:
        """The items had the documents the treatment needs (MADARA §5.5: it chooses ``k`` of 10).

        Items without documents (a questions-only dataset read with ``doc_source="item"``)
        would let every treatment answer from nothing and pass: the case fails instead.
        """
        listed = [(r.get("extra") or {}).get("doc_ids") for r in records]
        counts = [len(ids) for ids in listed if isinstance(ids, list)]
        if not counts:
            return []
        mean = sum(counts) / len(counts)
        needed = documents_needed(config.assess.method, config.assess.k)
        if mean < needed:
            return [
                f"items averaged {mean:.1f} documents, fewer than the {needed} that {config.assess.method} needs "
                f"(k={config.assess.k}); give the items documents, or --bcas-corpus to retrieve them"
            ]
        return []


class RscKind(WholeCaseKind):
    """The RSC probe of one model x dataset on its calibration items (MADARA §3): a profile file."""

    def calibrates(self, config: RunConfig) -> bool:
        return True

    def whole_items(self, session: KindSession, case: Case, config: RunConfig) -> int:
        return len(session.calibration(case.dataset, config.assess.calibration_n).items)

    def shape(self, name: str, config: RunConfig, documents: float) -> CallShape | None:
        from bcas.assess.rsc.probe import probe_shape

        return probe_shape(config, documents)

    async def _probe(self, session: KindSession, case: Case, config: RunConfig, model: ChatModel) -> ProbeRun:
        from bcas.assess import rsc

        ds = session.calibration(case.dataset, config.assess.calibration_n)
        retriever = session.retriever(case.dataset, config.retrieval, model) if self.needs_retriever(config) else None
        return await rsc.probe_run(model, list(ds.items), retriever, config, task=ds.task)

    async def run_whole(self, session: KindSession, case: Case, config: RunConfig) -> tuple[int, int, list[str]]:
        from bcas.run.rsc_files import RSC_DIR, write_probe

        ds = session.calibration(case.dataset, config.assess.calibration_n)
        stem = f"{case.model.label}--{ds.name}--{config.config_id}--{ds.hash[:12]}"
        path = session.settings.run_dir / RSC_DIR / f"{stem}.json"
        if path.is_file():
            session.progress(f"[bcas] {case.id}: profile already at {path}")
            return 0, len(ds.items), []
        session.progress(f"[bcas] {case.id}: RSC probe on {len(ds.items)} calibration items")
        run = await self._probe(session, case, config, session.model(case.model))
        meta = {"dataset": ds.name, "dataset_hash": ds.hash, "model_label": case.model.label, "case_id": case.id}
        searches = len(run.item_ids) if self.needs_retriever(config) else 0
        write_probe(
            session.settings.run_dir,
            stem,
            run,
            meta,
            model_id=case.model.label,
            prices=session.prices,
            searches=searches,
        )
        empty = ["RSC probe produced no (normal, perturbed) score triples"] if run.profile.n_triples == 0 else []
        return len(ds.items), 0, empty


class MethodKind(ItemKind):
    """A method beside the BCAS loop (:data:`bcas.registry.METHODS`; :mod:`bcas.methods`): the run kind
    named after the method answers each item with it, on the loop's ledger and budgets."""

    def needs_retriever(self, config: RunConfig) -> bool:
        return True

    def shape(self, name: str, config: RunConfig, documents: float) -> CallShape | None:
        from bcas.methods.base import method_shape

        return method_shape(name, config)

    async def answer(self, ctx: KindContext, item: Item, config: RunConfig) -> Answer:
        from bcas.methods import run_method

        answer, _ = await run_method(ctx.case.entry.kind, item, ctx.model, ctx.retriever_for(item), config)
        return with_titles(ctx, answer)

    def finish(self, ctx: KindContext, item: Item, answer: Answer) -> Answer:
        with_recall: Answer = ctx.session.with_evidence_recall(ctx.case.dataset, item, answer)
        return with_recall

    def check(self, config: RunConfig, records: list[dict[str, Any]]) -> list[str]:
        """Searches within ``max_searches``; completion tokens within ``max_total_tokens`` (a method
        holds the answer's tokens back inside the budget, :mod:`bcas.methods.base`)."""
        return budget_problems(config, records)


BCAS = BcasKind()
MADARA = MadaraKind()
RSC = RscKind()
METHOD = MethodKind()


async def run_item_record(ctx: KindContext, item: Item, epoch: int = 0) -> Record:
    """Run ``item`` (its ``epoch``-th sample) under the case in ``ctx``; return its ``Record``.

    The kind answers (:meth:`ItemKind.answer`, then :meth:`RunKind.finish`); the record is
    built once, by :func:`bcas.records.build_record`, from that answer, the case's answer
    identity and the answer's grades under the dataset's scoring rule.
    A failure inside the pipeline never loses the item: it becomes a record with
    ``stop_reason="error"`` and the error text, which the case's invariants report.
    Epoch ``e`` samples with :func:`bcas.identity.epoch_seed` (the run's seed for epoch 0);
    the record keeps the configuration's own id and says its epoch and seed.
    """
    case = ctx.case
    kind = case.entry.kind
    extra: dict[str, object] = dict(ctx.extra_base)
    extra["model_id"] = getattr(ctx.model, "model_id", "")
    seed = epoch_seed(ctx.config.seed, epoch)
    sampling = ctx.config if seed == ctx.config.seed else replace(ctx.config, seed=seed)
    started = time.perf_counter()
    failed = False
    with tally() as cache:  # how many of the item's model calls the generation cache answered
        try:
            answer = await item_kind(kind).answer(ctx, item, sampling)
        except Exception as exc:  # noqa: BLE001 - any failure becomes an error record, never a lost item
            failed = True
            answer = Answer(
                prediction="",
                method=kind,
                stop_reason="error",
                error=f"{type(exc).__name__}: {exc}",
                latency_s=time.perf_counter() - started,
                extra={"traceback": traceback.format_exc(limit=6)},
            )
    if cache.lookups:
        extra["cache"] = {"lookups": cache.lookups, "hits": cache.hits}
    answer = run_kind(kind).finish(ctx, item, answer)
    correct, f1 = (
        (False, 0.0) if failed else score_prediction(answer.prediction, list(item.answers), ctx.dataset.scoring)
    )
    grades = Grades(bool(correct), float(f1))
    identity = AnswerIdentity(
        run_id=ctx.session.settings.run_dir.name,
        config_id=ctx.identity.config_id,
        config=ctx.config.to_dict(),
        dataset=ctx.dataset.name,
        dataset_hash=ctx.dataset.hash,
        item_id=item.id,
        question=item.question,
        answers=list(item.answers),
        model_fingerprint=ctx.identity.fingerprint,
        prompt_hash=ctx.identity.prompt_hash,
        epoch=epoch,
        seed=seed,
        model=case.model.label,
        label=case.entry.label,
    )
    return build_record(answer, identity, grades, extra=extra)


def budget_problems(config: RunConfig, records: list[dict[str, Any]]) -> list[str]:
    """Each record past its budget: more searches than ``max_searches``, more completion tokens
    (the agent's own, ``extra.agent_tokens_out``, else ``tokens_out``) than ``max_total_tokens``."""
    b = config.budget
    problems = []
    for r in records:
        if b.max_searches is not None and int(r.get("searches_used") or 0) > b.max_searches:
            problems.append(f"{r.get('item_id')}: searches_used {r.get('searches_used')} > {b.max_searches}")
        spent = int((r.get("extra") or {}).get("agent_tokens_out", r.get("tokens_out") or 0))
        if spent > b.max_total_tokens:
            problems.append(f"{r.get('item_id')}: completion tokens {spent} > budget {b.max_total_tokens}")
    return problems


def with_titles(ctx: KindContext, answer: Answer) -> Answer:
    """``answer`` with each search step's documents named by their titles (the report's trajectory)."""
    titles = ctx.session.titles(ctx.case.dataset)
    steps = [
        {**step, "titles": [titles.get(d, d) for d in step.get("docs") or []]} if step.get("docs") else step
        for step in answer.steps
    ]
    return answer.replace(steps=steps)


def answered_from_cache(record: dict[str, Any]) -> bool:
    """Whether the generation cache answered every model call of a record (``extra.cache``)."""
    cache = (record.get("extra") or {}).get("cache") or {}
    return bool(cache.get("lookups")) and cache.get("hits") == cache.get("lookups")


__all__ = [
    "BCAS",
    "MADARA",
    "METHOD",
    "RSC",
    "BcasKind",
    "ItemKind",
    "MadaraKind",
    "MethodKind",
    "RscKind",
    "RunKind",
    "WholeCaseKind",
    "answered_from_cache",
    "budget_problems",
    "item_kind",
    "run_item_record",
    "run_kind",
    "whole_case_kind",
    "with_titles",
]
