#!/usr/bin/env bash
# Start this machine's Dask workers for an mgemm cluster: `dask cuda worker`, one worker per GPU
# (in the foreground; run it on every GPU machine).
#
#   cluster/start-workers.sh [SCHEDULER_ADDRESS] [extra worker arguments]
#
# The scheduler is SCHEDULER_ADDRESS (e.g. ucx://10.0.0.1:8786) or, if omitted, the file
# MGEMM_SCHEDULER_FILE written by start-scheduler.sh.  Settings (environment):
#   MGEMM_PROTOCOL        tcp (default), tls or ucx: must match the scheduler
#   MGEMM_HOST            address the workers listen on; default 127.0.0.1 (a one-machine cluster);
#                         set it to this machine's address, or set MGEMM_INTERFACE, for several
#   MGEMM_INTERFACE       network interface instead, e.g. ib0
#   CUDA_VISIBLE_DEVICES  which GPUs get a worker (default: all)
#   MGEMM_RMM_POOL_SIZE   RMM pool per GPU, e.g. 0.5 (of GPU memory) or 32GiB; default with ucx:
#                         16GiB where the first visible GPU has 32 GiB or more, else 0.5 (the pool grows when a
#                         product needs more; UCX maps or registers each pool allocation once, and
#                         on NVLink a peer's first receive maps the whole allocation: a 70 GB pool
#                         stalled it ~0.26 s on two H200s); none otherwise
#   MGEMM_UCX_TRANSPORTS  auto (default: UCX chooses) or a comma list of nvlink, infiniband, rdmacm
#                         to set transports explicitly (TCP over UCX is always on then)
#   UCX_NET_DEVICES       passed to UCX as is, e.g. mlx5_0:1 to pin the InfiniBand adapter
#   MGEMM_TLS_DIR         with tls: the directory make-certs.sh filled (default
#                         $XDG_CONFIG_HOME/mgemm/certs, else ~/.config/mgemm/certs);
#                         or set MGEMM_TLS_CA, MGEMM_TLS_CERT, MGEMM_TLS_KEY one by one
#   MGEMM_NTHREADS        cuda: tasks each GPU worker runs at once (default 2: the GPU computes one
#                         block while Dask hands the worker the next; mgemm.cluster.GPU_THREADS_PER_WORKER)
#   MGEMM_TRANSFER_LIMIT  bytes a worker fetches from one peer per message (default for cuda
#                         workers 512MiB, Dask's 50MB made every 128 MiB chunk a round trip of its own;
#                         mgemm.cluster.GPU_TRANSFER_LIMIT); cpu workers: Dask's default
#   MGEMM_WORKER_KIND     cuda (default) or cpu: plain `dask worker`s for a CPU-only cluster,
#                         MGEMM_NWORKERS processes (default 1) of MGEMM_NTHREADS threads (default 1)
#   MGEMM_PYTHON          Python with mgemm, dask-cuda and CuPy installed (default: python)
set -euo pipefail

py="${MGEMM_PYTHON:-python}"
protocol="${MGEMM_PROTOCOL:-tcp}"
kind="${MGEMM_WORKER_KIND:-cuda}"

scheduler=()
if [[ $# -gt 0 && "$1" != -* ]]; then
  scheduler=("$1")
  shift
elif [[ -n "${MGEMM_SCHEDULER_FILE:-}" ]]; then
  scheduler=(--scheduler-file "$MGEMM_SCHEDULER_FILE")
else
  echo "start-workers.sh: give the scheduler address or set MGEMM_SCHEDULER_FILE" >&2
  exit 2
fi

args=(--protocol "$protocol" --no-dashboard)
if [[ -n "${MGEMM_INTERFACE:-}" ]]; then
  args+=(--interface "$MGEMM_INTERFACE")
else
  args+=(--host "${MGEMM_HOST:-127.0.0.1}")
fi

case "$protocol" in
  tls)
    tls="${MGEMM_TLS_DIR:-${XDG_CONFIG_HOME:-$HOME/.config}/mgemm/certs}"
    args+=(--tls-ca-file "${MGEMM_TLS_CA:-$tls/ca.pem}"
           --tls-cert "${MGEMM_TLS_CERT:-$tls/worker.pem}"
           --tls-key "${MGEMM_TLS_KEY:-$tls/worker-key.pem}")
    export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True ;;
  ucx|ucxx) ;;
  tcp) ;;
  *) echo "start-workers.sh: MGEMM_PROTOCOL must be tcp, tls or ucx, not '$protocol'" >&2; exit 2 ;;
esac

case "$kind" in
  cuda)
    if ! "$py" -c "import dask_cuda" 2>/dev/null; then
      echo "start-workers.sh: $py has no dask-cuda (pip install 'mgemm[cuda13]' or 'mgemm[cuda12]');" \
           "for a CPU-only cluster set MGEMM_WORKER_KIND=cpu" >&2
      exit 2
    fi
    pool="${MGEMM_RMM_POOL_SIZE:-}"
    if [[ -z "$pool" && "$protocol" == ucx* ]]; then
      first="${CUDA_VISIBLE_DEVICES:-0}"
      mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i "${first%%,*}" 2>/dev/null | head -1 || true)
      if [[ "$mib" =~ ^[0-9]+$ ]] && (( mib >= 32768 )); then pool=16GiB; else pool=0.5; fi
    fi
    [[ -n "$pool" ]] && args+=(--rmm-pool-size "$pool")
    args+=(--nthreads "${MGEMM_NTHREADS:-2}")
    export DASK_DISTRIBUTED__WORKER__TRANSFER__MESSAGE_BYTES_LIMIT="${MGEMM_TRANSFER_LIMIT:-512MiB}"
    transports="${MGEMM_UCX_TRANSPORTS:-auto}"
    if [[ "$protocol" == ucx* && "$transports" != auto ]]; then
      args+=(--enable-tcp-over-ucx)
      IFS=, read -ra wanted <<< "$transports"
      for t in "${wanted[@]}"; do
        case "$t" in
          nvlink|infiniband|rdmacm) args+=("--enable-$t") ;;
          *) echo "start-workers.sh: unknown UCX transport '$t'" >&2; exit 2 ;;
        esac
      done
    fi
    exec "$py" -m dask cuda worker "${scheduler[@]}" "${args[@]}" "$@" ;;
  cpu)
    [[ -n "${MGEMM_TRANSFER_LIMIT:-}" ]] && \
      export DASK_DISTRIBUTED__WORKER__TRANSFER__MESSAGE_BYTES_LIMIT="$MGEMM_TRANSFER_LIMIT"
    exec "$py" -m dask worker "${scheduler[@]}" "${args[@]}" \
      --nworkers "${MGEMM_NWORKERS:-1}" --nthreads "${MGEMM_NTHREADS:-1}" "$@" ;;
  *) echo "start-workers.sh: MGEMM_WORKER_KIND must be cuda or cpu, not '$kind'" >&2; exit 2 ;;
esac
