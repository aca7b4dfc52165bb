"""A small GPT shared by the tests, the demo and the benchmarks.

Token + position embeddings, pre-LayerNorm blocks (causal self-attention through
F.scaled_dot_product_attention, GELU MLP, dropout), a final LayerNorm and a linear head. Import it
with the tests folder on sys.path: ``from models.gpt import GPT, GPTConfig, train``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 512
    seq_len: int = 128
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    dropout: float = 0.1


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.resid_drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model), nn.Dropout(cfg.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig = GPTConfig()):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def make_batches(cfg: GPTConfig, batch_size: int, steps: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Deterministic next-token batches (CPU tensors): windows at random offsets of a fixed
    sequence that repeats a random 61-token cycle, so the loss falls within a few steps."""
    g = torch.Generator().manual_seed(seed)
    cycle = torch.randperm(cfg.vocab_size, generator=g)[:61]
    text = cycle.repeat((cfg.seq_len + 1) // 61 + 2)
    batches = []
    for _ in range(steps):
        starts = torch.randint(0, 61, (batch_size,), generator=g).tolist()
        chunk = torch.stack([text[s : s + cfg.seq_len + 1] for s in starts])
        batches.append((chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()))
    return batches


def train(device: str | torch.device, steps: int = 20, batch_size: int = 8, cfg: GPTConfig = GPTConfig(), seed: int = 0,
          lr: float = 1e-3) -> list[float]:
    """Train a freshly initialized GPT for ``steps`` AdamW steps on ``device``; the per-step losses.

    Same ``seed`` gives the same initial weights (built on CPU, then moved) and the same dropout
    masks on every device whose generator follows CPU's (neuron's does)."""
    torch.manual_seed(seed)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    losses = []
    torch.manual_seed(seed + 1)  # the dropout stream
    for x, y in make_batches(cfg, batch_size, steps, seed):
        _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
