"""The grid table types: ``Grid``, ``GridEntry``, the ``GRIDS`` registry and the helpers that
derive a run's grids (retrieval models, Holm scope).  See :mod:`bcas.grids`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bcas.config import RunConfig
from bcas.grading.outcomes import JUDGE, resolve
from bcas.registry import METHODS, RUN_KINDS, Registry, RegistryError, mode_uses

HOLM_SCOPES = ("cell", "grid")
"""``grid``: one Holm family per declared family, pooled over the grid's models and datasets
(MADARA Table 14 corrects across models and benchmarks); ``cell``: per model × dataset."""


@dataclass(frozen=True)
class GridEntry:
    """One configuration of a grid.

    ``kind`` names the run kind (:data:`bcas.registry.RUN_KINDS`: BCAS agent loop,
    MADARA treatment, RSC probe, or a registered one);
    ``reference`` marks the configuration the grid's paired comparisons use;
    ``requires`` lists requirement markers (``gpu``, ``slow``, ``judge``, ``vllm``);
    ``compare``: (label of another entry, Holm family) pairs this entry is tested
    against; empty means the grid's reference in the grid's one family.
    """

    kind: str
    config: RunConfig
    reference: bool = False
    requires: tuple[str, ...] = ()
    name: str = ""
    datasets: tuple[str, ...] = ()
    compare: tuple[tuple[str, str], ...] = ()
    # The run's options that depart from the grid's own value (``rc10``: 10 rerank candidates),
    # appended to the label by with_retrieval_models / with_calibration_n: a case's label shows
    # them.  Not part of the configuration id beyond the fields they change.
    departures: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A method's entry names its method in the configuration (RunConfig.method), so its answers
        # never share a configuration id with the loop's, or another method's, at the same budget.
        if self.kind in METHODS and self.config.method != self.kind:
            object.__setattr__(self, "config", replace(self.config, method=self.kind))

    @property
    def label(self) -> str:
        """The entry's name (or its run kind's label of its configuration), then each departure
        from the grid's own value: ``bcas/hs+r/rc10``."""
        if self.name:
            base = self.name
        else:
            template = (
                RUN_KINDS.meta(self.kind, "label", "{config.label}") if self.kind in RUN_KINDS else "{config.label}"
            )
            base = str(template).format(config=self.config)
        return "/".join((base, *self.departures))


@dataclass(frozen=True)
class Grid:
    """A named table of configurations and the datasets it runs on.

    An entry with its own ``datasets`` runs only on those (of the grid's datasets).
    """

    name: str
    entries: tuple[GridEntry, ...]
    datasets: tuple[str, ...]
    limit: int | None = None
    description: str = ""
    kind_labels: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    primary_metric: str = JUDGE
    holm_scope: str = "grid"
    holdout: int = 0
    paper_retrieval: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    paper: str = ""

    def holdout_for(self, calibration_n: int | None) -> int:
        """Items held out of evaluation for calibration, under ``--bcas-calibration-n``.

        A grid that holds out its calibration split (MADARA Algorithm 2: C disjoint from
        the evaluated items) holds out the ``calibration_n`` items the run calibrates on
        when one is given, so a 100-item file with ``calibration_n=10`` evaluates the
        other 90 instead of stopping for want of items past the default 100.
        """
        return calibration_n if self.holdout and calibration_n is not None else self.holdout

    def __post_init__(self) -> None:
        if self.holm_scope not in HOLM_SCOPES:
            raise ValueError(f"grid {self.name!r}: holm_scope must be one of {HOLM_SCOPES}, got {self.holm_scope!r}")
        for entry in self.entries:
            if entry.kind not in RUN_KINDS:
                raise RegistryError(
                    f"grid {self.name!r}: unknown run kind {entry.kind!r}; registered: {', '.join(RUN_KINDS.names())}"
                )
        labels = [e.label for e in self.entries]
        for entry in self.entries:
            for other, _family in entry.compare:
                if other not in labels or other == entry.label:
                    raise ValueError(
                        f"grid {self.name!r}: entry {entry.label!r} is compared with {other!r}, "
                        f"which is not another entry of the grid ({labels})"
                    )

    def metric(self, judge: bool | None = None, records: Iterable[dict[str, Any]] = ()) -> str:
        """The primary metric as used (:func:`bcas.grading.outcomes.resolve`)."""
        return resolve(self.primary_metric, records, judge)

    def metric_note(self, metric: str) -> str | None:
        """What the summary must say when a paper grid graded by a judge (BCAS §3.6) ran without one."""
        if self.paper and self.primary_metric == JUDGE and metric != "judge_verdict":
            return "primary metric: SQuAD EM (proxy; the paper uses an LLM judge)"
        return None

    def comparisons(self, label: str) -> list[tuple[str, str]]:
        """(label compared with, Holm family) of the entry ``label``; [] for the reference or an unknown label."""
        entry = next((e for e in self.entries if e.label == label), None)
        if entry is None:
            ref = self.reference
            return [] if ref is None or ref.label == label else [(ref.label, "")]
        if entry.compare:
            return list(entry.compare)
        ref = self.reference
        return [] if ref is None or ref is entry else [(ref.label, "")]

    def retrieval_notes(self, configs: Iterable[dict[str, Any]]) -> list[str]:
        """Which retrieval models the run used where the paper names one, and where they differ."""
        notes = []
        for role, paper in self.paper_retrieval.items():
            used = sorted({str((c.get("retrieval") or {}).get(role)) for c in configs if _uses(c, role)})
            if not used:
                continue
            differs = [u for u in used if u != paper]
            tail = f"; differs from the paper's {paper}" if differs else " (the paper's)"
            notes.append(f"{self.name}: {role} {', '.join(used)}{tail}")
        return notes

    def cases(self, datasets: tuple[str, ...] | None = None) -> list[tuple[str, GridEntry]]:
        """(dataset, entry) pairs of this grid, in table order, dataset-major."""
        chosen = datasets or self.datasets
        out = []
        for ds in chosen:
            for entry in self.entries:
                if entry.datasets and ds not in entry.datasets and datasets is None:
                    continue
                out.append((ds, entry))
        return out

    @property
    def reference(self) -> GridEntry | None:
        for entry in self.entries:
            if entry.reference:
                return entry
        return None


