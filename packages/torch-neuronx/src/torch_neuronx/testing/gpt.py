"""A small GPT (token + position embeddings, pre-LayerNorm blocks of causal self-attention and a
GELU MLP, tied output head) and a training loop, used to check that training on ``neuron`` gives
the same losses as on CPU, and to measure it."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 512
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    seq_len: int = 128
    dropout: float = 0.1


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.out = nn.Linear(4 * cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.heads = cfg.n_heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        attn = self.drop(scores.masked_fill(~mask, float("-inf")).softmax(dim=-1))
        x = x + self.drop(self.proj((attn @ v).transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig = GPTConfig()):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        for module in self.modules():  # GPT-2 initialization
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tok.weight.t()  # tied head
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def batches(cfg: GPTConfig, batch: int, steps: int, seed: int = 0):
    """Deterministic random token batches (inputs, next-token targets), on CPU."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        tokens = torch.randint(0, cfg.vocab, (batch, cfg.seq_len + 1), generator=g)
        yield tokens[:, :-1], tokens[:, 1:]


@dataclass
class TrainRun:
    """One training run, step by step."""

    losses: list[float]
    step_seconds: list[float]  # host wall time of each step (the first includes compiling)
    device_ms: list[float]  # simulated NeuronCore time of each step (neuron only)


def train_run(device: str, steps: int = 20, batch: int = 8, cfg: GPTConfig = GPTConfig(), seed: int = 0,
              lr: float = 3e-4, compile_backend: str | None = None) -> TrainRun:
    """Train a fresh GPT (same initial weights and dropout stream on every device) with AdamW,
    optionally with its forward compiled by ``torch.compile(backend=compile_backend)``."""
    torch.manual_seed(seed)
    model = GPT(cfg).to(device)
    step_model = torch.compile(model, backend=compile_backend) if compile_backend else model
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    torch.manual_seed(seed + 1)  # dropout masks: the same stream on every device
    run = TrainRun([], [], [])
    on_neuron = torch.device(device).type == "neuron"
    for x, y in batches(cfg, batch, steps, seed):
        if on_neuron:
            begin, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
            begin.record()
        start = time.perf_counter()
        loss = step_model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        run.losses.append(loss.item())
        run.step_seconds.append(time.perf_counter() - start)
        if on_neuron:
            end.record()
            end.synchronize()
            run.device_ms.append(begin.elapsed_time(end))
    return run


def train_steps(device: str, steps: int = 20, batch: int = 8, cfg: GPTConfig = GPTConfig(), seed: int = 0,
                lr: float = 3e-4) -> tuple[list[float], float]:
    """Train a fresh GPT (same initial weights for every device) and return (losses, seconds per step)."""
    run = train_run(device, steps, batch, cfg, seed, lr)
    return run.losses, sum(run.step_seconds) / steps
