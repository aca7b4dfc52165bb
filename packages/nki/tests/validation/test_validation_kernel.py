"""Kernel-level rules (outputs, return values) and Python errors raised inside kernels."""

import traceback

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from neuron_sim.errors import ConfigurationError
from nki import NkiError, NkiValidationError
from nki_helpers import check_error, line_of

X = np.ones((128, 64), np.float32)


@nki.jit
def writes_nothing(x):  # no-output
    t = nl.load(x)
    nl.exp(t)


@nki.jit
def returns_a_tile(x):
    t = nl.load(x)
    return t  # returns-tile


@nki.jit
def returns_a_view(x):
    out = nl.ndarray((256, 64), x.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:128, :], nl.load(x))
    return out[0:128, :]  # returns-view


@nki.jit
def returns_unwritten(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.load(x)
    return out  # returns-unwritten


@nki.jit
def returns_a_number(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return 3  # returns-number


def test_kernel_that_writes_no_output():
    with pytest.raises(NkiValidationError) as info:
        writes_nothing(X)
    check_error(info.value, "kernel.no_output", "'writes_nothing'", marker="no-output")


@pytest.mark.parametrize("kernel,rule,value,marker", [
    (returns_a_tile, "kernel.return", "buffer=sbuf", "returns-tile"),
    (returns_a_view, "kernel.return", "not a view", "returns-view"),  # a part, not a reshape of the whole
    (returns_unwritten, "kernel.output_unwritten", "never writes", "returns-unwritten"),
    (returns_a_number, "kernel.return", "got int", "returns-number"),
], ids=["tile", "view", "unwritten", "number"])
def test_bad_returns_point_at_the_return_statement(kernel, rule, value, marker):
    with pytest.raises(NkiValidationError) as info:
        kernel(X)
    check_error(info.value, rule, value, marker=marker)


def test_writing_an_input_counts_as_output():
    @nki.jit
    def scale_in_place(x):
        nl.store(x, nl.multiply(nl.load(x), 2.0))

    x = X.copy()
    assert scale_in_place(x) is None
    np.testing.assert_array_equal(x, 2 * X)


# --- Python errors surface as themselves, with the kernel's frames in the traceback ------------
@nki.jit
def divides_by_zero(x):
    rows = x.shape[0] - 128
    tiles = x.shape[1] // rows  # zero-division
    return tiles


def _helper(table, key):
    return table[key]  # key-error


@nki.jit
def looks_up_missing_key(x, config):
    return _helper(dict(config), "tile_n")


def _frames(err):
    return [(f.filename, f.lineno) for f in traceback.extract_tb(err.__traceback__)]


def test_zero_division_propagates_with_the_kernel_frame():
    with pytest.raises(ZeroDivisionError) as info:
        divides_by_zero(X)
    assert (__file__, line_of("zero-division", __file__)) in _frames(info.value)


def test_tracer_frames_are_dropped_from_the_traceback():
    import os

    import nki as nki_package

    with pytest.raises(ZeroDivisionError) as info:
        divides_by_zero(X)
    frames = _frames(info.value)
    nki_dir = os.path.dirname(nki_package.__file__)
    # this test, the kernel call (nki's re-raise), then straight into the kernel body
    inside = [f for f, _ in frames if f.startswith(nki_dir)]
    assert len(inside) == 1 and frames[-1] == (__file__, line_of("zero-division", __file__))


def test_key_error_propagates_from_helpers_called_by_the_kernel():
    with pytest.raises(KeyError, match="tile_n") as info:
        looks_up_missing_key(X, (("tile_m", 128),))
    assert (__file__, line_of("key-error", __file__)) in _frames(info.value)


def test_a_failed_trace_leaves_no_kernel_behind():
    # the next kernel traces cleanly (no stale trace context, nothing cached for the failed call)
    with pytest.raises(ZeroDivisionError):
        divides_by_zero(X)
    with pytest.raises(NkiError, match="inside a function decorated with @nki.jit"):
        nl.zeros((128, 4), nl.float32)
    with pytest.raises(ZeroDivisionError):
        divides_by_zero(X)


def test_validation_errors_inside_helpers_name_the_helper_line():
    def evacuate(psum_tile):
        out = nl.ndarray(psum_tile.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=psum_tile, engine=nisa.gpsimd_engine)  # helper-line
        return out

    @nki.jit
    def uses_helper(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        nl.store(out, evacuate(acc))
        return out

    with pytest.raises(NkiValidationError) as info:
        uses_helper(X)
    check_error(info.value, "engine.memory_access", "gpsimd", marker="helper-line")


def test_platform_target_argument_is_refused():
    with pytest.raises(NkiError, match="NEURON_PLATFORM_TARGET_OVERRIDE"):
        nki.jit(platform_target="trn2")(lambda x: x)


def test_unknown_platform_target(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ConfigurationError, match="trn9"):
        returns_a_tile(X)


def test_float64_arguments_are_refused():
    with pytest.raises(NkiError, match="float64"):
        returns_a_tile(np.ones((128, 4)))
