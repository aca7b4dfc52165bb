"""torch.profiler's with_stack, record_shapes and profile_memory with the neuron device's activity
profiler, in a fresh process (what goes wrong only happens on a process's first profile).

with_stack=True traces every Python call, and PyTorch's tracer keeps only borrowed pointers to a
function's file and name: a module imported for the first time inside the window has its module
code freed after the import, and key_averages() then failed decoding those names
(UnicodeDecodeError). The activity profiler's Python side is imported with torch_neuronx, so
opening the window imports nothing."""

from __future__ import annotations

import pytest
from tnx_helpers import run_python

SCRIPT = """
import torch
import torch_neuronx  # noqa: F401
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
{setup}
x = torch.randn(64, 128, device="neuron")
w = torch.randn(128, 96, device="neuron")
torch.relu(x @ w)  # compiled and warm
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], with_stack=True, record_shapes=True,
             profile_memory=True{config}) as prof:
    y = torch.relu(x @ w)  # the profiled line
    torch.neuron.synchronize()
averages = prof.key_averages(group_by_input_shape=True)
mm = [e for e in averages if e.key == "aten::mm" and e.device_type == DeviceType.CPU]
assert len(mm) == 1 and mm[0].self_device_time_total > 0, mm
assert mm[0].input_shapes[:2] == [[64, 128], [128, 96]], mm[0].input_shapes
import json, os, tempfile
path = os.path.join(tempfile.mkdtemp(), "trace.json")
prof.export_chrome_trace(path)
python = [e["name"] for e in json.load(open(path))["traceEvents"] if e.get("cat") == "python_function"]
assert any(name.startswith("<string>(") for name in python), python[:20]  # the traced Python calls, by line
print("OK", mm[0].self_device_time_total)
"""


@pytest.mark.parametrize("with_config", [False, True], ids=["privateuse1", "neuron_config"])
def test_with_stack_record_shapes_and_profile_memory_on_a_first_profile(tmp_path, with_config):
    setup = ("from torch_neuronx.profiling import NeuronConfig\n"
             f"config = NeuronConfig(profile_output_dir={str(tmp_path)!r})") if with_config else ""
    code = SCRIPT.format(setup=setup, config=", experimental_config=config" if with_config else "")
    proc = run_python(code, timeout=600)
    assert proc.stdout.startswith("OK"), proc.stdout
