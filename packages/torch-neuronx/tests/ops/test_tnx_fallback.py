"""The CPU fallback: every op runs CPU kernels over zero-copy views of device memory, queued on the
current stream as a CPU-fallback launch; shapes come from meta kernels at submission."""

from __future__ import annotations

import pytest
import torch
from tnx_helpers import assert_close_to_cpu, assert_equal, held_stream, torch_neuronx_runtime
from torch_neuronx.ops import costs

pytestmark = pytest.mark.usefixtures("fallback_only")  # compiled ops would take these calls


def _capture_launches():
    """Trace records of device 0's launches from now on, and a function that stops the capture."""
    sink = torch_neuronx_runtime().device(0).trace
    records = []
    handle = sink.subscribe(lambda r: records.append(r) if r.device == 0 else None)
    return records, lambda: sink.unsubscribe(handle)


def test_ops_are_queued_as_cpu_fallback_launches():
    records, stop = _capture_launches()
    try:
        a = torch.arange(12.0, device="neuron").reshape(3, 4)
        b = (a * 2).sum(dim=1)
        torch.neuron.synchronize()
    finally:
        stop()
    kinds = {(r.name, r.kind) for r in records}
    assert ("aten::mul", "cpu_fallback") in kinds
    assert ("aten::sum", "cpu_fallback") in kinds
    mul = next(r for r in records if r.name == "aten::mul")
    assert "CPU fallback" in mul.context and "[3, 4]:float32" in mul.context
    # Absolute timestamps on the device timeline: their difference is the cost up to float rounding.
    assert mul.end_ns - mul.start_ns == pytest.approx(costs.fallback_ns(48, 48), rel=1e-12, abs=1e-6)
    assert_equal(b, torch.tensor([12.0, 44.0, 76.0]))


def test_submission_does_not_wait_for_the_device():
    with held_stream():
        x = torch.ones(8, 8, device="neuron")
        y = (x @ x).relu()  # shapes known at submission from meta kernels
        assert y.shape == (8, 8) and y.dtype == torch.float32 and y.device.type == "neuron"
        assert not torch.neuron.current_stream().query()
    assert_equal(y, torch.full((8, 8), 8.0))


def test_in_place_and_out_arguments_write_device_memory():
    x = torch.zeros(4, device="neuron")
    ptr = x.data_ptr()
    x.add_(3).mul_(2)
    out = torch.empty(4, device="neuron")
    torch.add(x, 1, out=out)
    small = torch.empty(0, device="neuron")
    torch.mul(x, 2, out=small)  # out= resized like on CPU
    assert x.data_ptr() == ptr
    assert_equal(x, torch.full((4,), 6.0))
    assert_equal(out, torch.full((4,), 7.0))
    assert_equal(small, torch.full((4,), 12.0))


def test_data_dependent_ops_synchronize():
    x = torch.tensor([0.0, 1.5, 0.0, -2.0], device="neuron")
    nz = torch.nonzero(x)
    assert nz.device.type == "neuron"
    assert_equal(nz, torch.tensor([[1], [3]]))
    assert_equal(x[x != 0], torch.tensor([1.5, -2.0]))
    assert_equal(torch.unique(torch.tensor([3, 1, 3], device="neuron")), torch.tensor([1, 3]))
    assert x.sum().item() == -0.5
    assert bool((x > 1).any())


def test_results_are_zero_copy_views_of_device_memory():
    x = torch.arange(6.0, device="neuron")
    v = x.view(2, 3).t()
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    v.mul_(10)  # a write through a transposed view lands in x
    assert_equal(x, torch.arange(6.0) * 10)


def test_random_ops_without_a_device_form_draw_from_the_device_generator():
    """multinomial runs CPU's kernel, seeded for one draw of the device generator: reproducible
    under manual_seed, one offset step, the CPU generator untouched."""
    weights = torch.rand(50, device="neuron")
    torch.manual_seed(123)
    cpu_state = torch.get_rng_state()
    a = torch.multinomial(weights, 20)
    assert torch.neuron.default_generator(0).get_offset() == 1
    assert torch.equal(torch.get_rng_state(), cpu_state)
    torch.manual_seed(123)
    assert_equal(a, torch.multinomial(weights, 20).cpu())
    g = torch.Generator(device="neuron").manual_seed(123)
    assert_equal(a, torch.multinomial(weights, 20, generator=g).cpu())


