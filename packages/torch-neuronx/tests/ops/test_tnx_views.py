"""Views, strides, in-place ops and storage metadata ops on neuron tensors."""

from __future__ import annotations

import pytest
import torch
from tnx_helpers import assert_equal
from torch_neuronx.compiled.dispatch import BACKEND_ENV


def test_views_share_storage_and_strides_match_cpu():
    cpu = torch.arange(24.0).reshape(2, 3, 4)
    dev = cpu.to("neuron")
    for fn in [lambda t: t.view(6, 4), lambda t: t.transpose(1, 2), lambda t: t.permute(2, 0, 1), lambda t: t[:, 1],
               lambda t: t[..., ::2], lambda t: t.unsqueeze(1), lambda t: t.expand(3, 2, 3, 4), lambda t: t.narrow(2, 1, 2),
               lambda t: t.unfold(2, 2, 1), lambda t: t.as_strided((3, 2), (1, 4), 2), lambda t: t.flatten(),
               lambda t: t.diagonal(dim1=1, dim2=2), lambda t: t.view(torch.int32), lambda t: t.unbind(1)[2],
               lambda t: t.split(1, dim=1)[1], lambda t: t.movedim(0, -1), lambda t: t.reshape(4, 6)]:
        v, c = fn(dev), fn(cpu)
        assert v.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
        assert (v.shape, v.stride(), v.storage_offset()) == (c.shape, c.stride(), c.storage_offset())
        assert_equal(v.cpu(), c)


def test_in_place_through_views():
    cpu = torch.zeros(4, 5)
    dev = cpu.to("neuron")
    for t in (cpu, dev):
        t[1:3, ::2] += 5
        t.t()[0].mul_(-1)
        t.diagonal().fill_(2)
        t[:, -1].copy_(torch.arange(4.0).to(t.device))
        t.view(-1)[::7].sub_(1)
        t.clamp_(min=-1)
    assert_equal(dev, cpu)


