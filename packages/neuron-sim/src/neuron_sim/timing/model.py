"""The timing model: schedules a program on one NeuronCore's engines and DMA engines.

Each engine runs its instructions in program order (an in-order queue). An instruction starts when
its engine is free and its memory dependencies (RAW, WAR, WAW) are satisfied - the semaphore wait.
Results become visible after the engine's pipeline latency, plus a semaphore hop when the consumer
is on another engine or queue. TensorE splits each matmul into LoadStationary, which runs in the
background of the previous MultiplyMoving, and MultiplyMoving; after an idle spell it is throttled
to 50% and ramps back to full rate (dI/dt throttling). A DMA occupies its triggering engine for
the trigger (which waits on the DMA's dependencies, as a trigger instruction does), then, after
the fixed DMA latency, moves its bytes on the DMA engines serving its partitions, in order within
its queue.

Timing depends only on the instruction list, never on data, so it is computed once per program.
The loop below is the simulator's hottest Python path: ``plan.py`` lowers the whole program first
(every cost, and every operand's dependency footprint, compressed as ``footprints.py`` explains),
and records are kept as tuples until someone asks for record objects.
"""

from __future__ import annotations

import gc

from ..arch import Architecture, get_architecture
from ..errors import ValidationError
from ..isa import Barrier, SemaphoreSignal
from ..program import Program
from .dma import endpoints
from .dma_engines import DmaEngines
from .loops import issued_stream
from .plan import COMPUTE, DMA, SYNC, TENSOR, TRACKS, Lowering
from .records import DmaRecord, SemaphoreUpdate, TimingResult
from .summary import summarize

THROTTLE_IDLE_NS = 1000.0  # TensorE idle longer than this re-engages dI/dt throttling
THROTTLE_RAMP_NS = 3000.0  # ramp from 50% to 100% utilization (neuron-explorer glossary)


# Most footprints are a single slot (footprints.py): index it rather than slice and max().
def _ready(read_fps, write_fps):
    """Earliest start allowed by memory dependencies, and the track of the binding producer."""
    ready, by = 0.0, ""
    for wend, wby, _, lo, hi in read_fps:  # RAW: the last writer
        if hi - lo == 1:
            t = wend[lo]
            if t > ready:
                ready, by = t, wby[lo]
        else:
            ends = wend[lo:hi]
            t = max(ends)
            if t > ready:
                ready, by = t, wby[lo + ends.index(t)]
    for wend, wby, rend, lo, hi in write_fps:  # WAW and WAR: earlier writers and readers
        if hi - lo == 1:
            t = wend[lo]
            if t > ready:
                ready, by = t, wby[lo]
            t = rend[lo]
        else:
            ends = wend[lo:hi]
            t = max(ends)
            if t > ready:
                ready, by = t, wby[lo + ends.index(t)]
            t = max(rend[lo:hi])
        if t > ready:
            ready, by = t, "WAR"
    return ready, by


def _record(read_fps, write_fps, end: float, by: str) -> None:
    for _, _, rend, lo, hi in read_fps:
        if hi - lo == 1:
            if rend[lo] < end:
                rend[lo] = end
        elif max(rend[lo:hi]) <= end:  # the common case: time moves forward
            rend[lo:hi] = [end] * (hi - lo)
        else:
            for i in range(lo, hi):
                if rend[i] < end:
                    rend[i] = end
    for wend, wby, _, lo, hi in write_fps:
        if hi - lo == 1:
            wend[lo] = end
            wby[lo] = by
        else:
            n = hi - lo
            wend[lo:hi] = [end] * n
            wby[lo:hi] = [by] * n


