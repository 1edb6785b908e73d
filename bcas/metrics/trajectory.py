"""Trajectory metrics: what the searches of one answer found, and when (computed from a record).

The BCAS loop (BCAS §3.4) spends a search budget; accuracy says whether the answer
was right, these say how the budget was used.  Each function is pure: it takes the
document ids each search returned (in order) and the item's gold groups
(:class:`bcas.corpus.GoldEvidence`: one group of document ids per gold document, a
group found when any of its ids is returned).

- **evidence recall** (the retrieval recall of multi-hop QA, HotpotQA's supporting
  facts at document level, Yang et al. 2018 §5): gold groups found by any search /
  gold groups;
- **recall at each search step**: the same after searches 1..n (a non-decreasing curve);
- **first gold hit**: the 1-based number of the first search that found a gold group;
- **redundant searches**: a search whose query repeats an earlier one (the loop's
  ``repeated_query`` flag, or a normalised query whose token set has Jaccard
  similarity >= :data:`NEAR_DUPLICATE` with an earlier one) or whose top
  :data:`TOP_HITS` documents are those of an earlier search;
- **wasted searches**: searches after the last one that found a new gold group (all of
  them when none found any) -- budget spent without new evidence;
- **kept precision / recall** (MADARA §4: the documents a treatment keeps for
  generation): kept documents in some gold group / kept documents, and gold groups
  with a kept document / gold groups;
- **citation precision / recall** (ALCE, Gao et al. 2023, "Enabling Large Language
  Models to Generate Text with Citations", §2.2, here at document level against gold
  evidence instead of by NLI entailment): cited documents in some gold group / cited
  documents (an id of no passage the model was shown counts as cited and not gold),
  and gold groups with a cited document / gold groups (``AgentConfig.cite``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bcas.grading.metrics import normalize_answer

GoldGroups = Sequence[frozenset[str]]

NEAR_DUPLICATE = 0.8  # token-set Jaccard at or above which two queries are the same search
TOP_HITS = 3  # leading documents whose equality makes two searches the same search
_NOT_RUN = ("repeated_query", "search_error")


def evidence_recall(retrieved: Iterable[str], groups: GoldGroups) -> float | None:
    """Gold groups with a retrieved document / gold groups; ``None`` without gold.

    >>> evidence_recall(["a", "x"], [frozenset({"a"}), frozenset({"b", "c"})])
    0.5
    """
    if not groups:
        return None
    seen = set(retrieved)
    return sum(1 for group in groups if group & seen) / len(groups)


def recall_curve(searches: Sequence[Sequence[str]], groups: GoldGroups) -> list[float]:
    """Evidence recall after each search (cumulative); empty without gold.

    >>> recall_curve([["x"], ["a"], ["b"]], [frozenset({"a"}), frozenset({"b"})])
    [0.0, 0.5, 1.0]
    """
    if not groups:
        return []
    seen: set[str] = set()
    out = []
    for docs in searches:
        seen.update(docs)
        out.append(sum(1 for group in groups if group & seen) / len(groups))
    return out


def new_gold(searches: Sequence[Sequence[str]], groups: GoldGroups) -> list[int]:
    """How many gold groups each search found first (none of the earlier searches had)."""
    found: set[int] = set()
    out = []
    for docs in searches:
        hits = {j for j, group in enumerate(groups) if group & set(docs)} - found
        found |= hits
        out.append(len(hits))
    return out


def first_gold_hit(searches: Sequence[Sequence[str]], groups: GoldGroups) -> int | None:
    """1-based number of the first search that returned a gold document; ``None`` if none did.

    >>> first_gold_hit([["x"], ["a"]], [frozenset({"a"})])
    2
    """
    for n, count in enumerate(new_gold(searches, groups), start=1):
        if count:
            return n
    return None


def wasted_searches(searches: Sequence[Sequence[str]], groups: GoldGroups) -> int | None:
    """Searches after the last one that found a new gold group (all when none did); ``None`` without gold.

    >>> wasted_searches([["a"], ["a"], ["x"]], [frozenset({"a"})])
    2
    """
    if not groups:
        return None
    counts = new_gold(searches, groups)
    last = max((n for n, c in enumerate(counts, start=1) if c), default=0)
    return len(searches) - last


def query_tokens(query: str) -> frozenset[str]:
    """A query's SQuAD-normalised token set (the unit of near-duplicate detection)."""
    return frozenset(normalize_answer(query).split())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (1 for two empty sets)."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def redundant_searches(
    queries: Sequence[str],
    results: Sequence[Sequence[str]],
    flags: Sequence[str | None] = (),
    near: float = NEAR_DUPLICATE,
    top: int = TOP_HITS,
) -> int:
    """Searches that repeat an earlier one (module docstring); ``results`` may be empty for a search not run.

    >>> redundant_searches(["who is X", "Who is X?", "where is Y"], [["a"], ["b"], ["a"]])
    2
    """
    flags = list(flags) or [None] * len(queries)
    seen_queries: list[frozenset[str]] = []
    seen_tops: list[frozenset[str]] = []
    count = 0
    for query, docs, flag in zip(queries, results, flags, strict=True):
        tokens = query_tokens(query)
        head = frozenset(list(dict.fromkeys(docs))[:top])
        repeat = flag == "repeated_query" or any(jaccard(tokens, q) >= near for q in seen_queries)
        same_hits = bool(head) and head in seen_tops
        if repeat or same_hits:
            count += 1
        seen_queries.append(tokens)
        if head:
            seen_tops.append(head)
    return count


