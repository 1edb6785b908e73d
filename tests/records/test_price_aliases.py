"""A price sheet's aliases and model names match whatever their case (bcas.records.pricing):
a served name such as ``Qwen/Qwen3-8B-Instruct`` is priced by an alias written as the provider
spells it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bcas.records import PriceError, load_price_sheet

SHEET = """
default = "s"
[sheets.s]
[sheets.s.models."qwen3-8b"]
input_per_mtok = 1.0
output_per_mtok = 3.0
aliases = ["Qwen3-8B-Instruct", "QWEN-EIGHT"]
[sheets.s.models."Mistral-Small"]
input_per_mtok = 2.0
output_per_mtok = 6.0
"""


def test_mixed_case_aliases_and_names_price_the_model(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(SHEET, encoding="utf-8")
    sheet = load_price_sheet(str(path))
    qwen = (1_000_000 * 1.0 + 1_000_000 * 3.0) / 1e6
    for served in ("Qwen3-8B-Instruct", "qwen3-8b-instruct", "QWEN3-8B-INSTRUCT", "Qwen/Qwen3-8B-Instruct",
                   "qwen-eight", "QWEN-EIGHT", "Qwen3-8B"):  # fmt: skip
        assert sheet.token_cost(served, 1_000_000, 1_000_000) == pytest.approx(qwen), served
    for served in ("Mistral-Small", "mistral-small", "mistralai/MISTRAL-SMALL"):
        assert sheet.token_cost(served, 1_000_000, 1_000_000) == pytest.approx(8.0), served
    with pytest.raises(PriceError, match="no price for model 'Gemma-2'"):
        sheet.price_for("Gemma-2")  # neither a key, an alias nor a key's extension: unknown, never 0
