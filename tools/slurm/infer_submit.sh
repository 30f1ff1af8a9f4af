#!/bin/bash
# Submit a sharded `speechkit infer` job: an array of SHARDS tasks (at most PARALLEL at once), then a merge job
# that starts when every array task has succeeded. Prints both job ids.
#
#   tools/slurm/infer_submit.sh 64 16 models/asr archive.json out/archive --task transcribe
#
# Extra sbatch options for both jobs go in SPEECHKIT_SBATCH_OPTIONS (e.g. "--partition=gpu --account=x").
set -euo pipefail

if [ $# -lt 5 ]; then
    echo "usage: $0 SHARDS PARALLEL MODEL MANIFEST OUT [speechkit infer options]" >&2
    exit 2
fi
shards=$1 parallel=$2 source_dir=$3 manifest=$4 out=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC2086  # the options are meant to split into words
array=$(sbatch --parsable ${SPEECHKIT_SBATCH_OPTIONS:-} --array="0-$((shards - 1))%${parallel}" \
    "$here/infer_array.sbatch" "$source_dir" "$manifest" "$out" "$@")
array=${array%%;*}
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SPEECHKIT_SBATCH_OPTIONS:-} --dependency="afterok:${array}" --kill-on-invalid-dep=yes \
    "$here/infer_merge.sbatch" "$out")
echo "array job ${array} (${shards} shards, ${parallel} at once), merge job ${merge%%;*}"
