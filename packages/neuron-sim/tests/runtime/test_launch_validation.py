"""Launch arguments are checked when the launch is submitted, not at a later sync point."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import ValidationError
from neuron_sim.neff import Neff


def test_launch_results_match_numpy(runtime, matmul, h):
    bufs = h.matmul_buffers()
    runtime.device(0).launch(matmul, bufs)
    runtime.synchronize()
    np.testing.assert_allclose(bufs["out"], bufs["lhsT"].T @ bufs["rhs"], rtol=1e-4, atol=1e-3)


def test_neff_is_accepted(runtime, matmul, h):
    bufs = h.matmul_buffers(1)
    sub = runtime.device(0).launch(Neff(matmul, metadata={"source_hash": "x"}), bufs)
    runtime.synchronize()
    assert sub.name == matmul.name
    np.testing.assert_allclose(bufs["out"], bufs["lhsT"].T @ bufs["rhs"], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    ("mutate", "rule", "fragment"),
    [
        (lambda b: b.pop("rhs"), "launch.missing_buffer", "['rhs']"),
        (lambda b: b.update(extra=np.zeros(4)), "launch.unknown_buffer", "['extra']"),
        (lambda b: b.update(rhs=np.zeros((256, 511), np.float32)), "launch.buffer_too_small", "'rhs'"),
        (lambda b: b.update(out=np.zeros((512, 256), np.float32).T), "launch.not_contiguous", "'out'"),
        (lambda b: b.update(lhsT=[[1.0]]), "launch.buffer_type", "list"),
    ],
)
def test_bad_buffers_raise_at_launch(runtime, matmul, h, mutate, rule, fragment):
    bufs = h.matmul_buffers()
    mutate(bufs)
    queue = runtime.device(0).default_queue
    with pytest.raises(ValidationError, match=rule) as info:
        queue.launch(matmul, bufs)
    assert fragment in str(info.value)
    assert queue.query()  # nothing was enqueued
    queue.synchronize()  # and nothing is kept for later


def test_read_only_output_is_refused(runtime, matmul, h):
    bufs = h.matmul_buffers()
    bufs["out"].flags.writeable = False
    with pytest.raises(ValidationError, match="launch.read_only_buffer"):
        runtime.device(0).launch(matmul, bufs)


def test_read_only_input_is_fine(runtime, matmul, h):
    bufs = h.matmul_buffers()
    bufs["rhs"].flags.writeable = False
    runtime.device(0).launch(matmul, bufs)
    runtime.synchronize()


def test_larger_buffer_is_fine(runtime, h):
    bufs = h.copy_buffers()
    bufs["y"] = np.zeros(128 * 64 + 16, np.float32)
    runtime.device(0).launch(h.copy_program(), bufs)
    runtime.synchronize()
    np.testing.assert_array_equal(bufs["y"][: 128 * 64], bufs["x"].reshape(-1))


def test_program_for_another_target_is_refused(runtime, h):
    from neuron_sim import get_architecture
    from neuron_sim.programs import dependent_chain

    program = dependent_chain(2, arch=get_architecture("trn3"))
    with pytest.raises(ValidationError, match="launch.target"):
        runtime.device(0).launch(program, {"x": np.zeros((1, 1), np.float32)})


def test_not_a_program(runtime):
    with pytest.raises(TypeError, match="Program or a Neff"):
        runtime.device(0).launch(object(), {})
