"""The fused LSTM / GRU cells nn.LSTM and nn.GRU call on non-CPU devices, composed of ordinary ops."""

from __future__ import annotations

import torch


# nn.LSTM / nn.GRU on any non-CPU device call the fused cell kernels CUDA provides; CPU has none,
# so on neuron they failed ("Could not run 'aten::_thnn_fused_lstm_cell' ... 'CPU' backend").
# These compose them from ordinary ops (registered for Autograd too, so backward follows the
# composition). The gate sums are ordered as the fused kernels do, not as CPU's unfused cell, so
# RNN results match CPU to rounding, not bit for bit.
def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    cy = f.sigmoid() * cx + i.sigmoid() * g.tanh()
    hy = o.sigmoid() * cy.tanh()
    return hy, cy, gates


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates = input_gates + input_bias
        hidden_gates = hidden_gates + hidden_bias
    ir, iz, in_ = input_gates.chunk(3, 1)
    hr, hz, hn = hidden_gates.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat([r, z, n, hx, hn], dim=1)
