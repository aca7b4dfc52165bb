"""Transformers' ``from_pretrained(dir, device_map=...)`` on neuron: ``"auto"`` plans the model onto
the neuron devices (accelerate's ``get_max_memory`` counts their free memory), ``"neuron"`` loads
it onto neuron:0, and a checkpoint larger than the simulated HBM raises the catchable
out-of-memory error while loading."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from tnx_helpers import run_python

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

TINY_LLAMA = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=128,
    max_position_embeddings=64,
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_llama")
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model("llama", **TINY_LLAMA)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(path)
    return path


def _logits(model, ids):
    with torch.no_grad():
        return model(ids.to(model.device)).logits.cpu()


@pytest.mark.parametrize("device_map", ["auto", "sequential", "balanced"])
def test_auto_device_maps_place_the_model_on_neuron(checkpoint, device_map):
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, device_map=device_map)
    assert {p.device.type for p in model.parameters()} == {"neuron"}
    planned = getattr(model, "hf_device_map", {})  # absent when the plan is one device
    assert all(isinstance(d, int) for d in planned.values()), planned
    cpu = transformers.AutoModelForCausalLM.from_pretrained(checkpoint)
    ids = torch.randint(0, 128, (2, 7), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(_logits(model, ids), _logits(cpu, ids), rtol=1e-4, atol=1e-5)


def test_accelerate_sees_the_neuron_devices_free_memory():
    from accelerate.utils import get_max_memory

    found = get_max_memory()
    assert found[0] == torch.neuron.mem_get_info(0)[0] and "cpu" in found
    assert sorted(k for k in found if isinstance(k, int)) == list(range(torch.neuron.device_count()))
    assert get_max_memory({0: "1MB", "cpu": "2MB"}) == {0: 10**6, "cpu": 2 * 10**6}  # a given budget stands


def test_device_map_neuron_loads_onto_the_device(checkpoint):
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron")
    assert {p.device for p in model.parameters()} == {torch.device("neuron", 0)}
    cpu = transformers.AutoModelForCausalLM.from_pretrained(checkpoint)
    ids = torch.randint(0, 128, (1, 5), generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(_logits(model, ids), _logits(cpu, ids), rtol=1e-4, atol=1e-5)
    torch_neuronx.empty_cache()


def test_a_checkpoint_larger_than_hbm_raises_out_of_memory_at_load(checkpoint):
    proc = run_python(
        f"""
        import torch, torch_neuronx, transformers
        try:
            transformers.AutoModelForCausalLM.from_pretrained({str(checkpoint)!r}, device_map="neuron")
        except torch.OutOfMemoryError as err:
            print("caught", type(err).__name__, "simulated HBM" in str(err))
        import gc
        gc.collect()  # what the failed load had placed is freed with the model
        x = torch.ones(4, device="neuron")  # the device still works
        print((x + 1).sum().item())
        """,
        env={"NEURON_SIM_HBM_BYTES": str(64 << 10)},
    )
    assert proc.stdout.split()[-4:] == ["caught", "NeuronOutOfMemoryError", "True", "8.0"], proc.stdout
