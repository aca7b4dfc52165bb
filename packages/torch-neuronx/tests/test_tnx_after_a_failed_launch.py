"""After a failed launch (README: "Device state after a failed launch"): every later use of a
tensor whose producing work did not run raises the original error - at the call for host reads,
at the next synchronization for work on the device - never returns the stale bytes; a tensor
written whole again is valid; everything the failure did not touch keeps working."""

from __future__ import annotations

import gc

import pytest
import torch
import torch_neuronx
from neuron_sim import ExecutionError, InvalidMemoryError

BAD_INDEX = 9


def _failed(shape=(3, 7)) -> torch.Tensor:
    """A tensor of ``shape`` whose producer was skipped: it reads the result of an index_select
    that fails (index 9 of 5); the failure has been reported by a synchronize."""
    torch.neuron.synchronize()  # work issued before runs apart from the failure (adaptive: not in its run)
    x = torch.randn(5).to("neuron")
    y = x.index_select(0, torch.tensor([BAD_INDEX], device="neuron"))
    z = torch.zeros(shape, device="neuron") + y.reshape([1] * len(shape))
    with pytest.raises(ExecutionError) as info:
        torch.neuron.synchronize()
    _assert_original(info.value)
    return z


def _assert_original(err: ExecutionError) -> None:
    assert type(err.original) is IndexError and str(err.original) == "index out of range in self", err  # CPU's
    assert err.original.__cause__.index == BAD_INDEX  # the simulator's IndexOutOfBoundsError
    assert "index_select" in err.origin_name  # adaptive eager: the fused run holding it


def _raises_original(use) -> None:
    """``use()`` (then a synchronize) raises the original error."""
    with pytest.raises(ExecutionError) as info:
        use()
        torch.neuron.synchronize()
    _assert_original(info.value)


@pytest.fixture(params=[False, True], ids=["eager", "adaptive"])
def mode(request):
    torch_neuronx.set_adaptive_eager(request.param)
    yield request.param
    torch_neuronx.set_adaptive_eager(None)


HOST_READS = {
    "cpu": lambda t: t.cpu(),
    "item": lambda t: t[0, 0].item(),
    "tolist": lambda t: t.tolist(),
    "print": lambda t: print(t),
    "float": lambda t: float(t[1, 2]),
    "to another device": lambda t: t.to("neuron:1").cpu(),
    "numpy": lambda t: t.cpu().numpy(),
}


@pytest.mark.parametrize("read", HOST_READS.values(), ids=HOST_READS.keys())
def test_host_reads_raise_the_original_error_at_the_call(read, mode):
    z = _failed()
    with pytest.raises(ExecutionError) as info:  # at the call (printing reads through device ops)
        read(z)
    _assert_original(info.value)
    _raises_original(lambda: read(z))  # every time, not once


def test_a_non_blocking_copy_to_the_host_raises_at_the_next_synchronization(mode):
    z = _failed()
    host = z.to("cpu", non_blocking=True)  # the download is skipped: ``host`` never gets the bytes
    _raises_original(lambda: None)
    assert host.shape == z.shape


DEVICE_USES = {
    "eager op": lambda t: (t * 2).exp(),
    "reduction": lambda t: t.sum(dim=0),
    "cpu fallback": lambda t: torch.special.zeta(t + 2, t + 2),
    "copy on the device": lambda t: t.clone(),
    "compiled graph": lambda t: torch.compile(lambda a: a.relu() * 3 + 1, backend="neuron", dynamic=False)(t),
}


@pytest.mark.parametrize("use", DEVICE_USES.values(), ids=DEVICE_USES.keys())
def test_work_that_reads_it_is_skipped_with_the_original_error_and_its_results_are_invalid(use, mode):
    z = _failed()
    result = use(z)
    _raises_original(lambda: None)  # at the next synchronization point
    _raises_original(result.cpu)  # skipped: what it should have written is invalid in turn
    torch.neuron.synchronize()  # the error was raised: nothing else is pending


@pytest.mark.parametrize("shape", [(1,), (129, 3, 1), (2, 0, 5), (1, 1, 130)], ids=str)
def test_views_of_an_invalid_tensor(shape, mode):
    z = _failed(shape)
    if z.numel() == 0:
        assert z.cpu().shape == shape  # nothing to read, nothing invalid
        return
    views = [z.reshape(-1)[-1:], z.transpose(0, -1), z.unsqueeze(1).expand(shape[0], 4, *shape[1:]), z[..., :1]]
    for view in views:
        with pytest.raises(InvalidMemoryError):
            view.cpu()
        _raises_original(lambda v=view: (v + 1).cpu())
    assert z[:0].cpu().shape == (0, *shape[1:])  # an empty view reads no byte


