"""Metrics beyond accuracy: evidence and trajectory, reliability over tries, cost of a correct answer.

Pure functions over plain numbers and record dictionaries, each citing its source:
``trajectory`` (evidence recall, recall per search step, first gold hit, redundant and
wasted searches; MADARA kept-document precision/recall), ``reliability`` (pass@k of
Chen et al. 2021, pass^k of τ-bench, answer flips), ``cost`` (cost-of-pass of Erol et
al. 2025, tokens-of-pass) and ``columns`` (a summary row's columns from its records).
Abstention (SimpleQA's not attempted) is graded in :mod:`bcas.grading.abstention` and
the pass/fail metrics are registered in :data:`bcas.grading.outcomes.METRICS`.
"""

from bcas.metrics.columns import MetricColumns, metric_columns, three_way_counts
from bcas.metrics.cost import cost_of_pass, cost_of_pass_interval
from bcas.metrics.reliability import flip_share, over_items, pass_at_k, pass_hat_k
from bcas.metrics.trajectory import (
    bcas_trajectory,
    evidence_recall,
    first_gold_hit,
    kept_precision_recall,
    madara_evidence,
    recall_curve,
    redundant_searches,
    wasted_searches,
)

__all__ = [
    "MetricColumns",
    "bcas_trajectory",
    "cost_of_pass",
    "cost_of_pass_interval",
    "evidence_recall",
    "first_gold_hit",
    "flip_share",
    "kept_precision_recall",
    "madara_evidence",
    "metric_columns",
    "over_items",
    "pass_at_k",
    "pass_hat_k",
    "recall_curve",
    "redundant_searches",
    "three_way_counts",
    "wasted_searches",
]
