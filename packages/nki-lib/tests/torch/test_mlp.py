"""nkilib.torch.gated_mlp on neuron tensors (eager and compiled, with gradients) against plain
torch on CPU in fp32 autograd, the fast form against the kernel's instructions, the fallback."""

import pytest
import torch
import torch_neuronx
from nkilib.mlp.gated_mlp import gated_mlp_kernel
from nkilib.torch import NkilibFallbackWarning, gated_mlp
from nkilib.torch.mlp import gated_mlp_plain
from nkilib_torch_helpers import DTYPES, assert_close, inputs, run_with_grads
from torch_neuronx.testing import check_fast_form


def _args(b=2, s=65, hidden=96, inter=200, dtype=torch.float32, seed=0):
    x, wg, wu, wd = inputs((b, s, hidden), (hidden, inter), (hidden, inter), (inter, hidden), dtype=dtype, seed=seed)
    return x, wg * 0.1, wu * 0.1, wd * 0.1


@pytest.mark.parametrize("activation", ["silu", "gelu"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_eager_forward_and_gradients(dtype, activation):
    args = _args(dtype=dtype)
    dy = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(1))
    (y,), grads = run_with_grads(lambda *a: gated_mlp(*a, activation), args, (dy,), "neuron")
    (ref,), ref_grads = run_with_grads(lambda *a: gated_mlp_plain(*a, activation), [a.float() for a in args], (dy,), "cpu")
    assert_close(y, ref, dtype)
    for g, r in zip(grads, ref_grads):
        assert_close(g, r, dtype, scale=4.0)
    assert "nki::gated_mlp_kernel" in torch_neuronx.get_executed_ops()


def test_compiled_block(strict):
    x, wg, wu, wd = _args(seed=2)
    block = torch.compile(lambda x, wg, wu, wd: x + gated_mlp(x, wg, wu, wd), backend="neuron")
    out = block(*(t.to("neuron") for t in (x, wg, wu, wd)))
    assert_close(out.cpu(), x + gated_mlp_plain(x, wg, wu, wd), torch.float32)
    assert "nki::gated_mlp_kernel" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_fast_form_matches_the_instructions(dtype):
    x, wg, wu, wd = (t.to("neuron") for t in _args(b=1, s=130, dtype=dtype, seed=3))
    tol = {"rtol": 2e-5, "atol": 2e-5} if dtype == torch.float32 else {"rtol": 8e-3, "atol": 8e-3}
    for activation in ("silu", "gelu_tanh"):
        check_fast_form(gated_mlp_kernel, x[0], wg, wu, wd, activation, **tol)


def test_unsupported_calls_run_plain_torch():
    x, wg, wu, wd = _args(seed=4)
    dev = [t.to("neuron") for t in (x, wg, wu, wd)]
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.dtype\] x has dtype float64"):
        out = gated_mlp(*(t.double() for t in dev))
    assert_close(out.float().cpu(), gated_mlp_plain(x, wg, wu, wd), torch.float32)
    with pytest.raises(Exception, match=r"\[nkilib.mlp.activation\] activation='tanh'"):
        gated_mlp(*dev, activation="tanh")
