"""Consecutive groups get SBUF tiles clear of each other (``sbuf.SpacedAllocator``), so an
independent group's loads need not wait for the previous group's last reads of the same bytes."""

import pytest
from cc_helpers import Graph, check
from neuron_sim import ValidationError
from neuron_sim.isa import DmaCopy
from neuron_sim.memory.access_pattern import SBUF
from neuron_sim.memory.allocator import OnChipAllocator
from neuronxcc.compiler.sbuf import SpacedAllocator


def test_next_group_is_placed_above_the_previous_one():
    a = SpacedAllocator(OnChipAllocator(SBUF, 1000))
    first = a.allocate(300)
    a.free(first)
    a.new_group()
    assert a.allocate(100) >= 300


def test_spacer_gives_way_when_a_group_needs_the_room():
    a = SpacedAllocator(OnChipAllocator(SBUF, 1000))
    a.free(a.allocate(600))
    a.new_group()
    assert a.allocate(700) == 0  # the spacer was dropped: the old region is reused
    with pytest.raises(ValidationError):
        a.allocate(400)  # really full: the error still says so


def _two_chains():
    g = Graph("two")
    xs = [g.add_input(f"x{k}", (256, 512), "float32") for k in range(3)]
    outs = []
    for x in xs:  # compute-bound chains: the next one's loads should not wait for the tail of this one
        for op in ["exp", "tanh", "sin", "tanh"] * 2:
            x = g.add1(op, x)
        outs.append(x)
    g.set_outputs(outs, ["a", "b", "c"])
    return g


def test_consecutive_groups_use_separate_sbuf():
    program = check(_two_chains(), rtol=1e-6, atol=1e-6)
    assert len(program.metadata["groups"]) == 3
    writes = {}  # group (by the input it loads) -> SBUF byte range its loads write
    for i in program.instructions:
        if isinstance(i, DmaCopy) and i.dst.memory == SBUF and i.src.tensor in ("x0", "x1"):
            lo, hi = writes.get(i.src.tensor, (1 << 30, 0))
            writes[i.src.tensor] = (min(lo, i.dst.offset), max(hi, i.dst.offset + 4 * i.dst.free_size))
    (lo0, hi0), (lo1, hi1) = writes["x0"], writes["x1"]
    assert hi0 <= lo1 or hi1 <= lo0
