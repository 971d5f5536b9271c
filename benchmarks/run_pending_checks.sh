#!/usr/bin/env bash
# The GPU checks still owed on one H200 (kind nvidia-h200), each part within one device call:
#   bash benchmarks/run_pending_checks.sh suite   # the whole GPU suite, then the CuPy example
#   bash benchmarks/run_pending_checks.sh draws   # SK_256_CLUSTER_PAD on a draw of its own (fp16,
#       bf16), the exact-width pricing on three narrow products, issue 4's table
# Every census launch cold, in turns with cuBLAS, every output checked against float64 on
# sampled rows (benchmarks/cublas_census.py).  Output on stdout; the census's files under $OUT.
set -o pipefail
[[ "${1:-}" == suite || "${1:-}" == draws ]] || { echo "usage: $0 suite|draws" >&2; exit 2; }
source "$(dirname "$0")/gpu_env.sh"
echo "commit $(cat .whl/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
census="python3 benchmarks/cublas_census.py --no-census --reps 8 --scrub --caller"
case "${1:-}" in
  suite)
    echo "== the whole GPU suite"
    timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -n 14 -rfs 2>&1 | tail -15
    echo "== examples/local_cuda.py"
    MGEMM_EXAMPLE_N=4096 timeout 90 python3 examples/local_cuda.py 2>&1 | tail -12 ;;
  draws)
    for dtype in float16 bfloat16; do
      echo "== SK_256_CLUSTER_PAD, a draw where it changes a caller's launch, $dtype"
      timeout 130 $census --dtype "$dtype" --prior "SK_256_CLUSTER_PAD=None" --typed 8 \
        --seed 2026120695 --prior-differs 2>&1 | tail -40
    done
    echo "== narrow N: 256-wide stream-K priced against exact widths (prior: the rule off)"
    timeout 70 $census --prior "SK_256_OVER_STATIC=None" 10632x432x4824 9920x488x7360 13360x280x7776 2>&1 | tail -20
    echo "== issue 4's table"
    timeout 120 $census 8192x8192x8192 4096x4096x4096 896x2432x8192 1024x2112x8192 1408x1536x16384 \
      256x256x65536 64x8192x8192 8192x8192x256 2>&1 | tail -30 ;;
esac
