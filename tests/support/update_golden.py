"""Regenerate tests/golden/ from fresh smoke runs (only when records are meant to change).

python tests/support/update_golden.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from test_golden_records import EMBEDDED_ARGS, GOLDEN, MOCK_ARGS, run_smoke  # noqa: E402

from support.golden import write_golden  # noqa: E402

if __name__ == "__main__":
    for name, args in (("smoke_mock.jsonl", MOCK_ARGS), ("smoke_embedded_1.jsonl", EMBEDDED_ARGS)):
        with tempfile.TemporaryDirectory() as tmp:
            n = write_golden(run_smoke(Path(tmp), *args), GOLDEN / name)
        print(f"{name}: {n} records")