def with_holm_scope(grids: Mapping[str, Grid], scope: str | None) -> dict[str, Grid]:
    """``grids`` with every grid's Holm scope set to ``scope`` (``None``: each grid's own)."""
    if scope is None:
        return dict(grids)
    if scope not in HOLM_SCOPES:
        raise ValueError(f"holm scope must be one of {HOLM_SCOPES}, got {scope!r}")
    return {name: replace(grid, holm_scope=scope) for name, grid in grids.items()}


def _uses(config: dict[str, Any], role: str) -> bool:
    """Does a run configuration (as a dict) use its retrieval ``role`` (embedder, reranker)?"""
    mode = str((config.get("retrieval") or {}).get("mode", ""))
    return mode_uses(mode, "dense") if role == "embedder" else mode_uses(mode, "rerank")


def with_retrieval_models(
    entry: GridEntry, embedder: str | None = None, reranker: str | None = None, candidates: int | None = None
) -> GridEntry:
    """``entry`` with the chosen embedder / reranker where its retrieval mode uses them, and
    ``candidates`` (``--bcas-rerank-candidates``) as the pool its reranker re-scores.

    An entry whose mode uses neither (BM25, the MADARA grids) is returned unchanged, so
    its configuration id, and the answers recorded under it, stay the same.
    """
    r = entry.config.retrieval
    changes: dict[str, Any] = {}
    if embedder and mode_uses(r.mode, "dense") and r.embedder != embedder:
        changes["embedder"] = embedder
    if reranker and mode_uses(r.mode, "rerank") and r.reranker != reranker:
        changes["reranker"] = reranker
    if candidates and mode_uses(r.mode, "rerank") and r.candidates != candidates:
        changes["candidates"] = candidates
    if not changes:
        return entry
    marks = tuple(_departure(name, value) for name, value in changes.items())
    return replace(
        entry, config=replace(entry.config, retrieval=replace(r, **changes)), departures=entry.departures + marks
    )


# How a label shows an option that departs from the grid's own value (GridEntry.departures).
_DEPARTURE_MARKS = {"candidates": "rc{}", "embedder": "emb-{}", "reranker": "rr-{}", "calibration_n": "cal{}"}
_DEPARTURE = re.compile(r"/(?:rc\d+|cal\d+|emb-[^/]+|rr-[^/]+)$")


