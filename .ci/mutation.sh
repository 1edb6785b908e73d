#!/usr/bin/env bash
# CI stage: a seeded, time-boxed random sample of the trust core's mutants (mutmut 3,
# .ci/mutation.py; groups and reviewed equivalent mutants in pyproject.toml under
# [tool.bcas-mutation]).  The seed is the commit hash, so each submission checks another
# sample.  Where .ci/mutation-baseline.json has a group, the sample is drawn from the
# mutants its score found caught in functions unchanged since, and any of them surviving
# fails the stage (a regression); a survivor of a function changed since the score is
# printed with its diff and fails nothing.  BCAS_MUTATION_STRICT=1 (.ci/run sets it) also
# fails a sample that held no mutant to the baseline.  Fails when nothing could be checked.
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${BCAS_MUTATION_SEED:-$(git rev-parse HEAD 2>/dev/null || date +%s)}
strict=()
if [[ "${BCAS_MUTATION_STRICT:-0}" == 1 ]]; then strict=(--strict); fi
exec python3 .ci/mutation.py sample --seed "$seed" "${strict[@]}" \
  --count "${BCAS_MUTATION_COUNT:-40}" --limit-s "${BCAS_MUTATION_LIMIT_S:-600}" --jobs "${BCAS_MUTATION_JOBS:-2}"
