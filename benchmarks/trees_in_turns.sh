#!/usr/bin/env bash
# Kernel rows of several source trees (commits) timed in turns on one GPU, each tree's own code
# (mgemm/, kernels/, benchmarks/) in a process of its own: a ladder of kernel steps, one idea per
# commit, each against the one before it in the same device call.
#
#   bash benchmarks/trees_in_turns.sh prepare REV...    # here: each REV's tree under scratch_trees/
#   SHAPES="8192x8192x256 4096x4096x4096" [DTYPE=float16] [ROUNDS=2] [TESTS="staged or tma"] \
#     OUT=$OUT bash benchmarks/trees_in_turns.sh run    # on the GPU host (.whl carried)
#
# `run` times benchmarks/cublas_census.py --no-census --scrub (every launch cold, cuBLAS in turns
# in the same process, every output checked against float64) in each tree, the trees in the order
# prepared and then in reverse, ROUNDS times (CENSUS_ARGS: more of its arguments, e.g. --caller);
# with TESTS (a pytest -k expression, or "all"), it first runs the GPU tests of
# tests/test_hopper.py that TESTS selects in each tree but the first.  Rows under
# $OUT/<tree>-<run>.txt; the table printed is the Hopper rows (µs, × cuBLAS) per tree: the
# heuristic's config ("hopper") and, with --caller, hopper.gemm as a caller gets it ("auto":
# swaps and copies included).  scratch_trees/ is not ignored, so that it travels to the GPU
# host: delete it once done.
set -o pipefail
cd "$(dirname "$0")/.."
TREES=scratch_trees
if [[ ${1:-} == prepare ]]; then
  shift
  (( $# )) || { echo "usage: $0 prepare REV..." >&2; exit 2; }
  rm -rf "$TREES"; mkdir -p "$TREES"
  for rev in "$@"; do
    name=$(git rev-parse --short "$rev") || exit 1
    mkdir -p "$TREES/$name"
    # (without benchmarks/*.md, the logs: what travels to the GPU host is at most 64 MiB)
    git archive "$rev" mgemm kernels benchmarks tests pyproject.toml ':(exclude)benchmarks/*.md' \
      | tar -x -C "$TREES/$name" || exit 1
    echo "$name" >>"$TREES/ORDER"
    echo "$TREES/$name: $rev ($(git log -1 --format=%s "$rev" | cut -c1-80))"
  done
  exit 0
fi
[[ ${1:-} == run ]] || { echo "usage: $0 prepare REV... | run" >&2; exit 2; }
[[ -f $TREES/ORDER ]] || { echo "no trees: run '$0 prepare REV...' first" >&2; exit 2; }
[[ -n ${SHAPES:-} ]] || { echo "SHAPES: the MxNxK products to time" >&2; exit 2; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/gpu_env.sh  # the wheels in /tmp/site
mapfile -t order <"$TREES/ORDER"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
if [[ -n ${TESTS:-} ]]; then
  for name in "${order[@]:1}"; do
    echo "== GPU tests in $name: $TESTS"
    select=(-k "$TESTS"); [[ $TESTS == all ]] && select=()
    (cd "$TREES/$name" && PYTHONPATH=/tmp/site:$PWD timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest -m gpu -q \
       -p no:cacheprovider -n "${TEST_WORKERS:-14}" tests/test_hopper.py "${select[@]}" 2>&1 | tail -3)
  done
fi
reversed=(); for (( i=${#order[@]}-1; i>=0; i-- )); do reversed+=("${order[i]}"); done
runs=0
for (( r=1; r<=${ROUNDS:-2}; r++ )); do
  for name in "${order[@]}" "${reversed[@]}"; do
    log="$OUT/$name-$((++runs)).txt"  # one file a run, so each run's failures print once
    # shellcheck disable=SC2086
    (cd "$TREES/$name" && PYTHONPATH=/tmp/site:$PWD timeout "${CENSUS_TIMEOUT:-150}" python3 benchmarks/cublas_census.py \
       --no-census --scrub --reps "${REPS:-8}" --dtype "${DTYPE:-float16}" ${CENSUS_ARGS:-} $SHAPES \
       >"$log" 2>&1) || echo "census in $name exited with status $? (run $runs): $(tail -1 "$log")"
    grep -E "CHECK FAILED|Error" "$log" | head -3
  done
done
echo "== Hopper rows (µs, x cuBLAS), every run in order"
for label in hopper auto; do
  for name in "${order[@]}"; do
    for shape in $SHAPES; do
      row=$(cat "$OUT/$name"-*.txt | awk -v s="$shape" -v l="$label" '$1 == s && $2 == l && $4 == "us" {printf " %s (%s)", $3, $9}')
      [[ -n $row ]] && printf '%-6s %-10s %-18s%s\n' "$label" "$name" "$shape" "$row"
    done
  done
done