def test_contiguous_and_channels_last():
    cpu = torch.randn(2, 3, 4, 5)
    dev = cpu.to("neuron")
    cl = dev.contiguous(memory_format=torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    assert cl.stride() == cpu.contiguous(memory_format=torch.channels_last).stride()
    assert_equal(cl, cpu)
    t = dev.transpose(1, 3).contiguous()
    assert t.is_contiguous() and t.stride() == cpu.transpose(1, 3).contiguous().stride()
    assert_equal(t, cpu.transpose(1, 3).contiguous())


def test_resize_and_set():
    x = torch.arange(6.0, device="neuron")
    x.resize_(2, 3)
    assert x.shape == (2, 3)
    assert_equal(x, torch.arange(6.0).reshape(2, 3))
    x.resize_(4, 4)  # grows the storage, keeping the data
    assert x.untyped_storage().nbytes() >= 64
    assert_equal(x.view(-1)[:6], torch.arange(6.0))
    y = torch.empty(0, device="neuron")
    y.set_(x.untyped_storage(), 2, (2,), (1,))
    assert_equal(y, torch.tensor([2.0, 3.0]))
    z = torch.empty(0, device="neuron").set_(x)
    assert z.data_ptr() == x.data_ptr()


def test_data_assignment_and_shallow_copy():
    p = torch.nn.Parameter(torch.randn(3))
    values = torch.arange(3.0, device="neuron")
    p.data = values  # CPU param -> neuron data (what Module.to does)
    assert p.device.type == "neuron"
    assert_equal(p.detach(), torch.arange(3.0))
    p.data = torch.ones(3)
    assert p.device.type == "cpu"


def test_indexing():
    cpu = torch.arange(40.0).reshape(5, 8)
    dev = cpu.to("neuron")
    idx = torch.tensor([4, 0, 2])
    assert_equal(dev[idx.to("neuron")], cpu[idx])
    assert_equal(dev[:, idx.to("neuron")], cpu[:, idx])
    mask = cpu > 17
    assert_equal(dev[mask.to("neuron")], cpu[mask])
    dev[idx.to("neuron"), 1] = -1.0
    cpu[idx, 1] = -1.0
    assert_equal(dev, cpu)
    dev.index_add_(0, idx.to("neuron"), torch.ones(3, 8, device="neuron"))
    cpu.index_add_(0, idx, torch.ones(3, 8))
    assert_equal(dev, cpu)
    assert_equal(torch.gather(dev, 1, torch.tensor([[0], [7], [3], [1], [2]], device="neuron")),
                 torch.gather(cpu, 1, torch.tensor([[0], [7], [3], [1], [2]])))
    dev.scatter_(1, torch.zeros(5, 1, dtype=torch.long, device="neuron"), 100.0)
    cpu.scatter_(1, torch.zeros(5, 1, dtype=torch.long), 100.0)
    assert_equal(dev, cpu)


@pytest.mark.parametrize("backend", ["compiled", "fallback"])
@pytest.mark.parametrize("base_shape, view", [((7,), lambda t: t.expand(2, 7)), ((1, 7), lambda t: t.expand(3, 7)),
                                              ((4,), lambda t: t.as_strided((3, 2), (1, 1)))])
def test_fill_of_a_view_whose_elements_share_memory_matches_cpu(monkeypatch, backend, base_shape, view):
    """``x.expand(2, 7).fill_(0.5)``: CPU writes every element (fill_ and zero_ allow overlap)."""
    monkeypatch.setenv(BACKEND_ENV, backend)
    cpu = torch.arange(float(torch.Size(base_shape).numel())).reshape(base_shape)
    dev = cpu.to("neuron")
    for t in (cpu, dev):
        view(t).fill_(0.5)
        view(t)[..., :1].zero_()
    assert_equal(dev, cpu)


@pytest.mark.parametrize("backend", ["compiled", "fallback"])
def test_arithmetic_into_a_view_whose_elements_share_memory_raises_cpus_error_at_the_call(monkeypatch, backend):
    monkeypatch.setenv(BACKEND_ENV, backend)
    for t in (torch.zeros(3), torch.zeros(3, device="neuron")):
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory location"):
            t.expand(4, 3).add_(1)
    torch.neuron.synchronize()  # nothing was left queued to fail later



# (name, shape and dtype of the base, the view of it): 0-d, transposed, offset and size-1 complex
# tensors, as PyTorch's test_view_as_real / test_real_imag_view / test_flip (complex) make them.
COMPLEX_CASES = [
    ("0d", (4, 130), torch.cfloat, lambda b: b[1, 2]),
    ("transposed", (4, 130), torch.cfloat, lambda b: b.t()),
    ("offset_columns", (4, 130), torch.cfloat, lambda b: b[:, 3:7]),
    ("size_1_dim", (4, 130), torch.cfloat, lambda b: b[2:3, ::3]),
    ("complex128_0d", (3, 5), torch.cdouble, lambda b: b[2, 4]),
]


@pytest.mark.parametrize("name, shape, dtype, take", COMPLEX_CASES, ids=[c[0] for c in COMPLEX_CASES])
def test_real_views_of_complex_tensors_are_cpus_views(name, shape, dtype, take):
    """view_as_real / .real / .imag of a 0-d or non-contiguous complex tensor raised "self.dim()
    cannot be 0" or "self.stride(-1) must be 1 to view ComplexFloat as Float" on neuron; CPU gives
    views. They are views here too: same geometry, same values, writes reach the complex tensor."""
    base = torch.randn(shape, dtype=dtype)
    cpu, dev = take(base), take(base.to("neuron"))
    for view in (torch.view_as_real, lambda t: t.real, lambda t: t.imag):
        expected, got = view(cpu), view(dev)
        assert got.shape == expected.shape and got.stride() == expected.stride()
        assert got.storage_offset() == expected.storage_offset()
        assert torch.equal(got.cpu(), expected)
    torch.view_as_real(dev).mul_(2)  # through the view
    assert torch.equal(dev.cpu(), cpu * 2)
    assert torch.equal(torch.view_as_complex(torch.view_as_real(dev)).cpu(), cpu * 2)
