#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): two changes to the heuristic, each on shapes
# drawn as a user types them (M, N, K log-uniform 256-16384, multiples of 8, 5-2000 GFLOP) where
# it changes the config, fp16 and bf16, in turns with cuBLAS, every output checked against
# float64 on sampled rows:
#   waves: _cheapest_waves over more than four static waves (CHEAPEST_MAX_WAVES 64, was 4), 14
#     shapes of seed 2026120273 beside the prior heuristic (--prior), both as gemm_parts runs them
#     (--split);
#   epi: _static_width's epilogue from K (TMA stores up to TMA_STORE_K steps) where the cluster
#     configs had kept a 224-wide tile's staged one, 10 shapes of seed 2026120274 beside
#     epilogue=staged.
#   bash benchmarks/run_waves_study.sh      (results under $OUT; DTYPES overrides)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
DTYPES=${DTYPES:-"float16 bfloat16"}
SHAPES="15008x896x9632 8800x1328x10104 8040x1600x2608 13136x2064x1944 3568x6272x1000 2416x5696x14728
6184x1328x1288 3064x4352x1088 4672x2576x13064 3320x4352x2640 1696x4784x4384 1640x8576x1592
3368x6464x10472 11448x1536x2096" census_study waves --split --prior "CHEAPEST_MAX_WAVES=4"
SHAPES="928x10792x1000 2224x1352x912 8928x656x608 7592x440x1240 1328x7784x1536 776x7456x568
7096x424x1064 1232x2584x1112 15080x440x1008 7048x1496x1184" census_study epi --variant staged:epilogue=staged