def test_cpu_index_tensors_are_accepted_and_snapshotted():
    x = torch.arange(10.0, device="neuron")
    idx = torch.tensor([1, 3])
    x[x > 4]  # a boolean mask runs synchronously; it must not make integer indexing synchronous
    with held_stream():
        picked = x[idx]  # a CPU index into a neuron tensor, as with CUDA
        assert not torch.neuron.current_stream().query()  # queued behind the gate, not run at once
        idx.fill_(0)  # changed before the stream reaches the op: the op saw the old values
    assert_equal(picked, torch.tensor([1.0, 3.0]))
    x[torch.tensor([0, 9])] = -1.0
    assert x.cpu().tolist()[0] == -1.0 and x.cpu().tolist()[9] == -1.0


def test_ops_whose_cpu_outputs_differ_from_meta_run_synchronously():
    w = torch.randn(10, 3)
    idx, offsets = torch.tensor([1, 2, 4, 5]), torch.tensor([0, 2])
    for mode in ("sum", "mean", "max"):
        expected = torch.nn.functional.embedding_bag(idx, w, offsets, mode=mode)
        actual = torch.nn.functional.embedding_bag(idx.to("neuron"), w.to("neuron"), offsets.to("neuron"), mode=mode)
        assert_equal(actual, expected)


def test_attention_matches_cpu_and_is_async_without_dropout():
    import torch.nn.functional as F

    q = torch.randn(2, 4, 16, 8)
    qd = q.to("neuron")
    F.scaled_dot_product_attention(qd, qd, qd, is_causal=True)  # whatever runs once per process, before the hold
    torch.neuron.synchronize()
    with held_stream():
        # No random draws to order, and the math path's add(a, mask, out=a) and where(..., out=a)
        # write the very tensor they read: none of its ops waits for the held stream.
        y = F.scaled_dot_product_attention(qd, qd, qd, is_causal=True)
        assert not torch.neuron.current_stream().query()
    # neuron takes attention's math path (its matmuls and softmax compile for the NeuronCore).
    assert_close_to_cpu(y, F.scaled_dot_product_attention(q, q, q, is_causal=True))
    torch.manual_seed(0)
    a = F.scaled_dot_product_attention(qd, qd, qd, dropout_p=0.5)
    # The math path's dropout draws its mask on the device: the first draw after the seed.
    torch.manual_seed(0)
    _, mask = torch.ops.aten.native_dropout(torch.ones(2, 4, 16, 16, device="neuron"), 0.5, True)
    weights = torch.softmax(q @ q.transpose(-2, -1) / 8**0.5, dim=-1)
    assert_close_to_cpu(a, (weights * mask.cpu() * 2.0) @ q)


def test_an_out_that_is_its_own_input_elementwise_is_queued():
    a = torch.ones(3, 4, device="neuron")
    b = torch.arange(4.0, device="neuron")
    torch.neuron.synchronize()
    with held_stream():
        torch.add(a, b, out=a)  # the same elements read and written: no CPU check to wait for
        torch.where(a > 2, a, a.new_zeros(()), out=a)
        assert not torch.neuron.current_stream().query()
    assert_equal(a, torch.tensor([[0.0, 0.0, 3.0, 4.0]] * 3))


def test_a_call_cpu_refuses_leaves_later_calls_of_the_op_queued():
    # A meta kernel that refuses one call's arguments says nothing of the op: the call raises
    # CPU's error at the call, and later good calls are queued as before.
    x = torch.ones(2, 3, device="neuron")
    with pytest.raises(RuntimeError) as cpu_error:
        torch.ops.aten._softmax(torch.ones(2, 3), 1, True)
    with pytest.raises(RuntimeError, match=str(cpu_error.value).splitlines()[0][:40]):
        torch.ops.aten._softmax(x, 1, True)  # half_to_float of a float tensor (the meta kernel: AssertionError)
    with pytest.raises(RuntimeError, match="must have same reduction dim|cannot be multiplied"):
        torch.mm(x, x)
    torch.neuron.synchronize()
    with held_stream():
        y = torch.ops.aten._softmax(x, 1, False)
        z = torch.mm(x, x.t())
        assert not torch.neuron.current_stream().query()
    assert_close_to_cpu(y, torch.softmax(torch.ones(2, 3), 1))
    assert_equal(z, torch.full((2, 2), 3.0))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bool], ids=str)
