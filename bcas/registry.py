"""One small registry for every extension point: name -> factory, imported lazily.

bcas keeps one :class:`Registry` per kind of extension -- model backends, dataset
formats, retrieval modes, MADARA treatments, run kinds, metrics and grids.  An entry is
an object or a ``"package.module:attribute"`` string imported on first use (so choosing
the ``embedded`` backend never imports vllm), plus free-form metadata the harness reads
instead of testing names (a backend's default concurrency, its label, whether it needs a
base URL).  Asking for a name that is not there raises :class:`RegistryError` listing
what is.

Extensions register in one line, from anywhere that runs before they are used:

* a ``conftest.py`` beside the user's tests, or a module given to pytest with ``-p``;
* a third-party package, through the entry-point group ``bcas.plugins``: each entry
  point names a module (imported) or a callable (called with no arguments), loaded
  once, the first time any registry is asked for a name it does not hold or listed.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
ENTRY_POINT_GROUP = "bcas.plugins"
_plugins_loaded = False
_MISSING = object()


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` naming the known name closest to a mistyped one, or ``""``."""
    close = difflib.get_close_matches(given, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class RegistryError(LookupError):
    """An unknown name (the message lists the registered ones) or a clash."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0]) if self.args else ""


def load_plugins() -> list[str]:
    """Import the ``bcas.plugins`` entry points once; returns their names."""
    global _plugins_loaded
    if _plugins_loaded:
        return []
    _plugins_loaded = True
    from importlib.metadata import entry_points

    loaded = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        if callable(obj) and not isinstance(obj, type):
            obj()
        loaded.append(ep.name)
    return loaded


@dataclass
class _Entry(Generic[T]):
    target: T | str
    meta: dict[str, Any] = field(default_factory=dict)
    resolved: bool = False


class Registry(Generic[T]):
    """Named extensions of one kind (``kind`` names it in error messages)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, _Entry[T]] = {}

    # -- registering -------------------------------------------------------------------
    def register(self, name: str, target: T | str | None = None, *, replace: bool = True, **meta: Any) -> Any:
        """Register ``target`` (an object or ``"module:attr"``) as ``name``, with metadata.

        Without ``target`` it is a decorator: ``@registry.register("name")``.  ``replace``
        (default) lets a later registration win, as a user's conftest overriding a
        built-in should; ``replace=False`` refuses a taken name.
        """
        if target is None:

            def decorate(obj: T) -> T:
                self.register(name, obj, replace=replace, **meta)
                return obj

            return decorate
        if not name or not isinstance(name, str):
            raise RegistryError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if not replace and name in self._entries:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        lazy = isinstance(target, str) and ":" in target
        self._entries[name] = _Entry(target, dict(meta), resolved=not lazy)
        return target

    # Mapping-style access to the raw target (``monkeypatch.setitem`` swaps a target and
    # restores it; the entry's metadata stays).
    def __getitem__(self, name: str) -> T | str:
        return self._entry(name).target

    def __setitem__(self, name: str, target: T | str) -> None:
        meta = self._entries[name].meta if name in self._entries else {}
        self.register(name, target, **meta)

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def snapshot(self) -> dict[str, tuple[Any, dict[str, Any]]]:
        """Every entry with its metadata (for :meth:`restore`: tests that register temporarily)."""
        return {name: (e.target, dict(e.meta)) for name, e in self._entries.items()}

    def restore(self, snapshot: dict[str, tuple[Any, dict[str, Any]]]) -> None:
        """Exactly the entries of an earlier :meth:`snapshot` (later registrations dropped)."""
        self._entries.clear()
        for name, (target, meta) in snapshot.items():
            self.register(name, target, **meta)

    # -- reading -----------------------------------------------------------------------
    def _entry(self, name: str) -> _Entry[T]:
        entry = self._entries.get(name)
        if entry is None and load_plugins():
            entry = self._entries.get(name)
        if entry is None:
            names = self.names()
            raise RegistryError(
                f"unknown {self.kind} {name!r}{did_you_mean(str(name), names)}; registered: {', '.join(names) or '(none)'}"
            )
        return entry

    def get(self, name: str, default: Any = _MISSING) -> T:
        """The registered object (a lazy ``"module:attr"`` is imported now, once).

        ``default``: returned for an unknown name instead of raising (as ``dict.get``).
        """
        if default is not _MISSING and name not in self:
            return default  # type: ignore[no-any-return]
        entry = self._entry(name)
        if not entry.resolved:
            module_name, _, attr = str(entry.target).partition(":")
            try:
                obj = getattr(importlib.import_module(module_name), attr)
            except (ImportError, AttributeError) as exc:
                raise RegistryError(f"{self.kind} {name!r}: cannot load {entry.target}: {exc}") from exc
            entry.target, entry.resolved = obj, True
        return entry.target  # type: ignore[return-value]

    def meta(self, name: str, key: str | None = None, default: Any = None) -> Any:
        """An entry's metadata (all of it, or one ``key`` with ``default``)."""
        data = self._entry(name).meta
        return dict(data) if key is None else data.get(key, default)

    def names(self) -> list[str]:
        return sorted(self._entries)

    # Read-only mapping views (resolved objects), so a registry can stand where a mapping is read.
    def keys(self) -> list[str]:
        return self.names()

    def values(self) -> list[T]:
        return [self.get(name) for name in self.names()]

    def items(self) -> list[tuple[str, T]]:
        return [(name, self.get(name)) for name in self.names()]

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str) and name not in self._entries:
            load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def describe(self) -> str:
        """One line listing the names (for ``pytest --help``)."""
        return f"{self.kind}s: {', '.join(self.names())}"

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


