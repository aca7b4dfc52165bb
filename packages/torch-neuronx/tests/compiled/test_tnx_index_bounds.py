"""Indices into a dim of size 1 are range-checked like any other, eager, adaptive and compiled.

torch-mlir folded ``index_select`` of one index over a size-1 dim into its operand (StableHLO
clamps gather indices), so an out-of-range index silently read row 0: ``index_select``,
``F.embedding`` of a one-row table and ``torch.take`` of a one-element tensor returned values
where CPU raises. The other indexing ops keep their gathers/scatters and were checked already;
they are here so a new fold is caught too."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torch_neuronx  # noqa: F401 - the neuron device
from tnx_helpers import MODES, execution_mode

N = "neuron"

# (name, fn, inputs): inputs on CPU, the index last but for embedding (its index comes first).
SIZE_1_DIM_OPS = [
    ("index_select", lambda x, i: x.index_select(0, i), torch.arange(3.).view(1, 3)),
    ("index_select_last_dim", lambda x, i: x.index_select(2, i), torch.arange(12).view(3, 4, 1)),
    ("index_select_1d_int64", lambda x, i: x.index_select(0, i), torch.tensor([2**40 + 1])),
    ("index_select_non_contiguous", lambda x, i: x.index_select(0, i), torch.arange(10.).view(5, 2).t()[1:]),
    ("index_select_of_0d", lambda x, i: x.index_select(0, i), torch.tensor(4.)),  # lifted to [1] (fuzz-35)
    ("embedding", lambda x, i: F.embedding(i, x), torch.arange(129.).view(1, 129)),
    ("take", lambda x, i: torch.take(x, i), torch.tensor([[7.]], dtype=torch.bfloat16)),
    ("index", lambda x, i: x[i], torch.arange(5.).view(1, 5)),
    ("index_dim1", lambda x, i: x[:, i], torch.arange(3.).view(3, 1)),
    ("gather", lambda x, i: x.gather(0, i.view(1, 1).expand(1, 3)), torch.arange(3.).view(1, 3)),
    ("index_put", lambda x, i: x.index_put((i,), x.new_ones(3)), torch.zeros(1, 3)),
    ("index_add", lambda x, i: x.index_add(0, i, x.new_ones(1, 3)), torch.zeros(1, 3)),
    ("index_copy", lambda x, i: x.index_copy(0, i, x.new_ones(1, 3)), torch.zeros(1, 3)),
    ("index_fill", lambda x, i: x.index_fill(0, i, 2.0), torch.zeros(1, 3)),
    ("scatter", lambda x, i: x.scatter(0, i.view(1, 1).expand(1, 3), x.new_ones(1, 3)), torch.zeros(1, 3)),
    ("scatter_add", lambda x, i: x.scatter_add(0, i.view(1, 1).expand(1, 3), x.new_ones(1, 3)), torch.zeros(1, 3)),
]
IDS = [name for name, *_ in SIZE_1_DIM_OPS]


def _on_device(fn, mode, x, i):
    run = torch.compile(fn, backend="neuron") if mode == "compile" else fn
    with execution_mode(mode):
        out = run(x.to(N), i.to(N))
        return out.cpu()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name, fn, x", SIZE_1_DIM_OPS, ids=IDS)
def test_an_index_into_a_size_1_dim_gives_cpus_values(name, fn, x, mode):
    i = torch.tensor([0])
    expected = fn(x, i)
    got = _on_device(fn, mode, x, i)
    assert got.dtype == expected.dtype and got.shape == expected.shape and torch.equal(got, expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name, fn, x", SIZE_1_DIM_OPS, ids=IDS)
@pytest.mark.parametrize("index", [1, -2])
def test_an_index_past_a_size_1_dim_raises(name, fn, x, mode, index):
    """Raised at the sync (the read), as every out-of-range gather: eager and adaptive with CPU's
    type for the op (ops/index_errors: gather, scatter, index_add raise RuntimeError on CPU),
    compiled graphs with the device's IndexError."""
    i = torch.tensor([index])
    with pytest.raises((IndexError, RuntimeError)) as cpu:
        fn(x, i)  # CPU raises too
    with pytest.raises((IndexError, RuntimeError), match=r"out of (bounds|range)") as info:
        _on_device(fn, mode, x, i)
    original = getattr(info.value, "original", info.value)
    assert isinstance(original, IndexError if mode == "compile" else type(cpu.value)), (original, cpu.value)
    torch.neuron.synchronize()  # the error was delivered: the device works again
    assert torch.equal(_on_device(fn, mode, x, torch.tensor([0])), fn(x, torch.tensor([0])))


