"""Engine balancing (``Emitter._balance``): float elementwise instructions go to whichever of
VectorE, ScalarE and GpSimd would finish them first, within what each engine can run."""

from cc_helpers import Graph, check
from neuron_sim.isa import TensorScalar, TensorTensor
from neuron_sim.memory.access_pattern import PSUM


def _chain(dtype, n=6, shape=(512, 512)):
    g = Graph("chain")
    x = g.add_input("x", shape, dtype)
    y = g.add_input("y", shape, dtype)
    z = x
    for k in range(n):
        z = g.add1(["add", "multiply", "subtract"][k % 3], z, y)
    g.set_outputs([z], ["out"])
    return g


def test_float_tensor_tensor_chain_spreads_over_vector_and_gpsimd():
    prog = check(_chain("float32"))
    engines = {i.engine for i in prog.instructions if isinstance(i, TensorTensor)}
    assert engines == {"vector", "gpsimd"}


def test_integer_chain_keeps_the_lowering_engine():
    # int32 of any range: GpSimd's integer ALU (the only exact engine), never balanced elsewhere
    prog = check(_chain("int32"))
    assert all(i.engine == "gpsimd" for i in prog.instructions if isinstance(i, TensorTensor))


def test_scalar_engine_only_takes_its_alu_ops():
    g = Graph("ts")
    x = g.add_input("x", (512, 512), "float32")
    import numpy as np

    c = g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(2.0)), shape=(512, 512), dims=())
    y = x
    for op in ["maximum", "multiply", "minimum", "add"] * 3:
        y = g.add1(op, y, c)
        y = g.add1("exp", y) if op == "add" else y
    g.set_outputs([y], ["out"])
    prog = check(g)
    for i in prog.instructions:
        if isinstance(i, TensorScalar) and i.engine == "scalar":
            assert {i.op0, i.op1} <= {"add", "multiply", "subtract", None}


def test_gpsimd_never_reads_psum():
    g = Graph("mm")
    a = g.add_input("a", (256, 128), "float32")
    b = g.add_input("b", (128, 512), "float32")
    p = g.add1("dot_general", a, b, lhs_contract=(1,), rhs_contract=(0,))
    g.set_outputs([g.add1("add", p, p)], ["out"])
    prog = check(g, rtol=1e-5, atol=1e-4)
    for i in prog.instructions:
        if i.engine == "gpsimd":
            assert all(ap.memory != PSUM for ap in i.reads() + i.writes())
