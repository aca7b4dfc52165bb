"""The announcement's custom NKI op with autograd (example 3), as written: forward through
``sin_kernel``, backward through ``cos_kernel``, at the announcement's shape [128, 1] (which once
gave NaN), at other shapes the kernel accepts, with non-contiguous inputs, inside a compiled
function, and a shape the kernel cannot take (a clear error, not garbage)."""

from __future__ import annotations

import pytest
from examples_harness import run_example

SNIPPET = '''
import torch
import nki
import nki.language as nl
from torch_neuronx import nki_op

# Note in NKI kernels, the output tensor should be defined as parameter to the kernel
@nki.jit
def sin_kernel(in_ptr0, out_ptr):
    input_tile = nl.load(in_ptr0[0:128])
    output_tile = nl.sin(input_tile)
    nl.store(out_ptr[0:128], value=output_tile)
    return out_ptr

# defining cos since it will be used in backward path of sin
@nki.jit
def cos_kernel(in_ptr0, out_ptr):
    input_tile = nl.load(in_ptr0[0:128])
    output_tile = nl.cos(input_tile)
    nl.store(out_ptr[0:128], value=output_tile)
    return out_ptr

# after this line, there is no NKI code, just native PyTorch, registering custom ops
@nki_op("mylib::pt_nki_sin", mutates_args={})
def pt_nki_sin(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    sin_kernel(x, out)
    return out

@nki_op("mylib::pt_nki_cos", mutates_args={})
def pt_nki_cos(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    cos_kernel(x, out)
    return out

def pt_nki_sin_backward(ctx, grad):
    x, = ctx.saved_tensors
    return grad * pt_nki_cos(x)  # cos is derivative of sin

def pt_sin_setup_context(ctx, inputs, output):
    x, = inputs
    ctx.save_for_backward(x)

# Register backward pass and context function used during autograd for nki_sin
pt_nki_sin.register_autograd(pt_nki_sin_backward, setup_context=pt_sin_setup_context)

if __name__ == "__main__":
    x = torch.randn(128, 1, device="neuron", requires_grad=True)
    # Forward pass uses sin_kernel
    y = pt_nki_sin(x)
    # Backward pass, autograd calls uses nki_sin_backward() -> cos_kernel()
    loss = y.sum()
    loss.backward()
'''

CHECK_AS_WRITTEN = """
report({"forward_error": (y.detach().cpu() - torch.sin(x.detach().cpu())).abs().max().item(),
        "grad_error": (x.grad.cpu() - torch.cos(x.detach().cpu())).abs().max().item(),
        "finite": bool(torch.isfinite(y.detach().cpu()).all() and torch.isfinite(x.grad.cpu()).all()),
        "shape": list(y.shape)})
"""

# Other inputs to the same ops. The kernels read and write rows 0:128 only (rows past them keep
# empty_like's contents, the kernel author's business): those rows are checked.
CHECK_OTHER_INPUT = """
torch.manual_seed(0)
x = {make}
fn = pt_nki_sin
scale = 1.0
if {compiled}:
    fn, scale = torch.compile(lambda t: pt_nki_sin(t) * 2.0, backend="neuron"), 2.0
y = fn(x)
y.sum().backward()
got, grad, ref = y.detach().cpu()[:128], x.grad.cpu()[:128], x.detach().cpu()[:128]
report({{"forward_error": (got - scale * torch.sin(ref)).abs().max().item(),
        "grad_error": (grad - scale * torch.cos(ref)).abs().max().item(),
        "finite": bool(torch.isfinite(got).all() and torch.isfinite(grad).all()),
        "shape": list(y.shape)}})
"""

# The simulated ScalarE evaluates sin/cos by its activation tables: float32-close, not exact.
TOLERANCE = 1e-5


def _check(result, shape):
    assert result["finite"], result
    assert result["shape"] == shape, result
    assert result["forward_error"] < TOLERANCE and result["grad_error"] < TOLERANCE, result


def test_the_example_as_written():
    _check(run_example(SNIPPET + CHECK_AS_WRITTEN), [128, 1])


OTHER_INPUTS = {
    "128x64": ('torch.randn(128, 64, device="neuron", requires_grad=True)', [128, 64]),
    "128x3-noncontiguous": ('torch.randn(3, 128, device="neuron").t().requires_grad_()', [128, 3]),
    "rows-past-128": ('torch.randn(200, 5, device="neuron", requires_grad=True)', [200, 5]),
}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name", list(OTHER_INPUTS))
def test_other_inputs(name, compiled):
    make, shape = OTHER_INPUTS[name]
    code = SNIPPET + CHECK_OTHER_INPUT.format(make=make, compiled=compiled)
    _check(run_example(code), shape)


def test_fewer_rows_than_the_kernel_reads_is_a_clear_error():
    code = SNIPPET + """
x = torch.randn(64, 1, device="neuron")
try:
    pt_nki_sin(x).cpu()
    report({"raised": None})
except Exception as err:
    report({"raised": type(err).__name__, "message": str(err)})
"""
    result = run_example(code)
    assert result["raised"] is not None, result
    assert "in_ptr0[0:128]" in result["message"] or "128" in result["message"], result
