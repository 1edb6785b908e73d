#!/usr/bin/env bash
# The search engine behind --bcas-retriever in tests: Milvus Lite (PyPI milvus-lite) and its
# client pymilvus, installed into the current Python (the bcas[search] extra), then one start
# of a server on loopback as a smoke check (it answers within seconds; the tests start their own).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check -e ".[search]"
data=$(mktemp -d)
t0=$SECONDS
timeout 120 "$PY" -m bcas index milvus --data-dir "$data" --port 0 --check
rm -rf "$data"
echo "search engine check wall time: $((SECONDS - t0)) s"
