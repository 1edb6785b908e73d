#!/usr/bin/env bash
# The experiment-tracking and cluster parts (idempotent): the mlflow and ray extras
# (tests/tracking/, tests/deploy/) and Debian's slurm-wlm and munge for the one-node Slurm
# cluster of tests/deploy/test_slurm_cluster.py (slow stage; deploy/slurm/local-cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[mlflow,ray]"
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  # Only the slow stage's Slurm test needs them; without them it is skipped, so a machine
  # without apt (or root) still runs the rest of CI.
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; } \
    || echo "warning: slurm-wlm and munge not installed; the Slurm test will be skipped" >&2
fi
