#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200), fp16 and bf16, in turns with cuBLAS, every
# output checked against float64 on sampled rows:
#   the GPU tests of mgemm.tune (output in $OUT/tune-tests.txt);
#   issue4 and tune: issue 4's shapes, then 16 shapes drawn as a user types them (seed 2026120276, M, N, K
#     log-uniform 256-16384, multiples of 8, 5-2000 GFLOP), hopper.gemm as a caller gets it
#     ("auto") and with tune=True ("tuned", mgemm.tune's pick; its tuning not timed).
#   With PAD=1 first (the twenty-seventh session's call 4): BLOCK_PAD 0.13 against 0.1 on 12 shapes
#   drawn where it changes the config (seed 2026120275; run with BLOCK_PAD = 0.13 in the tree).
#   bash benchmarks/run_tune_study.sh      (results under $OUT; DTYPES overrides)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
DTYPES=${DTYPES:-"float16 bfloat16"}
if [ "${PAD:-0}" = 1 ]; then
  SHAPES="1728x800x11160 1792x816x15120 1432x816x2256 7680x1784x2952 5336x1640x1104 1496x792x2480
5032x840x2136 1288x808x2744 1488x1704x9592 1440x856x6680 1536x1624x4720 1416x792x4040" \
    census_study pad --split --prior "BLOCK_PAD=0.1"
fi
python3 -m pytest -q -p no:cacheprovider -m gpu -rf tests/test_tune.py >"$OUT/tune-tests.txt" 2>&1
tail -3 "$OUT/tune-tests.txt"
SHAPES="8192x8192x8192 4096x4096x4096 896x2432x8192 1024x2112x8192 1408x1536x16384 256x256x65536
64x8192x8192 8192x8192x256" census_study issue4 --tune --reps 10
SHAPES="544x8288x6984 1112x384x11296 5032x592x3968 4856x2952x2760 3264x632x1648 1560x4960x6480
12008x8688x1656 16304x1168x544 3056x4568x1168 9504x1560x3192 2024x336x6048 4760x10264x1128
1168x1984x3080 384x720x10400 6312x9144x4712 5584x12224x7816" census_study tune --tune
