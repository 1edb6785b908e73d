"""A failing grid case names itself once, by its id, in pytest's failure report.

A case's dataclass repr (model spec, grid entry, the whole run configuration) used to
fill the report wherever pytest showed a frame's arguments.  The case here fails for a
real reason inside the harness: the shipped TriviaQA sample has 50 items, fewer than the
100 calibration queries MADARA's RSC probe needs (``madara_heldout``, on ``mock:gold``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bcas.run.settings import Case, ModelSpec

REPO = Path(__file__).resolve().parents[2]
CASE = "mock-gold-triviaqa-rsc"


def test_a_case_repr_is_its_id() -> None:
    from bcas.grids import get_grid

    entry = get_grid("smoke").entries[0]
    case = Case(ModelSpec("mock", "gold"), "hotpotqa", "smoke", entry)
    assert repr(case) == f"Case({case.id!r})" == "Case('mock-gold-hotpotqa-bm25/s1/t2k')"


def test_a_failing_case_is_named_once_in_its_failure(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "BCAS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--bcas-grid", "madara_heldout",
            "--bcas-model", "mock:gold", "-k", "rsc", "--bcas-report", str(tmp_path / "run"),
        ],  # fmt: skip
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "fewer than the 100 calibration items" in out, out  # it failed for the reason above
    assert out.count("Case(") == 1 and f"bcas_case = Case('{CASE}')" in out, out
    assert "ModelSpec(" not in out and "RunConfig(" not in out, out
