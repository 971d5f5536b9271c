#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the weakest of the twenty-fifth session's 24 user
# sizes (RESULTS.md: 2704x1560x8344 0.58 of cuBLAS, B's rows off 32-byte sectors, 2-CTA clusters of
# 128; 6400x272x4680 0.72, 192-wide stream-K; 8752x376x1528 0.74; 1000x4472x1272 0.77;
# 352x1056x11952 0.78; 1192x5240x2352 0.78), then the float32 portable kernel at 8192³, whose
# SIMT epilogue went back to element stores after the paired ones cost it 0.06 of cuBLAS.
# The heuristic beside the widths, policies and clusters it could have taken, in turns with cuBLAS,
# every output checked against float64 on sampled rows:
#   static 160 / 192 / 224 / 256; stream-K 128 and 192; 2-CTA clusters 128 and 256; 2 x 2 clusters
#   128 and 256; and the heuristic's two-band split.
#   bash benchmarks/run_weak_study.sh      (results under $OUT; SHAPES and DTYPES override)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
SHAPES=${SHAPES:-"2704x1560x8344 6400x272x4680 8752x376x1528 1000x4472x1272 352x1056x11952 1192x5240x2352"}
V=(--variant s160:policy=static,tile_n=160,stages=4,cluster_m=1,cluster_n=1,epilogue=staged
   --variant s192:policy=static,tile_n=192,stages=4,cluster_m=1,cluster_n=1
   --variant s224:policy=static,tile_n=224,stages=4,cluster_m=1,cluster_n=1,epilogue=staged
   --variant s256:policy=static,tile_n=256,stages=4,cluster_m=1,cluster_n=1
   --variant k128:policy=streamk,tile_n=128,stages=6,cluster_m=1,cluster_n=1
   --variant k192:policy=streamk,tile_n=192,stages=4,cluster_m=1,cluster_n=1
   "${CLUSTER_VARIANTS[@]}")
census_study weak --split "${V[@]}"
echo "== portable float32 8192^3"
timeout 90 python3 benchmarks/kernels.py --squares 8192 --no-skewed --dtypes float32 --policies static \
  --reps 10 --out "$OUT" >"$OUT/portable-f32.txt" 2>&1
grep "^| square" "$OUT/portable-f32.txt"
