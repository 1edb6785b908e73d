"""Regenerate tests/golden/ from fresh smoke runs (only when records are meant to change).

python tests/support/update_golden.py

The embedded golden is written for this host's kind (``support/golden.py``); the files of
other hosts are listed: regenerate them on such a host, or the embedded test fails there.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from test_golden_records import EMBEDDED_ARGS, GOLDEN, MOCK_ARGS, run_smoke  # noqa: E402

from support.golden import embedded_goldens, host_key, record_host, write_golden  # noqa: E402

if __name__ == "__main__":
    embedded = f"smoke_embedded_1.{host_key()}.jsonl"
    for name, args in (("smoke_mock.jsonl", MOCK_ARGS), (embedded, EMBEDDED_ARGS)):
        with tempfile.TemporaryDirectory() as tmp:
            n = write_golden(run_smoke(Path(tmp), *args), GOLDEN / name)
        print(f"{name}: {n} records")
    record_host(GOLDEN, embedded)
    others = [p.name for p in embedded_goldens(GOLDEN, "smoke_embedded_1") if p.name != embedded]
    if others:
        print(f"not regenerated (other hosts): {', '.join(others)}; regenerate them there or delete them")