# -- the registries ---------------------------------------------------------------------
#
# Declared here, at the bottom of the layers, so configuration can be validated against
# them without importing the packages that implement the entries (a lazy target is a
# string, not an import).  Built-in entries name their implementation; an extension
# registers its object directly.

TREATMENTS: Registry[Any] = Registry("treatment")
"""MADARA treatments (MADARA §4-§5): ``async (TreatmentContext) -> TreatmentOutcome``.

Metadata: ``routed_mode`` -- the router's name for it when Algorithm 2 can choose it;
``agent_tool`` -- it can post-process the BCAS ``search_database`` tool's hits;
``filters`` -- it chooses ``AssessConfig.k`` of the gathered documents, so a case whose
items average fewer than ``k`` documents cannot show what it does (No-Filter needs one).
"""
for _name, _fn, _meta in (
    ("nf", "_nf", {}),
    ("3-agent", "_three_agent", {"filters": True}),
    ("cot", "_cot", {"routed_mode": "CoT", "filters": True}),
    ("sda", "_sda", {"routed_mode": "SDA", "agent_tool": True, "filters": True}),
    ("sda-cot", "_sda_cot", {"filters": True}),
    ("rrf", "_rrf", {"filters": True}),
    ("atf", "_atf", {"routed_mode": "ATF", "agent_tool": True, "filters": True}),
    ("pde", "_pde", {"routed_mode": "PDE", "agent_tool": True, "filters": True}),
    ("pde-unif", "_pde_unif", {"filters": True}),
    ("pde-random", "_pde_random", {"filters": True}),
):
    TREATMENTS.register(_name, f"bcas.assess.pipeline:{_fn}", **_meta)

RETRIEVAL_MODES: Registry[Any] = Registry("retrieval mode")
"""Retrieval modes (BCAS §3.5): a first-stage function ``(retriever, query, n, exclude) ->
[(chunk position, score)]``.  Metadata: ``label`` (in case ids), ``lexical`` (needs BM25),
``dense`` (needs an embedder and a dense index), ``rerank`` (a reranker re-orders its
``candidates``)."""
RETRIEVAL_MODES.register("bm25", "bcas.retrieval.modes:bm25", label="bm25", lexical=True)
RETRIEVAL_MODES.register("dense", "bcas.retrieval.modes:dense", label="dense", dense=True)
RETRIEVAL_MODES.register("hybrid", "bcas.retrieval.modes:hybrid", label="hs", lexical=True, dense=True)
RETRIEVAL_MODES.register(
    "hybrid_rerank", "bcas.retrieval.modes:hybrid", label="hs+r", lexical=True, dense=True, rerank=True
)
# BM25 candidates re-ordered by a reranker (MADARA §6.4 reranker robustness, Appendix K cross-encoder).
RETRIEVAL_MODES.register("bm25_rerank", "bcas.retrieval.modes:bm25", label="bm25+r", lexical=True, rerank=True)


def mode_uses(mode: str, need: str) -> bool:
    """Whether retrieval ``mode`` declares ``need`` (``lexical``, ``dense`` or ``rerank``)."""
    return mode in RETRIEVAL_MODES and bool(RETRIEVAL_MODES.meta(mode, need))


RUN_KINDS: Registry[Any] = Registry("run kind")
"""How a grid entry's case runs (``GridEntry.kind``): a :class:`bcas.run.pipelines.ItemKind` or ``WholeCaseKind``.

Metadata, read without importing the kind: ``per_item`` -- it answers items one by one
into records (``False``: a probe run whole that writes a profile, such as MADARA §3's
RSC probe); ``prompts`` -- the prompt folders (relative to the package, or absolute)
whose templates shape its answers, hashed into the answer identity (:mod:`bcas.identity`);
``label`` -- a format string over ``config`` naming an unnamed grid entry; ``budgeted`` --
its conversation grows with ``config.budget`` (BCAS §3.3), which the session start
compares with each model's context window."""
RUN_KINDS.register(
    "bcas",
    "bcas.run.pipelines:BCAS",
    per_item=True,
    prompts=("agent/prompts", "retrieval/prompts"),
    label="{config.label}",
    budgeted=True,
)
RUN_KINDS.register(
    "madara",
    "bcas.run.pipelines:MADARA",
    per_item=True,
    prompts=("assess/prompts",),
    label="madara/{config.assess.method}",
)
RUN_KINDS.register("rsc", "bcas.run.pipelines:RSC", per_item=False, prompts=("assess/prompts",), label="rsc")