NEGATIVE_INDEX_PUTS = [
    ("accumulate_duplicates", lambda x, i: x.index_put((i,), x.new_ones(4, 130), accumulate=True), torch.zeros(5, 130)),
    ("assign", lambda x, i: x.index_put((i,), x.new_full((4, 1), 2.0)), torch.zeros(5, 1)),
    ("two_dims", lambda x, i: x.index_put((i, i.flip(0) % 3 - 3), x.new_tensor([0., 1., 2., 3.])), torch.zeros(5, 3)),
    ("non_contiguous", lambda x, i: x.t().index_put((i.new_tensor([-1]), i), x.new_tensor(3.0),
                                                      accumulate=True), torch.zeros(5, 2)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name, fn, x", NEGATIVE_INDEX_PUTS, ids=[n for n, *_ in NEGATIVE_INDEX_PUTS])
def test_negative_indices_of_index_put_count_from_the_end(name, fn, x, mode):
    """PyTorch's test_index_put_accumulate_duplicate_indices: eager ``_index_put_impl_`` (the
    functional ``_index_put_impl`` it traces to) gathered -1 as it was: an out-of-bounds error at
    the sync. Wrapped by the dim's size, as CPU and ``index_put`` do; repeated ones accumulate."""
    i = torch.tensor([-1, 0, -5, -1])
    expected = fn(x, i)
    got = _on_device(fn, mode, x, i)
    assert got.shape == expected.shape and torch.equal(got, expected)


INTEGER_INDEXING = [
    ("rows", lambda x, i: x[i], torch.arange(20.).view(4, 5)),
    ("columns", lambda x, i: x[:, i], torch.arange(20.).view(4, 5)),
    ("two_dims", lambda x, i: x[i, i.flip(0)], torch.arange(20.).view(4, 5)[:, :4]),
    ("int64_past_2_24", lambda x, i: x[i], torch.tensor([2**40 + 1, -(2**53) + 3, 2**24 + 1, 7])),
    ("non_contiguous", lambda x, i: x.t()[i], torch.arange(30.).view(5, 6)[:, :4]),
    ("moe_gather", lambda x, i: x[i.abs() // 2], torch.arange(24.).view(4, 6)),  # hidden[perm // top_k]
]


@pytest.mark.parametrize("mode", ["eager", "adaptive"])
@pytest.mark.parametrize("name, fn, x", INTEGER_INDEXING, ids=[n for n, *_ in INTEGER_INDEXING])
def test_integer_advanced_indexing_runs_on_the_device(name, fn, x, mode):
    """``x[ids]`` with integer indices has the indices' shape (only mask indices make it the
    data's): it compiles - a gather moving bytes - with negative indices counted from the end."""
    i = torch.tensor([-1, 0, 2, -3])
    expected = fn(x, i)
    torch_neuronx.clear_op_tracking()
    got = _on_device(fn, mode, x, i)
    assert "aten::index" not in torch_neuronx.get_fallback_ops(), torch_neuronx.get_fallback_reasons()
    assert got.dtype == expected.dtype and torch.equal(got, expected)


def test_a_mask_index_still_takes_the_datas_shape():
    x, mask = torch.arange(12.).view(4, 3), torch.tensor([True, False, True, True])
    assert torch.equal(x.to(N)[mask.to(N)].cpu(), x[mask])


@pytest.mark.parametrize("index", [4, -5, -9])
def test_an_out_of_range_integer_index_raises_cpus_error(index):
    """Past either end: CPU's IndexError with CPU's words (the call's index, not the wrapped one),
    at the next synchronization."""
    x, i = torch.arange(20.).view(4, 5), torch.tensor([0, index])
    with pytest.raises(IndexError) as cpu:
        x[i]
    with pytest.raises(Exception) as info:
        x.to(N)[i.to(N)].cpu()
    original = getattr(info.value, "original", info.value)
    assert type(original) is IndexError and str(original) == str(cpu.value), (original, cpu.value)
    torch.neuron.synchronize()
