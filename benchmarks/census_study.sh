# Sourced by run_narrow_study.sh and run_weak_study.sh (from the repository root, after
# gpu_env.sh): census_study TAG ARG... times the caller's SHAPES with the heuristic and the
# cublas_census.py arguments ARG... (variants, --split) for each of DTYPES (default float16), in
# turns with cuBLAS, every output checked against float64; full output in $OUT/TAG-DTYPE.txt, the
# rows printed with their configs shortened.
census_study() {
  local tag=$1 dtype
  shift
  for dtype in ${DTYPES:-float16}; do
    echo "== $dtype"
    # shellcheck disable=SC2086
    timeout "${STUDY_TIMEOUT:-300}" python3 benchmarks/cublas_census.py --no-census --reps 8 --dtype "$dtype" \
      "$@" $SHAPES >"$OUT/$tag-$dtype.txt" 2>&1
    grep -v "^#" "$OUT/$tag-$dtype.txt" | sed -e 's/ | tiles.*//' -e "s/hopper $dtype->$dtype //" | cut -c1-150
  done
}
