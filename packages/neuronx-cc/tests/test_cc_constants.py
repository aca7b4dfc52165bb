"""Constants: immediates, iotas, Memset-generated, or constant input tensors with data in metadata."""

import numpy as np
import pytest
from cc_helpers import Graph, check
from neuronxcc.compiler import compile_graph, constant_arrays


def graph_with_constant(value, dtype="float32"):
    g = Graph("const")
    value = np.asarray(value)
    x = g.add_input("x", value.shape, dtype)
    c = g.add1("constant", value=value.astype(dtype) if dtype != "bfloat16" else value, dtype=dtype)
    g.set_outputs([g.add1("add", x, c), c], ["sum", "c"])
    return g


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_uniform_constant_is_an_immediate(dtype):
    g = graph_with_constant(np.full((40, 50), 3), dtype)
    program = check(g)
    assert not program.metadata.get("constants")
    assert not [t for t in program.tensors if t.kind == "internal"]


def test_affine_constant_is_generated_by_iota():
    g = graph_with_constant(np.arange(60).reshape(6, 10) * 3 - 7, "int32")
    program = check(g)
    assert any(i.opcode == "IOTA" for i in program.instructions)
    assert not program.metadata.get("constants")


def test_small_constant_is_generated_on_chip():
    g = graph_with_constant([[1.5, -2.0, 7.25], [0.0, np.nan, np.inf]])
    program = check(g)
    assert any(i.opcode == "MEMSET" for i in program.instructions)
    assert not program.metadata.get("constants")


def test_large_constant_is_an_input_with_its_data_in_metadata():
    value = np.random.default_rng(0).standard_normal((300, 70)).astype(np.float32)
    g = graph_with_constant(value)
    program = compile_graph(g)
    (name,) = program.metadata["constants"]
    assert program.tensor(name).kind == "input"
    np.testing.assert_array_equal(constant_arrays(program)[name], value)
    check(g, program=program)


def test_constants_survive_the_neff_round_trip(tmp_path):
    from neuron_sim.neff import Neff
    from neuronxcc.compiler import compile_neff

    value = np.random.default_rng(1).standard_normal((50, 40)).astype(np.float32)
    neff = compile_neff(graph_with_constant(value))
    neff.save(tmp_path / "c.neff")
    loaded = Neff.load(tmp_path / "c.neff")
    (array,) = constant_arrays(loaded.program).values()
    np.testing.assert_array_equal(array, value)


def test_folded_constant_expressions():
    g = Graph("fold")
    x = g.add_input("x", (8, 8), "float32")
    a = g.add1("constant", value=np.arange(8, dtype=np.float32))
    b = g.add1("exp", g.add1("multiply", a, a))  # folded at compile time with the graph's numerics
    g.set_outputs([g.add1("add", x, g.add1("broadcast_in_dim", b, shape=(8, 8), dims=(1,)))], ["out"])
    program = check(g)
    assert not any(i.opcode == "ACTIVATE" for i in program.instructions)


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_large_constants_bind_themselves_at_launch(mode, tmp_path):
    """The constant's bytes travel in the NEFF; any launcher works without constant_arrays."""
    from neuron_sim.executor.fast import FastExecutor
    from neuron_sim.neff import Neff
    from neuron_sim.runtime import Runtime, RuntimeConfig, register_executor
    from neuron_sim.trace import TraceSink
    from neuronxcc.compiler import compile_neff

    register_executor("fast", FastExecutor, requires_graph=True)  # other test modules may replace it
    value = np.random.default_rng(2).standard_normal((300, 70)).astype(np.float32)
    g = graph_with_constant(value)
    compile_neff(g).save(tmp_path / "c.neff")
    neff = Neff.load(tmp_path / "c.neff")
    assert neff.program.metadata["constants"]
    x = np.random.default_rng(3).standard_normal((300, 70)).astype(np.float32)
    out = {"sum": np.empty_like(x), "c": np.empty_like(x)}
    rt = Runtime(RuntimeConfig.from_env({"NEURON_SIM_MODE": mode}), blocking=True, trace=TraceSink())
    rt.device(0).launch(neff, {"x": x, **out})  # no constant buffers given
    rt.synchronize()
    np.testing.assert_array_equal(out["sum"], x + value)
    np.testing.assert_array_equal(out["c"], value)
