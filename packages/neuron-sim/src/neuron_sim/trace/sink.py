"""A publish/subscribe point for runtime trace records (what ``TraceSession`` is built on).

The runtime checks ``sink.enabled`` (a plain attribute) before building any record, so with no
subscriber tracing costs one attribute read per task. Subscribers are called on the queue's worker
thread, in completion order per queue - so concurrently from the workers of different queues
(subscribers must be thread-safe; ``list.append`` is). A subscriber that raises is logged once and otherwise
ignored, because a profiler bug must never stop the device.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable

from .records import LaunchRecord, OpRecord

logger = logging.getLogger("neuron_sim.trace")

Subscriber = Callable[[LaunchRecord | OpRecord], None]


class TraceSink:
    def __init__(self) -> None:
        self.enabled = False
        # Replaced, never mutated, so publishers iterate without taking the lock.
        self._subscribers: tuple[tuple[int, Subscriber], ...] = ()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._warned: set[int] = set()

    def subscribe(self, callback: Subscriber) -> int:
        """Call ``callback(record)`` for every record from now on; returns a handle for unsubscribe."""
        if not callable(callback):
            raise TypeError(f"trace subscriber must be callable, got {type(callback).__name__}")
        with self._lock:
            handle = next(self._ids)
            self._subscribers = self._subscribers + ((handle, callback),)
            self.enabled = True
        return handle

    def unsubscribe(self, handle: int) -> None:
        with self._lock:
            remaining = tuple(s for s in self._subscribers if s[0] != handle)
            if len(remaining) == len(self._subscribers):
                raise KeyError(f"no trace subscriber with handle {handle!r}")
            self._subscribers = remaining
            self.enabled = bool(remaining)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def publish(self, record: LaunchRecord | OpRecord) -> None:
        for handle, callback in self._subscribers:
            try:
                callback(record)
            except Exception:
                if handle not in self._warned:
                    self._warned.add(handle)
                    logger.warning(
                        "trace subscriber %r (handle %d) raised while handling a record of %r; "
                        "it stays subscribed and further errors from it are not logged",
                        callback, handle, record.name, exc_info=True,
                    )


_GLOBAL = TraceSink()


def global_sink() -> TraceSink:
    """The process-wide sink runtimes publish to unless given their own (what profilers subscribe to:
    it outlives ``reset_runtime``)."""
    return _GLOBAL
