"""neuron-explorer: capture and ingest throughput of a million-instruction run (target: >= 1M
instruction records per second to Parquet).

The run's trace records are replayed into a recorder (``_explorer_trace``); the session is then
ingested into every profile table. Baseline, same run: writing the finished Instruction table
alone with one ``pyarrow.parquet.write_table`` call from memory - the floor for its rows (ingest
also derives and writes DmaPacket, SemaphoreUpdate, ActiveTime, HbmUsage, Flow and the roll-ups).

    python benchmarks/explorer_ingest.py [--instructions 1000000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import pyarrow.parquet as pq
from _explorer_trace import synthetic_session
from _harness import report
from neuron_explorer import ingest
from neuron_explorer.profile import Profile


def bare_rate(launches: int) -> float:
    """Records per second through a trace sink whose only subscriber appends them to a list."""
    from neuron_sim.trace import LaunchRecord, TraceSink

    sink, kept = TraceSink(), []
    sink.subscribe(kept.append)
    start = time.perf_counter()
    for i in range(launches):
        sink.publish(LaunchRecord(i, 0, "default", "op", "neff", 0.0, 1.0, 0, 0))
    return launches / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instructions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="explorer-bench-")
    try:
        session, rows, capture_s = synthetic_session(work, args.instructions)
        launches = sum(1 for _ in open(os.path.join(session, "system_trace.jsonl")))
        ingest_s = floor_s = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            path = ingest(session)
            ingest_s = min(ingest_s, time.perf_counter() - start)
            table = Profile(path).table("Instruction", decode=False)
            start = time.perf_counter()
            pq.write_table(table, os.path.join(work, "floor.parquet"), compression="zstd")
            floor_s = min(floor_s, time.perf_counter() - start)
        print(f"{rows:,} instruction records in {launches:,} executions; load average {os.getloadavg()[0]:.1f}")
        report("explorer capture (records -> session)", f"{launches / capture_s:,.0f} launches/s",
               bare_rate(launches) / (launches / capture_s), "a bare list.append subscriber", "-")
        report("explorer ingest (session -> Parquet)", f"{rows / ingest_s:,.0f} inst/s", ingest_s / floor_s,
               "write_table of the Instruction table", ">= 1,000,000 inst/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
