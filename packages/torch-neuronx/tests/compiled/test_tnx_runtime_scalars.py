"""Float scalars that change every call (Adam's step size and bias correction, a scheduled
learning rate) are 0-d inputs of the compiled op, not constants: a training loop stops compiling
after its first step, and results keep CPU's."""

from __future__ import annotations

import torch
import torch_neuronx
from tnx_helpers import assert_equal


def builds() -> int:
    """Op signatures the eager path has built (compiled, read from disk, or refused) so far."""
    m = torch_neuronx.eager_metrics()
    return m["compiled"] + m["disk_hits"] + m["not_lowerable"]


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(5, 7, generator=g), torch.randn(5, 7, generator=g), torch.rand(5, 7, generator=g) + 0.5


def test_new_values_reuse_one_neff_with_cpus_results(neuron):
    x, t1, t2 = _inputs()
    xd, t1d, t2d = x.to(neuron), t1.to(neuron), t2.to(neuron)
    for k, v in enumerate((0.25, 0.3, -1.7, 2.5e-3, 1e6)):
        if k == 1:  # every signature was built for the first value
            built = builds()
        assert_equal(xd / v, x / v)
        assert_equal(torch.addcdiv(xd, t1d, t2d, value=v), torch.addcdiv(x, t1, t2, value=v))
        y = xd.clone()
        y.div_(v).addcdiv_(t1d, t2d, value=v)
        assert_equal(y, (x / v).addcdiv_(t1, t2, value=v))
        torch.testing.assert_close(torch.lerp(xd, t1d, v).cpu(), torch.lerp(x, t1, v))
        torch.testing.assert_close(torch.addcmul(xd, t1d, t2d, value=v).cpu(), torch.addcmul(x, t1, t2, value=v))
    # div, addcdiv, in-place div_/addcdiv_, lerp, addcmul, clone: built once each, whatever the value
    assert builds() == built


def test_adamw_steps_compile_nothing_after_the_first(neuron):
    from torch_neuronx.testing.gpt import GPT, GPTConfig, batches

    cfg = GPTConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=16, dropout=0.0)
    torch.manual_seed(0)
    model = GPT(cfg).to(neuron)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    built = []
    for x, y in batches(cfg, 2, 4):
        loss = model(x.to(neuron), y.to(neuron))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        built.append(builds())
    assert built[1] == built[2] == built[3]


def test_kept_scalars_are_dropped_at_synchronize(neuron):
    import torch_neuronx

    x = torch.randn(64, device=neuron)
    torch.neuron.synchronize()
    before = torch_neuronx.memory_allocated(neuron)
    y = x / 0.123  # its 0-d input holding 0.123 is kept for the next calls
    del y
    assert torch_neuronx.memory_allocated(neuron) > before
    torch.neuron.synchronize()
    assert torch_neuronx.memory_allocated(neuron) == before


def test_a_call_that_cannot_compile_falls_back_with_the_callers_number(neuron, monkeypatch):
    # The device call takes the Scalar as a 0-d tensor; CPU's kernel for the fallback wants the
    # number itself (mul.Scalar given a tensor raised "Expected a value of type 'number'").
    from neuronxcc.compiler import CompileError
    from torch_neuronx.compiled import dispatch

    def refuse(graph, arch):
        raise CompileError("compile.unsupported_op", "refused by the test")

    monkeypatch.setattr(dispatch, "compile_neff", refuse)  # the compiler refuses every new signature
    monkeypatch.setenv("TORCH_NEURONX_NEFF_DISABLE_CACHE", "1")
    x = torch.randn(11, 3)  # shapes no other test compiles
    assert_equal(x.to(neuron).mul(1.3217), x.mul(1.3217))
    y = x.clone().to(neuron)
    y.div_(0.731)
    assert_equal(y, x / 0.731)


def test_signed_zeros_and_nan_scalars_keep_their_values(neuron):
    x = torch.tensor([-2.0, 3.0, 0.0])
    xd = x.to(neuron)
    for v in (0.0, -0.0, 0.0, float("nan"), float("nan"), -0.0):
        assert_equal(xd / v, x / v)  # +-inf: the zero's sign
        product = (xd * v).cpu()
        assert_equal(product, x * v)
        assert torch.equal(product.signbit(), (x * v).signbit())
