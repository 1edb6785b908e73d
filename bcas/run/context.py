"""Per-case state shared by a case's items: the retriever, the RSC profile, the record's
identity fields; and the step that teaches a ``mock:gold`` model the gold answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bcas.config import RunConfig
from bcas.llm import backend_meta
from bcas.records import Record
from bcas.run.pipelines import run_item_record, run_kind
from bcas.run.plan import CaseIdentity
from bcas.run.rsc_files import write_probe
from bcas.run.settings import Case

if TYPE_CHECKING:  # typing only
    from bcas.assess.rsc.profile import RSCProfile
    from bcas.data import Dataset
    from bcas.items import Item
    from bcas.llm.base import ChatModel
    from bcas.run.pipelines import KindSession, SearchIndex


def _teach(model: ChatModel, dataset: Dataset) -> None:
    """Give a model that asks for them (the ``mock`` backend's ``gold``) the gold answers."""
    register = getattr(model, "register_items", None)
    if callable(register):
        register(dataset.items)


class CaseContext:
    """Per-case state shared by its items (retriever, RSC profile)."""

    def __init__(
        self, session: KindSession, case: Case, dataset: Dataset, identity: CaseIdentity, model: ChatModel
    ) -> None:
        self.session = session
        self.case = case
        self.dataset = dataset
        self.identity = identity
        self.config: RunConfig = identity.config
        self.model = model
        self.retriever: SearchIndex | None = None
        self.profile: RSCProfile | None = None  # the routed pipeline's RSC profile (MadaraKind.prepare)
        self.extra_base: dict[str, object] = {
            "grid": case.grid,
            "kind": case.entry.kind,
            "reference": case.entry.reference,
            "case_id": case.id,
            "worker": session.worker,
        }
        if backend_meta(case.model.backend, "identity") == "mock":  # a test double's answers say so in every record
            self.extra_base["mock"] = True

    async def prepare(self, todo: list[Item]) -> None:
        kind = run_kind(self.case.entry.kind)
        # Scope "item": each item's own index, opened when the item is answered (retriever_for).
        if kind.needs_retriever(self.config) and todo and self.config.retrieval.scope != "item":
            self.retriever = self.session.retriever(self.case.dataset, self.config.retrieval, self.model)
            engine = getattr(self.retriever, "engine_url", None)
            if engine:  # records say which engine answered their searches
                self.extra_base["retriever"] = engine
        await kind.prepare(self, todo)

    def retriever_for(self, item: Item) -> SearchIndex | None:
        """The index ``item`` searches: the case's, or under scope ``item`` the item's own."""
        if self.retriever is not None or self.config.retrieval.scope != "item":
            return self.retriever
        if not run_kind(self.case.entry.kind).needs_retriever(self.config):
            return None
        return self.session.item_retriever(self.case.dataset, item, self.config.retrieval, self.model)

    async def session_rsc_profile(self) -> RSCProfile:
        """The routed pipeline's RSC profile, probed once a session per model and dataset
        (Algorithm 2, lines 1-6); the probe's results, calls and cost go to ``rsc/``."""
        from bcas.assess import rsc as rsc_mod

        key = (self.case.model.label, self.case.dataset)
        cached = self.session.rsc_profiles.get(key)
        if cached is None:
            calib = self.session.calibration(self.case.dataset, self.config.assess.calibration_n)
            retriever = self.retriever
            if retriever is None and run_kind(self.case.entry.kind).needs_retriever(self.config):
                # Scope "item": the probe searches one index for all its items (the corpus's; otherwise refused).
                retriever = self.session.retriever(self.case.dataset, self.config.retrieval, self.model)
            run = await rsc_mod.probe_run(self.model, list(calib.items), retriever, self.config, task=calib.task)
            write_probe(
                self.session.settings.run_dir,
                f"{self.case.model.label}--{calib.name}--{self.config.config_id}--{calib.hash[:12]}",
                run,
                {
                    "dataset": calib.name,
                    "dataset_hash": calib.hash,
                    "dataset_evaluated": self.dataset.name,
                    "model_label": self.case.model.label,
                    "case_id": self.case.id,
                    "routed": True,
                },
                model_id=self.case.model.label,
                prices=self.session.prices,
                searches=len(run.item_ids) if self.config.assess.doc_source == "retrieval" else 0,
            )
            cached = run.profile
            self.session.rsc_profiles[key] = cached
        return cached

    async def run_item(self, item: Item, epoch: int = 0) -> Record:
        return await run_item_record(self, item, epoch)
