"""LNC=2: kernel[2] runs on two physical cores sharing HBM, each tracing its own program."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from neuron_sim import ValidationError
from neuron_sim.runtime import reset_runtime
from nki import NkiError
from nki_helpers import BF16, assert_close, f32, rand


# lnc.rst's pattern: one core loops over both halves, two cores take one half each.
@nki.jit
def exp_halves(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    half = x.shape[0] // 2

    def process(h):
        for r in nl.affine_range(half // 128):
            rows = slice(h * half + r * 128, h * half + (r + 1) * 128)
            t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[rows, :])
            nisa.activation(dst=t, op=nl.exp, data=t)
            nisa.dma_copy(dst=out[rows, :], src=t)

    if nl.num_programs() == 1:
        process(0)
        process(1)
    else:
        process(nl.program_id(0))
    return out


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["fp32", "bf16"])
def test_two_cores_each_do_half(dtype):
    x = rand((512, 512), dtype, seed=1)
    assert_close(exp_halves[2](x), np.exp(f32(x)), dtype)
    compiled = exp_halves[2].compile((x,), {})
    assert [p.name for p in compiled.programs] == ["exp_halves_core0", "exp_halves_core1"]
    assert compiled.parallel
    per_core = [t.summary["dma_transfer_bytes"] for t in compiled.timing()]
    assert per_core[0] == per_core[1] == 2 * x.nbytes // 2


def test_lnc2_is_faster_than_one_core():
    x = rand((1024, 512), seed=2)
    one = exp_halves.compile((x,), {})
    two = exp_halves[2].compile((x,), {})
    np.testing.assert_array_equal(exp_halves(x), exp_halves[2](x))
    assert len(one.programs) == 1 and not one.parallel
    assert two.device_time_ns == max(t.total_ns for t in two.timing())
    assert two.device_time_ns < 0.75 * one.device_time_ns


def test_kernel_call_is_lnc1():
    seen = []

    @nki.jit
    def probe(x):
        seen.append((nl.program_id(0), nl.num_programs(), nl.program_ndim()))
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    x = rand((128, 8), seed=3)
    probe(x)
    probe[1](rand((128, 4), seed=4))
    probe[2](x)
    assert seen == [(0, 1, 0), (0, 1, 0), (0, 2, 1), (1, 2, 1)]


def test_simulate_of_an_lnc2_launch():
    x = rand((256, 256), seed=5)
    np.testing.assert_array_equal(nki.simulate(exp_halves[2])(x), exp_halves[2](x))


def test_both_cores_write_one_output_parameter():
    @nki.jit
    def negate_into(x, out):
        half = x.shape[0] // nl.num_programs()
        i = nl.program_id(0)
        t = nl.load(x[i * half:(i + 1) * half, :])
        nl.store(out[i * half:(i + 1) * half, :], nl.negative(t))

    x = rand((256, 64), seed=6)
    out = np.zeros_like(x)
    negate_into[2](x, out)
    np.testing.assert_array_equal(out, -x)


def test_last_timing_of_an_lnc2_launch_is_recorded_on_the_kernel():
    x = rand((256, 128), seed=7)
    exp_halves[2](x)
    assert len(exp_halves.last_timing) == 2


@pytest.fixture
def fresh_runtime():
    """The process runtime reads NEURON_LOGICAL_NC_CONFIG when it is made: remake it around the test."""
    reset_runtime()
    yield
    reset_runtime()


def test_lnc2_needs_a_matching_runtime_config(monkeypatch, fresh_runtime):
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    with pytest.raises(ValidationError, match=r"\[launch.lnc\].*NEURON_LOGICAL_NC_CONFIG=1"):
        exp_halves[2](rand((256, 128), seed=8))
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    reset_runtime()
    x = rand((256, 128), seed=8)
    assert_close(exp_halves[2](x), np.exp(x), np.float32)


def test_program_id_axis_outside_the_grid():
    @nki.jit
    def bad_axis(x):
        nl.program_id(1)

    with pytest.raises(nki.NkiValidationError, match=r"\[spmd.axis\]"):
        bad_axis[2](rand((8, 8)))


@pytest.mark.parametrize("grid", [0, -1, (2, 0), 1.5])
def test_invalid_grids(grid):
    with pytest.raises(NkiError, match="grid"):
        exp_halves[grid]
