"""Which grid tables a record's configuration belongs to, and records grouped by grid x
model x dataset x configuration.  Grid membership is not part of an answer's identity: a
configuration that several grids share is one set of answers, shown in each grid's tables
and compared with that grid's own reference.

Group by identity, display by name: records are grouped by their model's full
fingerprint (never by a shortened form), and one model label with several fingerprints
gets one group per fingerprint, shown as its label followed by a short fingerprint that
:func:`unique_short` lengthens until no two fingerprints of the run share it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from bcas.grids import with_retrieval_models
from bcas.identity import short
from bcas.registry import mode_uses, per_item

GroupKey = tuple[str, str, str, str]  # (grid, model, dataset, label)


def group_key(rec: dict[str, Any]) -> GroupKey:
    """(grid, model, dataset, label) as the record says it was run (its first grid)."""
    extra = rec.get("extra") or {}
    return (
        str(extra.get("grid", "")),
        str(rec.get("model", "")),
        str(rec.get("dataset", "")),
        str(rec.get("label") or extra.get("label") or rec.get("config_id", "")),
    )


def _seed_of(rec: dict[str, Any]) -> int:
    cfg = rec.get("config") or {}
    return int(cfg.get("seed", 0) or 0) if isinstance(cfg, dict) else 0


def _models_of(rec: dict[str, Any]) -> tuple[str | None, str | None, int | None]:
    """The record's embedder, reranker and, where it re-ranks, candidate pool (chosen with
    --bcas-embedder / --bcas-reranker / --bcas-rerank-candidates)."""
    cfg = rec.get("config") or {}
    retrieval = cfg.get("retrieval") if isinstance(cfg, dict) else None
    if not isinstance(retrieval, dict):
        return None, None, None
    pool = retrieval.get("candidates") if mode_uses(str(retrieval.get("mode", "")), "rerank") else None
    return retrieval.get("embedder"), retrieval.get("reranker"), int(pool) if pool else None


def memberships(
    records: Iterable[dict[str, Any]], grids: Mapping[str, Any] | None = None, only: Iterable[str] | None = None
) -> list[tuple[str, bool, str, dict[str, Any]]]:
    """(grid, is_reference, label, record) for every grid a record's configuration belongs to.

    ``grids``: name -> :class:`bcas.grids.Grid` (the registered grids); a record
    belongs to each grid with an entry whose configuration, under the record's seed, has
    the record's ``config_id`` (retrieval models chosen for the run applied as the plugin
    applies them).  ``only``: grids to consider (default: the grids the records were run
    under).  A record no grid entry matches keeps the grid it was run under.
    """
    recs = list(records)
    wanted = set(only) if only is not None else set()
    wanted |= {str((r.get("extra") or {}).get("grid", "")) for r in recs}
    index: dict[tuple[int, str], list[tuple[str, bool, str]]] = defaultdict(list)
    if grids:
        for seed, (embedder, reranker, pool) in sorted({(_seed_of(r), _models_of(r)) for r in recs}, key=repr):
            for name, grid in grids.items():
                if name not in wanted:
                    continue
                for entry in grid.entries:
                    if not per_item(entry.kind):  # a probe writes a profile, never item records
                        continue
                    chosen = with_retrieval_models(entry, embedder, reranker, pool)
                    cid = replace(chosen.config, seed=seed).config_id
                    # the chosen entry's label: the grid's, then the run's departures from it (bcas/hs+r/rc10)
                    index[(seed, cid)].append((name, bool(entry.reference), chosen.label))
    out = []
    for rec in recs:
        found = index.get((_seed_of(rec), str(rec.get("config_id", ""))))
        if found:
            for name, ref, label in dict.fromkeys(found):
                out.append((name, ref, label, rec))
        else:
            extra = rec.get("extra") or {}
            out.append((str(extra.get("grid", "")), bool(extra.get("reference")), group_key(rec)[3], rec))
    return out


def unique_short(fingerprints: Iterable[str], n: int = 10) -> dict[str, str]:
    """Fingerprint -> a short display form, distinct for distinct fingerprints.

    The forms are :func:`bcas.identity.short` at the least width ``>= n`` at which no two
    of the fingerprints share one (``served:Qwen/Qwen3-8B`` and
    ``served:Qwen/Qwen3-8B#fp_x`` agree on their first 10 characters, so both are shown
    longer); fingerprints that no width tells apart (they differ before the last ``:``)
    are shown whole.
    """
    prints = sorted(set(fingerprints))
    widest = max((len(fp) for fp in prints), default=0)
    for width in range(n, widest + 1):
        forms = {fp: short(fp, width) for fp in prints}
        if len(set(forms.values())) == len(prints):
            return forms
    return {fp: fp for fp in prints}


def model_names(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(label, fingerprint) -> display name, one name per pair (grouping by name is grouping by identity).

    A label with one fingerprint is shown as the label; a label with several gets each
    fingerprint's :func:`unique_short` form appended (``no fingerprint`` for legacy records).
    """
    fps: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        fps[str(rec.get("model", ""))].add(str(rec.get("model_fingerprint") or ""))
    names: dict[tuple[str, str], str] = {}
    for label, prints in sorted(fps.items()):
        forms = unique_short(fp for fp in prints if fp)
        for fp in sorted(prints):
            names[(label, fp)] = label if len(prints) == 1 else f"{label} [{forms.get(fp, 'no fingerprint')}]"
    # Labels are free text: a label may read like another label's display name.  Keep the pairs apart.
    taken: dict[str, tuple[str, str]] = {}
    for pair, name in sorted(names.items()):
        while name in taken:
            name = f"{name} [{pair[1] or 'no fingerprint'}]"  # longer each time: ends within len(taken) steps
        taken[name] = pair
        names[pair] = name
    return names


