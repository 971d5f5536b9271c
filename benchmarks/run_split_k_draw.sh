#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the split-K rule (hopper_heuristic.SPLIT_K) against the
# heuristic without it, hopper.gemm as a caller gets it, in turns with cuBLAS, every output checked
# against float64 on sampled rows: first the products on which the 2 x 2 cluster rule (QUAD_SK)
# was measured that split-K now takes, then sizes drawn as a user types them where the rule
# changes the launch (fp16 and bf16); then the GPU tests of stream-K and split-K.
#   bash benchmarks/run_split_k_draw.sh        (results under $OUT)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(cat .whl/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
PRIOR="SPLIT_K=None"
SHAPES="1024x1024x16384 768x1024x16384 640x1280x12288 512x2048x16384 512x1024x16384 1752x416x37456
  744x736x12376" STUDY_TIMEOUT=150 census_study quad --caller --prior "$PRIOR"
SHAPES="" STUDY_TIMEOUT=200 census_study draw16 --caller --typed 12 --seed 2026120481 --prior "$PRIOR" --prior-differs
SHAPES="" DTYPES=bfloat16 STUDY_TIMEOUT=120 census_study draw16 --caller --typed 6 --seed 2026120482 --prior "$PRIOR" \
  --prior-differs
TESTS_TIMEOUT=150 study_tests streamk "sk_ways or streamk or quad or heuristic"
