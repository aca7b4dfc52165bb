"""Ops first called from several threads at once are each built once and run on the device.
Tracing is not thread-safe (torch.fx's patcher is a module global): concurrent builds failed
with "CURRENT_PATCHER is None", and the op was remembered as not lowerable - on CPU fallback for
the rest of the process."""

import threading

import torch
import torch_neuronx


def builds() -> int:
    m = torch_neuronx.eager_metrics()
    return m["compiled"] + m["disk_hits"] + m["not_lowerable"]


def program(a: torch.Tensor) -> float:
    return ((a @ a.t()).relu_() - 1).sum().item()


def test_threads_building_the_same_new_ops_all_get_device_kernels(neuron, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_DISABLE_CACHE", "1")
    torch_neuronx.clear_op_tracking()
    before = builds()
    program(torch.ones(31, 47).to(neuron))  # the program's signatures on shapes no other test uses
    one_thread = builds() - before

    start = threading.Barrier(4)
    results, errors = {}, []

    def work(i):
        try:
            a = torch.full((37, 53), float(i + 1)).to(neuron)
            start.wait(10)
            results[i] = program(a)
        except Exception as err:  # reported below, with the thread's own failure
            errors.append(err)

    before = builds()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert not errors
    assert results == {i: float(37 * 37 * ((i + 1) ** 2 * 53 - 1)) for i in range(4)}
    assert torch_neuronx.get_fallback_reasons() == {}
    assert builds() - before == one_thread  # one build of each signature for all four threads
