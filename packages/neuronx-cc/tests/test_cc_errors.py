"""Refusals are CompileErrors naming the op, the types and the node's source line - never crashes."""

import numpy as np
import pytest
from cc_helpers import Graph
from neuron_sim import ValidationError
from neuronxcc.compiler import CompileError, compile_graph


def test_float64_input_is_refused_naming_it():
    g = Graph("f64")
    x = g.add_input("x", (4, 4), "float64")
    g.set_outputs([g.add1("exp", x)], ["out"])
    with pytest.raises(CompileError) as info:
        compile_graph(g)
    err = info.value
    assert isinstance(err, ValidationError)
    assert err.op == "input" and "float64" in str(err) and "'x'" in str(err)


def test_float64_node_is_refused_naming_op_dtype_and_location():
    g = Graph("f64")
    x = g.add_input("x", (4, 4), "float32")
    y = g.add1("convert", x, dtype="float64", location="model.py:12")
    g.set_outputs([g.add1("convert", y, dtype="float32")], ["out"])
    with pytest.raises(CompileError) as info:
        compile_graph(g)
    err = info.value
    assert err.op == "convert" and err.location == "model.py:12"
    assert "float64" in str(err) and "4x4xfloat32" in str(err) and "model.py:12" in str(err)


def test_shape_mismatch_in_a_deserialized_graph():
    g = Graph("bad")
    x = g.add_input("x", (4, 5), "float32")
    y = g.add_input("y", (4, 5), "float32")
    g.set_outputs([g.add1("add", x, y, location="net.py:3")], ["out"])
    d = g.to_dict()
    d["inputs"][1][2] = [5, 4]  # y is now 5x4: add's operands disagree
    with pytest.raises(CompileError) as info:
        compile_graph(Graph.from_dict(d))
    err = info.value
    assert err.op == "add" and err.location == "net.py:3"
    assert "4x5xfloat32" in str(err) and "5x4xfloat32" in str(err)


def test_recorded_result_type_disagreeing_with_the_op():
    g = Graph("bad")
    x = g.add_input("x", (4, 5), "float32")
    g.set_outputs([g.add1("exp", x)], ["out"])
    d = g.to_dict()
    d["nodes"][0]["out"][0][1] = [4, 6]
    with pytest.raises(CompileError, match="shape_mismatch") as info:
        compile_graph(Graph.from_dict(d))
    assert info.value.op == "exp"


def test_unsupported_op_names_op_shapes_and_location(monkeypatch):
    from neuronxcc.compiler import OP_KINDS

    monkeypatch.delitem(OP_KINDS, "dot_general")  # every graph op has a lowering: pretend one has none
    g = Graph("mm")
    a = g.add_input("a", (8, 16), "float32")
    b = g.add_input("b", (16, 4), "float32")
    g.set_outputs([g.add1("dot_general", a, b, lhs_contract=(1,), rhs_contract=(0,), location="mlp.py:7")], ["out"])
    with pytest.raises(CompileError) as info:
        compile_graph(g)
    err = info.value
    assert err.op == "dot_general" and err.location == "mlp.py:7" and "8x16xfloat32" in str(err)


def test_unknown_op():
    g = Graph("unknown")
    x = g.add_input("x", (3,), "float32")
    g.set_outputs([g.add1("exp", x)], ["out"])
    d = g.to_dict()
    d["nodes"][0]["op"] = "frobnicate"
    with pytest.raises(CompileError, match="frobnicate"):
        compile_graph(Graph.from_dict(d))


def test_bitwise_on_floats():
    g = Graph("bits")
    x = g.add_input("x", (3,), "float32")
    g.set_outputs([g.add1("xor", x, x)], ["out"])
    with pytest.raises(CompileError, match="xor") as info:
        compile_graph(g)
    assert info.value.op == "xor"


def test_negative_padding_and_empty_argmax():
    g = Graph("pad")
    x = g.add_input("x", (4, 4), "float32")
    d = g.to_dict()
    g.set_outputs([g.add1("pad", x, low=(0, 0), high=(1, 1))], ["out"])
    d = g.to_dict()
    d["nodes"][0]["attrs"]["low"] = [-1, 0]
    d["nodes"][0]["out"][0][1] = [4, 5]
    with pytest.raises(CompileError) as info:
        compile_graph(Graph.from_dict(d))
    assert info.value.op == "pad"
    g = Graph("argmax")
    x = g.add_input("x", (3, 0), "float32")
    g.set_outputs([g.add1("argmax", x, dim=1)], ["out"])
    with pytest.raises(CompileError, match="argmax"):
        compile_graph(g)


def test_duplicate_names():
    g = Graph("dup")
    x = g.add_input("x", (3,), "float32")
    g.add_input("x", (3,), "float32")
    g.set_outputs([g.add1("exp", x)], ["out"])
    with pytest.raises(CompileError, match="duplicate"):
        compile_graph(g)


def test_errors_keep_their_attributes_when_relocated():
    err = CompileError("compile.x", "boom", op="exp", shapes=["3xfloat32"])
    moved = err.at("a.py:1")
    assert moved.op == "exp" and moved.location == "a.py:1" and moved.shapes == ["3xfloat32"]


def test_huge_shapes_do_not_hang():
    # Compiling only plans tiles; a 1G-element elementwise op is a few thousand tiles.
    g = Graph("huge")
    x = g.add_input("x", (1 << 15, 1 << 15), "bfloat16")
    g.set_outputs([g.add1("exp", x)], ["out"])
    program = compile_graph(g)
    assert program.metadata["groups"][0]["tiles"] >= (1 << 30) // (128 * 4096)
    np.testing.assert_equal(program.tensor("out").shape, (1 << 15, 1 << 15))


def test_malformed_graph_dict():
    with pytest.raises(CompileError, match="malformed"):
        compile_graph({"inputs": [[0, "x", [3], "float32"]], "nodes": [{"op": "exp", "in": [7], "out": [[1, [3], "float32"]]}],
                       "outputs": [[1, "y"]]})


def test_graph_dict_compiles_like_the_graph():
    g = Graph("d")
    x = g.add_input("x", (5, 6), "float32")
    g.set_outputs([g.add1("tanh", x)], ["y"])
    assert len(compile_graph(g.to_dict()).instructions) == len(compile_graph(g).instructions)