Groups = dict[GroupKey, list[dict[str, Any]]]


def grouped(
    records: Iterable[dict[str, Any]], grids: Mapping[str, Any] | None = None, only: Iterable[str] | None = None
) -> tuple[Groups, dict[tuple[str, str, str], str]]:
    """Records by (grid, model display name, dataset, label), and each (grid, model, dataset)'s reference label.

    A label whose records hold answers of several identities (another configuration id
    under the same label, another prompt-template hash, another file under the dataset's
    name) gets one group per identity, its label followed by what differs
    (:func:`variant_labels`); epochs of one identity stay one group.
    """
    recs = list(records)
    names = model_names(recs)
    member = memberships(recs, grids, only)
    variants = variant_labels((grid, names[_model_pair(rec)], label, rec) for grid, _ref, label, rec in member)
    groups: Groups = defaultdict(list)
    references: dict[tuple[str, str, str], str] = {}
    for grid, ref, label, rec in member:
        shown = variants.get((grid, names[_model_pair(rec)], label, _answer_identity(rec)), label)
        key = (grid, names[_model_pair(rec)], str(rec.get("dataset", "")), shown)
        groups[key].append(rec)
        if ref:
            references[key[:3]] = shown
    return groups, references


def _model_pair(rec: dict[str, Any]) -> tuple[str, str]:
    return str(rec.get("model", "")), str(rec.get("model_fingerprint") or "")


_VARIANT_PARTS = (("config", 0), ("prompt", 1), ("data", 2))


def _answer_identity(rec: dict[str, Any]) -> tuple[str, str, str]:
    """What, besides the model, makes a record's answer another answer: configuration, prompts, data."""
    return str(rec.get("config_id", "")), str(rec.get("prompt_hash") or ""), str(rec.get("dataset_hash") or "")


def variant_labels(
    rows: Iterable[tuple[str, str, str, dict[str, Any]]],
) -> dict[tuple[str, str, str, tuple[str, str, str]], str]:
    """(grid, model, label, answer identity) -> the label to show, for labels holding several identities.

    Each differing part is named with the shortest hash prefix (at least 6 characters) that
    tells the label's identities apart: ``hs/s1/t16k [prompt 3fa2c1]``.
    """
    seen: dict[tuple[str, str, str, str], set[tuple[str, str, str]]] = defaultdict(set)
    for grid, model, label, rec in rows:
        seen[(grid, model, str(rec.get("dataset", "")), label)].add(_answer_identity(rec))
    out: dict[tuple[str, str, str, tuple[str, str, str]], str] = {}
    for (grid, model, _dataset, label), identities in seen.items():
        if len(identities) < 2:
            continue
        for identity in identities:
            parts = []
            for name, i in _VARIANT_PARTS:
                values = {other[i] for other in identities}
                if len(values) > 1:
                    width = next((w for w in range(6, 65) if len({v[:w] for v in values}) == len(values)), 64)
                    parts.append(f"{name} {identity[i][:width] or 'none'}")
            out[(grid, model, label, identity)] = f"{label} [{', '.join(parts)}]"
    return out
