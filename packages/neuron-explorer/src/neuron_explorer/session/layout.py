"""The capture session directory: what a capture writes and an ingest reads.

    <output_dir>/<host>_pid_<pid>/<timestamp>/
        session.json            versions, host, pid, clocks, capture options, what the files hold
        system_trace.jsonl      one JSON object per runtime task (launches, copies, host tasks), in
                                completion order per queue; appended while the capture runs
                                (an eager op's launch also has "call_site": the user's file:line)
        host_samples.jsonl      host CPU utilization and memory samples, when captured
        device/timing_<n>.*.parquet
                                the device timeline of each distinct program schedule (instructions,
                                DMA transfers, semaphore updates), times relative to the program start;
                                an execution's rows are these shifted to its start
        neffs/<name>_<hash>.neff
                                the NEFFs that ran (neuron-sim's versioned format), for operands,
                                source locations and tensor tables
        sources/                copies of the source files instructions point at (index.json maps
                                the original paths)
        trace.json              the framework trace (torch.profiler), when one was exported here
        profile/                the Parquet tables, once ingested

Everything is JSON, Parquet or NEFF: no pickle anywhere.
"""

from __future__ import annotations

import pyarrow as pa

SESSION_FILE = "session.json"
SYSTEM_TRACE_FILE = "system_trace.jsonl"
HOST_SAMPLES_FILE = "host_samples.jsonl"  # host CPU and memory samples (CPU_UTIL / HOST_MEMORY captures)
DEVICE_DIR = "device"
NEFF_DIR = "neffs"
SOURCES_DIR = "sources"
SOURCES_INDEX = "index.json"
FRAMEWORK_TRACE_FILE = "trace.json"
PROFILE_DIR = "profile"
SESSION_FORMAT = "neuron-explorer-session"
PARQUET_FORMAT_KEY = b"neuron_explorer.session_format"

# The device timeline of one program schedule, relative to the program's start (float ns, as the
# timing model computes them: exact).
DEVICE_INSTRUCTIONS = pa.schema([
    ("pc", pa.int64()), ("opcode", pa.string()), ("engine", pa.string()), ("timeline_track", pa.string()),
    ("start", pa.float64()), ("end", pa.float64()), ("wait", pa.float64()), ("waited_on", pa.string()),
    ("hbm_read_bytes", pa.int64()), ("hbm_write_bytes", pa.int64()), ("sbuf_read_bytes", pa.int64()),
    ("sbuf_write_bytes", pa.int64()), ("psum_read_bytes", pa.int64()), ("psum_write_bytes", pa.int64()),
    ("raw_flops", pa.int64()), ("adjusted_flops", pa.float64()), ("transpose_flops", pa.int64()),
    ("performance_mode", pa.string()),
])
DEVICE_DMA = pa.schema([
    ("pc", pa.int64()), ("queue_name", pa.string()), ("engine_idx", pa.int64()), ("start", pa.float64()),
    ("end", pa.float64()), ("transfer_bytes", pa.int64()), ("source", pa.string()), ("dest", pa.string()),
])
DEVICE_SEMAPHORES = pa.schema([
    ("timestamp", pa.float64()), ("semaphore", pa.string()), ("value", pa.int64()), ("update_source", pa.string()),
    ("pc", pa.int64()),
])
DEVICE_PARTS = {"instructions": DEVICE_INSTRUCTIONS, "dma": DEVICE_DMA, "semaphores": DEVICE_SEMAPHORES}


def device_file(key: str, part: str) -> str:
    return f"{DEVICE_DIR}/{key}.{part}.parquet"
