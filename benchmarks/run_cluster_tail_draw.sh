#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): stream-K over the last two waves of static
# clusters whose last wave is short (hopper_heuristic.CLUSTER_TAIL_SK) against the heuristic without it,
# hopper.gemm as a caller gets it (tail_split's two bands of rows included), every launch cold, in
# turns with cuBLAS, every output checked against float64 on sampled rows: the products of
# RESULTS.md's fifty-fourth session in the rule's class (fp16 and bf16), then sizes drawn as a
# user types them where the rule changes the config; then the GPU tests of the rule, the tail
# split and stream-K over clusters.  (Written from that session's calls 4 and 5.)
#   bash benchmarks/run_cluster_tail_draw.sh        (results under $OUT)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(cat .whl/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
PRIOR="CLUSTER_TAIL_SK=None"
SHAPES="1239x6808x15048 2291x3784x10488 1384x3592x3904 9040x456x10120 3906x2120x16040 4560x1944x5216
  12736x736x11752 1488x6344x4896 2384x3432x7936 512x8856x2208 12632x712x3736 1496x6376x2272
  7456x1208x4720 1296x6392x6752 448x12904x10848 7214x1248x8256 7696x2640x12904" \
  DTYPES="float16 bfloat16" STUDY_TIMEOUT=200 census_study class --caller --scrub --prior "$PRIOR"
SHAPES="" STUDY_TIMEOUT=150 census_study draw --caller --scrub --typed 10 --seed 2026120403 --prior "$PRIOR" \
  --prior-differs
TESTS_TIMEOUT=150 study_tests tail "cluster_tail or tail_split or b_rows_off_128_on or cluster_streamk"
