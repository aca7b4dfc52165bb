"""Files a kernel run writes on request: its NEFF(s) and a trace of its launches.

NEFFs are neuron-sim's format (``neuron_sim.neff.Neff``: versioned, checksummed, no pickle); an
LNC=2 kernel has one program per physical core and so one NEFF each, ``<name>_core0<ext>`` and
``<name>_core1<ext>``.

A trace is Chrome trace-event JSON (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU;
Perfetto's UI and chrome://tracing open it). Times are microseconds on the runtime's simulated
device clock. One process per device (``pid`` = device index, named ``neuron:<index>``); in it,
one thread (track) per queue holding the launches (``cat`` "launch": name = kernel, args =
launch id, context, executor), and per physical core one track per engine / DMA queue holding the
instructions of each launch (``cat`` "instruction": name = opcode, args = the kernel's source
line, program index, semaphore wait). ``otherData`` says what made the file:
``{"format": "nki-trace", "version": 1, "kernel": ..., "target": ...}``.
"""

from __future__ import annotations

import json
import os

from neuron_sim.neff import Neff

TRACE_FORMAT = "nki-trace"
TRACE_VERSION = 1


def neff_paths(path: str | os.PathLike, programs: int) -> list[str]:
    """Where ``save_neffs`` writes a kernel of ``programs`` physical-core programs."""
    path = os.fspath(path)
    if programs == 1:
        return [path]
    stem, ext = os.path.splitext(path)
    return [f"{stem}_core{i}{ext or '.neff'}" for i in range(programs)]


def save_neffs(compiled, path: str | os.PathLike, timings, kernel_name: str) -> list[str]:
    """Write each program of ``compiled`` as a NEFF with its timing summary; returns the paths."""
    paths = neff_paths(path, len(compiled.programs))
    for core, (program, timing, target) in enumerate(zip(compiled.programs, timings, paths)):
        metadata = {"producer": "nki", "kernel": kernel_name, "physical_cores": len(paths), "core": core}
        Neff(program, timing.summary, metadata).save(target)
    return paths


def write_trace(path: str | os.PathLike, records, timings_of, kernel_name: str, target: str) -> None:
    """Write the launch ``records`` (``neuron_sim.trace.LaunchRecord``) as a Chrome trace.
    ``timings_of(record)`` gives the TimingResult of each physical core of a launch."""
    events: list[dict] = []
    tracks: dict[tuple[int, str], int] = {}

    def tid(device: int, track: str) -> int:
        key = (device, track)
        if key not in tracks:
            tracks[key] = len([k for k in tracks if k[0] == device]) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": device, "tid": tracks[key], "args": {"name": track}})
        return tracks[key]

    for device in sorted({r.device for r in records}):
        events.append({"ph": "M", "name": "process_name", "pid": device, "args": {"name": f"neuron:{device}"}})
    for rec in records:
        events.append({
            "ph": "X", "cat": "launch", "name": rec.name, "pid": rec.device, "tid": tid(rec.device, f"queue {rec.queue}"),
            "ts": rec.start_ns / 1e3, "dur": rec.duration_ns / 1e3,
            "args": {"launch_id": rec.launch_id, "context": rec.context, "executor": rec.executor},
        })
        timings = timings_of(rec)
        for core, timing in enumerate(timings):
            prefix = f"core{core} " if len(timings) > 1 else ""
            for ins in timing.instructions:
                events.append({
                    "ph": "X", "cat": "instruction", "name": ins.opcode, "pid": rec.device,
                    "tid": tid(rec.device, prefix + ins.timeline_track),
                    "ts": (rec.start_ns + ins.start_ts) / 1e3, "dur": ins.duration_ns / 1e3,
                    "args": {"source": ins.nki_source_location, "index": ins.index, "launch_id": rec.launch_id,
                             "semaphore_wait_ns": ins.evt_wait_time_ns},
                })
    document = {
        "traceEvents": events, "displayTimeUnit": "ns",
        "otherData": {"format": TRACE_FORMAT, "version": TRACE_VERSION, "kernel": kernel_name, "target": target},
    }
    with open(path, "w") as f:
        json.dump(document, f)