def kept_precision_recall(kept: Sequence[str], groups: GoldGroups) -> tuple[float | None, float | None]:
    """(precision, recall) of the documents kept for generation against gold (MADARA §4).

    Precision: kept documents in some gold group / kept documents (``None`` when none
    was kept); recall: gold groups with a kept document / gold groups (``None`` without gold).

    >>> kept_precision_recall(["a", "x"], [frozenset({"a"}), frozenset({"b"})])
    (0.5, 0.5)
    """
    if not groups:
        return None, None
    unique = list(dict.fromkeys(kept))
    gold_ids = set().union(*groups)
    precision = sum(1 for d in unique if d in gold_ids) / len(unique) if unique else None
    return precision, evidence_recall(unique, groups)


def citation_precision_recall(
    cited_docs: Sequence[str], groups: GoldGroups, unseen: int = 0
) -> tuple[float | None, float | None]:
    """(precision, recall) of the documents an answer cites against gold (ALCE §2.2, module docstring).

    ``unseen``: cited ids that name no passage shown (in the precision's denominator only).
    Precision is ``None`` when nothing was cited; both are ``None`` without gold.

    >>> citation_precision_recall(["a", "x"], [frozenset({"a"}), frozenset({"b"})], unseen=2)
    (0.25, 0.5)
    """
    if not groups:
        return None, None
    unique = list(dict.fromkeys(cited_docs))
    gold_ids = set().union(*groups)
    cited = len(unique) + max(0, unseen)
    precision = sum(1 for d in unique if d in gold_ids) / cited if cited else None
    return precision, evidence_recall(unique, groups)


def bcas_searches(steps: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The search steps of a BCAS record that ran a retrieval (counted searches, BCAS §3.3)."""
    return [s for s in steps if s.get("kind") == "search" and s.get("flag") not in _NOT_RUN]


def bcas_trajectory(
    steps: Sequence[Mapping[str, Any]], groups: GoldGroups, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The trajectory metrics of a BCAS record's steps (the module's list), as record fields.

    ``extra``: the record's ``extra``; when it holds the answer's citations (``cite``,
    ``cited_docs``, ``cite_unseen``: ``AgentConfig.cite``) the citation precision and
    recall are added.

    ``redundant_searches`` counts every search turn (a repeated query the loop did not
    re-run included); the others count the searches that ran.  ``gold_hits``: per search
    that ran, the gold document ids it returned (what the report's trajectory panel marks).
    """
    ran = bcas_searches(steps)
    results = [[str(d) for d in s.get("docs") or []] for s in ran]
    turns = [s for s in steps if s.get("kind") == "search" and s.get("flag") != "search_error"]
    out: dict[str, Any] = {
        "redundant_searches": redundant_searches(
            [str(s.get("query") or "") for s in turns],
            [[str(d) for d in s.get("docs") or []] for s in turns],
            [s.get("flag") for s in turns],
        ),
    }
    if groups:
        gold_ids = set().union(*groups)
        out.update(
            {
                "evidence_recall": evidence_recall([d for docs in results for d in docs], groups),
                "gold_hits": [sorted(set(docs) & gold_ids) for docs in results],
                "recall_at_step": recall_curve(results, groups),
                "first_gold_step": first_gold_hit(results, groups),
                "wasted_searches": wasted_searches(results, groups),
            }
        )
        if extra is not None and extra.get("cite") is not None:
            cited = [str(d) for d in extra.get("cited_docs") or []]
            precision, recall = citation_precision_recall(cited, groups, int(extra.get("cite_unseen") or 0))
            out.update(citation_precision=precision, citation_recall=recall)
    return out


def madara_evidence(extra: Mapping[str, Any], groups: GoldGroups) -> dict[str, Any]:
    """Evidence metrics of a MADARA record: recall of its retrieved documents and kept precision/recall."""
    if not groups:
        return {}
    retrieved = [str(d) for d in extra.get("doc_ids") or []]
    kept = [str(d) for d in extra.get("selected_docs") or extra.get("context_doc_ids") or []]
    precision, recall = kept_precision_recall(kept, groups)
    return {"evidence_recall": evidence_recall(retrieved, groups), "kept_precision": precision, "kept_recall": recall}


__all__ = [
    "NEAR_DUPLICATE",
    "TOP_HITS",
    "bcas_searches",
    "bcas_trajectory",
    "citation_precision_recall",
    "evidence_recall",
    "first_gold_hit",
    "jaccard",
    "kept_precision_recall",
    "madara_evidence",
    "new_gold",
    "query_tokens",
    "recall_curve",
    "redundant_searches",
    "wasted_searches",
]
