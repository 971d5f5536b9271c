# Sourced by the benchmarks/run_*.sh scripts on the GPU host, from the repository root: unbuffered
# output, NVLink multicast off (the host's rule), and mgemm's Python dependencies installed from the
# wheels in .whl (and .whl-ucx, the UCX and RMM wheels, where the call carried it:
# benchmarks/split_wheels.sh) into /tmp/site when the host's Python lacks them (the GPU host has no
# dask); PYTHONPATH then holds /tmp/site and the repository.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1 && ! python3 -c "import distributed" 2>/dev/null; then
  wheels=(.whl/*.whl); ls .whl-ucx/*.whl >/dev/null 2>&1 && wheels+=(.whl-ucx/*.whl)
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    "${wheels[@]}" || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
fi
