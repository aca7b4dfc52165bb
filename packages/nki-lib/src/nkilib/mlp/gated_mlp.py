"""Gated MLP forward: ``y = (act(x W_gate) * (x W_up)) W_down`` with act SiLU (SwiGLU, Llama) or
GELU (GeGLU; tanh approximation with ``"gelu_tanh"``), for x [T, H], W_gate/W_up [H, I],
W_down [I, H].

The weights are loaded into SBUF once (H or I on the partitions, 128 rows per chunk). Per
128-token tile (the next tile's rows prefetched): x^T by TensorE transposes, then 512 columns of
I at a time the gate and up projections in two PSUM banks, act(gate) on ScalarE straight from
PSUM and its product with up on VectorE into the hidden tile (I/O dtype, as the torch module
rounds it), then the hidden tile's transposes and the down projection accumulated over I in PSUM.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

from nkilib import _checks
from nkilib._matmul import N_CHUNK, chunks, project, project_out, transpose_groups
from nkilib._tiling import P, Ring, loader, prefetched, scratch, store

ACTIVATIONS = {"silu": nl.silu, "gelu": nl.gelu, "gelu_tanh": nl.gelu_apprx_tanh}


def _load_rows(dst, w, chunks, width):
    """dst[p, c * width + j] = w[c * 128 + p, j]: a weight with its rows on the partitions."""
    for c, (r0, rw) in enumerate(chunks):
        nisa.dma_copy(dst=dst[0:rw, c * width : (c + 1) * width], src=w[r0 : r0 + rw, :])


@nki.jit
def gated_mlp_kernel(x, w_gate, w_up, w_down, activation):
    tokens, hidden = x.shape
    inter = w_gate.shape[1]
    act = ACTIVATIONS[activation]
    hc, ic = chunks(hidden, P), chunks(inter, P)
    y = nl.ndarray((tokens, hidden), dtype=x.dtype, buffer=nl.shared_hbm)
    wg, wu = scratch((P, len(hc) * inter), w_gate.dtype), scratch((P, len(hc) * inter), w_up.dtype)
    wd = scratch((P, len(ic) * hidden), w_down.dtype)
    _load_rows(wg, w_gate, hc, inter)
    _load_rows(wu, w_up, hc, inter)
    _load_rows(wd, w_down, ic, hidden)
    ring = Ring(2, ((P, len(hc) * P), x.dtype), ((P, inter), x.dtype), ((P, len(ic) * P), x.dtype))
    act_ring = Ring(2, ((P, N_CHUNK), nl.float32))
    out_ring = Ring(2, ((P, N_CHUNK), x.dtype))
    for (p0, n), (xs,) in prefetched(tokens, loader(x)):
        xT, h, hT = ring.next()
        transpose_groups(xT, xs, hc, n)
        for i0, iw in chunks(inter, N_CHUNK):
            g_ps = nl.ndarray((P, N_CHUNK), dtype=nl.float32, buffer=nl.psum)
            u_ps = nl.ndarray((P, N_CHUNK), dtype=nl.float32, buffer=nl.psum)
            project(g_ps, xT, wg, hc, n, inter, i0, iw)
            project(u_ps, xT, wu, hc, n, inter, i0, iw)
            (a,) = act_ring.next()
            nisa.activation(dst=a[0:n, 0:iw], op=act, data=g_ps[0:n, 0:iw])
            nisa.tensor_tensor(dst=h[0:n, i0 : i0 + iw], data1=a[0:n, 0:iw], data2=u_ps[0:n, 0:iw], op=nl.multiply)
        transpose_groups(hT, h, ic, n)
        project_out(y, p0, hT, wd, ic, n, hidden, out_ring, store)
    return y


def check(x, w_gate, w_up, w_down, activation="silu") -> str:
    dt = _checks.check_float("x", x)
    if len(x.shape) != 2:
        raise _checks.NkilibError("shape", f"x has shape {list(x.shape)}; expected [tokens, H]")
    _tokens, hidden = _checks.check_rows("x", x)
    if activation not in ACTIVATIONS:
        raise _checks.NkilibError("mlp.activation", f"activation={activation!r}; expected one of {tuple(ACTIVATIONS)}")
    if len(w_gate.shape) != 2 or int(w_gate.shape[0]) != hidden or int(w_gate.shape[1]) == 0:
        raise _checks.NkilibError("shape", f"w_gate has shape {list(w_gate.shape)}; expected [{hidden}, I]")
    inter = int(w_gate.shape[1])
    _checks.check_shape("w_up", w_up, (hidden, inter))
    _checks.check_shape("w_down", w_down, (inter, hidden))
    for name, w in (("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down)):
        _checks.check_same_dtype(name, w, dt)
    io = _checks.DTYPE_BYTES[dt]
    hc, ic = -(-hidden // P), -(-inter // P)
    # per partition: the three weights, then two sets of x^T, hidden and hidden^T tiles, the x
    # tiles being prefetched, the activation and output chunks
    need = (2 * hc * inter + ic * hidden) * io + 2 * (hc * P + inter + ic * P + hidden) * io + 2 * N_CHUNK * (4 + io)
    if need > _checks.sbuf_budget():
        raise _checks.NkilibError(
            "sbuf",
            f"gated_mlp: H={hidden}, I={inter} need {need} bytes per SBUF partition, over the "
            f"{_checks.sbuf_budget()} available (the three weights stay on chip)",
        )
    return dt


def gated_mlp(x, w_gate, w_up, w_down, activation: str = "silu"):
    """y [T, H] = (act(x w_gate) * (x w_up)) w_down in x's dtype."""
    check(x, w_gate, w_up, w_down, activation)
    return gated_mlp_kernel(x, w_gate, w_up, w_down, activation)
