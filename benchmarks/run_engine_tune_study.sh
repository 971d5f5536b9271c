#!/usr/bin/env bash
# One device call on one H200 (kind nvidia-h200): the engine-level check of engine auto and its
# tune option after 2ec21bd (operand addresses from data.ptr).  benchmarks/engine_pick.py times
# the engines as a block task calls them (host time counted) in turns, every block checked against
# float64 on sampled rows: where auto picks cuBLAS, "auto" beside "cublas" is auto's own host cost
# (46-60 µs a call in the twenty-seventh session's call 8, before that commit); "auto-tuned"
# beside "auto" is the tuned path's.  The same nine blocks as call 8, then the tune GPU tests.
#   bash benchmarks/run_engine_tune_study.sh      (results under $OUT)
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_env.sh"
timeout 200 python3 benchmarks/engine_pick.py --tune --reps 8 --random 2 --classes aligned,all \
  --size 2000,9000 8192x8192x8192 8192x8192x16384/4 6000x6000x6000/2 4104x4104x4104 9504x1560x3192 \
  >"$OUT/engine.txt" 2>&1
grep -v "^ *$" "$OUT/engine.txt" | tail -14
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -n 4 -rf tests/test_tune.py >"$OUT/tests.txt" 2>&1
tail -3 "$OUT/tests.txt"
