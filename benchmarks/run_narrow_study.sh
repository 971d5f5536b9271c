#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): products with one narrow side, the weakest class
# of sizes a user types after the 2 x 2 cluster rule (RESULTS.md, twenty-fourth session:
# 13328x296x3632 0.59 of cuBLAS, 5800x784x712 0.66, 312x7376x7592 0.66, 15976x816x2360 0.67,
# 1080x592x7280 0.69).  Their tiles pad the narrow side (296 columns in 128- or 256-wide tiles) and
# their cluster waves round up; this times the heuristic beside the widths and policies it could
# have taken, in turns with cuBLAS, every output checked against float64 on sampled rows:
#   heuristic; static 160 / 192 / 224 / 96 wide (one CTA per tile); stream-K 128 and 160; 2 x 1
#   clusters 128 and 256; the thin 64 x 64 pingpong tile; and the heuristic's two-band split.
#   bash benchmarks/run_narrow_study.sh      (results under $OUT; SHAPES and DTYPES override)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
SHAPES=${SHAPES:-"13328x296x3632 5800x784x712 312x7376x7592 15976x816x2360 1080x592x7280 7864x272x2312 272x5984x2264 6992x296x3896"}
V=(--variant s160:policy=static,tile_n=160,stages=4,cluster_m=1,cluster_n=1,epilogue=staged
   --variant s192:policy=static,tile_n=192,stages=4,cluster_m=1,cluster_n=1
   --variant s224:policy=static,tile_n=224,stages=4,cluster_m=1,cluster_n=1,epilogue=staged
   --variant s96:policy=static,tile_n=96,stages=6,cluster_m=1,cluster_n=1,epilogue=staged
   --variant k128:policy=streamk,tile_n=128,stages=6,cluster_m=1,cluster_n=1
   --variant k160:policy=streamk,tile_n=160,stages=4,cluster_m=1,cluster_n=1,epilogue=staged
   --variant c128:policy=static,tile_n=128,stages=6,cluster_m=2,cluster_n=1
   --variant c256:policy=static,tile_n=256,stages=4,cluster_m=2,cluster_n=1
   --variant thin:policy=static,tile_m=64,tile_n=64,stages=12,pingpong=1,cluster_m=1,cluster_n=1)
census_study narrow --split "${V[@]}"
