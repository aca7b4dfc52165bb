"""bitcast_convert: an operand's bytes read as another dtype, compiled as a byte move (no cast)."""

import numpy as np
import pytest
from cc_helpers import Graph, check, run_exact
from neuron_sim import dtypes
from neuronxcc.compiler import compile_graph

SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.5, -3.25, 1e-45, -3.4e38], np.float32)


def _bitcast_graph(shape, in_dtype, out_dtype, transpose=False):
    g = Graph("bitcast")
    x = g.add_input("x", shape, in_dtype)
    if transpose:
        x = g.add1("transpose", x, perm=tuple(reversed(range(len(shape)))))
    g.set_outputs([g.add1("bitcast_convert", x, dtype=out_dtype)], ["out"])
    return g


@pytest.mark.parametrize("shape", [(10,), (3, 130), (1, 1), (2, 0)], ids=str)
@pytest.mark.parametrize("in_dtype,out_dtype", [("float32", "int32"), ("int32", "float32"), ("float32", "uint32"),
                                                ("bfloat16", "int16"), ("float16", "uint16"), ("uint32", "int32")])
def test_equally_wide_bitcast_moves_the_bytes(shape, in_dtype, out_dtype):
    g = _bitcast_graph(shape, in_dtype, out_dtype)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(_np(in_dtype)).itemsize, dtype=np.uint8)
    x = x.view(_np(in_dtype)).reshape(shape)
    out = run_exact(compile_graph(g), {"x": x})["out"]
    assert out.dtype == _np(out_dtype) and out.tobytes() == x.tobytes() and out.shape == shape


def test_float_specials_keep_their_bits_both_ways():
    g = _bitcast_graph((10,), "float32", "int32")
    out = run_exact(compile_graph(g), {"x": SPECIALS})["out"]
    assert out.tolist() == SPECIALS.view(np.int32).tolist()  # -0.0 -> -2**31, NaN sign kept
    back = run_exact(compile_graph(_bitcast_graph((10,), "int32", "float32")), {"x": out})["out"]
    assert back.tobytes() == SPECIALS.tobytes()


@pytest.mark.parametrize("in_dtype,out_dtype,shape", [("float32", "uint8", (3, 5)), ("int32", "bfloat16", (7,)),
                                                      ("uint8", "float32", (6, 4)), ("int16", "int64", (2, 3, 4))],
                         ids=str)
def test_bitcast_to_another_width_regroups_the_bytes(in_dtype, out_dtype, shape):
    g = _bitcast_graph(shape, in_dtype, out_dtype)
    x = np.arange(int(np.prod(shape)) * np.dtype(_np(in_dtype)).itemsize, dtype=np.uint8).view(_np(in_dtype))
    x = x.reshape(shape)
    out = run_exact(compile_graph(g), {"x": x})["out"]
    assert out.tobytes() == x.tobytes() and out.dtype == _np(out_dtype)
    check(g, {"x": x})  # the graph's own definition agrees


def test_bitcast_of_a_strided_view_reads_its_elements():
    g = _bitcast_graph((2, 6), "uint8", "int16", transpose=True)  # (6, 2) seen transposed: last dim strided
    x = np.arange(12, dtype=np.uint8).reshape(2, 6)
    out = run_exact(compile_graph(g), {"x": x})["out"]
    assert out.tobytes() == np.ascontiguousarray(x.T).tobytes() and out.shape == (6,)


def test_bitcast_feeds_integer_compares_exactly():
    """copysign's form in StableHLO: the sign comes from the int32 bits (< 0), also of -0.0 and NaN."""
    g = Graph("sign_bit")
    x = g.add_input("x", (10,), "float32")
    bits = g.add1("bitcast_convert", x, dtype="int32")
    zero = g.add1("broadcast_in_dim", g.add1("constant", value=np.int32(0)), shape=(10,), dims=())
    g.set_outputs([g.add1("compare", bits, zero, direction="LT")], ["neg"])
    out = run_exact(compile_graph(g), {"x": SPECIALS})["neg"]
    assert out.tolist() == np.signbit(SPECIALS).tolist()


def _np(dtype):
    return dtypes.to_numpy(dtype)
