"""Runtime trace records, the sink they are published to, and capture sessions.

    with neuron_sim.trace.TraceSession(devices=[0]) as session:
        ...                                          # launches, host tasks, frameworks' op records
    for rec in session.records: ...                  # LaunchRecord / OpRecord
    for table, row in device_events(rec): ...        # Instruction / DmaPacket / SemaphoreUpdate rows

Underneath, ``global_sink().subscribe(callback)`` calls ``callback(record)`` for every record.
"""

from .records import ClockAnchor, LaunchRecord, OpRecord, RecordKind, device_events, record_kind
from .session import TraceSession
from .sink import Subscriber, TraceSink, global_sink

__all__ = ["LaunchRecord", "OpRecord", "RecordKind", "ClockAnchor", "TraceSession", "TraceSink", "Subscriber",
           "device_events", "global_sink", "record_kind"]
