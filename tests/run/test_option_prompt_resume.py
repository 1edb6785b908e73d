"""Resume after an option's prompt is reworded: the old answers are not this configuration's.

A configuration with ``AgentConfig.cite`` or ``AgentConfig.abstain`` on carries its
option templates' hash in its configuration id (``bcas.identity.OPTION_PROMPTS``), and
resume skips only the items already recorded under the answer identity.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import bcas
import bcas.identity as identity
from bcas.config import AgentConfig, Budget, RetrievalConfig, RunConfig
from bcas.grids import Grid, GridEntry, register_grid
from bcas.testing.project import codename_items, write_jsonl


@pytest.fixture
def prompts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The package's templates, copied where ``bcas.identity`` reads them for hashing."""
    fake = tmp_path / "pkg"
    for folder in ("agent/prompts", "retrieval/prompts", "assess/prompts", "grading/prompts"):
        shutil.copytree(identity.PACKAGE_ROOT / folder, fake / folder)
    monkeypatch.setattr(identity, "PACKAGE_ROOT", fake)
    identity.option_prompt_hash.cache_clear()
    yield fake
    identity.option_prompt_hash.cache_clear()


# Every template the agent renders for an option (bcas/agent/loop.py), named here and not read from
# bcas.identity's table, so a template left out of that table is caught.
OPTION_TEMPLATES = [
    ("cite", "answer_cite_json.txt"),
    ("cite", "answer_cite_text.txt"),
    ("abstain", "tool_abstain.txt"),
    ("abstain", "answer_abstain.txt"),
]


@pytest.mark.parametrize(("option", "name"), OPTION_TEMPLATES)
def test_a_reworded_option_prompt_answers_again_on_resume(
    option: str, name: str, prompts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BCAS_CACHE_DIR", str(tmp_path / "cache"))
    data = write_jsonl(tmp_path / "two.jsonl", codename_items(2))
    config = RunConfig(
        budget=Budget(max_searches=1, max_total_tokens=2000),
        retrieval=RetrievalConfig(mode="bm25"),
        agent=AgentConfig(**{option: True}),
    )
    grid = f"opt_{name.removesuffix('.txt')}"
    register_grid(Grid(grid, (GridEntry("bcas", config, reference=True),), datasets=(str(data),)))
    run = tmp_path / "run"
    first = bcas.evaluate(grids=grid, models="mock:gold", out=run)
    again = bcas.evaluate(grids=grid, models="mock:gold", out=run)
    assert (first.written, again.written) == (2, 0)  # unchanged prompts: everything resumed
    template = prompts / "agent/prompts/options" / name
    template.write_text(template.read_text(encoding="utf-8") + "\nA reworded instruction.\n", encoding="utf-8")
    identity.option_prompt_hash.cache_clear()
    reworded = bcas.evaluate(grids=grid, models="mock:gold", out=run)
    assert reworded.written == 2  # answered again under the new wording
    assert len({r["config_id"] for r in reworded.records}) == 2
