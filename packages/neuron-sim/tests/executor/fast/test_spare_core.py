"""spare_core: two halves of executor work run at once only while a thread waits for the device
(and there are two cores); errors from either half reach the caller; numpy's error state of the
caller applies to both halves."""

import threading
import warnings

import numpy as np
import pytest
from neuron_sim.executor.fast import spare_core
from neuron_sim.executor.waiting import waiting_for_device, waiting_threads


def _threads_of_halves():
    names = [None, None]  # by half: the halves may finish in either order

    def half(i):
        names[i] = threading.current_thread().name

    spare_core.run_halves(lambda: half(0), lambda: half(1))
    return names


def test_in_turn_on_the_calling_thread_while_no_one_waits():
    me = threading.current_thread().name
    assert _threads_of_halves() == [me, me]


def test_at_once_while_a_thread_waits(monkeypatch):
    monkeypatch.setattr(spare_core, "CAN_OVERLAP", True)
    with waiting_for_device():
        names = _threads_of_halves()
    assert names[0] == threading.current_thread().name
    assert names[1].startswith("neuron-sim spare core")
    assert waiting_threads() == 0


def test_halves_do_not_split_again(monkeypatch):
    # A half that reaches run_halves itself (an erf inside a split elementwise run) runs both of
    # its halves in turn on its own thread: handing one to the busy spare core would wait forever.
    monkeypatch.setattr(spare_core, "CAN_OVERLAP", True)
    inner = {}

    def half(i):
        inner[i] = _threads_of_halves()

    with waiting_for_device():
        spare_core.run_halves(lambda: half(0), lambda: half(1))
        assert spare_core.available()  # after the split
    assert inner[0] == [threading.current_thread().name] * 2
    assert len(set(inner[1])) == 1 and inner[1][0].startswith("neuron-sim spare core")


def test_one_core_never_overlaps(monkeypatch):
    monkeypatch.setattr(spare_core, "CAN_OVERLAP", False)
    with waiting_for_device():
        assert not spare_core.available()


def test_errors_of_the_other_half_reach_the_caller(monkeypatch):
    monkeypatch.setattr(spare_core, "CAN_OVERLAP", True)

    def fail():
        raise ValueError("second half failed")

    with waiting_for_device(), pytest.raises(ValueError, match="second half failed"):
        spare_core.run_halves(lambda: None, fail)


def test_the_callers_numpy_error_state_applies_to_the_other_half(monkeypatch):
    monkeypatch.setattr(spare_core, "CAN_OVERLAP", True)
    overflow = np.float32([1e30])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with waiting_for_device(), np.errstate(all="ignore"):
            spare_core.run_halves(lambda: overflow * overflow, lambda: overflow * overflow)
