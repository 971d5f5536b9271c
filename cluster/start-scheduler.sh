#!/usr/bin/env bash
# Start the Dask scheduler of an mgemm cluster (in the foreground; run it under tmux, srun, systemd).
#
#   cluster/start-scheduler.sh [extra `dask scheduler` arguments]
#
# Settings (environment):
#   MGEMM_PROTOCOL        tcp (default), tls or ucx
#   MGEMM_HOST            address to listen on; default 127.0.0.1, so nothing is reachable from
#                         other machines until you set it (or MGEMM_INTERFACE)
#   MGEMM_INTERFACE       network interface to listen on instead, e.g. ib0 (InfiniBand) or eth0
#   MGEMM_SCHEDULER_PORT  default 8786
#   MGEMM_SCHEDULER_FILE  write the address to this JSON file (on a shared file system) for workers
#   MGEMM_DASHBOARD       dashboard address, e.g. 127.0.0.1:8787; default: no dashboard
#   MGEMM_TLS_DIR         with tls: the directory make-certs.sh filled (default
#                         $XDG_CONFIG_HOME/mgemm/certs, else ~/.config/mgemm/certs);
#                         or set MGEMM_TLS_CA, MGEMM_TLS_CERT, MGEMM_TLS_KEY one by one
#   MGEMM_PYTHON          Python with mgemm, dask and distributed installed (default: python)
# The scheduler needs mgemm importable: mgemm registers a scheduler plugin that keeps planned
# block placement (see mgemm/cluster.py).
set -euo pipefail

py="${MGEMM_PYTHON:-python}"
protocol="${MGEMM_PROTOCOL:-tcp}"
args=(--protocol "$protocol" --port "${MGEMM_SCHEDULER_PORT:-8786}")

if [[ -n "${MGEMM_INTERFACE:-}" ]]; then
  args+=(--interface "$MGEMM_INTERFACE")
else
  args+=(--host "${MGEMM_HOST:-127.0.0.1}")
fi
[[ -n "${MGEMM_SCHEDULER_FILE:-}" ]] && args+=(--scheduler-file "$MGEMM_SCHEDULER_FILE")
if [[ -n "${MGEMM_DASHBOARD:-}" ]]; then
  args+=(--dashboard-address "$MGEMM_DASHBOARD")
else
  args+=(--no-dashboard)
fi

case "$protocol" in
  tls)
    tls="${MGEMM_TLS_DIR:-${XDG_CONFIG_HOME:-$HOME/.config}/mgemm/certs}"
    args+=(--tls-ca-file "${MGEMM_TLS_CA:-$tls/ca.pem}"
           --tls-cert "${MGEMM_TLS_CERT:-$tls/scheduler.pem}"
           --tls-key "${MGEMM_TLS_KEY:-$tls/scheduler-key.pem}")
    export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True ;;
  ucx|ucxx)
    # UCX picks its transports (NVLink, InfiniBand, TCP) itself when the scheduler has a CUDA
    # context; workers and the client must also use UCX (see start-workers.sh and the README).
    export DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT="${DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT:-True}" ;;
  tcp) ;;
  *) echo "start-scheduler.sh: MGEMM_PROTOCOL must be tcp, tls or ucx, not '$protocol'" >&2; exit 2 ;;
esac

# mgemm places blocks itself; Dask's work stealing would move them off their planned GPUs.
# (mgemm's plugin also exempts its own tasks; set True here for a cluster shared with other work.)
export DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING="${DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING:-False}"

exec "$py" -m dask scheduler "${args[@]}" "$@"
