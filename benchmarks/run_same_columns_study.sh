#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the 160-wide rule (hopper.SAME_COLUMNS_160),
# checked on sizes drawn after it:
#   1. the GPU tests of the rule's tile (160 wide, both fix-ups) and the split tiles;
#   2. SHAPES sizes drawn as a user types them where the rule changes the heuristic's config
#      (cublas_census.py --typed --prior-differs, seed SEED), the rule's config ("hopper") beside
#      the 192-wide one it replaces ("prior") and cuBLAS, in turns, in each of DTYPES;
#   3. 13232x416x10184, where a 160-wide rest once made the 2 x 1 launch's tail split look
#      cheaper than 2 x 2 clusters (RESULTS.md, thirty-third session): the 2 x 2 config ("hopper")
#      beside the 2 x 1 one ("prior": OFF_ROWS_BLOCKS off) alone and split in two as gemm_parts
#      would run it ("prior-split", its rest 160 wide).  Every output checked against float64 on
#      sampled rows.
#   bash benchmarks/run_same_columns_study.sh      (results under $OUT)
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_env.sh"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

echo "== 1. GPU tests: 160-wide tiles, split tiles"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -n 12 -rfs tests/test_hopper.py \
  -k "odd_multiple or spread_fix_up or split_n" >"$OUT/pytest-same-columns.log" 2>&1
grep -E "passed|failed|FAILED|Error" "$OUT/pytest-same-columns.log" | tail -10

for dtype in ${DTYPES:-float16 bfloat16}; do
  echo "== 2. $dtype: ${SHAPES:-12} sizes drawn where the rule fires (seed ${SEED:-2026120331})"
  timeout ${STUDY_TIMEOUT:-120} python3 benchmarks/cublas_census.py --no-census --reps 10 --dtype "$dtype" \
    --typed "${SHAPES:-12}" --seed "${SEED:-2026120331}" --prior "SAME_COLUMNS_160=None" --prior-differs \
    >"$OUT/same-columns-$dtype.txt" 2>&1
  grep -v "^#" "$OUT/same-columns-$dtype.txt" | sed -e 's/ | tiles.*//' -e "s/hopper $dtype->$dtype //" | cut -c1-140
  echo "== 3. $dtype: 13232x416x10184, 2 x 2 clusters beside the 2 x 1 launch split in two"
  timeout 60 python3 benchmarks/cublas_census.py --no-census --reps 10 --dtype "$dtype" --split \
    --prior "OFF_ROWS_BLOCKS=False" 13232x416x10184 >"$OUT/same-columns-2x2-$dtype.txt" 2>&1
  grep -v "^#" "$OUT/same-columns-2x2-$dtype.txt" | sed -e 's/ | tiles.*//' -e "s/hopper $dtype->$dtype //" | cut -c1-160
done
