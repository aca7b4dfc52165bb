"""Helpers of the nkilib.torch tests: the same op on neuron (through nkilib.torch) and on CPU
(torch's own op in fp32 autograd), compared at the tolerance of the I/O dtype."""

from __future__ import annotations

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# (rtol, atol relative to the reference's largest magnitude): fp32 tight, bf16 one rounding of the output
TOLERANCES = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (8e-3, 4e-3)}


def inputs(*shapes, dtype=torch.float32, seed=0, scale=1.0):
    """CPU tensors of ``dtype`` (random normal), one per shape."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(s, generator=g) * scale).to(dtype) for s in shapes]


def run_with_grads(fn, args, grad_outputs, device):
    """(outputs, input grads) of fn on leaf copies of ``args`` on ``device``; the loss is the sum
    of each output times its grad_output (so the gradients are not all-ones)."""
    leaves = [a.detach().to(device).requires_grad_() for a in args]
    outs = fn(*leaves)
    outs = outs if isinstance(outs, tuple) else (outs,)
    loss = sum((o.float() * g.to(device).float()).sum() for o, g in zip(outs, grad_outputs))
    loss.backward()
    return [o.detach().cpu() for o in outs], [leaf.grad.cpu() for leaf in leaves]


def assert_close(actual, expected, dtype, scale=1.0):
    """``actual`` (the I/O dtype) against an fp32 ``expected``; ``scale`` widens atol for sums
    over many rows."""
    assert actual.dtype == dtype, f"dtype {actual.dtype} != {dtype}"
    rtol, atol = TOLERANCES[dtype]
    expected = expected.float()
    torch.testing.assert_close(actual.float(), expected, rtol=rtol,
                               atol=atol * scale * max(1.0, expected.abs().max().item()))