def _departure(name: str, value: Any) -> str:
    """``rc10`` for 10 rerank candidates, ``emb-bge-small-en-v1.5`` for an embedder (its last path part)."""
    return _DEPARTURE_MARKS[name].format(str(value).rstrip("/").rsplit("/", 1)[-1])


def base_label(label: str) -> str:
    """A case label without its departures from the grid's values (``bcas/hs+r/rc10`` -> ``bcas/hs+r``):
    the grid entry it was run from, so runs that differ in such an option are paired and compared."""
    while (found := _DEPARTURE.search(label)) is not None:
        label = label[: found.start()]
    return label


GRIDS: Registry[Grid] = Registry("grid")


def register_grid(grid: Grid) -> Grid:
    """Add a grid by name (one registration, no dispatch code to edit)."""
    GRIDS.register(grid.name, grid)
    return grid


def get_grid(name: str) -> Grid:
    try:
        return GRIDS.get(name)
    except RegistryError:
        raise KeyError(f"unknown grid {name!r}; available: {', '.join(sorted(GRIDS))}") from None


def with_calibration_n(entry: GridEntry, calibration_n: int) -> GridEntry:
    """``entry`` probing ``calibration_n`` calibration items (MADARA Algorithm 2's C) instead of its own number.

    For the entries that use calibration items (the RSC probe, the routed pipeline;
    the harness asks the run kind); the number is part of the configuration id, so a
    quick run's profiles and answers never stand in for a full run's.
    """
    if entry.config.assess.calibration_n == calibration_n:
        return entry
    assess = replace(entry.config.assess, calibration_n=calibration_n)
    mark = _departure("calibration_n", calibration_n)
    return replace(entry, config=replace(entry.config, assess=assess), departures=(*entry.departures, mark))


def _flat(entry: GridEntry) -> dict[str, Any]:
    """An entry's configuration as ``{"budget.max_searches": 3, ...}`` (seed left out: the session sets it)."""
    out: dict[str, Any] = {"datasets": entry.datasets}
    for part, fields in entry.config.to_dict().items():
        if isinstance(fields, dict):
            out.update({f"{part}.{name}": value for name, value in fields.items()})
    return out


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _numeric(values: list[Any]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present)


def axis_extremes(grid: Grid) -> tuple[GridEntry, ...]:
    """The entries that reach both ends of every axis ``grid`` sweeps, in table order.

    Entries are taken per run kind; an axis is a configuration field (or the entry's own
    datasets) whose value differs between entries of one kind.  A numeric axis (a budget,
    a size; ``None`` means unlimited, so it is the largest) gives its first entry at the
    smallest and at the largest value; any other axis (planning, reflection, retrieval
    mode, treatment) its first entry at every value; each kind gives its first entry.
    For the BCAS paper grids: the smallest and largest search budget (unlimited) and token
    budget, planning and reflection on and off, every retrieval mode; for MADARA's, every
    treatment.  A pure function of the table, so a grid added later is covered the same way.
    """
    chosen: set[int] = set()
    by_kind: dict[str, list[int]] = {}
    for i, entry in enumerate(grid.entries):
        by_kind.setdefault(entry.kind, []).append(i)
    for rows in by_kind.values():
        chosen.add(rows[0])
        flat = [_flat(grid.entries[i]) for i in rows]
        for name in sorted(set().union(*flat)):
            values = [f.get(name) for f in flat]
            if len({_key(v) for v in values}) < 2:
                continue
            if _numeric(values):
                ranks = [math.inf if v is None else v for v in values]
                chosen.update(rows[ranks.index(end)] for end in (min(ranks), max(ranks)))
            else:
                first: dict[str, int] = {}
                for i, value in zip(rows, values, strict=True):
                    first.setdefault(_key(value), i)
                chosen.update(first.values())
    return tuple(grid.entries[i] for i in sorted(chosen))


def extreme_cases(grid: Grid, prefer: tuple[str, ...] = ()) -> list[tuple[str, GridEntry]]:
    """(dataset, entry) of each of :func:`axis_extremes`, on one dataset each.

    The dataset is the first of ``prefer`` the entry runs on by default, else its first
    (an entry with its own ``datasets`` runs only on those of the grid's).
    """
    out = []
    for entry in axis_extremes(grid):
        runs_on = [ds for ds, e in grid.cases() if e is entry]
        if runs_on:
            out.append((next((ds for ds in prefer if ds in runs_on), runs_on[0]), entry))
    return out
