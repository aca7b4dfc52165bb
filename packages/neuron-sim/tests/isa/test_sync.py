"""Semaphores and barriers: ordering only for the sequential executor; their rules."""

import numpy as np
import pytest
from helpers import TRN2, execute, sb
from neuron_sim import ValidationError
from neuron_sim.isa import ENGINES, Barrier, SemaphoreSignal, SemaphoreWait, TensorScalar


@pytest.mark.parametrize("cls", [SemaphoreSignal, SemaphoreWait])
@pytest.mark.parametrize("value", [0, -3])
def test_semaphore_values_must_be_positive(cls, value):
    with pytest.raises(ValidationError) as info:
        cls(semaphore="s0", value=value).validate(TRN2)
    assert info.value.rule == "semaphore.value" and str(value) in str(info.value)


def test_semaphores_run_on_every_engine_and_barrier_on_sync():
    for engine in ENGINES:
        SemaphoreSignal(semaphore="s", engine=engine).validate(TRN2)
        SemaphoreWait(semaphore="s", engine=engine, value=2).validate(TRN2)
    Barrier().validate(TRN2)
    with pytest.raises(ValidationError) as info:
        Barrier(engine="vector").validate(TRN2)
    assert info.value.rule == "engine.unsupported" and "vector" in str(info.value)
    with pytest.raises(ValidationError) as info:
        SemaphoreSignal(semaphore="s", engine="dma").validate(TRN2)
    assert info.value.rule == "engine.unsupported" and "dma" in str(info.value)


def test_sync_instructions_do_not_change_memory():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    t = sb("float32", 2, 4)
    run = execute(
        [
            SemaphoreSignal(semaphore="s", engine="vector"),
            SemaphoreWait(semaphore="s", engine="scalar"),
            Barrier(),
            TensorScalar(dst=t, src=t, op0="add", operand0=1.0),
        ],
        preload=[(t, x)],
        fetch=[t],
    )
    np.testing.assert_array_equal(run[0], x + 1)
    assert SemaphoreSignal(semaphore="s").reads() == [] and Barrier().writes() == []
