#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): shapes drawn as a user types them, stratified by
# the config the heuristic picks (24 shapes, seed 2026120272), each beside static tiles 128 / 192 /
# 256 wide, stream-K 128 / 192 and the four cluster configs, in turns with cuBLAS, every output
# checked against float64 on sampled rows.  The rows feed a fit of each config's cost per wave.
#   bash benchmarks/run_cluster_study.sh      (results under $OUT; SHAPES and DTYPES override)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
SHAPES=${SHAPES:-"13840x9080x2400 14184x12008x648 11792x10288x488 5176x5336x408 928x3488x976
288x7432x11824 2776x632x3552 1256x840x11128 1552x512x9912 688x832x7976 816x432x10784 3656x1632x4168
1104x4800x6568 320x15616x4408 5224x2240x808 14528x4928x2768 808x1416x4144 1512x720x5720
2144x11840x1368 5680x256x2272 1856x2136x9280 744x6480x14736 2016x1144x7000 3672x896x1200"}
V=(--variant s128:policy=static,tile_n=128,stages=6,cluster_m=1,cluster_n=1
   --variant s192:policy=static,tile_n=192,stages=4,cluster_m=1,cluster_n=1,epilogue=staged
   --variant s256:policy=static,tile_n=256,stages=4,cluster_m=1,cluster_n=1
   --variant k128:policy=streamk,tile_n=128,stages=6,sk_reduce=owner,cluster_m=1,cluster_n=1
   --variant k192:policy=streamk,tile_n=192,stages=4,sk_reduce=owner,cluster_m=1,cluster_n=1,epilogue=staged
   "${CLUSTER_VARIANTS[@]}")
census_study cluster "${V[@]}"
