#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the K-major copy of a narrow row-major B
# (hopper_heuristic.B_K_MAJOR, gemm_copies_b), checked on sizes drawn after it:
#   1. the GPU tests of the copy and of clusters at odd widths over a K-major B;
#   2. DRAWS sizes drawn as a user types them where gemm copies B (cublas_census.py --typed
#      --prior-differs, seed SEED): hopper.gemm as a caller gets it ("auto", the copy inside the
#      call) beside the same without the rule ("auto-prior") and cuBLAS, in turns, in each of DTYPES;
#   3. the copy alone beside a contiguous copy of the same bytes (transpose_narrow_probe.py).
#   bash benchmarks/run_k_major_study.sh      (results under $OUT)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
DTYPES=${DTYPES:-float16 bfloat16} STUDY_TIMEOUT=${STUDY_TIMEOUT:-150}

echo "== 1. GPU tests: the K-major copy, clusters at odd widths over a K-major B"
study_tests k-major "k_major or copies_b"

echo "== 2. ${DRAWS:-10} sizes drawn where gemm copies B (seed ${SEED:-2026120344})"
SHAPES="" census_study k-major --reps 10 --caller --typed "${DRAWS:-10}" --seed "${SEED:-2026120344}" \
  --prior "B_K_MAJOR=None" --prior-differs
echo "== 3. the copy alone"
timeout 90 python3 benchmarks/transpose_narrow_probe.py --reps 20 2640x312 11696x400 15168x288 \
  | tee "$OUT/transpose-narrow.txt"