def test_an_empty_out_that_is_its_own_input_is_resized_and_written_as_cpus(dtype):
    # fuzz-28: CPU's kernel resizes the out= tensor, then reduces the input as it was (no elements).
    x = torch.empty(4, 0, dtype=dtype, device="neuron")
    torch.sum(x, -1, out=x)
    cpu = torch.empty(4, 0, dtype=dtype)
    torch.sum(cpu, -1, out=cpu)
    assert_equal(x, cpu)
    y = torch.empty(3, 0, device="neuron")
    torch.prod(y, -1, out=y)
    assert_equal(y, torch.ones(3))


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "mean"])
def test_a_reduction_into_its_own_input_is_resized_and_computed_as_cpus(name):
    # fuzz-28: CPU's kernel resizes the out= tensor (its own input: (2, 3) -> (3,), with its
    # deprecation warning), fills it with the reduction's identity and reduces that.
    fn = getattr(torch, name)
    expected = torch.arange(1.0, 7.0).reshape(2, 3)
    with pytest.warns(UserWarning, match="was resized"):
        fn(expected, 0, out=expected)
    x = torch.arange(1.0, 7.0).reshape(2, 3).to("neuron")
    with pytest.warns(UserWarning, match="was resized"):
        fn(x, 0, out=x)
    assert x.shape == expected.shape and x.stride() == expected.stride()
    assert_equal(x, expected)


def test_a_reduction_into_an_alias_of_its_input_reads_what_cpu_reads():
    # fuzz-28: out= the same elements as the input: CPU fills it before reading it.
    for device in ("cpu", "neuron"):
        x = torch.tensor(4, dtype=torch.int8, device=device)
        v = x.pow_(2)
        torch.sum(x, 0, out=v)
        assert x.item() == 0, device


def test_an_op_cpu_refuses_into_a_small_out_raises_cpus_error():
    # fuzz-36: CPU's kernel refuses bools; a host view of the small out= cannot grow, which
    # raised "Trying to resize storage that is not resizable" instead.
    x = torch.ones(128, 7, 3, dtype=torch.bool, device="neuron")
    out = torch.empty(3, dtype=torch.bool, device="neuron")
    with pytest.raises(NotImplementedError, match="div_floor_cpu"):
        torch.floor_divide(x, x, out=out)
    assert out.shape == (3,)


def test_a_synchronous_fallback_grows_a_small_out_as_cpu_does():
    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 4.0]])
    expected = torch.empty(1, dtype=torch.long)
    torch.nonzero(x, out=expected)
    out = torch.empty(1, dtype=torch.long, device="neuron")
    torch.nonzero(x.to("neuron"), out=out)
    assert out.stride() == expected.stride()
    assert_equal(out, expected)


@pytest.mark.parametrize("shape, out_shape", [((3, 3, 3), (3, 3, 3)), ((1, 130), (1, 130)), ((4, 5), (5, 4))],
                         ids=["3d_out_of_its_shape", "size_1_dim_130", "transposed_out"])
def test_a_fallback_grows_an_out_past_its_storage_by_the_values_count(shape, out_shape):
    """PyTorch's test_nonzero_astuple_out: ``nonzero(t, out=out)`` with ``out`` of t's shape needs
    more room than ``out``'s storage (27 x 3 indices into 27 elements). The probe over zeros finds
    no non-zeros, so only CPU's kernel over the values knows the size: "Trying to resize storage
    that is not resizable" was raised."""
    x = torch.randn(shape)
    x[(0,) * len(shape)] = 0.0  # one zero: the count is not the element count
    expected = torch.empty(out_shape, dtype=torch.long)
    if out_shape == (5, 4):
        expected = expected.t()
    torch.nonzero(x, out=expected)
    out = torch.empty(out_shape, dtype=torch.long, device="neuron")
    if out_shape == (5, 4):
        out = out.t()  # non-contiguous
    returned = torch.nonzero(x.to("neuron"), out=out)
    assert returned is out
    assert out.shape == expected.shape == (x.numel() - 1, len(shape))
    assert_equal(out, expected)
    with pytest.raises(RuntimeError):  # CPU refuses as_tuple with out= too
        torch.nonzero(x.to("neuron"), as_tuple=True, out=out)
