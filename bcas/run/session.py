"""Running grid cases: shared session resources, concurrency and resume.

One ``BcasSession`` per process (a pytest process, or a :func:`bcas.evaluate` call)
holds everything cases share, opened once and closed once: loaded
datasets, one retriever per (collection, retrieval config), one model per model
spec, the judge, the price sheet and the results store.  Indexes come from the
disk cache, so xdist workers load what another worker built instead of
recomputing it.  Each case runs its item subset concurrently on one event loop,
skips items already recorded for the same config and dataset hash (resume), and
appends one record per item atomically.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bcas.llm import backend_meta
from bcas.records import Answer, reprice_record
from bcas.records.case_status import ERROR, INCOMPLETE, CaseStatus, append_case_status, case_verdict
from bcas.records.executor import run_items
from bcas.registry import mode_uses, per_item
from bcas.run.context import CaseContext, _teach
from bcas.run.cost import CaseStopped, CostGuard
from bcas.run.invariants import check_invariants
from bcas.run.observe import QUIET, Observer
from bcas.run.outcome import CaseOutcome, CasePlan
from bcas.run.pipelines import whole_case_kind
from bcas.run.plan import CaseIdentity, case_config, case_identity, model_identity
from bcas.run.settings import DEFAULT_LIMIT, Case, ModelSpec, Settings, judge_endpoint

if TYPE_CHECKING:  # typing only: the classes of the resources a session opens
    from bcas.assess.rsc.profile import RSCProfile
    from bcas.config import RetrievalConfig
    from bcas.corpus import Corpus, GoldEvidence
    from bcas.data import Dataset
    from bcas.grading.judge import LLMJudge
    from bcas.items import Item
    from bcas.llm.base import ChatModel
    from bcas.records import Record
    from bcas.retrieval.engine import EngineRetriever
    from bcas.retrieval.retriever import Retriever

    SearchIndex = Retriever | EngineRetriever  # what a case searches: a local index or a search engine

if TYPE_CHECKING:
    from bcas.gating.baseline import GateResult
    from bcas.gating.plan import GatePlan


class BcasSession:
    """What a process's cases share: datasets, retrievers, models, the judge, prices and the store.

    ``token`` names the session in the run folder (its manifest entry, gate and cost
    files); ``observer`` is told of notes and of each case's progress (the pytest front
    door's terminal display; nothing by default).
    """

    def __init__(
        self, settings: Settings, worker: str | None = None, *, token: str = "run", observer: Observer | None = None
    ) -> None:
        from bcas.records import ResultStore, load_price_sheet

        self.settings = settings
        self.worker = worker
        self.token = token
        self.observer = observer or QUIET
        self.loop = asyncio.new_event_loop()
        self.store = ResultStore(settings.run_dir, worker=worker)
        # case id -> (answer identity, dataset name) of the case running, for its line in cases.jsonl
        self._case_identities: dict[str, tuple[CaseIdentity, str]] = {}
        # Checked with the options (bcas.run.checks.resolve_prices); None: --bcas-prices none.
        self.prices = load_price_sheet(settings.prices, settings.price_sheet) if settings.prices is not None else None
        # (name, limit, seed, holdout) or ("calibration", name, n, seed)
        self._datasets: dict[tuple[str | int | None, ...], Dataset] = {}
        self._models: dict[ModelSpec, ChatModel] = {}
        self._retrievers: dict[tuple[object, ...], SearchIndex] = {}
        self._judge: LLMJudge | None = None
        self.rsc_profiles: dict[tuple[str, str], RSCProfile] = {}
        self._titles: dict[tuple[str, str], dict[str, str]] = {}
        self._corpus: Corpus | None = None
        self._gold: dict[str, dict[str, GoldEvidence]] = {}
        self._fingerprints: dict[ModelSpec | tuple[str, str], str] = {}
        self._grade_id: str | None = None
        self.cases_run = 0
        self.unpriced: set[tuple[str, str]] = set()
        self.gate_results: list[GateResult] = []  # this process's paired tests (bcas.gating.case)
        # The gate's plan, set by the front door: under --bcas-gate-sequential it orders and stops a case's items.
        self.gate_plan: GatePlan | None = None
        # Notes and warnings through the observer; --bcas-max-cost's guard (bcas.run.cost).
        self.progress = self.observer.message
        self.spend = CostGuard(settings.max_cost, settings.run_dir, token, self.progress)

    # -- shared resources ---------------------------------------------------------
    def dataset(self, name: str, limit: int | None, holdout: int = 0) -> Dataset:
        """The evaluated items; ``holdout`` > 0 draws them from outside the calibration split."""
        from bcas.data import load_evaluation

        key = (name, limit, self.settings.seed, holdout)
        if key not in self._datasets:
            ds = load_evaluation(name, limit=limit, seed=self.settings.seed, holdout=holdout)
            corpus = self.corpus()
            self._datasets[key] = ds.with_corpus(corpus.hash) if corpus is not None else ds
            for model in self._models.values():
                _teach(model, self._datasets[key])
        return self._datasets[key]

    def calibration(self, name: str, calibration_n: int) -> Dataset:
        """MADARA's calibration items (Algorithm 2's C), disjoint from every ``dataset(..., holdout)``."""
        from bcas.data import load_calibration

        key = ("calibration", name, calibration_n, self.settings.seed)
        if key not in self._datasets:
            ds = load_calibration(name, calibration_n, seed=self.settings.seed)
            corpus = self.corpus()
            self._datasets[key] = ds.with_corpus(corpus.hash) if corpus is not None else ds
            for model in self._models.values():
                _teach(model, self._datasets[key])
        return self._datasets[key]

    def corpus(self) -> Corpus | None:
        """The ``--bcas-corpus`` every item searches instead of its own documents, or None."""
        spec = getattr(self.settings, "corpus", None)
        if spec and self._corpus is None:
            from bcas.corpus import open_corpus

            self._corpus = open_corpus(spec)
        return self._corpus if spec else None

    def with_evidence_recall(self, name: str, item: Item, record: Answer) -> Answer:
        """``record`` (an answer) with its evidence metrics in ``extra`` (:mod:`bcas.metrics.trajectory`): the
        share of the item's gold documents reached, per search step for BCAS, kept documents for MADARA."""
        from bcas.corpus import gold_evidence
        from bcas.metrics.trajectory import bcas_trajectory, madara_evidence

        if name not in self._gold:
            self._gold[name] = gold_evidence(self.collection(name).items, self.corpus())
        gold = self._gold[name].get(item.id)
        if gold is None or record.error is not None:
            return record
        if record.method == "madara":
            found = madara_evidence(record.extra or {}, gold.groups)
        else:
            found = bcas_trajectory(record.steps, gold.groups, record.extra)
        extra = {**(record.extra or {}), **found, "gold_documents": len(gold.groups)}
        if gold.unmapped:
            extra.update(gold_unmapped=len(gold.unmapped), gold_unmapped_refs=list(gold.unmapped[:5]))
        return record.replace(extra=extra)

    def collection(self, name: str) -> Dataset:
        """The whole dataset collection (all items' documents), whatever the item subset."""
        return self.dataset(name, None)

    def titles(self, name: str) -> dict[str, str]:
        """Document id -> title over the whole collection (for the report's drill-down)."""
        key = ("titles", name)
        if key not in self._titles:
            # A corpus is never held in memory whole: its hits show their ids.
            items = () if self.corpus() is not None else self.collection(name).items
            self._titles[key] = {d.id: d.title for it in items for d in it.documents}
        return self._titles[key]

    def model(self, spec: ModelSpec) -> ChatModel:
        if spec not in self._models:
            from bcas.llm import load_model

            options: dict[str, str | None] = {}
            if backend_meta(spec.backend, "needs_base_url"):
                options["base_url"] = spec.base_url
                if spec.api_key_env:
                    options["api_key_env"] = spec.api_key_env
            # The generation cache keys on the fingerprint: another model behind the same name reuses nothing.
            self._models[spec] = load_model(
                spec.backend, spec.model, cache=self.settings.cache, identity=self.fingerprint(spec), **options
            )
            for ds in self._datasets.values():
                _teach(self._models[spec], ds)
        return self._models[spec]

    def retriever(self, dataset_name: str, rconfig: RetrievalConfig, model: ChatModel | None) -> SearchIndex:
        """The index over ``dataset_name``'s whole collection (or the corpus) that ``rconfig`` searches."""
        from bcas.retrieval import build_retriever
        from bcas.retrieval.progress import build_notes

        if rconfig.scope == "item" and self.corpus() is None:
            raise ValueError(
                f"bcas/run/session.py: retrieval scope 'item' on {dataset_name}: each item has its own index "
                "(item_retriever); this kind searches one index for all its items"
            )
        needs_model = mode_uses(rconfig.mode, "rerank") and rconfig.reranker == "llm"
        corpus = self.corpus()
        # One index over the corpus serves every dataset; without one, each dataset's documents.
        source = dataset_name if corpus is None else ("corpus", str(corpus.path))
        key = (source, rconfig, id(model) if needs_model else None)
        if key not in self._retrievers:
            engine = getattr(self.settings, "retriever", None)
            if engine and rconfig.mode == "bm25":  # --bcas-retriever: a search engine serves BM25
                from bcas.retrieval.engine import EngineRetriever

                shared = corpus if corpus is not None else self.collection(dataset_name).documents
                self._retrievers[key] = EngineRetriever.open(engine, shared, rconfig)
                return self._retrievers[key]
            if engine:
                self.progress(
                    f"[bcas] --bcas-retriever serves BM25 cases; mode {rconfig.mode} searches the local index"
                )
            docs = iter(corpus) if corpus is not None else self.collection(dataset_name).documents
            # A corpus is streamed into on-disk indexes; its content hash finds them again unread.
            # An embedding says what it embeds, about how long, then its progress (bcas.retrieval.progress).
            where = dataset_name if corpus is None else str(corpus.path)
            with build_notes(lambda line: self.progress(f"[bcas] {where}: {line}")):
                self._retrievers[key] = build_retriever(
                    docs,
                    rconfig,
                    model=model if needs_model else None,
                    source_hash=corpus.hash if corpus is not None else None,
                )
            speed = getattr(self._retrievers[key], "embed_speed", None)
            if speed:  # this build embedded the collection (a cached one reports nothing)
                self.progress(
                    f"[bcas] dense index of {dataset_name if corpus is None else corpus.path}: "
                    f"{speed['embedded_chunks']} chunks embedded in {speed['embed_seconds']:.1f} s "
                    f"({speed['chunks_per_s']} chunks/s)"
                )
        return self._retrievers[key]

    def item_retriever(
        self, dataset_name: str, item: Item, rconfig: RetrievalConfig, model: ChatModel | None
    ) -> SearchIndex:
        """The index ``item`` searches under ``rconfig.scope``: its own documents' for ``item``,
        the collection's (or the corpus's) otherwise.  Only the evaluated items are embedded."""
        from bcas.retrieval import build_retriever

        if rconfig.scope != "item" or self.corpus() is not None:
            return self.retriever(dataset_name, rconfig, model)
        needs_model = mode_uses(rconfig.mode, "rerank") and rconfig.reranker == "llm"
        key = (("item", dataset_name, item.id), rconfig, id(model) if needs_model else None)
        if key not in self._retrievers:
            # An item's few chunks are indexed in memory, not in the on-disk cache.
            self._retrievers[key] = build_retriever(
                item.documents, rconfig, model=model if needs_model else None, cache_dir=False, progress=False
            )
        return self._retrievers[key]

    def judge(self) -> LLMJudge | None:
        if self.settings.judge == "none":
            return None
        if self._judge is None:
            from bcas.grading import LLMJudge

            spec = self.settings.judge
            if spec == "same":
                judge_model = self.model(self.settings.models[0])
            else:
                from bcas.llm import load_model

                backend, _, name = spec.partition(":")
                options: dict[str, str | None] = {}
                if backend_meta(backend, "needs_base_url"):
                    options["base_url"], key_env = judge_endpoint(self.settings)  # as judge_fingerprint
                    if key_env:
                        options["api_key_env"] = key_env
                judge_model = load_model(
                    backend, name or None, cache=self.settings.cache, identity=self.judge_fingerprint(), **options
                )
            three_way = self.settings.judge_three_way
            self._judge = LLMJudge(judge_model, repeats=self.settings.judge_repeats, three_way=three_way)
        return self._judge

    # -- running a case ------------------------------------------------------------
    async def grade_and_price(self, record: Record) -> Record:
        """What the executor does to a produced record: the judge's grade (an answered item) and its cost."""
        grade = self._grader()
        if grade is not None and record.error is None and record.prediction:
            record = await grade(record)
        return reprice_record(record, self.prices) if self.prices is not None else record

    def _grader(self) -> Callable[[Record], Awaitable[Record]] | None:
        """The executor's ``grade`` step: the session's judge under its grade identity (or None)."""
        judge = self.judge()
        if judge is None:
            return None
        from bcas.grading import grade_record

        gid = self.grade_id()

        async def grade(record: Record) -> Record:
            graded: Record = await grade_record(record, judge, gid)
            return graded

        return grade

    def fingerprint(self, spec: ModelSpec) -> str:
        """The model's identity (bcas.llm.fingerprint), computed once per session."""
        if spec not in self._fingerprints:
            loaded = self._models.get(spec)
            self._fingerprints[spec] = model_identity(spec, verify=self.settings.preflight, loaded=loaded)
        return self._fingerprints[spec]

    def judge_fingerprint(self) -> str | None:
        """Identity of the session's judge model (None without a judge)."""
        spec = self.settings.judge
        if spec == "none":
            return None
        if spec == "same":
            return self.fingerprint(self.settings.models[0])
        if ("judge", spec) not in self._fingerprints:
            from bcas.llm.fingerprint import model_fingerprint

            backend, _, name = spec.partition(":")
            base, key_env = judge_endpoint(self.settings) if backend_meta(backend, "needs_base_url") else (None, None)
            verify = getattr(self.settings, "preflight", True)
            self._fingerprints[("judge", spec)] = model_fingerprint(
                backend, name or None, base_url=base, api_key_env=key_env, verify=verify
            )
        return self._fingerprints[("judge", spec)]

    def grade_id(self) -> str | None:
        """Identity of the session's grades: judge fingerprint + judge prompt hash + repeats."""
        if self._grade_id is None and self.settings.judge != "none":
            from bcas.identity import grade_id

            three_way = self.settings.judge_three_way
            self._grade_id = grade_id(self.judge_fingerprint() or "", self.settings.judge_repeats, three_way)
        return self._grade_id

    async def _grade_missing(self, case: Case, ds: Dataset, config_id: str, fingerprint: str, phash: str) -> None:
        """Grade recorded answers of this case that the session's judge has not graded yet."""
        gid = self.grade_id()
        judge = self.judge()
        if gid is None or judge is None:
            return
        from bcas.grading import grade_record

        stale = [r for r in self._case_records(ds, config_id, fingerprint, phash) if gid not in (r.grades or {})]
        for rec in stale:
            graded = await grade_record(rec, judge, gid)
            await asyncio.to_thread(self.store.append, graded)

    def _case_records(self, ds: Dataset, config_id: str, fingerprint: str, phash: str) -> list[Record]:
        """The store's records of one case's answer identity (every epoch) on ``ds``'s items."""
        ids = {it.id for it in ds.items}
        return [
            r
            for r in self.store.records()
            if (r.model_fingerprint, r.config_id, r.dataset_hash, r.prompt_hash)
            == (fingerprint, config_id, ds.hash, phash)
            and r.item_id in ids
        ]

    def _note_price(self, record: Record) -> None:
        """One warning per model per session when the price sheet cannot price it."""
        missing = (record.extra or {}).get("price_missing")
        if not isinstance(missing, dict):
            return
        key = (str(missing.get("model")), str(missing.get("sheet")))
        if key in self.unpriced:
            return
        self.unpriced.add(key)
        from bcas.records import missing_price_note

        self.progress(f"[bcas] warning: {missing_price_note(*key)}; its records get cost_usd null")

    def limit_for(self, case: Case) -> int | None:
        limit: int | None = self.settings.limit
        if limit is not None:
            return limit
        from bcas.grids import get_grid

        return get_grid(case.grid).limit or DEFAULT_LIMIT

    def run_case(self, case: Case) -> CaseOutcome:
        """Run ``case``; its status (passed, failed, incomplete, error) goes to the run folder's
        ``cases.jsonl`` (:mod:`bcas.records.case_status`), which every view of the run reads."""
        task = self.loop.create_task(self._run_case(case))
        try:
            outcome = self.loop.run_until_complete(task)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (bcas.harness.interrupt): stop the items in flight
            self._cancel_pending(task)
            self._case_ended(case, INCOMPLETE, "interrupted before the case finished; rerun to resume")
            raise
        except CaseStopped as stop:  # --bcas-max-cost cut it short
            self._case_ended(case, *case_verdict(str(stop), ()))
            raise
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            self._case_ended(case, ERROR, f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
            raise
        self._case_ended(case, *case_verdict(None, outcome.violations))
        return outcome

    def _case_ended(self, case: Case, status: str, reason: str) -> None:
        known = self._case_identities.pop(case.id, None)
        identity, dataset = (known[0], known[1]) if known is not None else (None, case.dataset)
        file_items, held_out = self.file_items(case) if known is not None else (0, 0)  # a case with items
        entry = CaseStatus(
            case_id=case.id,
            grid=case.grid,
            model=case.model.label,
            dataset=dataset,
            label=case.entry.label,
            status=status,
            reason=reason,
            fingerprint=identity.fingerprint if identity is not None else "",
            config_id=identity.config_id if identity is not None else "",
            session=self.token,
            file_items=file_items,
            held_out=held_out,
        )
        append_case_status(self.settings.run_dir, entry)

    def _cancel_pending(self, main: asyncio.Task[CaseOutcome]) -> None:
        """Cancel the loop's tasks and collect their ends, so none is reported lost at exit.

        Finished items are in the store already (one fsynced line each); those in flight are
        dropped and run again on resume.  A call running in a worker thread ends there.
        """
        seen = {main}
        for _ in range(5):  # the interrupt may surface once more from a task it was raised in
            pending = {t for t in asyncio.all_tasks(self.loop) if not t.done()}
            if not pending:
                break
            seen |= pending
            for t in pending:
                t.cancel()
            with contextlib.suppress(KeyboardInterrupt):
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        for t in seen:
            if t.done() and not t.cancelled():
                t.exception()  # retrieved: no "Task exception was never retrieved" traceback

    def file_items(self, case: Case) -> tuple[int, int]:
        """(items the case's dataset file holds, items held for calibration): for the n shown beside
        a case that evaluates fewer (``--bcas-limit``, a grid's calibration split).  A corpus-backed
        or unreadable file: (0, 0)."""
        from bcas.grids import get_grid

        try:
            whole = self.collection(case.dataset)
        except Exception:  # noqa: BLE001 - a count to show, never a reason to fail a case
            return 0, 0
        return len(whole.items), get_grid(case.grid).holdout_for(self.settings.calibration_n)

    def plan_case(self, case: Case) -> CasePlan:
        """What a case runs: its items (this shard's, not yet recorded), configuration and answer identity."""
        from bcas.grids import get_grid

        holdout = get_grid(case.grid).holdout_for(self.settings.calibration_n)
        ds = self.dataset(case.dataset, self.limit_for(case), holdout)
        # The session seed picks the item subset and seeds sampling, so it is part of the config id.
        if not per_item(case.entry.kind):  # a probe of calibration items, run whole (RunKind.run_whole)
            config = case_config(case, self.settings.seed, bool(self.settings.corpus))
            return CasePlan(ds, CaseIdentity(config, config.config_id, "", ""), [], [])
        shard = getattr(self.settings, "shard", None)
        if shard is not None:
            # Only this shard's items, drawn from the same subset: the dataset hash stays the unsharded run's.
            ds = replace(ds, items=tuple(it for it in ds.items if shard.owns(it.id)))
        done = self.store.done_keys(include_errors=False)
        identity = case_identity(case, self.settings.seed, self.fingerprint(case.model), bool(self.settings.corpus))
        fingerprint, config_id, phash = identity.fingerprint, identity.config_id, identity.prompt_hash
        wanted = [(it, e) for it in ds.items for e in range(self.settings.epochs)]
        todo = [(it, e) for it, e in wanted if (fingerprint, config_id, ds.hash, it.id, phash, e) not in done]
        return CasePlan(ds, identity, wanted, todo)

    async def _run_case(self, case: Case) -> CaseOutcome:
        t0 = time.perf_counter()
        plan = self.plan_case(case)
        ds, config = plan.dataset, plan.config
        shard = getattr(self.settings, "shard", None)
        if not per_item(case.entry.kind):
            if shard is not None and not shard.owns(case.id):  # a whole-case kind runs on one shard (bcas.shard)
                self.progress(f"[bcas] {case.id}: {case.entry.kind} case runs on another shard than {shard.label}")
                return CaseOutcome(case.id, [], 0, 0, time.perf_counter() - t0)
            self.spend.before_case(case, 1, 0)  # a probe's calls are not items: it only stops once the cap has
            ran, skipped_whole, violations = await whole_case_kind(case.entry.kind).run_whole(self, case, config)
            self.cases_run += 1 if ran else 0
            return CaseOutcome(case.id, [], ran, skipped_whole, time.perf_counter() - t0, violations)
        identity, epochs = plan.identity, self.settings.epochs
        self._case_identities[case.id] = (identity, ds.name)  # its status line names the answers (cases.jsonl)
        config_id, fingerprint, phash = identity.config_id, identity.fingerprint, identity.prompt_hash
        wanted, todo, skipped = plan.wanted, plan.todo, plan.skipped
        self.spend.before_case(case, len(wanted), skipped)  # --bcas-max-cost: skipped once the session stopped
        model = self.model(case.model)
        context = CaseContext(self, case, ds, plan.identity, model)
        await context.prepare([it for it, _ in todo])
        tracker = self.observer.start(case, len(wanted), skipped, self.prices is not None)
        gate = self._sequential_gate(case)
        seen: dict[tuple[str, int], dict[str, Any]] = {}
        if gate is not None:  # a seeded order; the test's state from the records already there (resume)
            from bcas.gating.sequential import sequence_order

            rank = {i: n for n, i in enumerate(sequence_order([it.id for it in ds.items], self.settings.seed, case.id))}
            todo = sorted(todo, key=lambda job: (rank[job[0].id], job[1]))
            seen = {(r.item_id, r.epoch): r.to_dict() for r in self._case_records(ds, config_id, fingerprint, phash)}

        def recorded(record: Record) -> None:
            self._note_price(record)
            tracker.item_done(record)

        def settle(key: Any, record: Record) -> None:  # in the item's slot: before the next item is admitted
            if gate is not None:
                seen[(record.item_id, record.epoch)] = record.to_dict()
            self.spend.settle(case, key, record)

        async def admit() -> Any:
            if gate is not None and gate(list(seen.values())):
                return None  # the sequential gate decided the case: its remaining items are not run
            return await self.spend.admit(case)

        prices = self.prices
        await run_items(
            todo,
            context.run_item,
            self.store,
            grade=self._grader(),
            price=(lambda r: reprice_record(r, prices)) if prices is not None else None,
            concurrency=self.settings.concurrency,
            admit=admit,  # None: the cost cap or the sequential gate stops new items
            settle=settle,
            on_record=recorded,
        )
        await self._grade_missing(case, ds, config_id, fingerprint, phash)
        self.cases_run += 1
        records = [r.to_dict() for r in self._case_records(ds, config_id, fingerprint, phash) if r.epoch < epochs]
        ran = len(todo)
        checked = ds
        if gate is not None and gate(records):  # items the gate spared are not missing
            recorded_ids = {str(r.get("item_id")) for r in records}
            checked = replace(ds, items=tuple(it for it in ds.items if it.id in recorded_ids))
            ran = sum(1 for it, e in todo if (it.id, e) in seen)
        outcome = CaseOutcome(case.id, records, ran, skipped, time.perf_counter() - t0)
        outcome.file_items, outcome.held_out = self.file_items(case)
        outcome.violations = check_invariants(case, checked, config, records, self.settings.allow_errors, epochs)
        stop = self.spend.finish_case(case, len(records), len(wanted))  # a case the cap cut short
        if stop is not None:
            outcome.stopped = str(stop)
            tracker.stopped()
        tracker.finish(outcome, case.grid, case.entry.label)  # end-of-case numbers: terminal and JUnit XML
        if stop is not None:
            raise stop  # skipped, resumable; run_case writes its status from the same message
        return outcome

    def _sequential_gate(self, case: Case) -> Callable[[list[dict[str, Any]]], bool] | None:
        """Under ``--bcas-gate-sequential``, for a gated case: whether its records so far decide it."""
        plan = self.gate_plan
        if plan is None or not plan.options.sequential or case.id not in plan.cases or not plan.cases[case.id].gated:
            return None
        from bcas.gating.sequential import case_decision

        def decided(records: list[dict[str, Any]]) -> bool:
            return case_decision(plan, case.id, records).decided

        return decided

    def close(self) -> None:
        if self.gate_results:
            from dataclasses import asdict

            path = self.settings.run_dir / f"gate.{self.token}.{self.worker or 'main'}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps([asdict(r) for r in self.gate_results], indent=1), encoding="utf-8")
            self.gate_results = []

        async def _close_all() -> None:
            for m in self._models.values():
                await m.aclose()
            if self._judge is not None and getattr(self._judge, "model", None) is not None:
                await self._judge.model.aclose()

        if not self.loop.is_closed():
            try:
                self.loop.run_until_complete(_close_all())
            finally:
                self.loop.close()
        self._models.clear()
