#!/usr/bin/env bash
# `mgemm bench` of several source trees (commits) in turns on one GPU host, each tree's own mgemm
# in a process of its own (its own embedded cluster): what a change to the orchestrator (graph,
# placement, planner) costs a product end to end, each tree beside dask.array.matmul on the same
# cluster and inputs.
#
#   bash benchmarks/trees_in_turns.sh prepare REV...   # here: each REV's tree under scratch_trees/
#   BENCH_ARGS="--case float16-32768 --repeat 7" OUT=$OUT bash benchmarks/bench_in_turns.sh
#                                                      # on the GPU host (.whl carried)
#
# The trees run in the order prepared and then in reverse; each run's rows (commit named by
# MGEMM_COMMIT) go to $OUT/bench.jsonl and its table is printed.  Delete scratch_trees/ once done.
set -o pipefail
cd "$(dirname "$0")/.."
TREES=scratch_trees
[[ -f $TREES/ORDER ]] || { echo "no trees: run 'bash benchmarks/trees_in_turns.sh prepare REV...' first" >&2; exit 2; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
source benchmarks/gpu_env.sh  # the wheels in /tmp/site
mapfile -t order <"$TREES/ORDER"
reversed=(); for (( i=${#order[@]}-1; i>=0; i-- )); do reversed+=("${order[i]}"); done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
for name in "${order[@]}" "${reversed[@]}"; do
  echo "== $name"
  # shellcheck disable=SC2086
  (cd "$TREES/$name" && PYTHONPATH=/tmp/site:$PWD MGEMM_COMMIT=$name timeout "${BENCH_TIMEOUT:-200}" \
     python3 -m mgemm.cli bench ${BENCH_ARGS:-} --json "$OUT/bench.jsonl" 2>>"$OUT/bench-$name.err" | tail -3)
done
