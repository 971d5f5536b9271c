#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the 2-CTA cluster rule for B rows off 128 bytes
# (hopper_heuristic.OFF_ROWS_CLUSTERS), checked on shapes drawn after it was fitted:
#   1. the GPU tests of the cluster path and of the heuristic's cluster configs;
#   2. SHAPES random shapes whose B rows are off 128 bytes (cublas_census.py --random --off-rows,
#      seed SEED), the heuristic beside the heuristic without the rule ("prior") and cuBLAS, in
#      turns, in each of DTYPES; every output checked against float64 on sampled rows (census_study.sh).
#   bash benchmarks/run_off_rows_study.sh      (results under $OUT)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

echo "== 1. GPU tests: clusters"
TEST_WORKERS=8 study_tests clusters "cluster or b_rows_off_128"

draws=${SHAPES:-16}
DTYPES=${DTYPES:-float16 bfloat16} STUDY_TIMEOUT=${STUDY_TIMEOUT:-150}
echo "== 2. $draws shapes drawn with B rows off 128 bytes (seed ${SEED:-2026122301})"
SHAPES="" census_study off-rows --random "$draws" --seed "${SEED:-2026122301}" --waves 1,8 --k-log2 10,14 \
  --off-rows --prior "OFF_ROWS_CLUSTERS=()"
