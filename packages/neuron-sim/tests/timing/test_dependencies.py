"""RAW, WAR and WAW dependencies order instructions across engines; independent ones overlap."""

from __future__ import annotations

import pytest
from helpers import TRN2, hb, sb
from neuron_sim import Program, TensorDecl
from neuron_sim.isa import Activation, DmaCopy, TensorCopy, TensorScalar
from neuron_sim.timing import estimate


def _program(instructions, tensors=()):
    return Program("deps", list(tensors), list(instructions), "trn2")


def _records(timing):
    return {r.index: r for r in timing.instructions}


def test_read_after_write_waits_for_the_producer_on_another_engine():
    a, b = sb("float32", 128, 512), sb("float32", 128, 512, offset=4096)
    prog = _program([
        TensorScalar(dst=a, src=b, op0="add", operand0=1.0, engine="vector"),
        Activation(dst=b, src=a, func="exp"),  # reads a: RAW on the vector result
    ])
    recs = _records(estimate(prog, TRN2))
    assert recs[1].start_ts >= recs[0].end_ts
    assert recs[1].waited_on == "Vector"
    assert recs[1].start_ts > recs[0].end_ts  # plus the semaphore's latency
    assert recs[1].evt_wait_time_ns == pytest.approx(recs[1].start_ts)  # ScalarE was idle: all of it is the wait


def test_write_after_read_waits_for_the_reader():
    a, b, c = sb("float32", 128, 512), sb("float32", 128, 512, offset=4096), sb("float32", 128, 512, offset=8192)
    prog = _program([
        Activation(dst=c, src=a, func="exp"),  # reads a on ScalarE
        TensorScalar(dst=a, src=b, op0="add", operand0=1.0, engine="vector"),  # overwrites a
    ])
    recs = _records(estimate(prog, TRN2))
    assert recs[1].start_ts >= recs[0].end_ts
    assert recs[1].waited_on == "WAR"


def test_write_after_write_keeps_program_order():
    a, b = sb("float32", 128, 64), sb("float32", 128, 64, offset=1024)
    prog = _program([
        Activation(dst=a, src=b, func="exp"),
        TensorCopy(dst=a, src=b, engine="vector"),
    ])
    recs = _records(estimate(prog, TRN2))
    assert recs[1].start_ts >= recs[0].end_ts


def test_independent_instructions_on_different_engines_overlap():
    a, b = sb("float32", 128, 2048), sb("float32", 128, 2048, offset=8192)
    c, d = sb("float32", 128, 2048, offset=16384), sb("float32", 128, 2048, offset=24576)
    prog = _program([
        Activation(dst=b, src=a, func="exp"),
        TensorScalar(dst=d, src=c, op0="multiply", operand0=2.0, engine="vector"),
    ])
    recs = _records(estimate(prog, TRN2))
    assert recs[1].start_ts < recs[0].end_ts  # ran in parallel
    assert recs[0].evt_wait_time_ns == recs[1].evt_wait_time_ns == 0


def test_dma_into_a_tile_waits_until_its_readers_finish():
    x = TensorDecl("x", (128, 512), "float32", "input")
    t, u = sb("float32", 128, 512), sb("float32", 128, 512, offset=4096)
    prog = _program([
        Activation(dst=u, src=t, func="exp"),
        DmaCopy(dst=t, src=hb("x", "float32", (128, 512))),
    ], [x])
    recs = _records(estimate(prog, TRN2))
    dma = recs[1]
    assert dma.start_ts >= recs[0].end_ts


def test_the_same_program_always_gets_the_same_timeline():
    prog = _program([
        TensorScalar(dst=sb("float32", 128, 512), src=sb("float32", 128, 512, offset=4096), op0="add", operand0=1.0),
        Activation(dst=sb("float32", 128, 512, offset=8192), src=sb("float32", 128, 512), func="tanh"),
    ])
    first, second = estimate(prog, TRN2), estimate(prog, TRN2)
    assert [(r.start_ts, r.end_ts) for r in first.instructions] == [(r.start_ts, r.end_ts) for r in second.instructions]
