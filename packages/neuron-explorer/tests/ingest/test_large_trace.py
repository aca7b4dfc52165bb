"""A million-instruction run is ingested without holding the trace in memory."""

import json
import subprocess
import sys
import textwrap

import pyarrow as pa
from neuron_explorer.profile import Profile

RUN = textwrap.dedent("""
    import json, resource, sys
    import pyarrow as pa
    from neuron_sim import get_architecture
    from neuron_sim.programs import tiled_matmul
    from neuron_sim.timing import estimate
    from neuron_sim.trace import LaunchRecord, TraceSink
    from neuron_explorer import CaptureConfig, Recorder, ingest

    arch = get_architecture("trn2")
    program = tiled_matmul(1024, 1024, 2048, arch=arch)
    timing = estimate(program, arch)
    sink = TraceSink()
    recorder = Recorder(sys.argv[1], CaptureConfig(device_profile="session"), sink=sink, cores_available=[0])
    rows, launch, clock = 0, 0, 0.0
    with recorder:  # the trace records of a long run, replayed (executing them would only take longer)
        while rows < 1_000_000:
            launch += 1
            sink.publish(LaunchRecord(launch, 0, "default", "aten::mm", "neff", clock, clock + timing.total_ns, 0, 0,
                                      timings=(timing,), programs=(program,), executor="fast", core_id=0))
            clock += timing.total_ns
            rows += len(timing.instructions)
    del timing, program
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    path = ingest(recorder.session_dir)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"profile": str(path), "rows": rows, "rss_growth": peak - before,
                      "arrow_peak": pa.default_memory_pool().max_memory()}))
""")


def test_a_million_instruction_run_is_ingested_in_bounded_memory(tmp_path):
    result = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    profile = Profile(report["profile"])
    instructions = profile.table("Instruction")
    assert instructions.num_rows == report["rows"] >= 1_000_000
    whole = instructions.nbytes + profile.table("Flow").nbytes + profile.table("DmaPacket").nbytes
    # row groups of 131,072 rows per table: a small fraction of the trace, whatever its length
    assert report["arrow_peak"] < whole / 4, (report, whole)
    assert report["rss_growth"] < whole / 2, (report, whole)
    assert pa.types.is_dictionary(profile.table("Instruction", columns=["operands"], decode=False).schema[0].type)
