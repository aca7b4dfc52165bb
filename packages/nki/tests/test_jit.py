"""nki.jit: tracing once per signature, argument binding, output styles, nki.simulate."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki import NkiError
from nki_helpers import BF16, assert_close, f32, rand

TRACES = []


@nki.jit
def scale(x, factor):
    TRACES.append((x.shape, factor))  # runs at trace time only
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), factor))
    return out


def test_traced_once_per_signature():
    TRACES.clear()
    x = rand((128, 64), seed=1)
    for _ in range(3):
        assert_close(scale(x, 2.0), 2 * x)
    assert TRACES == [((128, 64), 2.0)]
    scale(x, 3.0)  # a new compile-time value
    scale(rand((128, 32), seed=2), 3.0)  # a new shape
    scale(x.astype(BF16), 3.0)  # a new dtype
    assert len(TRACES) == 4


def test_results_do_not_depend_on_cached_data():
    a, b = rand((128, 64), seed=3), rand((128, 64), seed=4)
    assert_close(scale(a, 2.0), 2 * a)
    assert_close(scale(b, 2.0), 2 * b)


def test_keyword_array_arguments():
    @nki.jit
    def axpy(x, y, alpha=1.0):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.multiply(nl.load(x), alpha), nl.load(y)))
        return out

    x, y = rand((128, 16), seed=5), rand((128, 16), seed=6)
    assert_close(axpy(x, y=y, alpha=0.5), 0.5 * x + y)
    assert_close(axpy(y=y, x=x), x + y)


def test_several_outputs_come_back_as_a_tuple():
    @nki.jit
    def split(x):
        lo = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        hi = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(lo, t[:, 0:32])
        nl.store(hi, t[:, 32:64])
        return lo, hi

    x = rand((128, 64), seed=7)
    lo, hi = split(x)
    np.testing.assert_array_equal(lo, x[:, :32])
    np.testing.assert_array_equal(hi, x[:, 32:])


def test_output_parameter_non_contiguous_is_written_back():
    @nki.jit
    def fill_ones(out):
        t = nl.ndarray(out.shape, out.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        nisa.dma_copy(dst=out, src=t)

    big = np.zeros((128, 64), np.float32)
    view = big[:, ::2]  # not C-contiguous: bound through a copy, then copied back
    fill_ones(view)
    assert (big[:, ::2] == 1).all() and (big[:, 1::2] == 0).all()


def test_input_updated_in_place_through_simulate():
    @nki.jit
    def add_one_in_place(x):
        nl.store(x, nl.add(nl.load(x), 1.0))

    x = np.zeros((64, 8), np.float32)
    assert nki.simulate(add_one_in_place)(x) is None
    np.testing.assert_array_equal(x, 1.0)


def test_simulate_accepts_a_plain_function():
    def double(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(x), nl.load(x)))
        return out

    x = rand((32, 32), seed=8)
    assert_close(nki.simulate(double)(x), 2 * x)


def test_jit_forms_and_ignored_legacy_options():
    def body(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    x = rand((16, 16), seed=9)
    for kernel in (nki.jit(body), nki.jit()(body), nki.jit(mode="simulation")(body), nki.jit(nki.jit(body))):
        np.testing.assert_array_equal(kernel(x), x)
    assert nki.jit(body).__name__ == "body"


def test_print_runs_at_trace_time(capsys):
    @nki.jit
    def noisy(x):
        print("tracing", x.shape)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    x = rand((8, 8), seed=10)
    noisy(x)
    noisy(x)
    assert capsys.readouterr().out == "tracing (8, 8)\n"


def test_unhashable_compile_time_argument():
    with pytest.raises(NkiError, match="hashable"):
        scale(rand((128, 64)), {1, 2})


def test_nl_outside_a_kernel():
    with pytest.raises(NkiError, match="@nki.jit"):
        nl.ndarray((128, 4), nl.float32)


def test_compiled_kernel_exposes_programs_and_tensor_table():
    x = rand((128, 64), seed=12)
    compiled = scale.compile((x, 2.0), {})
    assert len(compiled.programs) == 1
    kinds = {t.name: t.kind for t in compiled.tensors.values()}
    assert kinds["x"] == "input" and "output" in kinds.values()
    # instructions carry the kernel line that made them
    assert all(i.location and i.location.startswith(__file__) for i in compiled.programs[0].instructions)


def test_bf16_kernel_rounds_on_write():
    x = rand((128, 64), BF16, seed=13)
    y = scale(x, 3.0)
    assert y.dtype == BF16
    np.testing.assert_array_equal(f32(y), f32((f32(x) * 3).astype(BF16)))


def test_a_kernel_may_return_a_reshape_of_a_whole_output_tensor():
    """``return out.reshape(shape)`` (nki-library's kernels): the caller gets the tensor in that shape."""

    @nki.jit
    def max_and_flat(x):
        out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
        copy = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.max(t, axis=1, keepdims=True))
        nl.store(copy, t)
        return out.reshape((x.shape[0],)), copy.reshape((x.shape[0] // 2, 2 * x.shape[1]))

    x = np.random.default_rng(0).standard_normal((128, 6)).astype(np.float32)
    peak, flat = max_and_flat(x)
    assert peak.shape == (128,) and flat.shape == (64, 12)
    np.testing.assert_array_equal(peak, x.max(axis=1))
    np.testing.assert_array_equal(flat, x.reshape(64, 12))


def test_a_kernel_called_from_a_kernel_runs_inline():
    """A helper kernel (``@nki.jit(mode="trace")`` in nki-samples' flash attention) called inside a
    kernel adds its instructions to the caller's trace, on the caller's tensors: one launch."""
    import neuronxcc.nki as legacy_nki

    @legacy_nki.jit(mode="trace")
    def load_scaled(src, scale):
        return nl.multiply(nl.load(src), scale)

    @nki.jit
    def outer(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, load_scaled(x, 2.0))
        return out

    x = np.arange(128 * 3, dtype=np.float32).reshape(128, 3)
    np.testing.assert_array_equal(outer(x), 2 * x)
    assert len(outer.compile((x,), {}).programs) == 1
