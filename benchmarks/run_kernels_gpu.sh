#!/usr/bin/env bash
# One device call: install the carried wheels (mgemm/__init__ imports dask), run the GPU tests of
# the persistent kernel, then the benchmark, then the sustained float16/bfloat16 rate at 8192³.
# Usage: bash benchmarks/run_kernels_gpu.sh [bench args] (e.g. --quick --ladder --no-skewed
# --dtypes float16,bfloat16: every float16/bfloat16 mainloop variant at 8192³ beside cuBLAS, then
# the defaults; PROBE_TIMEOUT=0 leaves the sustained rate out; mind the 600-s call with the
# timeouts' sum)
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)"
TESTS=${TESTS:-tests/test_kernels.py}
if [ "$TESTS" != none ]; then
  timeout ${TEST_TIMEOUT:-270} python3 -m pytest -q -m gpu $TESTS -x -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -40
fi
timeout ${BENCH_TIMEOUT:-270} python3 benchmarks/kernels.py "$@" 2>&1 | tee "$OUT/bench.log"
# The float16/bfloat16 8192³ rate sustained, back to back in turns with cuBLAS (each row over its
# round's cuBLAS rate): both sit at the board's power cap there, unlike one product after a spin
[ "${PROBE_TIMEOUT:-90}" = 0 ] || timeout ${PROBE_TIMEOUT:-90} python3 benchmarks/clock_probe.py --ways cuBLAS,portable --rounds 3 \
  --seconds 2.5 --out "$OUT" 2>&1 | tee "$OUT/clock_probe.log"
