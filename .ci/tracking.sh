#!/usr/bin/env bash
# The experiment-tracking and cluster parts (idempotent): the mlflow and ray extras
# (tests/tracking/, tests/deploy/) and Debian's slurm-wlm and munge for the one-node Slurm
# cluster of tests/deploy/test_slurm_cluster.py (slow stage; deploy/slurm/local-cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[mlflow,ray]"
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
