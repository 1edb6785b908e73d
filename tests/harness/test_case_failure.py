"""A failing grid case names itself once, by its id, in pytest's failure report.

A case's dataclass repr (model spec, grid entry, the whole run configuration) used to
fill the report wherever pytest showed a frame's arguments.  The case here fails for a
real reason inside the harness: the smoke grid's PDE case keeps 2 of each item's own
documents, and the items here carry one each (on ``mock:gold``).  A grid that cannot run on
the data at all (too few items to calibrate on) stops before collection ends instead, with
one usage error: tests/run/test_plan_checks.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bcas.run.settings import Case, ModelSpec

REPO = Path(__file__).resolve().parents[2]
CASE = "mock-gold-onedoc-madara/pde"


def test_a_case_repr_is_its_id() -> None:
    from bcas.grids import get_grid

    entry = get_grid("smoke").entries[0]
    case = Case(ModelSpec("mock", "gold"), "hotpotqa", "smoke", entry)
    assert repr(case) == f"Case({case.id!r})" == "Case('mock-gold-hotpotqa-bm25/s1/t2k')"


def test_a_failing_case_is_named_once_in_its_failure(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "BCAS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_ADDOPTS", None)
    shipped = (REPO / "bcas/resources/data/conflictqa_strategyqa.jsonl").read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in shipped[:4]]
    onedoc = tmp_path / "onedoc.jsonl"
    kept = [{**it, "documents": it["documents"][:1]} for it in items]
    for it in kept:  # supporting flags may name only the document kept
        it.pop("supporting", None)
    onedoc.write_text("".join(json.dumps(it) + "\n" for it in kept))
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--bcas-grid", "smoke",
            "--bcas-model", "mock:gold", "--bcas-datasets", str(onedoc), "-k", "madara/pde",
            "--bcas-report", str(tmp_path / "run"),
        ],  # fmt: skip
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "fewer than the 2 that pde needs" in out, out  # it failed for the reason above
    assert out.count("Case(") == 1 and f"bcas_case = Case('{CASE}')" in out, out
    assert "ModelSpec(" not in out and "RunConfig(" not in out, out
