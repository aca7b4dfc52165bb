"""A kernel's fast form (torch_neuronx.fast_form): its launches evaluate a reference graph under the
fast executor, its own instructions under exact, with one device time; check_fast_form is the
differential test."""

from __future__ import annotations

import nki
import nki.language as nl
import pytest
import torch
import torch_neuronx
from neuron_sim.trace import global_sink
from torch_neuronx import nki_op
from torch_neuronx.nki_fast_form import FastFormError
from torch_neuronx.nki_integration import call_kernel
from torch_neuronx.testing import check_fast_form


@nki.jit
def sin_kernel(in_ptr0, out_ptr):
    nl.store(out_ptr[0:128], value=nl.sin(nl.load(in_ptr0[0:128])))
    return out_ptr


@torch_neuronx.fast_form(sin_kernel)
def sin_reference(in_ptr0, out_ptr):
    return torch.sin(in_ptr0)


@nki.jit
def scaled_exp(x, scale):
    """A kernel that creates its output and takes a compile-time constant."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:128], value=nl.multiply(nl.exp(nl.load(x[0:128])), scale))
    return out


@torch_neuronx.fast_form(scaled_exp)
def scaled_exp_reference(x, scale):
    return torch.exp(x) * scale


@nki.jit
def tanh_kernel(in_ptr0, out_ptr):
    nl.store(out_ptr[0:128], value=nl.tanh(nl.load(in_ptr0[0:128])))


@nki.jit
def no_fast_form(in_ptr0, out_ptr):
    nl.store(out_ptr[0:128], value=nl.exp(nl.load(in_ptr0[0:128])))


def _launches(fn) -> list:
    records = []
    handle = global_sink().subscribe(records.append)
    try:
        fn()
        torch.neuron.synchronize()
    finally:
        global_sink().unsubscribe(handle)
    return [(r.name, r.executor) for r in records if r.kind == "neff"]


@pytest.mark.parametrize("shape", [(128, 1), (128, 37), (128,)], ids=str)
def test_fast_form_and_instructions_agree_with_one_device_time(neuron, shape):
    x = torch.randn(*shape, device=neuron)
    result = check_fast_form(sin_kernel, x, torch.empty_like(x))
    torch.testing.assert_close(result.cpu(), torch.sin(x.cpu()), rtol=1e-5, atol=1e-6)


def test_a_kernel_creating_its_output_with_a_constant_argument(neuron):
    x = torch.randn(128, 9, device=neuron)
    for scale in (0.5, 3.0):  # one fast form per compiled signature: the constant is part of it
        result = check_fast_form(scaled_exp, x, scale)
        torch.testing.assert_close(result.cpu(), torch.exp(x.cpu()) * scale, rtol=1e-5, atol=1e-5)


def test_launches_run_the_fast_form_by_default_and_instructions_when_asked(neuron):
    x = torch.randn(128, 4, device=neuron)
    out = torch.empty_like(x)
    torch.neuron.synchronize()  # the draw's own launch is not the kernel's
    assert _launches(lambda: sin_kernel(x, out)) == [("sin_kernel", "fast")]
    assert _launches(lambda: call_kernel(sin_kernel, [x, out], {}, executor="exact")) == [("sin_kernel", "exact")]
    assert _launches(lambda: no_fast_form(x, out)) == [("no_fast_form", "exact")]
    with pytest.raises(ValueError, match="no_fast_form has no fast form"):
        call_kernel(no_fast_form, [x, out], {}, executor="fast")


def test_a_fast_form_reading_what_the_kernel_writes_is_refused(neuron):
    @nki.jit
    def kernel(in_ptr0, out_ptr):
        nl.store(out_ptr[0:128], value=nl.sin(nl.load(in_ptr0[0:128])))

    torch_neuronx.fast_form(kernel)(lambda a, out: torch.sin(a) + out)
    x = torch.randn(128, 2, device=neuron)
    with pytest.raises(FastFormError, match="reads 'out_ptr', which the kernel writes"):
        kernel(x, torch.empty_like(x))


def test_the_differential_test_catches_a_wrong_fast_form(neuron):
    @torch_neuronx.fast_form(tanh_kernel)
    def wrong(in_ptr0, out_ptr):
        return torch.sigmoid(in_ptr0)

    x = torch.randn(128, 3, device=neuron)
    with pytest.raises(AssertionError, match="tanh_kernel argument 1"):
        check_fast_form(tanh_kernel, x, torch.empty_like(x))


@pytest.mark.parametrize(
    "reference, message",
    [
        (lambda a, out: torch.sin(a)[:, :1], r"'out_ptr' must be a \[128, 2\] torch.float32 tensor, got \[128, 1\]"),
        (lambda a, out: torch.sin(a).double(), "torch.float64"),
        (lambda a, out: (torch.sin(a), torch.cos(a)), "returned 2 tensors; the kernel writes 1"),
    ],
    ids=["shape", "dtype", "count"],
)
def test_a_fast_form_that_does_not_match_its_kernel_is_refused_by_name(neuron, reference, message):
    @nki.jit
    def kernel(in_ptr0, out_ptr):
        nl.store(out_ptr[0:128], value=nl.sin(nl.load(in_ptr0[0:128])))

    torch_neuronx.fast_form(kernel)(reference)
    x = torch.randn(128, 2, device=neuron)
    with pytest.raises(FastFormError, match=message):
        kernel(x, torch.empty_like(x))


@nki_op("tnx_fast_form::pt_sin", mutates_args={})
def pt_sin(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    sin_kernel(x, out)
    return out


def test_a_compiled_model_with_kernels_runs_every_launch_fast(neuron):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8)).to(neuron)

    def f(x):
        return model(pt_sin(model(x)))

    x = torch.randn(128, 8, device=neuron)
    compiled = torch.compile(f, backend="neuron")
    with torch.no_grad():
        expected = f(x).cpu()  # eager, kernel included
        compiled(x)
        launches = _launches(lambda: compiled(x))
        result = compiled(x).cpu()
    assert ("sin_kernel", "fast") in launches and all(mode == "fast" for _name, mode in launches), launches
    torch.testing.assert_close(result, expected, rtol=1e-5, atol=1e-5)
