#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the 160-wide rule (hopper_heuristic.SAME_COLUMNS_160),
# checked on sizes drawn after it:
#   1. the GPU tests of the rule's tile (160 wide, both fix-ups) and the split tiles;
#   2. DRAWS sizes drawn as a user types them where the rule changes the heuristic's config
#      (cublas_census.py --typed --prior-differs, seed SEED), the rule's config ("hopper") beside
#      the 192-wide one it replaces ("prior") and cuBLAS, in turns, in each of DTYPES;
#   3. 13232x416x10184, where a 160-wide rest once made the 2 x 1 launch's tail split look
#      cheaper than 2 x 2 clusters (RESULTS.md, thirty-third session): the 2 x 2 config ("hopper")
#      beside the 2 x 1 one ("prior": OFF_ROWS_BLOCKS off) alone and split in two as gemm_parts
#      would run it ("prior-split", its rest 160 wide).  Every output checked against float64 on
#      sampled rows (census_study.sh).
#   bash benchmarks/run_same_columns_study.sh      (results under $OUT)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
DTYPES=${DTYPES:-float16 bfloat16} STUDY_TIMEOUT=${STUDY_TIMEOUT:-120}

echo "== 1. GPU tests: 160-wide tiles, split tiles"
study_tests same-columns "odd_multiple or spread_fix_up or split_n"

echo "== 2. ${DRAWS:-12} sizes drawn where the rule fires (seed ${SEED:-2026120331})"
SHAPES="" census_study same-columns --reps 10 --typed "${DRAWS:-12}" --seed "${SEED:-2026120331}" \
  --prior "SAME_COLUMNS_160=None" --prior-differs
echo "== 3. 13232x416x10184: 2 x 2 clusters beside the 2 x 1 launch, alone and split in two"
SHAPES=13232x416x10184 census_study same-columns-2x2 --reps 10 --split --prior "OFF_ROWS_BLOCKS=False"
