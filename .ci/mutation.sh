#!/usr/bin/env bash
# CI stage: a seeded, time-boxed random sample of the trust core's mutants (mutmut 3,
# .ci/mutation.py; groups and reviewed equivalent mutants in pyproject.toml under
# [tool.bcas-mutation]).  The seed is the commit hash, so each submission checks another
# sample.  Fails on a mutant no test catches, or when nothing could be checked in time.
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${BCAS_MUTATION_SEED:-$(git rev-parse HEAD 2>/dev/null || date +%s)}
exec python3 .ci/mutation.py sample --seed "$seed" \
  --count "${BCAS_MUTATION_COUNT:-40}" --limit-s "${BCAS_MUTATION_LIMIT_S:-600}" --jobs "${BCAS_MUTATION_JOBS:-2}"
