"""Copies: host <-> device (blocking and non_blocking, pinned or not), device <-> device, with
dtype conversion and non-contiguous layouts."""

from __future__ import annotations

import pytest
import torch
from tnx_helpers import ALL_DTYPES, assert_equal


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip(dtype):
    cpu = (torch.arange(-50, 50) * 3).to(dtype)
    dev = cpu.to("neuron")
    assert dev.dtype == dtype and dev.device.type == "neuron"
    assert_equal(dev.cpu(), cpu)
    assert_equal(dev.clone().to("cpu"), cpu)


def test_host_to_device_snapshots_the_source():
    src = torch.arange(8.0)
    dev = src.to("neuron", non_blocking=True)
    src.fill_(-1)  # not pinned: the copy took a snapshot at submission
    assert_equal(dev, torch.arange(8.0))


def test_non_blocking_pinned_copies():
    src = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    assert src.is_pinned()
    dev = src.to("neuron", non_blocking=True)
    back = torch.empty(1 << 16).pin_memory()
    back.copy_(dev + 1, non_blocking=True)
    torch.neuron.synchronize()
    assert_equal(back, torch.arange(1 << 16, dtype=torch.float32) + 1)
    ev = torch.neuron.Event()
    host = (dev * 2).to("cpu", non_blocking=True)
    ev.record()
    ev.synchronize()
    assert_equal(host, torch.arange(1 << 16, dtype=torch.float32) * 2)


def test_blocking_device_to_host_waits_for_producers():
    x = torch.ones(256, 256, device="neuron")
    for _ in range(5):
        x = x @ torch.eye(256, device="neuron") * 2
    assert_equal(x.cpu(), torch.full((256, 256), 32.0))


def test_device_to_device_and_dtype_conversion():
    x = torch.randn(10, 10, device="neuron")
    y = torch.empty_like(x)
    y.copy_(x)
    assert_equal(y, x.cpu())
    assert_equal(x.to(torch.bfloat16), x.cpu().to(torch.bfloat16))
    assert_equal(x.half().float(), x.cpu().half().float())
    z = torch.empty(10, 10, dtype=torch.int32, device="neuron")
    z.copy_(x * 10)
    assert_equal(z, (x.cpu() * 10).to(torch.int32))
    h = torch.empty(10, 10, dtype=torch.float64)
    h.copy_(x)  # device float32 -> host float64
    assert_equal(h, x.cpu().double())
    d = torch.empty(10, 10, dtype=torch.bfloat16, device="neuron")
    d.copy_(torch.ones(10, 10, dtype=torch.float64))  # host float64 -> device bf16
    assert_equal(d, torch.ones(10, 10, dtype=torch.bfloat16))


def test_non_contiguous_copies():
    cpu = torch.arange(60.0).reshape(3, 4, 5)
    dev = cpu.to("neuron")
    assert_equal(dev.transpose(0, 2).cpu(), cpu.transpose(0, 2))
    assert_equal(dev[:, ::2, 1:].cpu(), cpu[:, ::2, 1:])
    target = torch.zeros(5, 4, 3, device="neuron")
    target.copy_(cpu.permute(2, 1, 0))  # strided host source
    assert_equal(target, cpu.permute(2, 1, 0).contiguous())
    part = torch.zeros(3, 4, 5, device="neuron")
    part[:, 1].copy_(dev[:, 2])  # strided device -> strided device
    expected = torch.zeros(3, 4, 5)
    expected[:, 1] = cpu[:, 2]
    assert_equal(part, expected)
    host_target = torch.zeros(5, 3)
    host_target.t().copy_(dev[:, 0, :])  # device -> strided host destination
    assert_equal(host_target, cpu[:, 0, :].t())


def test_broadcasting_copy_and_scalar_fill():
    x = torch.empty(4, 3, device="neuron")
    x.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert_equal(x, torch.tensor([1.0, 2.0, 3.0]).expand(4, 3).contiguous())
    x[1:3] = 7.0
    x[0, 0] = torch.tensor(9.0)
    assert x[0, 0].item() == 9.0 and x[2].tolist() == [7.0] * 3


def test_lazy_conjugate_and_negative_bits():
    x = torch.randn(6, dtype=torch.complex64)
    dev = x.to("neuron")
    c = torch.conj(dev)
    assert c.is_conj()
    assert_equal(c.resolve_conj(), x.conj().resolve_conj())  # used to recurse until the stack overflowed
    assert_equal(c.cpu().resolve_conj(), x.conj().resolve_conj())
    assert_equal((c * 2).cpu(), x.conj() * 2)
    assert_equal(dev._neg_view().resolve_neg(), -x)
    target = torch.zeros(6, dtype=torch.complex64, device="neuron")
    target.conj().copy_(x)  # writing through a conjugate view
    assert_equal(target, x.conj().resolve_conj())
    host = torch.empty(6, dtype=torch.complex64)
    host.copy_(c)
    assert_equal(host, x.conj().resolve_conj())


def test_fft_round_trip():
    x = torch.randn(5, 6, 7)
    dev = x.to("neuron")
    for fn in (lambda t: torch.fft.rfft(t, dim=1), lambda t: torch.fft.hfft(t, n=10, dim=1),
               lambda t: torch.fft.irfft(torch.fft.rfft(t)), lambda t: torch.fft.fftn(t).abs()):
        torch.testing.assert_close(fn(dev).cpu(), fn(x), rtol=0, atol=0)


@pytest.mark.parametrize("dst_shape, src_shape", [((), (0, 128)), ((3,), (2,)), ((2, 3), (4, 1, 3)), ((0,), (2,))])
def test_copy_of_a_shape_that_does_not_broadcast_raises_cpus_error_at_the_call(dst_shape, src_shape):
    for device in ("cpu", "neuron"):
        dst, src = torch.zeros(dst_shape, device=device), torch.ones(src_shape, device=device)
        with pytest.raises(RuntimeError) as raised:
            dst.copy_(src)
        if device == "cpu":
            expected = str(raised.value)
        else:
            assert str(raised.value) == expected
    torch.neuron.synchronize()  # nothing was queued that could fail later
