"""add / sub / add_ with a non-integer alpha on float16 / bfloat16 (issue 13).

CPU's kernel has two answers for the same values: where it runs element by element (a strided
operand, the last ``numel % 32`` elements of a contiguous run, tensors of under 32 elements, with
AVX2; 64 with AVX-512) it
rounds ``alpha * y`` to the 16-bit dtype before the add, as the device does; where it runs
vectorized it computes ``x + alpha * y`` in fp32 and rounds once (alpha rounded to the dtype in
both). The device gives the element-by-element answer in every mode and layout: bit for bit as
CPU with a strided ``y``, within the rounding of the product of CPU with a contiguous one.
"""

from __future__ import annotations

import pytest
import torch
import torch_neuronx  # noqa: F401 - the neuron device
from tnx_helpers import MODES, execution_mode

ALPHAS = [0.1, 1 / 3, 3.3, -2.5, 2]
SHAPES = [(1000,), (7, 1, 13), (1, 33), (3, 1)]


def _operands(shape, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=g) * 10).to(dtype)
    y_strided = (torch.randn((*shape, 2), generator=g) * 10).to(dtype)[..., 0]  # not contiguous
    return x, y_strided


def _on_neuron(mode, fn, *args):
    args = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args]
    with execution_mode(mode):  # compile: each alpha its own graph (dynamo reset)
        run = torch.compile(fn, backend="neuron", dynamic=False) if mode == "compile" else fn
        return run(*args).cpu()


def _bits(t):
    return t.view(torch.int16)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_alpha_as_cpu_computes_element_by_element(mode, dtype, shape):
    x, y = _operands(shape, dtype)
    for alpha in ALPHAS:
        for name, fn in {"add": lambda a, b, alpha=alpha: torch.add(a, b, alpha=alpha),
                         "sub": lambda a, b, alpha=alpha: torch.sub(a, b, alpha=alpha),
                         "add_": lambda a, b, alpha=alpha: a.clone().add_(b, alpha=alpha)}.items():
            want = fn(x, y)  # y strided: CPU's element-by-element loop
            assert torch.equal(_bits(want), _bits(x + y * torch.tensor(-alpha if name == "sub" else alpha, dtype=dtype)))
            got = _on_neuron(mode, fn, x, y)
            assert torch.equal(_bits(got), _bits(want)), (name, alpha, (got != want).sum().item())
            # a contiguous y: the same values, the device's answer unchanged; CPU's vectorized one
            # differs from it by at most the rounding of the product
            got_c, want_c = _on_neuron(mode, fn, x, y.contiguous()), fn(x, y.contiguous())
            assert torch.equal(_bits(got_c), _bits(want))
            eps = torch.finfo(dtype).eps
            bound = eps * (abs(alpha) * y.double().abs() + want_c.double().abs() + torch.finfo(dtype).tiny)
            assert ((got_c.double() - want_c.double()).abs() <= bound).all(), (name, alpha)
