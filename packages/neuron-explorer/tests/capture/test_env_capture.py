"""NEURON_RT_INSPECT_ENABLE=1 captures with no code change, in a fresh interpreter."""

import os
import subprocess
import sys
import textwrap

from neuron_explorer import open_profile
from neuron_explorer.session.reader import find_sessions

SCRIPT = textwrap.dedent("""
    import numpy as np
    from neuron_sim.programs import tiled_matmul
    from neuron_sim.runtime import get_runtime
    program = tiled_matmul(256, 256, 512, dtype="float32")
    rt = get_runtime()
    for _ in range(2):
        rt.device(0).launch(program, {"lhsT": np.ones((256, 256), np.float32), "rhs": np.ones((256, 512), np.float32),
                                      "out": np.zeros((256, 512), np.float32)}, name="aten::mm")
    rt.synchronize()
""")


def _run(tmp_path, **env):
    full = {**os.environ, "NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_OUTPUT_DIR": str(tmp_path), **env}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=full, capture_output=True, text=True, timeout=120)


def test_environment_variables_start_a_capture(tmp_path):
    result = _run(tmp_path, NEURON_RT_INSPECT_DEVICE_PROFILE="model")
    assert result.returncode == 0, result.stderr
    (session,) = find_sessions(tmp_path)
    profile = open_profile(session)
    ex = profile.table("ExecutionInfo").to_pylist()
    assert [(e["name"], e["device_profiled"]) for e in ex] == [("aten::mm", True), ("aten::mm", False)]
    assert profile.table("Instruction").num_rows > 0


def test_a_bad_capture_setting_is_reported_and_the_program_still_runs(tmp_path):
    result = _run(tmp_path, NEURON_RT_INSPECT_EVENT_FILTER_NC="0,9")
    assert result.returncode == 0
    assert "capture disabled" in result.stderr and "[9]" in result.stderr
    assert find_sessions(tmp_path) == []
