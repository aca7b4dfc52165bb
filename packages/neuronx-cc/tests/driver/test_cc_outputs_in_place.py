"""Graph outputs that are views of computed values: stored in place by the group when the view keeps
the value's row-major order (no copy), else copied as soon as the value is computed (the copy
overlaps the groups after it instead of trailing the program)."""

from cc_helpers import Graph, check
from neuron_sim.isa import DmaCopy
from neuron_sim.memory.access_pattern import HBM


def _hbm_copies(program):
    return [k for k, i in enumerate(program.instructions)
            if isinstance(i, DmaCopy) and i.src.memory == HBM and i.dst.memory == HBM]


def test_value_returned_through_a_reshape_is_stored_in_place():
    g = Graph("reshaped")
    x = g.add_input("x", (8, 16, 32), "float32")
    y = g.add1("exp", x)
    z = g.add1("tanh", g.add1("reduce", y, kind="sum", dims=(2,)))  # y is read elsewhere too
    g.set_outputs([g.add1("reshape", y, shape=(128, 32)), z], ["flat", "z"])
    program = check(g, rtol=1e-6, atol=1e-6)
    assert not _hbm_copies(program)
    assert not [t for t in program.tensors if t.kind == "internal"]


def test_value_returned_through_transposes_that_cancel_is_stored_in_place():
    g = Graph("twice")
    x = g.add_input("x", (64, 48), "float32")
    y = g.add1("exp", x)
    t = g.add1("transpose", g.add1("transpose", y, perm=(1, 0)), perm=(1, 0))
    w = g.add_input("w", (48, 32), "float32")
    p = g.add1("dot_general", y, w, lhs_contract=(1,), rhs_contract=(0,))
    g.set_outputs([t, p], ["same", "p"])
    program = check(g, rtol=1e-5, atol=1e-5)
    assert not _hbm_copies(program)


def test_transposed_output_is_copied_before_later_groups():
    g = Graph("early")
    x = g.add_input("x", (256, 128), "float32")
    y = g.add1("exp", x)
    later = g.add1("tanh", g.add1("multiply", y, y))
    for _ in range(3):
        later = g.add1("sin", g.add1("reduce", later, kind="sum", dims=(1,)))
    g.set_outputs([g.add1("transpose", y, perm=(1, 0)), later], ["yt", "later"])
    program = check(g, rtol=1e-5, atol=1e-5)
    writes = [k for k, i in enumerate(program.instructions) if isinstance(i, DmaCopy) and i.dst.memory == HBM
              and i.dst.tensor == "yt"]
    last_store = max(k for k, i in enumerate(program.instructions) if isinstance(i, DmaCopy)
                     and i.dst.memory == HBM and i.dst.tensor == "later")
    assert writes and max(writes) < last_store


def test_reshape_copy_that_is_an_output_is_made_once():
    """A reshape no strides express, read by a matmul and returned: copied once, into the output."""
    g = Graph("merged")
    x = g.add_input("x", (2, 4, 64, 32), "float32")  # [B, H, T, D]
    w = g.add_input("w", (128, 64), "float32")
    y = g.add1("reshape", g.add1("transpose", x, perm=(0, 2, 1, 3)), shape=(128, 128))  # [B*T, H*D]
    p = g.add1("dot_general", y, w, lhs_contract=(1,), rhs_contract=(0,))
    g.set_outputs([p, y], ["p", "y"])
    program = check(g, rtol=1e-5, atol=1e-4)
    assert not [t for t in program.tensors if t.kind == "internal"]
