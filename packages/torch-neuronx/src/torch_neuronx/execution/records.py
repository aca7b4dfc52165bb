"""Op-level records: which framework op made each launch or host task of the device.

The runtime's own trace records (``neuron_sim.trace``) describe a task once it ran: its program,
engines and simulated times. An ``OpRecord`` is published when the task is *submitted*, by the
execution API, and says what torch was doing: the op or graph, the framework path that issued it
(``eager``, ``adaptive_eager``, ``torch.compile``, ``nki``, ``cpu_fallback``, ``copy``) and the
stream. A profiler joins the two on ``launch_id``.

Records go through a neuron-sim trace sink of their own (subscribers are called on the thread
that submitted the work; one that raises is logged once and otherwise ignored). With no
subscriber, publishing costs one attribute test per launch.
"""

from __future__ import annotations

from dataclasses import dataclass

from neuron_sim.trace import TraceSink


@dataclass(frozen=True)
class OpRecord:
    launch_id: int  # the runtime task's id (neuron_sim's LaunchRecord.launch_id)
    name: str  # the op or graph (``aten::add.Tensor``, ``graph0_forward``, an NKI kernel's name)
    kind: str  # "neff" for launches; the host task's kind otherwise ("cpu_fallback", "copy", "host")
    framework: str  # the path that issued it: eager / adaptive_eager / torch.compile / nki / cpu_fallback / copy
    context: str  # the call as errors name it: op(shapes) or graph
    device: int  # neuron:<device>
    stream_id: int  # the torch stream's id on that device (0: the default stream)
    queue: str  # the runtime queue behind that stream
    start_ns: float  # simulated, on the device timeline
    end_ns: float


SINK = TraceSink()


def subscribe(callback) -> int:
    """Call ``callback(record)`` with an ``OpRecord`` for every launch and host task from now on;
    returns a handle for ``unsubscribe``."""
    return SINK.subscribe(callback)


def unsubscribe(handle: int) -> None:
    SINK.unsubscribe(handle)
