"""Preloaded in the worker processes of mgemm's embedded cluster (``mgemm.cluster``'s
``start_default_cluster``, Dask's ``preload``): they ignore SIGINT.

A Ctrl-C in a terminal reaches every process of its foreground group, the workers included: each
printed its own ``KeyboardInterrupt`` traceback while the command was closing them anyway.  The
command's own process takes a Ctrl-C as before.  (It used to ignore SIGINT itself while the
workers started, so that they inherited ignoring it; a Ctrl-C in those seconds was lost, and the
command ran on to its end.  A worker the nanny starts again after a crash runs this too.)  The
workers also block SIGINT from their first instruction (``mgemm.cluster._loop_blocking_sigint``),
which covers the second or so before this runs; ignoring it here still holds in a thread of the
worker that unblocks it (multiprocessing's resource tracker unblocks SIGINT in the thread that
starts it).
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
from typing import Any


def dask_setup(worker: Any) -> None:
    """In a worker process of its own (not a worker in the client's process), on its main thread,
    where a signal's handler can be set: SIGINT ignored from here on."""
    if multiprocessing.parent_process() is not None and \
            threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
