#!/usr/bin/env bash
# Moves the UCX and RMM wheels (about 53 MB of the 63 in .whl) from .whl to .whl-ucx, so that a
# device call that needs no UCX carries .whl alone: what travels to the GPU host is at most 64 MiB,
# the trees of benchmarks/trees_in_turns.sh included.  Calls that start a GPU cluster over UCX (the
# orchestrator, scaling, the whole GPU suite, the staged checks) carry both: carry=[".whl", ".whl-ucx"]
# (benchmarks/gpu_env.sh installs what is there).  Run here, from the repository root, after
# ../shared/gpu/fetch-wheels.sh .whl; it keeps .whl-ucx out of git through .git/info/exclude.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl-ucx .git/info
grep -qx '/.whl-ucx/' .git/info/exclude 2>/dev/null || echo '/.whl-ucx/' >> .git/info/exclude
shopt -s nullglob
for w in .whl/libucx_* .whl/libucxx_* .whl/ucxx_* .whl/distributed_ucxx_* .whl/librmm_* .whl/rmm_* \
         .whl/rapids_logger-*; do
  mv "$w" .whl-ucx/
done
echo ".whl: $(du -sh .whl | cut -f1), .whl-ucx: $(du -sh .whl-ucx | cut -f1)"
