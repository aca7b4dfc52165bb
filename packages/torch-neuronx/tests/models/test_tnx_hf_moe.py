"""Transformers' mixture-of-experts models on neuron, eager, built from their configs at a tiny
size: forward, backward and greedy generate match the same model on CPU, with the experts'
routing - ``topk``, ``sort``, ``histc`` over integer expert ids - on the device, through
Transformers' default experts path (``grouped_mm``), not only ``experts_implementation="eager"``.
Every one of them raised ``"histogram_cpu" not implemented for 'Int'`` before (issue 20)."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch_neuronx

transformers = pytest.importorskip("transformers")

SMALL = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=96,
    max_position_embeddings=64,
    head_dim=8,
)
MOE = {
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=32),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16),
    "olmoe": dict(num_experts=4, num_experts_per_tok=2),
    "granitemoe": dict(num_local_experts=4, num_experts_per_tok=2),
    "deepseek_v3": dict(
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        n_group=1,
        topk_group=1,
        first_k_dense_replace=0,
        kv_lora_rank=16,
        q_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=8,
        n_shared_experts=1,
        num_key_value_heads=4,
    ),
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, layer_types=["sliding_attention"], sliding_window=8),
}
ROUTING_OPS = {"aten::topk", "aten::sort", "aten::histc"}


def _tiny(name):
    config = transformers.AutoConfig.for_model(name)
    for key, value in {**SMALL, **MOE[name]}.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def _loss_and_grads(model, ids):
    model.zero_grad()
    out = model(ids, labels=ids)
    out.loss.backward()
    return out.logits.detach().cpu(), {n: p.grad.cpu() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", sorted(MOE))
def test_moe_model_matches_cpu(name):
    cpu = _tiny(name)
    assert cpu.config._experts_implementation not in (None, "eager"), cpu.config._experts_implementation
    device = copy.deepcopy(cpu).to("neuron")
    ids = torch.randint(0, SMALL["vocab_size"], (2, 7), generator=torch.Generator().manual_seed(1))
    logits, grads = _loss_and_grads(cpu, ids)
    torch_neuronx.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d_logits, d_grads = _loss_and_grads(device, ids.to("neuron"))
        routing = ROUTING_OPS & set(torch_neuronx.get_executed_ops())
        fallback = set(torch_neuronx.get_fallback_ops())
        prompt = ids[:1, :4]
        expected = cpu.generate(prompt, max_new_tokens=4, do_sample=False)
        generated = device.generate(prompt.to("neuron"), max_new_tokens=4, do_sample=False).cpu()
    assert "aten::histc" in routing and not routing & fallback, (routing, fallback)
    torch.testing.assert_close(d_logits, logits, rtol=1e-4, atol=1e-5)
    assert d_grads.keys() == grads.keys()
    for key, grad in grads.items():
        torch.testing.assert_close(d_grads[key], grad, rtol=1e-4, atol=1e-5, msg=key)
    assert torch.equal(generated, expected), (generated, expected)
