"""Trace capture as sessions: each collects the records published while it is active.

    with TraceSession(devices=[0]) as session:      # or session.start() ... session.stop()
        ...                                         # run work
    for record in session.records: ...

Several sessions may be active at once (a profiler's and a test's), each with its own filter:
the devices (runtime device indices) and record kinds it wants. A session either keeps what it
collects (``records``; ``drain()`` takes what came so far, so a profiler can write records out in
batches and hold only a batch) or hands each record to ``on_record`` as it arrives, keeping
nothing. Records arrive on the threads that finish tasks - queue workers, or threads running a
queue's work while they synchronize - so ``on_record`` must be thread-safe.

Sessions subscribe to a ``TraceSink`` (the process-wide one by default, which runtimes publish to
unless given their own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from .records import LaunchRecord, OpRecord, RecordKind, record_kind
from .sink import TraceSink, global_sink

Record = LaunchRecord | OpRecord


class TraceSession:
    def __init__(self, *, devices: Iterable[int] | None = None, kinds: Iterable[str | RecordKind] | None = None,
                 on_record: Callable[[Record], None] | None = None, sink: TraceSink | None = None):
        self.devices = None if devices is None else frozenset(_device_index(d) for d in devices)
        self.kinds = None if kinds is None else frozenset(record_kind(k) for k in kinds)
        if on_record is not None and not callable(on_record):
            raise TypeError(f"on_record must be callable, got {type(on_record).__name__}")
        self.on_record = on_record
        self.sink = sink if sink is not None else global_sink()
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._handle: int | None = None

    def __repr__(self) -> str:
        state = "active" if self.active else "stopped"
        return f"<TraceSession {state}, devices {sorted(self.devices) if self.devices is not None else 'all'}, {len(self._records)} record(s)>"

    # --- lifetime ----------------------------------------------------------------------------
    def start(self) -> TraceSession:
        with self._lock:
            if self._handle is not None:
                raise RuntimeError("this trace session is already active")
            self._handle = self.sink.subscribe(self._receive)
        return self

    def stop(self) -> None:
        """Stop collecting (records already collected stay). Stopping twice is harmless."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            self.sink.unsubscribe(handle)

    def __enter__(self) -> TraceSession:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def active(self) -> bool:
        return self._handle is not None

    # --- records -----------------------------------------------------------------------------
    def wants(self, record: Record) -> bool:
        return (self.devices is None or record.device in self.devices) and (self.kinds is None or record.kind in self.kinds)

    def _receive(self, record: Record) -> None:
        if not self.wants(record):
            return
        if self.on_record is not None:
            self.on_record(record)
        else:
            with self._lock:  # not lost to a drain() swapping the list meanwhile
                self._records.append(record)

    @property
    def records(self) -> list[Record]:
        """A copy of the records collected so far (and not drained)."""
        with self._lock:
            return list(self._records)

    def drain(self) -> list[Record]:
        """Take the records collected so far: the session no longer holds them."""
        with self._lock:
            taken, self._records = self._records, []
        return taken


def _device_index(device) -> int:
    index = getattr(device, "index", device)  # a runtime Device, or its index
    if not isinstance(index, int) or isinstance(index, bool):
        raise TypeError(f"trace session devices are device indices (or Devices), got {device!r}")
    return index
