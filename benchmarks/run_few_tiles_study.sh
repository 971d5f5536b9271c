#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): products with a narrow M on few tiles, the weakest
# class of the thirty-seventh session's broad draws (352x1592x6560 0.73 of cuBLAS, 328x1600x9472
# 0.71: 39 tiles of 128 x 128 split over 132 CTAs by stream-K, each CTA streaming its own A and B
# boxes, so the L2-to-SM bytes, not the tensor cores, may set the time).  Times the heuristic
# beside configs that move fewer bytes per k-step, in turns with cuBLAS, every output checked
# against float64 on sampled rows:
#   1 x 2 clusters (A multicast), 2 x 1 (B multicast), 2 x 2, each stream-K with the owner and
#   the spread fix-up; 128 x 256 stream-K; 128 x 128 with 4 stages.
# Then the transposed product's stream-K up to 0.9 of a wave against the 0.75 of WIDE_SK_FILL, on
# sizes drawn where that differs (the prior is the candidate: RESULTS.md, thirty-seventh session,
# call 5, 5 of 7 runs ahead at 0.80-0.85 of a wave).
#   bash benchmarks/run_few_tiles_study.sh      (results under $OUT; SHAPES and DTYPES override)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
SHAPES=${SHAPES:-"352x1592x6560 328x1600x9472 264x2048x8192 384x1216x12288 448x1800x6000 1056x704x11296"}
V=(--variant n2:policy=streamk,tile_n=128,stages=6,cluster_m=1,cluster_n=2,sk_reduce=owner
   --variant n2s:policy=streamk,tile_n=128,stages=6,cluster_m=1,cluster_n=2,sk_reduce=spread
   --variant c2:policy=streamk,tile_n=128,stages=6,cluster_m=2,cluster_n=1,sk_reduce=owner
   --variant q:policy=streamk,tile_n=128,stages=6,cluster_m=2,cluster_n=2,sk_reduce=owner
   --variant qs:policy=streamk,tile_n=128,stages=6,cluster_m=2,cluster_n=2,sk_reduce=spread
   --variant k256:policy=streamk,tile_n=256,stages=4,cluster_m=1,cluster_n=1,sk_reduce=owner
   --variant s4:stages=4)
STUDY_TIMEOUT=${STUDY_TIMEOUT:-240} census_study few --caller "${V[@]}"
SHAPES="" STUDY_TIMEOUT=120 census_study swapsk --caller --typed 6 --transposed-only --seed 2026120401 \
  --prior "WIDE_SK_FILL=0.9" --prior-differs
