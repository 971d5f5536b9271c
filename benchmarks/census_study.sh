# Sourced by the run_*_study.sh scripts that time cublas_census.py rows (from the repository
# root): makes $OUT (default /tmp/out) and sources gpu_env.sh, then census_study TAG ARG... times the caller's SHAPES with the heuristic and
# the cublas_census.py arguments ARG... (variants, --split) for each of DTYPES (default float16), in
# turns with cuBLAS, every output checked against float64; full output in $OUT/TAG-DTYPE.txt, the
# rows printed with their configs shortened, then each label's geomean, weakest shapes and count
# ahead of or behind "auto" (census_summary.py; "auto" is what a caller gets, "hopper" the
# heuristic's config as given, without the route).  CLUSTER_VARIANTS: static 2-CTA (c) and 2 x 2 (q)
# clusters of 128- and 256-wide tiles, as cublas_census.py --variant arguments.  study_tests TAG EXPR:
# tests/test_hopper.py's GPU tests that pytest -k EXPR selects (TEST_WORKERS xdist workers, default
# 12), full output in $OUT/pytest-TAG.log, the summary printed.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source "$(dirname "${BASH_SOURCE[0]}")/gpu_env.sh"
CLUSTER_VARIANTS=(--variant c128:policy=static,tile_n=128,stages=6,cluster_m=2,cluster_n=1
                  --variant c256:policy=static,tile_n=256,stages=4,cluster_m=2,cluster_n=1
                  --variant q128:policy=static,tile_n=128,stages=6,cluster_m=2,cluster_n=2
                  --variant q256:policy=static,tile_n=256,stages=4,cluster_m=2,cluster_n=2)
census_study() {
  local tag=$1 dtype
  shift
  for dtype in ${DTYPES:-float16}; do
    echo "== $dtype"
    # shellcheck disable=SC2086
    timeout "${STUDY_TIMEOUT:-300}" python3 benchmarks/cublas_census.py --no-census --reps 8 --dtype "$dtype" \
      "$@" $SHAPES >"$OUT/$tag-$dtype.txt" 2>&1
    grep -v "^#" "$OUT/$tag-$dtype.txt" | sed -e 's/ | tiles.*//' -e "s/hopper $dtype->$dtype //" | cut -c1-150
    python3 "$(dirname "${BASH_SOURCE[0]}")/census_summary.py" --against auto "$OUT/$tag-$dtype.txt"
  done
}
study_tests() {
  timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest -q -m gpu -p no:cacheprovider -n "${TEST_WORKERS:-12}" -rfs \
    tests/test_hopper.py -k "$2" >"$OUT/pytest-$1.log" 2>&1
  grep -E "passed|failed|FAILED|Error" "$OUT/pytest-$1.log" | tail -10
}
