"""``x * x`` of one tile may run as ScalarE's ``square`` activation (bit-identical in fp32) when ScalarE
would finish it before VectorE/GpSimd's two-input multiply."""

import pytest
from cc_helpers import Graph, check
from neuron_sim.isa import Activation, TensorTensor


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(128, 512), (300, 64)])
def test_product_with_itself_is_a_square_activation(shape, dtype):
    g = Graph("square")
    x = g.add_input("x", shape, dtype)
    g.set_outputs([g.add1("multiply", x, x)], ["out"])
    prog = check(g)
    squares = any(isinstance(i, Activation) and i.func == "square" for i in prog.instructions)
    # bf16 tiles multiply at twice the fp32 rate on VectorE: there the tensor_tensor is cheaper
    assert squares == (dtype == "float32")


def test_product_of_two_values_stays_tensor_tensor():
    g = Graph("product")
    x = g.add_input("x", (128, 256), "float32")
    y = g.add_input("y", (128, 256), "float32")
    g.set_outputs([g.add1("multiply", x, y)], ["out"])
    prog = check(g)
    assert any(isinstance(i, TensorTensor) for i in prog.instructions)


def test_busy_scalar_engine_leaves_squares_to_the_others():
    g = Graph("busy")
    x = g.add_input("x", (512, 512), "float32")
    y = x
    for _ in range(6):  # ScalarE is kept busy by the activations between the squares
        y = g.add1("multiply", g.add1("exp", g.add1("sin", g.add1("tanh", y))), g.add1("tanh", y))
        y = g.add1("multiply", y, y)
    g.set_outputs([y], ["out"])
    prog = check(g, rtol=1e-6, atol=1e-6)
    assert any(isinstance(i, TensorTensor) and i.in0 == i.in1 for i in prog.instructions)
