"""Child process for the token-equality tests: greedy tokens of one model on one backend.

``python generate_tokens.py MODEL_DIR BACKEND MAX_TOKENS < prompts.json`` prints one JSON line:
``{"platform": ..., "batches": [[token ids per prompt], ...], "placement": {...}}``.
BACKEND is ``hf`` (transformers generate on CPU), ``vllm`` (whatever platform vLLM picks) or
``vllm-cpu`` (vLLM's own CPU platform, VLLM_TARGET_DEVICE=cpu set by the caller). vLLM runs
in a child process because it owns process-global state (platform, distributed groups).
"""

from __future__ import annotations

import json
import os
import sys


def hf_tokens(model_dir: str, prompts: list[str], max_tokens: int) -> list[list[int]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    out = []
    for prompt in prompts:  # one at a time: no padding, the same positions vLLM uses
        ids = tok(prompt, return_tensors="pt").input_ids
        gen = model.generate(ids, max_new_tokens=max_tokens, do_sample=False, min_new_tokens=max_tokens)
        out.append(gen[0, ids.shape[1] :].tolist())
    return out


def placement(model) -> dict:
    import torch

    params = {p.device.type for p in model.parameters()}
    runner_kv = []
    for module in model.modules():
        kv = getattr(module, "kv_cache", None)
        if isinstance(kv, torch.Tensor):
            runner_kv.append(kv.device.type)
    return {"params": sorted(params), "kv_cache": sorted(set(runner_kv))}


def vllm_tokens(model_dir: str, batches: list[list[str]], max_tokens: int) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    cpu = current_platform.is_cpu()
    llm = LLM(
        model=model_dir,
        dtype="float32",
        max_model_len=128,
        max_num_seqs=8,
        max_num_batched_tokens=128,
        gpu_memory_utilization=0.05,
        seed=0,
        enforce_eager=cpu,
        kv_cache_memory_bytes=64 << 20 if cpu else None,
    )
    params = SamplingParams(max_tokens=max_tokens, min_tokens=max_tokens, temperature=0)
    results = [[list(o.outputs[0].token_ids) for o in llm.generate(batch, params, use_tqdm=False)] for batch in batches]
    return {"platform": type(current_platform).__name__, "batches": results, "placement": llm.apply_model(placement)[0]}


def main() -> None:
    model_dir, backend, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
    batches = json.load(sys.stdin)
    if backend == "hf":
        result = {"platform": "hf", "batches": [hf_tokens(model_dir, b, max_tokens) for b in batches]}
    else:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        result = vllm_tokens(model_dir, batches, max_tokens)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
