#!/usr/bin/env bash
# Submit a sharded bcas run: the array of shards, then the merge-and-gate job after it.
#
#   SHARDS=8 BCAS_RUN=/shared/runs/ss-qwen3-8b BCAS_SERVE_MODEL=Qwen/Qwen3-8B \
#   BCAS_ARGS="--bcas-grid search_scaling --bcas-limit all" \
#   BCAS_BASELINE=/shared/runs/ss-qwen3-8b-previous bash deploy/slurm/submit.sh
#
# Size the array first: the same options with --bcas-shard 1/$SHARDS --bcas-estimate print
# each shard's items, model calls and wall time.  Extra sbatch flags (partition, account)
# go in SBATCH_ARGS, e.g. SBATCH_ARGS="--partition=gpu --account=myproj".
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SHARDS="${SHARDS:-8}"
export BCAS_HOME="${BCAS_HOME:-$(cd "$here/../.." && pwd)}"
export BCAS_DEPLOY="$here"
export BCAS_RUN="${BCAS_RUN:?set BCAS_RUN to a run folder on storage every node mounts}"
if [[ -z "${BCAS_MODEL:-}" ]]; then  # BCAS_MODEL (e.g. mock:gold, openai:NAME with BCAS_ARGS' --bcas-base-url): no vLLM per task
    export BCAS_SERVE_MODEL="${BCAS_SERVE_MODEL:?set BCAS_SERVE_MODEL to the model vLLM serves, or BCAS_MODEL}"
fi
mkdir -p "$BCAS_RUN/logs"

# shellcheck disable=SC2086  # SBATCH_ARGS is a list of flags
array="$(sbatch --parsable ${SBATCH_ARGS:-} --array="0-$((SHARDS - 1))" --export=ALL "$here/bcas-shards.sbatch")"
array="${array%%;*}"
# shellcheck disable=SC2086
merge="$(sbatch --parsable ${SBATCH_ARGS:-} --dependency="afterany:${array}" --export=ALL "$here/bcas-merge.sbatch")"
echo "submitted: shards ${array} (array 0-$((SHARDS - 1))), merge and gate ${merge%%;*}; run folder ${BCAS_RUN}"
