"""Tiny Hugging Face models (built from configs, random weights) under
``torch.compile(model, backend="neuron")``, the loss inside (labels passed): forward and backward
match the same model eager on neuron, the whole model is one graph on the device (no graph
break, no graph run eagerly, no CPU fallback). T5 is the case that exercises most: its labels are
padded for the loss (``constant_pad_nd``) and shifted into decoder inputs (an int64 slice
assignment), and its relative-position buckets slice at non-zero offsets (whose backward ran
torch-mlir out of memory)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_neuronx
from torch_neuronx.dynamo import NeuronCompileFallbackWarning

transformers = pytest.importorskip("transformers")


def _t5():
    config = transformers.T5Config(
        vocab_size=96,
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        relative_attention_num_buckets=8,
        decoder_start_token_id=0,
    )
    return transformers.T5ForConditionalGeneration(config)


def _llama():
    config = transformers.LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        num_hidden_layers=1,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config)


MODELS = {"t5": (_t5, (2, 7), (2, 5)), "llama": (_llama, (2, 7), None)}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_forward_and_backward_match_eager(name):
    build, ids_shape, labels_shape = MODELS[name]
    torch.manual_seed(0)
    model = build().eval().to("neuron")  # eval: no dropout, so eager and compiled draw nothing
    ids = torch.randint(3, 96, ids_shape)
    labels = torch.randint(3, 96, labels_shape) if labels_shape else ids.clone()
    labels[0, -1] = -100  # ignored by the loss
    inputs = {"input_ids": ids.to("neuron"), "labels": labels.to("neuron")}

    def step(fn):
        model.zero_grad(set_to_none=True)
        out = fn(**inputs)
        out.loss.backward()
        return out.loss.detach().cpu(), out.logits.detach().cpu(), {n: p.grad.cpu() for n, p in model.named_parameters()}

    loss, logits, grads = step(model)
    torch._dynamo.reset()
    torch_neuronx.reset_compile_metrics()
    torch_neuronx.clear_op_tracking()
    from torch._dynamo.utils import counters

    counters.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NeuronCompileFallbackWarning)
        c_loss, c_logits, c_grads = step(torch.compile(model, backend="neuron"))
    assert dict(counters["graph_break"]) == {}
    assert torch_neuronx.get_fallback_ops() == []
    kinds = sorted(g["kind"] for g in torch_neuronx.compile_metrics()["graphs"])
    assert kinds == ["backward", "forward"], torch_neuronx.compile_metrics()["graphs"]
    torch.testing.assert_close(c_loss, loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c_logits, logits, rtol=1e-4, atol=1e-5)
    assert grads.keys() == c_grads.keys()
    for n in grads:
        torch.testing.assert_close(c_grads[n], grads[n], rtol=1e-4, atol=1e-5, msg=n)


def test_compiled_static_cache_generate_compiles_once_per_phase():
    """Greedy ``generate`` with the static cache and the forward compiled: the prefill graph and
    the one-token decode graph, whatever the number of tokens (no recompile per token), and the
    tokens of eager generate."""
    torch.manual_seed(0)
    model = _llama().eval().to("neuron")
    ids = torch.randint(3, 96, (1, 5)).to("neuron")
    expected = model.generate(ids, max_new_tokens=7, do_sample=False, cache_implementation="static")
    torch._dynamo.reset()
    torch_neuronx.reset_compile_metrics()
    model.forward = torch.compile(model.forward, backend="neuron", dynamic=False)
    got = model.generate(ids, max_new_tokens=7, do_sample=False, cache_implementation="static")
    assert torch.equal(got.cpu(), expected.cpu())
    assert [g["kind"] for g in torch_neuronx.compile_metrics()["graphs"]] == ["inference", "inference"]
