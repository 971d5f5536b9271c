#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): split-K (HopperConfig.sk_ways) on few tiles
# over long K, the weakest class of the forty-seventh session's broad draw (28-63 tiles of 128 x 128,
# 0.62-0.82 of cuBLAS on stream-K, which splits every tile's K over all 132 CTAs so that a CTA's
# range straddles tiles and CTAs on tiles of one row read different k-slabs at any moment).
# sk_ways launches a whole number of CTAs (clusters) a tile (block), each one equal k-slice, the
# slices of every tile read in step.  First the GPU tests of the field, then the heuristic beside
# stream-K and split-K on one CTA a tile and on 2 x 1, 1 x 2 and 2 x 2 clusters, in turns with
# cuBLAS, every output checked against float64 on sampled rows; then two timelines.
#   bash benchmarks/run_split_k_study.sh        (results under $OUT; SHAPES and DTYPES override)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(cat .whl/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
TESTS_TIMEOUT=150 study_tests ways "sk_ways or cluster_streamk_matches or record_equals_mirror"
SHAPES=${SHAPES:-"888x888x13696 272x1616x7952 1192x264x8080 1056x792x13424 328x1416x6144 984x480x7632
  784x912x8176 736x592x15816 488x776x9960"}
SK=policy=streamk,tile_n=128,stages=6,sk_reduce=owner
V=(--variant "c1:$SK,cluster_m=1,cluster_n=1" --variant "c1w:$SK,cluster_m=1,cluster_n=1,sk_ways=64"
   --variant "c2w:$SK,cluster_m=2,cluster_n=1,sk_ways=64"
   --variant "n2:$SK,cluster_m=1,cluster_n=2" --variant "n2w:$SK,cluster_m=1,cluster_n=2,sk_ways=64"
   --variant "q:$SK,cluster_m=2,cluster_n=2" --variant "qw:$SK,cluster_m=2,cluster_n=2,sk_ways=64"
   --variant "w2:policy=streamk,sk_ways=2")
STUDY_TIMEOUT=${STUDY_TIMEOUT:-300} census_study ways "${V[@]}"
timeout 90 python3 benchmarks/timeline_probe.py --reps 6 --variant "w:policy=streamk,sk_ways=64" \
  888x888x13696:float16 272x1616x7952:float16 > "$OUT/timeline.txt" 2>&1
tail -40 "$OUT/timeline.txt"
