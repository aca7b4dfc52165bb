"""host_copy: dst.copy_(src) between CPU tensors on the calling thread - the same results as
torch's copy_, including its errors, for every layout and element type."""

import pytest
import torch
from torch_neuronx.ops.host import host_copy, host_snapshot


def _pair(src, dst_factory):
    expected, got = dst_factory(), dst_factory()
    expected.copy_(src)
    host_copy(got, src)
    return expected, got


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.int64, torch.float16, torch.bfloat16, torch.complex64])
def test_strided_and_broadcast_copies_match_torch(dtype):
    base = torch.randn(6, 8, 5).mul(3).to(dtype)
    cases = [
        (base, lambda: torch.empty(6, 8, 5, dtype=dtype)),  # dense
        (base.transpose(0, 2), lambda: torch.empty(5, 8, 6, dtype=dtype)),  # strided source
        (base, lambda: torch.empty(5, 8, 6, dtype=dtype).transpose(0, 2)),  # strided destination
        (base[:, :1], lambda: torch.empty(6, 8, 5, dtype=dtype)),  # broadcast source
        (base[::2, 1:7:3], lambda: torch.zeros(12, 2, 5, dtype=dtype)[::4]),  # slices
    ]
    for src, make in cases:
        expected, got = _pair(src, make)
        assert torch.equal(expected, got)


def test_conversions_and_lazy_bits_keep_torchs_copy():
    src = torch.tensor([1.7, -2.5, 0.0, float("nan")])
    for dtype in (torch.int32, torch.bool, torch.float64):
        expected, got = _pair(src, lambda dtype=dtype: torch.empty(4, dtype=dtype))
        assert torch.equal(expected[:3], got[:3])
    z = torch.randn(4, dtype=torch.complex64)
    expected, got = _pair(z.conj(), lambda: torch.empty(4, dtype=torch.complex64))
    assert torch.equal(expected, got) and torch.equal(got, z.conj().resolve_conj())


def test_a_destination_sharing_memory_raises_torchs_error():
    with pytest.raises(RuntimeError, match="more than one element"):
        host_copy(torch.zeros(1).expand(4), torch.arange(4.0))


def test_snapshot_is_a_copy_with_the_layout():
    t = torch.randn(4, 6).t()
    snap = host_snapshot(t)
    assert torch.equal(snap, t) and snap.stride() == t.stride() and snap.data_ptr() != t.data_ptr()
