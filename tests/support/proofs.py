"""Helpers shared by the proof tests (tests/test_proofs_*.py): a tiny grid project
for the bcas plugin, and record comparison that ignores only timing fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bcas.testing.project import grid_project, read_records

TESTS_DIR = Path(__file__).resolve().parents[1]

# A tiny grid on HotpotQA: short turns, two small chunks per search, so a real
# 135M model runs an item in a few calls with prompts well under 2K tokens.
# ``configs``: (max_searches, planning) per grid entry; the first is the reference.
CONFTEST = """
import sys
sys.path.insert(0, {tests_dir!r})
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.grids import Grid, GridEntry, register_grid


def _cfg(searches, plan):
    return RunConfig(
        budget=Budget(max_searches=searches, max_total_tokens={tokens}, per_turn_max_tokens={per_turn},
                      forced_answer_tokens=32),
        retrieval=RetrievalConfig(mode="bm25", k=2, chunk_tokens=96, chunk_overlap=16),
        agent=AgentConfig(planning=plan),
    )


register_grid(Grid({grid!r}, tuple(GridEntry("bcas", _cfg(s, p), reference=(i == 0))
                                   for i, (s, p) in enumerate({configs!r})),
                   datasets=({dataset!r},), limit={limit}))
"""


def conftest_text(
    grid: str = "proof",
    configs: tuple[tuple[int, bool], ...] = ((1, False), (1, True)),
    dataset: str = "hotpotqa",
    limit: int = 3,
    tokens: int = 400,
    per_turn: int = 40,
) -> str:
    return CONFTEST.format(
        tests_dir=str(TESTS_DIR),
        grid=grid,
        configs=tuple(configs),
        dataset=dataset,
        limit=limit,
        tokens=tokens,
        per_turn=per_turn,
    )


def write_project(folder: Path, extra: str = "", **grid: Any) -> Path:
    """A pytest project in ``folder``: conftest registering the grid (then ``extra``
    conftest lines), the one-line grid test file, an empty ``pytest.ini``."""
    return grid_project(folder, conftest_text(**grid) + extra, files={"pytest.ini": "[pytest]\n"})


# Every line of ``records.jsonl`` parsed (no de-duplication: duplicates must show).
raw_records = read_records


STEP_TIMING = ("latency_s", "cached")
RECORD_FIELDS = (
    "model", "dataset", "dataset_hash", "config_id", "item_id", "question", "answers", "prediction",
    "correct_em", "f1", "searches_used", "tokens_in", "tokens_out", "llm_calls", "early_stop",
    "stop_reason", "error", "label",
)  # fmt: skip


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without its timing, run identity and retry bookkeeping."""
    out = {k: record.get(k) for k in RECORD_FIELDS}
    out["steps"] = [{k: v for k, v in step.items() if k not in STEP_TIMING} for step in record.get("steps", [])]
    return out


def by_key(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["config_id"], r["item_id"]): comparable(r) for r in records}


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    """A short description of where two comparable records differ (for assertion messages)."""
    for key in a:
        if a[key] != b.get(key):
            if key == "steps":
                for i, (sa, sb) in enumerate(zip(a["steps"], b.get("steps", []), strict=False)):
                    if sa != sb:
                        diff = {k: (sa.get(k), sb.get(k)) for k in sa if sa.get(k) != sb.get(k)}
                        return f"step {i}: {diff}"
                return f"steps: {len(a['steps'])} vs {len(b.get('steps', []))}"
            return f"{key}: {a[key]!r} vs {b.get(key)!r}"
    return "equal"
