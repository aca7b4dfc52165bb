"""``histc`` on the device (kernels/histc.py, neuronx-cc's fx_histc decomposition): float inputs
bit for bit as CPU's kernel bins them, integer inputs - which CPU's kernel refuses ("histogram_cpu"
not implemented for 'Int') and mixture-of-experts routing counts - as CUDA's kernel does, exact
for every value of the dtype; a range taken from the data (min == max) as both do."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_equal

N = "neuron"


def cuda_histc(x, bins, lo, hi):
    """CUDA's integer histc: ``(x - lo) * bins // (hi - lo)`` in int64, the last bin holding hi."""
    x = x.reshape(-1).to(torch.int64)
    x = x[(x >= lo) & (x <= hi)]
    position = ((x - lo) * bins // (hi - lo)).clamp(max=bins - 1)
    return torch.zeros(bins, dtype=torch.int64).index_add_(0, position, torch.ones_like(position))


def _on_device(x, *args):
    torch_neuronx.clear_op_tracking()
    got = torch.histc(x.to(N), *args).cpu()
    assert "aten::histc" not in torch_neuronx.get_fallback_ops(), torch_neuronx.get_fallback_reasons()
    return got


def _floats(dtype, shape=(37, 29)):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 3
    flat = x.view(-1)
    flat[::17] = float("nan")
    flat[1::19] = float("inf")
    flat[2::23] = -0.0
    flat[3::13] = 2.5  # on the top edge: the last bin
    flat[4::11] = -2.0  # on the bottom edge
    flat[5::7] = 0.25  # on an inner edge of (10, -2, 2.5)
    return x.to(dtype)


@pytest.mark.parametrize("args", [(10, -2.0, 2.5), (7, -1, 1), (100, -3.3, 7.1), (1, 0.0, 0.5), (3, 0.1, 0.2)])
def test_float32_bins_as_cpu(args):
    x = _floats(torch.float32)
    assert_equal(_on_device(x, *args), torch.histc(x, *args))
    xt = x.t()  # non-contiguous
    assert_equal(_on_device(xt, *args), torch.histc(xt, *args))


@pytest.mark.parametrize("dtype, shape", [(torch.float16, (41, 7)), (torch.bfloat16, (5, 51))], ids=str)
def test_16_bit_floats_bin_as_cpu_in_their_dtype(dtype, shape):
    x = _floats(dtype, shape)
    for args in [(10, -2.0, 2.5), (6, -1.1, 3.3)]:
        assert_equal(_on_device(x, *args), torch.histc(x, *args))


def test_a_bfloat16_count_past_256_matches_cpu_through_fallback():
    """CPU's bfloat16 counts stop at 256 (256 + 1 rounds to 256): not decomposed, CPU's kernel runs."""
    x = torch.zeros(300, dtype=torch.bfloat16)
    got = torch.histc(x.to(N), 2, -1, 1).cpu()
    assert_equal(got, torch.histc(x, 2, -1, 1))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.uint8], ids=str)
@pytest.mark.parametrize("args", [(8, 0, 7), (10, 3, 37), (50, 1, 4), (3, 2, 200)])
def test_integers_bin_as_cuda(dtype, args):
    x = torch.randint(0, 256, (999,), generator=torch.Generator().manual_seed(1)).to(dtype).view(27, 37)[:, 1:]
    got = _on_device(x, *args)
    assert got.dtype == dtype
    assert_equal(got, cuda_histc(x, *args).to(dtype))


def test_integers_past_2_24_are_exact():
    base = 2**40
    x = torch.tensor([base - 1, base, base + 1, base + 5, base + 6, base + 7, 2**24 + 1, 2**24], dtype=torch.int64)
    assert_equal(_on_device(x, 3, base, base + 6), cuda_histc(x, 3, base, base + 6))
    y = torch.tensor([2**24, 2**24 + 1, 2**24 + 2, 2**31 - 1], dtype=torch.int32)
    assert_equal(_on_device(y, 3, 2**24, 2**24 + 2), cuda_histc(y, 3, 2**24, 2**24 + 2).to(torch.int32))


def test_expert_counts_as_transformers_routes():
    """Transformers' grouped-experts path: sorted int32 expert ids, histc, then cumsum offsets."""
    experts, top_k = 8, 2
    ids = torch.randint(0, experts, (13, top_k), generator=torch.Generator().manual_seed(2)).reshape(-1)
    sorted_ids, _ = torch.sort(ids.to(N))
    counts = torch.histc(sorted_ids.int(), bins=experts, min=0, max=experts - 1)
    assert_equal(counts, torch.bincount(ids, minlength=experts).int())
    assert_equal(torch.cumsum(counts, 0, dtype=torch.int32), torch.bincount(ids, minlength=experts).cumsum(0).int())


@pytest.mark.parametrize("values", [[3.0, -1.5, 2.25, 0.0], [4.0, 4.0, 4.0]])
def test_the_data_range_of_floats(values):
    x = torch.tensor(values)
    assert_equal(torch.histc(x.to(N), 5).cpu(), torch.histc(x, 5))


@pytest.mark.parametrize("values", [[3, -1, 2, 0, 9], [4, 4], [2**40 + 3, 2**40]])
def test_the_data_range_of_integers(values):
    x = torch.tensor(values)
    lo, hi = min(values), max(values)
    lo, hi = (lo - 1, hi + 1) if lo == hi else (lo, hi)
    assert_equal(torch.histc(x.to(N), 4).cpu(), cuda_histc(x, 4, lo, hi))


def test_a_large_integer_input_is_counted_in_parts():
    x = torch.randint(0, 300, (40_000,), generator=torch.Generator().manual_seed(3), dtype=torch.int32)
    assert_equal(torch.histc(x.to(N), 200, 0, 299).cpu(), cuda_histc(x, 200, 0, 299).int())


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x: torch.histc(x, 0, 0, 1), "bins must be > 0"),
        (lambda x: torch.histc(x, 4, 2, 1), "max must be larger than min"),
        (lambda x: torch.histc(x.new_tensor([1.0, float("inf")]), 4), "not finite"),
    ],
)
def test_bad_arguments_raise_cpus_error_at_the_call(call, message):
    x = torch.tensor([0.5, 1.5])
    with pytest.raises(RuntimeError, match=message):
        call(x)
    with pytest.raises(RuntimeError, match=message):
        call(x.to(N))
