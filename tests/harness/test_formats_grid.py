"""The ``formats`` grid: json / text / tools on the same items, compared per model with McNemar + Holm."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from bcas.config import ACTION_FORMATS
from bcas.grids import GRIDS, get_grid
from bcas.llm.base import ModelError
from bcas.report.summary import compare_to_reference
from bcas.run.pipelines import BcasKind
from bcas.testing.scripted import ScriptedModel


def test_the_grid_varies_only_the_action_format_and_shows_it_in_every_label() -> None:
    grid = get_grid("formats")
    assert "formats" in GRIDS and grid.holm_scope == "cell"
    configs = [e.config for e in grid.entries]
    assert [c.agent.action_format for c in configs] == list(ACTION_FORMATS)
    assert len({c.config_id for c in configs}) == 3  # the format is part of the answer's identity
    base = configs[0]
    for config in configs[1:]:
        assert replace(config, agent=replace(config.agent, action_format="json")) == base
    assert [e.label for e in grid.entries] == ["bm25/s2/t2k/json", "bm25/s2/t2k/text", "bm25/s2/t2k/tools"]
    assert grid.reference is grid.entries[0]
    assert grid.comparisons("bm25/s2/t2k/tools") == [("bm25/s2/t2k/json", "")]


def _records(label: str, config_id: str, correct: list[bool]) -> list[dict[str, Any]]:
    return [
        {
            "model": "m",
            "model_fingerprint": "fp",
            "dataset": "hotpotqa",
            "item_id": f"q{i}",
            "epoch": 0,
            "config_id": config_id,
            "config": {"seed": 0},
            "label": label,
            "correct_em": ok,
            "extra": {"grid": "formats"},
        }  # fmt: skip
        for i, ok in enumerate(correct)
    ]


def test_the_report_pairs_each_format_with_json_under_mcnemar_and_holm() -> None:
    grid = get_grid("formats")
    json_e, text_e, tools_e = grid.entries
    records = (
        _records(json_e.label, json_e.config.config_id, [True] * 12 + [False] * 8)
        + _records(text_e.label, text_e.config.config_id, [True] * 12 + [False] * 8)
        + _records(tools_e.label, tools_e.config.config_id, [False] * 12 + [False] * 8)
    )
    comparisons = {c.label: c for c in compare_to_reference(records, grids=dict(GRIDS.items()))}
    assert set(comparisons) == {text_e.label, tools_e.label}
    tools = comparisons[tools_e.label]
    assert tools.reference == json_e.label and tools.diff == pytest.approx(-0.6) and (tools.b, tools.c) == (0, 12)
    assert tools.p_value == pytest.approx(2 * 0.5**12)  # exact McNemar: 12 discordant pairs, all one way
    assert tools.p_holm == pytest.approx(min(1.0, 2 * tools.p_value))  # Holm over the model x dataset family
    assert comparisons[text_e.label].p_value == pytest.approx(1.0)


def test_a_tools_case_stops_before_its_items_when_the_model_cannot_call_tools() -> None:
    grid = get_grid("formats")
    tools_entry = grid.entries[2]

    def ctx(model: Any, entry: Any) -> Any:
        case = SimpleNamespace(id=f"formats/hotpotqa/{entry.label}", model=SimpleNamespace(label="plain"))
        return SimpleNamespace(config=entry.config, model=model, case=case)

    plain = ScriptedModel(["x"], supports_tools=False)
    with pytest.raises(ModelError, match="needs native tool calling, which model plain lacks: this scripted"):
        asyncio.run(BcasKind().prepare(ctx(plain, tools_entry), []))
    asyncio.run(BcasKind().prepare(ctx(ScriptedModel(["x"]), tools_entry), []))
    asyncio.run(BcasKind().prepare(ctx(plain, grid.entries[0]), []))  # json needs no tools
