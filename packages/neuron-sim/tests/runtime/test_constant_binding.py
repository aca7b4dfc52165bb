"""Constant input tensors whose data travels in the program (metadata "constants") bind themselves at launch."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from neuron_sim import ProgramBuilder, ValidationError, get_architecture
from neuron_sim.isa import DmaCopy, TensorTensor
from neuron_sim.neff import Neff
from neuron_sim.runtime.constants import constant_buffers

rng = np.random.default_rng(0)
ARCH = get_architecture("trn2")


def add_constant_program(c: np.ndarray, data: str | None = None):
    """y = x + c, c stored in the program's metadata."""
    b = ProgramBuilder("add_constant", ARCH)
    x = b.input("x", c.shape, "float32")
    const = b.input("c", c.shape, "float32")
    y = b.output("y", c.shape, "float32")
    tx, tc = b.sbuf(c.shape, "float32"), b.sbuf(c.shape, "float32")
    b.emit(DmaCopy(dst=tx[:, :], src=x[:, :]))
    b.emit(DmaCopy(dst=tc[:, :], src=const[:, :]))
    b.emit(TensorTensor(dst=tx[:, :], in0=tx[:, :], in1=tc[:, :], op="add"))
    b.emit(DmaCopy(dst=y[:, :], src=tx[:, :]))
    entry = {"dtype": "float32", "shape": list(c.shape), "data": data or base64.b64encode(c.tobytes()).decode("ascii")}
    return b.build(metadata={"constants": {"c": entry}})


def launch(rt, program, buffers):
    rt.device(0).launch(program, buffers)
    rt.synchronize()


def test_constants_bind_themselves(blocking_runtime):
    c = rng.standard_normal((128, 40)).astype(np.float32)
    x = rng.standard_normal((128, 40)).astype(np.float32)
    y = np.empty_like(x)
    launch(blocking_runtime, add_constant_program(c), {"x": x, "y": y})
    np.testing.assert_array_equal(y, x + c)


def test_a_caller_buffer_wins(runtime):
    c = rng.standard_normal((128, 8)).astype(np.float32)
    mine = np.ones((128, 8), np.float32)
    x, y = np.zeros((128, 8), np.float32), np.empty((128, 8), np.float32)
    launch(runtime, add_constant_program(c), {"x": x, "y": y, "c": mine})
    np.testing.assert_array_equal(y, mine)


def test_constants_travel_in_the_neff(runtime, tmp_path):
    c = rng.standard_normal((128, 16)).astype(np.float32)
    Neff(add_constant_program(c)).save(tmp_path / "c.neff")
    loaded = Neff.load(tmp_path / "c.neff")
    x, y = np.full((128, 16), 2.0, np.float32), np.empty((128, 16), np.float32)
    launch(runtime, loaded, {"x": x, "y": y})
    np.testing.assert_array_equal(y, x + c)


def test_decoded_once_per_program_and_read_only():
    program = add_constant_program(np.zeros((128, 4), np.float32))
    first = constant_buffers(program)
    assert constant_buffers(program) is first
    assert not first["c"].flags.writeable


@pytest.mark.parametrize("data", ["not base64!", base64.b64encode(b"short").decode()])
def test_bad_constant_data_is_a_launch_error(runtime, data):
    program = add_constant_program(np.zeros((128, 4), np.float32), data=data)
    with pytest.raises(ValidationError) as err:
        launch(runtime, program, {"x": np.zeros((128, 4), np.float32), "y": np.empty((128, 4), np.float32)})
    assert err.value.rule == "launch.constant" and "'c'" in str(err.value)


def test_other_inputs_are_still_required(runtime):
    program = add_constant_program(np.zeros((128, 4), np.float32))
    with pytest.raises(ValidationError) as err:
        launch(runtime, program, {"y": np.empty((128, 4), np.float32)})
    assert err.value.rule == "launch.missing_buffer" and "tensor(s) ['x']" in str(err.value)
