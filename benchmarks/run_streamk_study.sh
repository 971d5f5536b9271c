#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the weakest user sizes of the twenty-sixth
# session, which the heuristic runs on stream-K (RESULTS.md: 1056x704x11296 0.70 of cuBLAS on 54
# tiles of 128, 1040x632x5016 0.71 on 45, 400x9712x2856 0.68 on 204 tiles of 192,
# 584x7088x4504 0.66 on 185) and two that SK_GIVE_WAY moved to static 192 without much gain
# (9648x464x15416 0.59, 4712x992x3272 0.60). The heuristic beside the configs it could have
# taken, in turns with cuBLAS, every output checked against float64 on sampled rows:
#   the thin 64 x 64 pingpong tile on stream-K and static; stream-K with either fix-up; static
#   128 / 192 / 256; 2-CTA clusters 128 and 256; 2 x 2 clusters 128 and 256.
#   bash benchmarks/run_streamk_study.sh      (results under $OUT; SHAPES and DTYPES override)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
SHAPES=${SHAPES:-"1056x704x11296 1040x632x5016 400x9712x2856 584x7088x4504 9648x464x15416 4712x992x3272"}
V=(--variant t64k:tile_m=64,tile_n=64,stages=12,pingpong=1,policy=streamk,sk_reduce=owner,cluster_m=1,cluster_n=1
   --variant t64s:tile_m=64,tile_n=64,stages=12,pingpong=1,policy=static,sk_reduce=owner,cluster_m=1,cluster_n=1
   --variant kspread:policy=streamk,sk_reduce=spread,cluster_m=1,cluster_n=1
   --variant kowner:policy=streamk,sk_reduce=owner,cluster_m=1,cluster_n=1
   --variant s128:policy=static,tile_n=128,stages=6,cluster_m=1,cluster_n=1
   --variant s192:policy=static,tile_n=192,stages=4,cluster_m=1,cluster_n=1
   --variant s256:policy=static,tile_n=256,stages=4,cluster_m=1,cluster_n=1
   "${CLUSTER_VARIANTS[@]}")
census_study streamk "${V[@]}"
