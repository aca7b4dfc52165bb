"""Offline LLM.generate on neuron: greedy tokens equal Hugging Face generate on CPU and vLLM's
own CPU platform, for prompts of several lengths, batched and alone; Llama-, Qwen3- and
Mistral-style tiny models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HELPER = Path(__file__).with_name("generate_tokens.py")
MAX_TOKENS = 8
# 1 to ~40 tokens; the long one spans two KV blocks of 32 and the batch mixes lengths, so a step
# holds prefills of different lengths and then decodes of different positions.
PROMPTS = [
    "a",
    "hello world",
    "the quick brown fox jumps over the lazy dog, and the simulator reports device time",
    "once upon a time there was a small model that generated text " * 4,
]
BATCHES = [PROMPTS, [PROMPTS[2]]]


def run(model_dir: Path, backend: str, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLUGINS", "VLLM_TARGET_DEVICE")} | env
    out = subprocess.run(
        [sys.executable, str(HELPER), str(model_dir), backend, str(MAX_TOKENS)],
        input=json.dumps(BATCHES),
        env=full,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@pytest.fixture(scope="module", params=["llama", "qwen3", "mistral"])
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def hf_reference(tiny_models, arch):
    return run(tiny_models(arch), "hf")["batches"]


@pytest.fixture(scope="module")
def neuron_result(tiny_models, arch):
    return run(tiny_models(arch), "vllm")


def test_model_runs_on_neuron(neuron_result):
    assert neuron_result["platform"] == "NeuronPlatform"
    assert neuron_result["placement"] == {"params": ["neuron"], "kv_cache": ["neuron"]}


def test_prompts_tokenize_to_several_lengths(tiny_llama):
    from transformers import AutoTokenizer

    lengths = [len(AutoTokenizer.from_pretrained(tiny_llama)(p).input_ids) for p in PROMPTS]
    assert len(set(lengths)) == len(PROMPTS) and min(lengths) <= 2 and max(lengths) > 32


def test_greedy_tokens_equal_hf_generate(neuron_result, hf_reference):
    assert neuron_result["batches"] == hf_reference
    assert all(len(t) == MAX_TOKENS for batch in hf_reference for t in batch)


def test_greedy_tokens_equal_vllm_cpu_platform(neuron_result, tiny_models, arch):
    if arch != "llama":
        pytest.skip("vLLM's CPU platform is compared on the Llama model only (bounds the suite's time)")
    cpu = run(tiny_models(arch), "vllm", VLLM_TARGET_DEVICE="cpu")
    assert cpu["platform"] == "CpuPlatform"
    assert neuron_result["batches"] == cpu["batches"]