ZETA_2_1 = float(torch.special.zeta(torch.tensor(2.0), torch.tensor(1.0)))
OVERWRITES = {  # name: (overwrite t, the value it writes)
    "fill_": (lambda t: t.fill_(0.5), 0.5),
    "zero_": (lambda t: t.zero_(), 0.0),
    "copy_ from the host": (lambda t: t.copy_(torch.full(t.shape, 0.5)), 0.5),
    "copy_ from the device": (lambda t: t.copy_(torch.full(t.shape, 0.5, device="neuron")), 0.5),
    "copy_ from the host, non_blocking": (lambda t: t.copy_(torch.full(t.shape, 0.5), non_blocking=True), 0.5),
    "uniform_": (lambda t: t.uniform_(0.5, 0.5), 0.5),
    "out=": (lambda t: torch.mul(torch.ones(t.shape, device="neuron"), 0.5, out=t), 0.5),
    "out= of a CPU-fallback op": (lambda t: torch.special.zeta(torch.full(t.shape, 2.0, device="neuron"),
                                                               torch.ones(t.shape, device="neuron"), out=t), ZETA_2_1),
}


@pytest.mark.parametrize("overwrite, value", OVERWRITES.values(), ids=OVERWRITES.keys())
@pytest.mark.parametrize("shape", [(3, 7), (129, 1)], ids=str)
def test_a_tensor_written_whole_again_is_valid(overwrite, value, shape, mode):
    z = _failed(shape)
    overwrite(z)
    torch.testing.assert_close(z.cpu(), torch.full(shape, value))
    torch.testing.assert_close((z * 2).cpu(), torch.full(shape, 2 * value))
    torch.neuron.synchronize()


def test_a_contiguous_part_written_again_is_valid_and_the_rest_is_not(mode):
    z = _failed((3, 7))
    z[0].fill_(1.0)
    assert z[0].tolist() == [1.0] * 7
    with pytest.raises(InvalidMemoryError):
        z[1].cpu()
    # A strided part spans invalid bytes between its elements: its write reads them, so it is
    # skipped (the README's rule: overwrite the tensor whole, or a contiguous part).
    z[:, 0].fill_(2.0)
    _raises_original(lambda: None)
    z.copy_(torch.arange(21.0).reshape(3, 7))
    assert torch.equal(z.cpu(), torch.arange(21.0).reshape(3, 7))


def test_an_in_place_op_that_reads_its_target_raises(mode):
    z = _failed()
    z.add_(1)
    _raises_original(lambda: None)
    _raises_original(z.cpu)  # still invalid: nothing wrote it


def test_everything_the_failure_did_not_touch_keeps_working(mode):
    a = torch.arange(6.0, device="neuron").reshape(2, 3)
    b = a * 2
    z = _failed()
    assert torch.equal(b.cpu(), torch.arange(6.0).reshape(2, 3) * 2)
    assert (a + 1).sum().item() == 21.0
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        c = a @ a.T
    side.synchronize()
    assert torch.equal(c.cpu(), torch.arange(6.0).reshape(2, 3) @ torch.arange(6.0).reshape(2, 3).T)
    del z
    gc.collect()
    fresh = torch.empty(3, 7, device="neuron")  # a reused block of the invalid tensor: a new tensor
    fresh.fill_(3.0)
    assert fresh.sum().item() == 63.0


def test_a_failed_cpu_fallback_leaves_nothing_invalid_for_memory_reused_by_a_copy(mode):
    # A failed fallback op's output block, freed and reused by a host-to-device copy, holds the
    # copied values: the copy makes the bytes it writes valid.
    a = torch.tensor([1, 2, 3], device="neuron")
    r = torch.fmod(a, torch.tensor([0, 1, 1], device="neuron"))  # integer division by zero: CPU raises
    with pytest.raises(ExecutionError, match="ZeroDivisionError"):
        torch.neuron.synchronize()
    with pytest.raises(InvalidMemoryError, match="ZeroDivisionError"):
        r.cpu()
    del r
    gc.collect()
    u = torch.tensor([4, 5, 6]).to("neuron")
    assert (u + 1).tolist() == [5, 6, 7]


def test_the_results_of_an_adaptive_flush_that_raises_at_the_call_are_invalid(monkeypatch):
    # A fused run whose compile fails raises at the call that flushes it - once - and its ops'
    # results were never written: host reads raise that error, work reading them is skipped with it.
    from torch_neuronx.compiled import adaptive

    def broken_compiler(*args, **kwargs):
        raise RuntimeError("the fused run's compile failed")

    x = torch.randn(5, 19, generator=torch.Generator().manual_seed(5))  # a run signature no other test makes
    monkeypatch.setattr(adaptive, "compile_neff", broken_compiler)
    torch_neuronx.set_adaptive_eager(True)
    try:
        a = x.to("neuron")
        kept = torch.full((5, 19), 2.0, device="neuron")
        torch.neuron.synchronize()
        y = (a * 3).exp()
        kept.add_(y)  # written in place by the run: left as it was, so invalid too
        with pytest.raises(RuntimeError, match="fused run's compile failed"):
            y.cpu()  # flushes the run
        torch.neuron.synchronize()  # raised once, at the call
        for t in (y, kept):
            with pytest.raises(InvalidMemoryError, match="fused run's compile failed"):
                t.cpu()
        z = y + 1  # a run of one op, launched alone: skipped, its result invalid
        with pytest.raises(ExecutionError, match="fused run's compile failed"):
            torch.neuron.synchronize()
        with pytest.raises(InvalidMemoryError, match="fused run's compile failed"):
            z.cpu()
        assert torch.equal((a + 1).cpu(), x + 1)  # what the failure did not touch keeps working
    finally:
        torch_neuronx.set_adaptive_eager(None)
