"""Deferred tensor_scalar ops: an fp32 ``x op c`` read once by an elementwise node is folded into that
node's instruction (a second ALU stage, an activation's scale/bias, a scalar_tensor_tensor), with
results bit-identical to the graph's (exact vs fast executors, rtol = atol = 0)."""

import numpy as np
import pytest
from cc_helpers import Graph, check
from neuron_sim.isa import Activation, ScalarTensorTensor, TensorScalar, TensorTensor

# (Tiles of one element per partition compute on [P, 1] columns, where nothing is deferred.)
SHAPES = [(128, 512), (300, 64), (3, 1000)]


def _count(program, cls):
    return sum(isinstance(i, cls) for i in program.instructions)


def _graph(build, shape, n_inputs=1, dtype="float32"):
    g = Graph("deferred")
    xs = [g.add_input(f"x{k}", shape, dtype) for k in range(n_inputs)]
    g.set_outputs([build(g, *xs)], ["out"])
    return g


def _const(g, value, shape, dtype="float32"):
    c = g.add1("constant", value=np.asarray(value, np.float32), dtype=dtype)
    return g.add1("broadcast_in_dim", c, shape=shape, dims=())


@pytest.mark.parametrize("shape", SHAPES)
def test_two_scalar_ops_are_one_tensor_scalar(shape):
    prog = check(_graph(lambda g, x: g.add1("add", g.add1("multiply", x, _const(g, 0.3, shape)), _const(g, 1.5, shape)),
                        shape))
    ts = [i for i in prog.instructions if isinstance(i, TensorScalar)]
    assert ts and all(i.op0 == "multiply" and i.op1 == "add" for i in ts)


@pytest.mark.parametrize("shape", SHAPES)
def test_scale_and_bias_fold_into_the_activation(shape):
    def build(g, x):
        y = g.add1("subtract", g.add1("multiply", x, _const(g, 0.7071, shape)), _const(g, 0.25, shape))
        return g.add1("erf", y)

    prog = check(_graph(build, shape))
    assert _count(prog, TensorScalar) == 0
    acts = [i for i in prog.instructions if isinstance(i, Activation)]
    assert acts and all(a.scale == pytest.approx(0.7071) and a.bias == -0.25 for a in acts)


def test_reversed_subtract_folds_as_negative_scale():
    shape = (128, 256)
    prog = check(_graph(lambda g, x: g.add1("exp", g.add1("subtract", _const(g, 1.0, shape), x)), shape))
    assert _count(prog, TensorScalar) == 0
    assert all(a.scale == -1.0 and a.bias == 1.0 for a in prog.instructions if isinstance(a, Activation))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("side", [0, 1])
def test_scalar_stage_folds_into_tensor_tensor(shape, side):
    def build(g, x, y):
        s = g.add1("multiply", x, _const(g, -2.5, shape))
        return g.add1("divide", *((s, y) if side == 0 else (y, s)))

    prog = check(_graph(build, shape, 2))
    assert _count(prog, TensorScalar) == 0 and _count(prog, TensorTensor) == 0
    assert _count(prog, ScalarTensorTensor) > 0


def test_third_stage_writes_the_first_two_out():
    shape = (128, 300)

    def build(g, x):
        y = g.add1("multiply", x, _const(g, 3.0, shape))
        y = g.add1("add", y, _const(g, 1.0, shape))
        return g.add1("maximum", y, _const(g, 2.0, shape))

    prog = check(_graph(build, shape))
    tiles = prog.metadata["groups"][0]["tiles"]
    assert _count(prog, TensorScalar) == 2 * tiles  # (x * 3 + 1) in one, then the maximum


def test_value_read_twice_or_stored_is_not_deferred():
    shape = (128, 256)
    g = Graph("twice")
    x = g.add_input("x", shape, "float32")
    y = g.add1("multiply", x, _const(g, 3.0, shape))
    z = g.add1("exp", y)
    g.set_outputs([z, y], ["z", "y"])
    prog = check(g)
    assert _count(prog, TensorScalar) > 0  # y is stored: computed on its own


def test_deferred_operand_outlives_buffer_reuse():
    """The deferred op's operand is read at its consumer, later than the graph order says: its buffer
    must not be handed to a node in between."""
    shape = (256, 512)

    def build(g, x, y):
        a = g.add1("multiply", x, y)  # a tile of its own
        b = g.add1("multiply", a, _const(g, 2.0, shape))  # deferred: reads a later
        c = g.add1("exp", g.add1("add", y, x))  # would reuse a's buffer if a died at b
        d = g.add1("tanh", c)
        return g.add1("add", b, d)

    check(_graph(build, shape, 2))


def test_softmax_subtracts_the_row_max_in_the_activation():
    from lower.test_cc_rowwise import softmax

    prog = check(softmax((256, 128)))
    exps = [i for i in prog.instructions if isinstance(i, Activation) and i.func == "exp"]
    assert exps and all(i.bias is not None for i in exps)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_intermediates_are_not_deferred(dtype):
    shape = (128, 256)
    prog = check(_graph(lambda g, x: g.add1("exp", g.add1("multiply", x, _const(g, 3.0, shape, dtype))), shape, 1, dtype))
    assert _count(prog, TensorScalar) > 0  # the product rounds to the low-precision dtype first
