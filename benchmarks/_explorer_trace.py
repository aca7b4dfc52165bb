"""A capture session with a given number of instruction records, for the neuron-explorer benchmarks.

The runtime's trace records of a long run are replayed into a recorder (the schedule of each
program is the timing model's, shared by every execution as in a real run); executing the
launches would only add the simulator's own time to a benchmark of the profiler.
"""

from __future__ import annotations

import time

from neuron_explorer import CaptureConfig, Recorder
from neuron_sim import get_architecture
from neuron_sim.programs import dependent_chain, tiled_matmul
from neuron_sim.timing import estimate
from neuron_sim.trace import LaunchRecord, TraceSink


def synthetic_session(out_dir, instructions: int = 1_000_000) -> tuple[object, int, float]:
    """(session dir, instruction records, seconds the recorder took) for a run of about ``instructions``."""
    arch = get_architecture("trn2")
    programs = [tiled_matmul(1024, 1024, 2048, arch=arch), tiled_matmul(512, 512, 1024, arch=arch),
                dependent_chain(200, arch=arch)]
    timings = [estimate(p, arch) for p in programs]
    sink = TraceSink()
    recorder = Recorder(out_dir, CaptureConfig(device_profile="session"), sink=sink, cores_available=[0])
    rows = launch = 0
    clock = 0.0
    start = time.perf_counter()
    with recorder:
        while rows < instructions:
            program, timing = programs[launch % 3], timings[launch % 3]
            launch += 1
            now = time.perf_counter_ns()
            sink.publish(LaunchRecord(launch, 0, "default", f"op{launch % 3}", "neff", clock, clock + timing.total_ns, now, now,
                                      timings=(timing,), programs=(program,), executor="fast", core_id=0))
            clock += timing.total_ns
            rows += len(timing.instructions)
    return recorder.session_dir, rows, time.perf_counter() - start
