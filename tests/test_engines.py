"""Engine plumbing that runs without a GPU: the order of stream operations around a block task."""

from __future__ import annotations

import threading
import types

from mgemm import engines


def _fake_cupy(log):
    """The parts of CuPy ``engines.task_stream`` touches, logging each stream operation."""
    class Event:
        def __init__(self, **kwargs):
            log.append(("event", kwargs))

        def record(self, stream):
            log.append(("record", stream.name))

    class Stream:
        def __init__(self, non_blocking=False, name="task"):
            self.name = name
            log.append(("stream", non_blocking))

        def wait_event(self, event):
            log.append(("wait", self.name))

        def __enter__(self):
            log.append(("enter", self.name))

        def __exit__(self, *exc):
            log.append(("exit", self.name))

        def synchronize(self):
            log.append(("synchronize", self.name))

    Stream.null = Stream.__new__(Stream)
    Stream.null.name = "legacy"
    cuda = types.SimpleNamespace(Stream=Stream, Event=Event,
                                 Device=lambda: types.SimpleNamespace(id=0))
    return types.SimpleNamespace(__name__="cupy", cuda=cuda)


def test_task_stream_waits_for_the_legacy_stream_then_synchronizes(monkeypatch):
    monkeypatch.setattr(engines, "_streams", threading.local())  # keep the fakes out of real runs
    log = []
    cp = _fake_cupy(log)
    with engines.task_stream(cp):
        log.append(("work",))
    assert log == [("stream", True), ("event", {"disable_timing": True}), ("record", "legacy"),
                   ("wait", "task"), ("enter", "task"), ("work",), ("exit", "task"),
                   ("synchronize", "task")]
    log.clear()
    with engines.task_stream(cp):  # the stream and event are made once per thread and device
        pass
    assert [op for op, *_ in log] == ["record", "wait", "enter", "exit", "synchronize"]


def test_task_stream_is_a_no_op_for_numpy():
    import numpy as np
    with engines.task_stream(np):
        pass
