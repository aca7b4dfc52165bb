"""Runtime trace records and the sink profilers subscribe to.

    handle = neuron_sim.trace.global_sink().subscribe(lambda rec: records.append(rec))
    ...
    for table, row in device_events(rec): ...   # Instruction / DmaPacket / SemaphoreUpdate rows
"""

from .records import LaunchRecord, device_events
from .sink import Subscriber, TraceSink, global_sink

__all__ = ["LaunchRecord", "TraceSink", "Subscriber", "device_events", "global_sink"]
