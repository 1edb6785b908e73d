"""Per-record values that are not pass/fail: what a comparison on a non-binary metric reads.

Each value metric maps a record (the dict of one ``records.jsonl`` line) to a number or
``None`` (not measurable for this record: no gold evidence, no price, no citations; the
record is then left out of that metric's pairing).  ``share`` metrics lie in [0, 1] and
are shown in percent; the others are amounts (dollars, tokens, searches).  Comparisons
pair them item by item with a paired bootstrap (:func:`bcas.report.paired.paired_bootstrap`);
pass/fail metrics stay in :data:`bcas.grading.outcomes.METRICS` (McNemar).

As everywhere in bcas, a record that ended in error or holds no answer is not left
out: its ``f1`` is 0.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from bcas.grading.outcomes import failed
from bcas.registry import Registry

Value = Callable[[dict[str, Any]], "float | None"]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _extra_value(name: str, rec: dict[str, Any]) -> float | None:
    """The number under ``name`` in the record's ``extra`` (None when absent or not a number)."""
    extra = rec.get("extra")
    return _number(extra.get(name)) if isinstance(extra, dict) else None


def _extra(name: str) -> Value:
    return partial(_extra_value, name)


def _f1(rec: dict[str, Any]) -> float | None:
    return 0.0 if failed(rec) else _number(rec.get("f1"))


def _tokens(rec: dict[str, Any]) -> float | None:
    return float(int(rec.get("tokens_in") or 0) + int(rec.get("tokens_out") or 0))


VALUES: Registry[Value] = Registry("value metric")
"""Non-binary per-record metrics: ``VALUES.register(name, fn, share=..., title=...)``."""
VALUES.register("f1", _f1, share=True, title="token F1 (SQuAD)")
VALUES.register("evidence_recall", _extra("evidence_recall"), share=True, title="evidence recall")
VALUES.register("citation_precision", _extra("citation_precision"), share=True, title="citation precision (ALCE)")
VALUES.register("citation_recall", _extra("citation_recall"), share=True, title="citation recall (ALCE)")
VALUES.register("kept_precision", _extra("kept_precision"), share=True, title="kept-document precision (MADARA)")
VALUES.register("kept_recall", _extra("kept_recall"), share=True, title="kept-document recall (MADARA)")
VALUES.register("cost_usd", lambda r: _number(r.get("cost_usd")), share=False, title="cost per answer (USD)")
VALUES.register("tokens", _tokens, share=False, title="tokens per answer (prompt + completion)")
VALUES.register("tokens_out", lambda r: _number(r.get("tokens_out")), share=False, title="completion tokens")
VALUES.register("searches_used", lambda r: _number(r.get("searches_used")), share=False, title="searches")
VALUES.register("redundant_searches", _extra("redundant_searches"), share=False, title="redundant searches")
VALUES.register("wasted_searches", _extra("wasted_searches"), share=False, title="searches after the last new gold")


def value(rec: dict[str, Any], metric: str) -> float | None:
    """The record's value in the registered value metric ``metric``."""
    return VALUES.get(metric)(rec)


def is_share(metric: str) -> bool:
    """Whether ``metric`` lies in [0, 1] (shown in percent)."""
    return bool(VALUES.meta(metric, "share", False))


__all__ = ["VALUES", "Value", "is_share", "value"]
