"""nki_op: NKI kernels as PyTorch custom ops on neuron tensors, trainable via register_autograd."""

from __future__ import annotations

import nki
import nki.language as nl
import numpy as np
import pytest
import torch
import torch_neuronx
from tnx_helpers import nki_sin_cos_ops
from torch_neuronx import nki as tnx_nki

my_sin, my_cos = nki_sin_cos_ops("tnx_tests")


def test_nki_is_reexported():
    assert tnx_nki is nki


def test_sin_cos_forward_and_backward():
    torch.manual_seed(0)
    x = torch.randn(128, 64, device="neuron", requires_grad=True)
    y = my_sin(x)
    assert y.device.type == "neuron" and y.shape == x.shape
    y.sum().backward()
    xc = x.detach().cpu()
    torch.testing.assert_close(y.detach().cpu(), torch.sin(xc), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(x.grad.cpu(), torch.cos(xc), rtol=1e-5, atol=1e-6)
    executed = torch_neuronx.get_executed_ops()
    assert "nki::sin_kernel" in executed and "nki::cos_kernel" in executed
    assert "nki::sin_kernel" not in torch_neuronx.get_fallback_ops()


@nki.jit
def sin_returning_out(in_ptr0, out_ptr):  # the announcement's form: the kernel returns its output parameter
    nl.store(out_ptr[0:128], value=nl.sin(nl.load(in_ptr0[0:128])))
    return out_ptr


@pytest.mark.parametrize("shape", [(128, 1), (128,), (128, 3)], ids=str)
def test_a_kernel_returning_its_output_parameter_returns_that_tensor(shape):
    """``return out_ptr`` gives back the caller's tensor, written by the kernel (issue 14: the
    announcement's [128, 1] example read an unwritten tensor and returned NaN)."""
    x = torch.randn(*shape, device="neuron")
    out = torch.empty_like(x)
    returned = sin_returning_out(x, out)
    assert returned is out
    torch.testing.assert_close(out.cpu(), torch.sin(x.cpu()), rtol=1e-5, atol=1e-6)


def test_nki_kernel_is_an_async_launch_timed_by_the_simulator():
    x = torch.randn(128, 32, device="neuron")
    torch.neuron.synchronize()
    start, end = torch_neuronx.Event(enable_timing=True), torch_neuronx.Event(enable_timing=True)
    start.record()
    y = my_sin(x)
    end.record()
    assert end.elapsed_time(start) <= 0 < start.elapsed_time(end)
    assert torch_neuronx.current_stream().query()
    torch.testing.assert_close(y.cpu(), torch.sin(x.cpu()), rtol=1e-5, atol=1e-6)


def test_nki_op_on_cpu_tensors_and_under_compile_tracing():
    x = torch.randn(128, 8)
    torch.testing.assert_close(my_sin(x), torch.sin(x), rtol=1e-5, atol=1e-6)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.randn(128, 8, device="neuron"))
        out = my_sin(fake)
    assert out.shape == (128, 8) and out.device.type == "neuron"


def test_nki_kernel_error_is_clear():
    x = torch.randn(128, 4, dtype=torch.float64, device="neuron")
    with pytest.raises(Exception, match="float64|dtype"):
        my_sin(x)
        torch.neuron.synchronize()


def test_cpu_bfloat16_tensors_run_and_written_inputs_update_in_place():
    @nki.jit
    def add_one_into(x, out):
        nl.store(out, nl.add(nl.load(x), 1.0))

    x = torch.randn(128, 16).to(torch.bfloat16)
    out = torch.zeros_like(x)
    assert add_one_into(x, out) is None
    torch.testing.assert_close(out, (x.float() + 1).to(torch.bfloat16))


def test_torch_tensors_without_torch_neuronx_name_what_to_import():
    from tnx_helpers import run_python

    proc = run_python(
        """
        import nki, nki.language as nl, torch

        @nki.jit
        def copy(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(x))
            return out

        try:
            copy(torch.ones(4, 4))
        except nki.NkiError as err:
            print("refused:", err)
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert "refused:" in proc.stdout and "import torch_neuronx" in proc.stdout and "torch.Tensor" in proc.stdout


@nki.jit
def exp_halves(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs()
    i = nl.program_id(0)
    nl.store(out[i * rows:(i + 1) * rows, :], nl.exp(nl.load(x[i * rows:(i + 1) * rows, :])))
    return out


def test_lnc2_kernel_takes_the_same_device_time_with_numpy_arrays_and_neuron_tensors():
    x = torch.randn(256, 512)
    y = exp_halves[2](x.to("neuron"))
    torch_ns = exp_halves.last_device_time_ns
    torch.testing.assert_close(y.cpu(), torch.exp(x), rtol=1e-5, atol=1e-6)
    cores = [t.total_ns for t in exp_halves.last_timing]
    np.testing.assert_allclose(exp_halves[2](x.numpy()), torch.exp(x).numpy(), rtol=1e-5, atol=1e-6)
    assert exp_halves.last_device_time_ns == pytest.approx(torch_ns)
    assert torch_ns == pytest.approx(max(cores))  # two cores at once: the slower one's time, not the sum
    assert len(cores) == 2 and torch_ns < sum(cores)
    # Events on the stream measure the same device time. (On neuron:1, where no numpy launch -
    # they use device 0 - holds the core: a launch waiting for the core would measure the wait too.)
    with torch.neuron.device(1):
        xn = x.to("neuron:1")
        torch.neuron.synchronize()
        start, end = torch_neuronx.Event(enable_timing=True), torch_neuronx.Event(enable_timing=True)
        start.record()
        exp_halves[2](xn)
        end.record()
        assert start.elapsed_time(end) * 1e6 == pytest.approx(torch_ns)
