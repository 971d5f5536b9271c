#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the transposed product (hopper.swap_pays, the
# "columns" epilogue), checked on shapes drawn after the rule:
#   1. the GPU tests of the columns epilogue and of the swap path;
#   2. SHAPES shapes drawn as a user types them where hopper.gemm runs B^T A^T (cublas_census.py
#      --typed --transposed-only, seed SEED), the direct config ("hopper") beside the transposed
#      product as gemm runs it ("sw") and cuBLAS, in turns, in each of DTYPES; every output checked
#      against float64 on sampled rows (census_study.sh).  (Seed 2026120232 draws the thirty-second session's twelve.)
#   bash benchmarks/run_swap_study.sh      (results under $OUT)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

echo "== 1. GPU tests: the columns epilogue, the swap"
study_tests swap "columns or swapped"

draws=${SHAPES:-12}
DTYPES=${DTYPES:-float16 bfloat16} STUDY_TIMEOUT=${STUDY_TIMEOUT:-150}
echo "== 2. $draws shapes drawn where gemm runs B^T A^T (seed ${SEED:-2026120301})"
SHAPES="" census_study swap --reps 10 --typed "$draws" --seed "${SEED:-2026120301}" --transposed-only \
  --variant "sw:swap=1,epilogue=columns"
