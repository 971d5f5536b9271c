#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the deep split (hopper_heuristic.DEEP_SPLIT, split-K on
# 128 x 256 tiles over a deep K, and DEEP_SPLIT_FEW, fewer tiles on 2 x 1 clusters) against the
# heuristic without it, hopper.gemm as a caller gets it, every launch cold, in turns with cuBLAS,
# every output checked against float64 on sampled rows: the chosen products of RESULTS.md's
# fifty-second session, then the products drawn there after each rule (fp16 and bf16); then the
# GPU tests of the deep split and split-K.
#   bash benchmarks/run_deep_split_draw.sh        (results under $OUT)
set -o pipefail
source "$(dirname "$0")/census_study.sh"  # $OUT, gpu_env.sh, census_study, study_tests
echo "commit $(cat .whl/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
SHAPES="1000x1000x65536 1024x1024x65536 768x768x65536 640x1280x65536 1024x1024x50000 768x1024x32768
  1000x1000x32768 1200x800x50000" STUDY_TIMEOUT=150 census_study chosen --caller --scrub --prior "DEEP_SPLIT=None"
SHAPES="704x576x79920 874x1488x122528 416x1656x63224 360x2120x65784 1989x264x42456 176x1856x55104
  2696x456x28104 604x1952x30136 1170x744x45496 1720x472x79616 1451x336x37888 1840x448x31856
  560x1856x117832 1661x328x70056 3184x216x40688 633x1296x28808 1328x528x33184 1074x632x119136
  1070x968x58648 1616x696x18808 1112x880x42264 378x2944x23504 2216x376x23640 1584x544x61160" \
  DTYPES="float16 bfloat16" STUDY_TIMEOUT=250 census_study drawn --caller --scrub --prior "DEEP_SPLIT=None"
SHAPES="216x1488x130488 504x760x123512 1264x240x115120 176x840x115184 389x656x68824 1216x232x93344
  1400x144x119632 960x248x108672 170x896x114088 216x800x124776 211x800x107280 240x840x111792" \
  DTYPES="float16 bfloat16" STUDY_TIMEOUT=200 census_study few --caller --scrub --prior "DEEP_SPLIT_FEW=None"
TESTS_TIMEOUT=150 study_tests deep "deep_split or sk_ways"
