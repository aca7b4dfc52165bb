"""Explicit semaphores and barriers."""

from __future__ import annotations

import pytest
from helpers import TRN2, sb
from neuron_sim import Program, ValidationError
from neuron_sim.isa import Activation, Barrier, SemaphoreSignal, SemaphoreWait, TensorScalar
from neuron_sim.timing import estimate


def test_semaphore_wait_orders_engines_without_a_memory_dependency():
    a, b = sb("float32", 128, 2048), sb("float32", 128, 2048, offset=8192)
    c, d = sb("float32", 128, 64, offset=16384), sb("float32", 128, 64, offset=17000)
    prog = Program("sem", [], [
        Activation(dst=b, src=a, func="exp"),
        SemaphoreSignal(semaphore="s", engine="scalar"),
        SemaphoreWait(semaphore="s", engine="vector"),
        TensorScalar(dst=d, src=c, op0="add", operand0=1.0),
    ], "trn2")
    recs = estimate(prog, TRN2).instructions
    assert recs[3].start_ts >= recs[0].end_ts


def test_waiting_for_a_value_never_signalled_is_a_deadlock_error():
    prog = Program("sem", [], [SemaphoreWait(semaphore="never", value=2, engine="vector", location="k.py:7")], "trn2")
    with pytest.raises(ValidationError) as err:
        estimate(prog, TRN2)
    assert err.value.rule == "semaphore.deadlock"
    assert "never" in str(err.value) and "k.py:7" in str(err.value)


def test_barrier_waits_for_every_engine():
    a, b = sb("float32", 128, 4096), sb("float32", 128, 4096, offset=16384)
    c, d = sb("float32", 128, 64, offset=32768), sb("float32", 128, 64, offset=33024)
    prog = Program("bar", [], [
        Activation(dst=b, src=a, func="exp"),
        Barrier(),
        TensorScalar(dst=d, src=c, op0="add", operand0=1.0),
    ], "trn2")
    recs = estimate(prog, TRN2).instructions
    assert recs[2].start_ts >= recs[0].end_ts
