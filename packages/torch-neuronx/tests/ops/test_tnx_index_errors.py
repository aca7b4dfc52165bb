"""An out-of-range index raises what CPU's kernel of that op raises - its type and its words - in
eager and adaptive eager; the device finds it when the program runs, so it is reported at the
next synchronization (the sync error's ``original``, chained to the simulator's
IndexOutOfBoundsError), and the op call itself neither raises nor waits for the device."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from neuron_sim import ExecutionError, IndexOutOfBoundsError
from tnx_helpers import held_stream

X = torch.arange(60.0).reshape(3, 4, 5)
IX = torch.arange(12, dtype=torch.int32).reshape(3, 4)

def _set_columns(x, i):
    x[:, i] = 1.0
    return x


# name: (input, op, index with one bad value, that value if the device indexes the call's own
# dimension - CPU's message exactly - or None if the lowering flattens the dims around it: the
# device's index is then not the call's, and the message says so instead of naming it).
CASES = {
    "gather dim 0": (X, lambda x, i: x.gather(0, i.expand(1, 4, 5)), torch.tensor([[[7]]]), 7),
    "gather dim -1": (X, lambda x, i: x.gather(-1, i.expand(3, 4, 1)), torch.tensor([[[5]]]), 5),
    "gather of int32": (IX, lambda x, i: x.gather(1, i.expand(3, 1)), torch.tensor([[4]]), 4),
    "index_select dim 0": (X, lambda x, i: x.index_select(0, i), torch.tensor([0, 3]), 3),
    "index_select dim 1": (X, lambda x, i: x.index_select(1, i), torch.tensor([9]), 9),
    "index_select dim 2": (X, lambda x, i: x.index_select(2, i), torch.tensor([5, 1]), 5),
    "index_select of 1-d": (X.reshape(-1), lambda x, i: x.index_select(0, i), torch.tensor([60]), 60),
    "take": (X, lambda x, i: torch.take(x, i), torch.tensor([2, 61]), 61),
    "x[idx]": (X, lambda x, i: x[i], torch.tensor([1, 3]), 3),
    "x[:, idx] = v": (X, lambda x, i: _set_columns(x.clone(), i), torch.tensor([4]), None),
    "embedding": (X[0], lambda x, i: torch.nn.functional.embedding(i, x), torch.tensor([[0, 4]]), 4),
    "scatter": (X, lambda x, i: x.scatter(1, i.expand(3, 1, 5), 2.0), torch.tensor([[[6]]]), 6),
    "scatter_add": (X, lambda x, i: x.scatter_add(0, i.expand(1, 4, 5), x[:1]), torch.tensor([[[3]]]), 3),
    "index_add dim 2": (X, lambda x, i: x.index_add(2, i, x[..., :1]), torch.tensor([5]), None),
    "index_copy": (X, lambda x, i: x.index_copy(0, i, x[:1]), torch.tensor([3]), 3),
    "index_fill dim 1": (X, lambda x, i: x.index_fill(1, i, 0.5), torch.tensor([0, 4]), None),
}


def _run(x, fn, index, device):
    return fn(x.to(device), index.to(device))


def _cpu_error(x, fn, index) -> Exception:
    with pytest.raises(Exception) as info:
        fn(x, index)
    return info.value


@pytest.fixture(params=[False, True], ids=["eager", "adaptive"])
def mode(request):
    torch_neuronx.set_adaptive_eager(request.param)
    yield request.param
    torch_neuronx.set_adaptive_eager(None)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_an_out_of_range_index_raises_cpus_error_at_the_next_synchronization(case, mode):
    x, fn, index, bad = case
    want = _cpu_error(x, fn, index)
    device = torch.device("neuron", 0)
    x_dev, index_dev = x.to(device), index.to(device)
    torch.neuron.synchronize()
    with held_stream():
        y = fn(x_dev, index_dev)  # the device has not run anything yet: no error, no wait
    with pytest.raises(ExecutionError) as info:
        torch.neuron.synchronize()
    got = info.value.original
    assert type(got) is type(want), (got, want)
    if bad is not None:
        assert str(got) == str(want)
    else:
        bad_value = int(index.reshape(-1)[-1])
        assert str(got).startswith(str(want).replace(f"index {bad_value} ", "index ? ") + " (the device found index "), got
    with pytest.raises(Exception) as read:
        y.cpu()  # its result was never written
    assert str(got) in str(read.value)


def test_the_simulators_error_stays_chained_and_an_in_range_index_then_computes():
    x, fn, index, _ = CASES["gather dim 0"]
    with pytest.raises(ExecutionError) as info:
        _run(x, fn, index, "neuron")
        torch.neuron.synchronize()
    found = info.value.original.__cause__
    assert isinstance(found, IndexOutOfBoundsError) and (found.index, found.size) == (7, 3), found
    good = torch.tensor([[[2]]])
    assert torch.equal(_run(x, fn, good, "neuron").cpu(), fn(x, good))


def test_a_fused_run_reports_the_error_of_its_op_with_the_bad_index():
    # index_select (CPU: IndexError) and gather (CPU: RuntimeError) in one adaptive run: the
    # error is the op's whose index is out of its dimension's range.
    torch_neuronx.set_adaptive_eager(True)
    try:
        x = torch.arange(24.0).reshape(6, 4).to("neuron")
        torch.neuron.synchronize()
        a = x.index_select(0, torch.tensor([1, 5], device="neuron"))  # in range
        b = a.gather(1, torch.tensor([[3], [4]], device="neuron"))  # 4 is out of range of size 4
        c = b * 2
        with pytest.raises(ExecutionError) as info:
            torch.neuron.synchronize()
    finally:
        torch_neuronx.set_adaptive_eager(None)
    assert type(info.value.original) is RuntimeError
    assert str(info.value.original) == "index 4 is out of bounds for dimension 1 with size 4"
    with pytest.raises(Exception, match="index 4 is out of bounds for dimension 1 with size 4"):
        c.cpu()
