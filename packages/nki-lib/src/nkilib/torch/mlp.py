"""The gated MLP as a torch op: ``nkilib::gated_mlp`` (forward kernel; its backward recomputes
the projections with torch ops - there is no backward kernel yet), on x [..., H]."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_neuronx import nki_op

# (by name: nkilib.mlp's gated_mlp attribute is the function, not the module)
from nkilib.mlp.gated_mlp import ACTIVATIONS, check
from nkilib.mlp.gated_mlp import gated_mlp as gated_mlp_forward
from nkilib.torch._support import CHECKS, refusal, refuse, spec


@nki_op("nkilib::gated_mlp", mutates_args=())
def gated_mlp_op(
    x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor, activation: str
) -> torch.Tensor:
    return gated_mlp_forward(x.contiguous(), w_gate.contiguous(), w_up.contiguous(), w_down.contiguous(), activation)


def _activate(g, activation):
    if activation == "silu":
        return F.silu(g)
    return F.gelu(g, approximate="tanh" if activation == "gelu_tanh" else "none")


def gated_mlp_plain(x, w_gate, w_up, w_down, activation="silu"):
    """The same MLP in plain torch ops (the fallback, and the backward's recomputation)."""
    return (_activate(x @ w_gate, activation) * (x @ w_up)) @ w_down


def _setup(ctx, inputs, output):
    x, w_gate, w_up, w_down, activation = inputs
    ctx.save_for_backward(x, w_gate, w_up, w_down)
    ctx.activation = activation


def _backward(ctx, dy):
    x, w_gate, w_up, w_down = ctx.saved_tensors
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_() for t in (x, w_gate, w_up, w_down)]
        y = gated_mlp_plain(*leaves, ctx.activation)
    return (*torch.autograd.grad(y, leaves, dy), None)


gated_mlp_op.register_autograd(_backward, setup_context=_setup)


def _check(x, w_gate, w_up, w_down, activation):
    check(x, w_gate, w_up, w_down, activation)


CHECKS["gated_mlp"] = _check


def gated_mlp(
    x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor, activation: str = "silu"
) -> torch.Tensor:
    """(act(x @ w_gate) * (x @ w_up)) @ w_down for x [..., H], w_gate/w_up [H, I], w_down [I, H]
    (act: "silu" - SwiGLU -, "gelu", "gelu_tanh"), the forward through the kernel on neuron tensors."""
    if activation not in ACTIVATIONS:  # not a fallback: no form of the op takes it
        refuse("mlp.activation", f"activation={activation!r}; expected one of {tuple(ACTIVATIONS)}")
    args = (x, w_gate, w_up, w_down)
    rows = x.reshape(-1, x.shape[-1])
    if all(t.device.type == "neuron" for t in args) and not refusal(
        "gated_mlp", (spec(rows), spec(w_gate), spec(w_up), spec(w_down), activation)
    ):
        return gated_mlp_op(rows, w_gate, w_up, w_down, activation).reshape(x.shape)
    return gated_mlp_plain(x, w_gate, w_up, w_down, activation)
