"""The README's profiling example (the announcement's RMSNorm example, verbatim) runs as written: its
table's device column is non-zero and adds up to torch.Event.elapsed_time over the same step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from neuron_explorer import open_profile
from torch.autograd import DeviceType

README = Path(__file__).resolve().parents[2] / "README.md"


def _profiling_example() -> str:
    section = README.read_text().split("## Profiling\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_the_rmsnorm_example_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_profiling_example(), str(README), "exec"), namespace)
    table = capsys.readouterr().out
    assert "Self NEURON" in table and "aten::mul" in table, table

    device_us = {e.key: e.self_device_time_total for e in namespace["prof"].key_averages() if e.device_type == DeviceType.CPU}
    assert {"aten::mul", "aten::mean", "aten::rsqrt", "aten::add"} <= {k for k, v in device_us.items() if v > 0}, device_us

    # The same step, timed by events on the stream.
    fn, x = namespace["rms_norm_fn"], namespace["x"]
    start, end = torch.Event(device="neuron", enable_timing=True), torch.Event(device="neuron", enable_timing=True)
    with torch.no_grad():
        start.record()
        fn(x)
        end.record()
    end.synchronize()
    assert sum(device_us.values()) == pytest.approx(start.elapsed_time(end) * 1e3, rel=1e-3)

    # One active step: one session, with the framework trace beside the device and runtime traces.
    nc = namespace["nc"]
    session = nc.get_session_dir()
    assert nc.sessions == [session] and session.is_relative_to(tmp_path / "output")
    trace = json.loads((session / "trace.json").read_text())
    assert sum(e.get("cat") == "kernel" for e in trace["traceEvents"]) == 6  # mul, mean, add, rsqrt, mul, mul
    profile = open_profile(session)
    assert profile.table("Instruction").num_rows > 0
