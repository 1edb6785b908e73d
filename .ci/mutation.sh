#!/usr/bin/env bash
# CI stage: a seeded, time-boxed random sample of the trust core's mutants (mutmut 3,
# .ci/mutation.py; groups and reviewed equivalent mutants in pyproject.toml under
# [tool.bcas-mutation]).  The seed is the commit hash, so each submission checks another
# sample.  Fails when nothing could be checked in time; a mutant no test catches is
# printed with its diff and fails only with BCAS_MUTATION_STRICT=1, until the trust
# core's score (docs/measured.md, "Mutation score") reaches the 90% at which every
# submission can be held to it.
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${BCAS_MUTATION_SEED:-$(git rev-parse HEAD 2>/dev/null || date +%s)}
rc=0
python3 .ci/mutation.py sample --seed "$seed" \
  --count "${BCAS_MUTATION_COUNT:-40}" --limit-s "${BCAS_MUTATION_LIMIT_S:-600}" --jobs "${BCAS_MUTATION_JOBS:-2}" || rc=$?
if (( rc == 1 )) && [[ "${BCAS_MUTATION_STRICT:-0}" != 1 ]]; then
  echo "warning: mutants survived (listed above); reported, not failing CI (BCAS_MUTATION_STRICT=1 to fail)"
  exit 0
fi
exit "$rc"