def schedule(program: Program, arch: Architecture, trip_counts: dict[int, list[int]] | None = None) -> TimingResult:
    stream, indices = issued_stream(program.instructions, trip_counts)
    plan, lowering_error = Lowering(program, arch).lower_all(stream)
    sync_ns = arch.dma.semaphore_update_ns
    dma_fixed = arch.dma.fixed_latency_ns
    engine_free = {e: 0.0 for e in TRACKS}
    queue_free: dict[str, float] = {}
    dma_engines = DmaEngines(arch.dma.engines)
    semaphores: dict[str, list[float]] = {}
    # Compact rows: (index, kind, cost entry, start, end, wait, waited_on, extra); records.py
    # expands them into InstructionRecords on demand.
    rows: list[tuple] = []
    dma_records: list[DmaRecord] = []
    sem_updates: list[SemaphoreUpdate] = []
    ls_free = mm_prev_start = 0.0
    mm_last_end = throttle_start = -1e18
    last_end = 0.0
    append = rows.append

    for idx, inst, e in zip(indices, stream, plan):
        kind = e[0]
        if kind == COMPUTE:
            _, cost, rb, wb = e
            _, engine, track, issue, latency = cost[:5]
            ready, by = _ready(rb, wb)
            if by and by != track and ready > 0:
                ready += sync_ns
            free = engine_free[engine]
            if ready > free:
                start, wait = ready, ready - free
            else:
                start, wait, by = free, 0.0, ""
            end = start + issue
            engine_free[engine] = end
            if end > last_end:
                last_end = end
            append((idx, COMPUTE, cost, start, end, wait, by, None))
            _record(rb, wb, end + latency, track)
        elif kind == TENSOR:
            _, cost, stationary, rb, recorded, wb = e
            ls_ns, mm_ns = cost[1], cost[2]
            # LoadStationary needs only the stationary tile; MultiplyMoving needs the moving tile
            # and its PSUM destination.
            wend, wby, _, lo, hi = stationary
            if hi - lo == 1:  # one slot, as nearly always: _ready() without the call
                t = wend[lo]
                ls_ready, ls_by = (t, wby[lo]) if t > 0.0 else (0.0, "")
            else:
                ls_ready, ls_by = _ready((stationary,), ())
            if ls_by and ls_by != "TensorMatrix":
                ls_ready += sync_ns
            mm_ready, mm_by = _ready(rb, wb)
            if mm_by and mm_by != "TensorMatrix" and mm_ready > 0:
                mm_ready += sync_ns
            ls_allowed = ls_free if ls_free > mm_prev_start else mm_prev_start
            ls_start = ls_ready if ls_ready > ls_allowed else ls_allowed
            ls_end = ls_start + ls_ns
            ls_free = ls_end
            mm_free = engine_free["tensor"]
            mm_start = ls_end if ls_end > mm_free else mm_free
            if mm_ready > mm_start:
                mm_start = mm_ready
            wait = mm_start - mm_free
            by = ((ls_by if ls_ready > ls_allowed else "TensorE") if ls_end >= mm_ready else mm_by) if wait else ""
            if mm_start - mm_last_end > THROTTLE_IDLE_NS:
                throttle_start = mm_start
            ramp = (mm_start - throttle_start) / THROTTLE_RAMP_NS
            throttled = ramp < 1.0
            # dI/dt throttling: starts at 50% utilization after idling, ramps to 100%.
            mm_end = mm_start + (mm_ns * (2.0 - ramp) if throttled else mm_ns)
            engine_free["tensor"] = mm_end
            mm_prev_start = mm_start
            mm_last_end = mm_end
            if mm_end > last_end:
                last_end = mm_end
            append((idx, TENSOR, cost, mm_start, mm_end, wait, by, (ls_start, ls_end, throttled)))
            # PSUM accumulates next to the array: the next matmul into the same bank need not
            # wait; consumers on other engines pay the semaphore hop.
            _record(recorded, wb, mm_end, "TensorMatrix")
        elif kind == DMA:
            _, cost, rb, wb = e
            trigger, issue, first, nengines, duration = cost[1:6]
            queue = inst.queue
            ready, by = _ready(rb, wb)
            if by and by != queue and ready > 0:
                ready += sync_ns
            free = engine_free[trigger]
            if ready > free:
                t_start, wait = ready, ready - free
            else:
                t_start, wait, by = free, 0.0, ""
            t_end = t_start + issue
            engine_free[trigger] = t_end
            earliest = t_end + dma_fixed
            q_free = queue_free.get(queue, 0.0)
            if q_free > earliest:  # transfers leave a queue in order
                earliest = q_free
            data_start = dma_engines.reserve(first, nengines, earliest, duration)
            data_end = data_start + duration
            queue_free[queue] = data_end
            done = data_end + sync_ns
            if done > last_end:
                last_end = done
            append((idx, DMA, cost, t_start, done, wait, by, queue))
            dma_records.append(DmaRecord(idx, queue, first, data_start, data_end, cost[10], *endpoints(inst)))
            sem_updates.append(SemaphoreUpdate(done, queue, len(dma_records), "DMA", idx))
            _record(rb, wb, done, queue)
        else:
            engine = inst.engine
            track = TRACKS[engine]
            spec = arch.engine(engine) if engine != "tensor" else arch.sync
            cost = spec.cycles_to_ns(spec.min_initiation_interval)
            free = engine_free[engine]
            if isinstance(inst, Barrier):
                start = max(list(engine_free.values()) + [dma_engines.busy_until(), ls_free] + list(queue_free.values()))
                end = start + cost
                for name in engine_free:
                    engine_free[name] = end
                ls_free = mm_prev_start = end
                start, wait, by = free, end - cost - free, "barrier"
            elif isinstance(inst, SemaphoreSignal):
                # The increment lands when this engine's earlier instructions have finished.
                start, end, wait, by = free, free + cost, 0.0, ""
                history = semaphores.setdefault(inst.semaphore, [])
                history.extend([end] * inst.value)
                sem_updates.append(SemaphoreUpdate(end, inst.semaphore, len(history), track, idx))
                engine_free[engine] = end
            else:
                history = semaphores.get(inst.semaphore, [])
                if len(history) < inst.value:
                    raise ValidationError(
                        "semaphore.deadlock",
                        f"wait for {inst.semaphore!r} >= {inst.value} can never be satisfied: only {len(history)} "
                        f"increment(s) are issued before it in program order",
                        inst.location,
                    )
                ready = history[inst.value - 1] + sync_ns
                start = max(free, ready)
                end = start + cost
                engine_free[engine] = end
                wait, by = max(0.0, ready - free), inst.semaphore
            append((idx, SYNC, (inst.opcode, engine, track), start, end, wait, by, None))
            if end > last_end:
                last_end = end

    if lowering_error is not None:  # the instruction after the last planned one
        raise lowering_error
    result = TimingResult(last_end, rows, [inst.location or "" for inst in program.instructions],
                          dma_records, sem_updates)
    result.summary = summarize(result, arch)
    return result


def estimate(program: Program, arch: Architecture | None = None,
             trip_counts: dict[int, list[int]] | None = None) -> TimingResult:
    """Schedule ``program`` and return its device timeline and summary.

    ``trip_counts`` gives the iteration counts of loops with run-time bounds, as recorded by the
    executor that ran the program (``ExactExecutor.trip_counts``).
    """
    arch = arch or get_architecture(program.target)
    # Scheduling allocates tens of thousands of small tuples and no reference cycles; letting the
    # cyclic collector rescan the growing heap meanwhile costs a third of the run.
    paused = gc.isenabled()
    gc.disable()
    try:
        return schedule(program, arch, trip_counts)
    finally:
        if paused:
            gc.enable()