METHODS: Registry[Any] = Registry("method")
"""Methods beside the BCAS loop (:mod:`bcas.methods`): ``async (MethodRun) -> stop reason``.

Each is also a run kind of the same name (one :func:`bcas.methods.register_method` call
registers both), answered through :data:`bcas.run.pipelines.METHOD`.  Metadata: ``paper``
(the citation), ``searches`` (``"none"``, ``"one"`` or ``"budget"``: what it spends of
``max_searches``), ``shape`` (its call structure for the estimate, ``RunConfig -> bcas.callshape.CallShape``,
an object or a lazy ``"module:attr"``)."""
for _name, _paper, _searches in (
    ("closed_book", "FlashRAG naive generation (Jin et al. 2024): the model alone", "none"),
    ("retrieve_read", "Lewis et al. 2020, retrieval-augmented generation: retrieve once, then read", "one"),
    ("iter_retgen", "Shao et al. 2023, Iter-RetGen (Findings of EMNLP 2023)", "budget"),
    ("ircot", "Trivedi et al. 2023, IRCoT (ACL 2023)", "budget"),
    ("self_ask", "Press et al. 2023, Self-Ask (Findings of EMNLP 2023)", "budget"),
):
    METHODS.register(
        _name,
        f"bcas.methods.builtin:{_name}",
        paper=_paper,
        searches=_searches,
        shape=f"bcas.methods.builtin:{_name}_shape",
    )
    RUN_KINDS.register(
        _name,
        "bcas.run.pipelines:METHOD",
        per_item=True,
        prompts=("methods/prompts", f"methods/prompts/{_name}"),
        label=f"{_name}/{{config.label}}",
        budgeted=_searches == "budget",
    )


AGENTS: Registry[Any] = Registry("agent")
"""Built-in agents for the ``agent`` run kind (:mod:`bcas.run.bridged`): a callable
``(question, endpoints) -> answer`` a :class:`bcas.config.BridgedAgent` names by its
registered name instead of ``module:function``.  Metadata: ``paper`` (the citation)."""
AGENTS.register(
    "search_r1",
    "bcas.bridge.search_r1:search_r1",
    paper="Jin et al. 2025, Search-R1 (arXiv 2503.09516); github.com/PeterGriffinJin/Search-R1",
)
RUN_KINDS.register(
    "agent",
    "bcas.run.bridged:AGENT",
    per_item=True,
    prompts=("bridge/prompts",),
    label="agent/{config.bridged.label}/{config.label}",
    budgeted=False,
)


def per_item(kind: str) -> bool:
    """Whether run kind ``kind`` writes one record per item (an unknown kind: yes)."""
    return kind not in RUN_KINDS or bool(RUN_KINDS.meta(kind, "per_item", True))


ROUTED_METHOD = "madara"
"""The assessment method that is no treatment but routes to one (MADARA Algorithm 2)."""


def assess_methods() -> tuple[str, ...]:
    """Every ``AssessConfig.method``: the registered treatments and the routed pipeline."""
    return (*TREATMENTS.names(), ROUTED_METHOD)


def agent_tool_methods() -> tuple[str, ...]:
    """Every ``AgentConfig.assess``: ``none`` and the treatments usable in the search tool."""
    return ("none", *(n for n in TREATMENTS.names() if TREATMENTS.meta(n, "agent_tool")))


def documents_needed(method: str, k: int) -> int:
    """Documents per item a MADARA ``method`` needs to do what it is for: ``k`` for a treatment
    that chooses ``k`` of them (and for the routed pipeline, whose routes all choose), else one."""
    if method == ROUTED_METHOD or (method in TREATMENTS and TREATMENTS.meta(method, "filters")):
        return k
    return 1


def routed_modes() -> dict[str, str]:
    """Router mode -> treatment name, for the treatments Algorithm 2 can choose."""
    return {TREATMENTS.meta(n, "routed_mode"): n for n in TREATMENTS.names() if TREATMENTS.meta(n, "routed_mode")}


__all__ = [
    "AGENTS",
    "ENTRY_POINT_GROUP",
    "METHODS",
    "RETRIEVAL_MODES",
    "ROUTED_METHOD",
    "RUN_KINDS",
    "TREATMENTS",
    "did_you_mean",
    "documents_needed",
    "Registry",
    "RegistryError",
    "agent_tool_methods",
    "assess_methods",
    "load_plugins",
    "mode_uses",
    "per_item",
    "routed_modes",
]
