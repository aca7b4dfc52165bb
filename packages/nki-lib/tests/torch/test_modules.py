"""swap_modules: the repository's GPT with its LayerNorms on the kernels trains as the plain one,
and a swapped module keeps its parameters and state_dict."""

import copy

import pytest
import torch
import torch_neuronx
from nkilib.torch import swap_modules
from nkilib.torch.modules import LayerNorm, RMSNorm
from nkilib_torch_helpers import assert_close
from torch_neuronx.testing.gpt import GPT, GPTConfig, batches

CFG = GPTConfig(vocab=64, d_model=64, n_layers=2, n_heads=2, seq_len=16, dropout=0.0)


def _loss_and_grads(model, idx, targets):
    model.zero_grad()
    loss = model(idx, targets)
    loss.backward()
    return loss.detach().cpu(), {n: p.grad.cpu() for n, p in model.named_parameters()}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_gpt_with_swapped_layernorms_matches_the_plain_model(compiled):
    torch.manual_seed(0)
    plain = GPT(CFG).to("neuron")
    swapped = copy.deepcopy(plain)
    names = swap_modules(swapped)
    assert names == ["blocks.0.ln1", "blocks.0.ln2", "blocks.1.ln1", "blocks.1.ln2", "ln"]
    assert list(swapped.state_dict()) == list(plain.state_dict())
    idx, targets = (t.to("neuron") for t in next(batches(CFG, batch=4, steps=1)))
    run = (lambda m: torch.compile(m, backend="neuron")) if compiled else (lambda m: m)
    ref_loss, ref_grads = _loss_and_grads(run(plain), idx, targets)
    torch_neuronx.clear_op_tracking()
    loss, grads = _loss_and_grads(run(swapped), idx, targets)
    executed = torch_neuronx.get_executed_ops()
    assert "nki::layer_norm_kernel" in executed and "nki::layer_norm_backward_kernel" in executed
    assert_close(loss, ref_loss, torch.float32)
    for name, g in grads.items():
        assert_close(g, ref_grads[name], torch.float32, scale=10.0 if g.dim() == 1 else 1.0)


def test_swapped_modules_keep_parameters_and_other_shapes_run_the_original_forward():
    model = torch.nn.Sequential(torch.nn.RMSNorm(32), torch.nn.LayerNorm((4, 8)), torch.nn.LayerNorm(8, bias=False))
    weight = model[0].weight
    swap_modules(model)
    assert type(model[0]) is RMSNorm and type(model[1]) is LayerNorm and model[0].weight is weight
    x = torch.randn(3, 4, 8)
    xn = x.to("neuron")
    model.to("neuron")
    torch.testing.assert_close(model[1](xn).cpu(), torch.nn.functional.layer_norm(x, (4, 8)), rtol=1e-5, atol=1e-5)
    # no bias: the kernel needs one, so torch's layer_norm runs (no warning: nothing was refused)
    torch.testing.assert_close(model[2](xn).cpu(), torch.nn.functional.layer_norm(x, (8,)), rtol=1e-5, atol=1e-5)
    y = model[0](torch.randn(5, 32, device="neuron"))
    assert y.shape == (5, 32) and "nki::rms_norm_kernel" in torch_neuronx.get_executed_ops()
