"""Cross-entropy over the last dim, forward and backward, for vocabularies of any width:
``loss[r] = logsumexp(x[r]) - x[r, label[r]]``, ``dx = (softmax(x) - onehot(label)) * dloss``.

Rows go to the 128 partitions; the vocabulary is streamed in chunks of CHUNK columns (the next
chunk's DMA issued before the current one is computed), so a row never has to fit in SBUF. The
forward keeps an online logsumexp per row (running max m and sum s of exp(x - m), rescaled by
exp(m_old - m_new) when a chunk raises the max) and picks the label's logit with VectorE's
range_select (label <= column < label + 1, row max through the accumulators). It writes the
per-row loss and logsumexp (fp32); the backward reads the logsumexp back instead of redoing the
max/sum pass: e = exp(x - lse) on ScalarE, then ``e * dloss - (column == label) * dloss`` on
VectorE into the logits' dtype. Labels travel as fp32 (exact below 2**24 classes).
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

from nkilib import _checks
from nkilib._tiling import P, Ring, prefetched_steps, row_tiles, scratch, store

CHUNK = 4096  # vocabulary columns per step: SBUF use is fixed whatever the vocabulary
MAX_CLASSES = 1 << 24  # labels are exact in fp32 below this


def _chunks(width):
    return [(c0, min(CHUNK, width - c0)) for c0 in range(0, width, CHUNK)]


def _steps(rows, width):
    """(p0, n, c0, w) per (row tile, chunk), row-major."""
    return [(p0, n, c0, w) for p0, n in row_tiles(rows) for c0, w in _chunks(width)]


def _column_loader(src):
    """load(p0, n, c0, w): DMA of a [n, w] block of src into the next of two [P, CHUNK] tiles."""
    ring = Ring(2, ((P, min(CHUNK, src.shape[1])), src.dtype))

    def load(p0, n, c0, w):
        (t,) = ring.next()
        nisa.dma_copy(dst=t[0:n, 0:w], src=src[p0:p0 + n, c0:c0 + w])
        return t

    return load


@nki.jit
def cross_entropy_kernel(logits, labels):
    """logits [R, V], labels [R, 1] fp32 -> (loss [R, 1] fp32, lse [R, 1] fp32)."""
    rows, width = logits.shape
    loss = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    lse = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    c = min(CHUNK, width)
    discard = scratch((P, c), nl.float32)  # exp(x - m): only its row sums are kept
    picked_all = scratch((P, c), logits.dtype)  # range_select's output: only its row max is kept
    rows_ring = Ring(2, *[((P, 1), nl.float32)] * 7)  # per row tile: label, label+1, s, picked, log s, lse, loss
    # per chunk: -chunk max, -running max, shift, alpha, chunk sum, chunk pick. The running max
    # lives in the chunk's own set (two in turn), so the next chunk's update never overwrites the
    # tile ScalarE's exp of this chunk still reads.
    chunk_ring = Ring(2, *[((P, 1), nl.float32)] * 6)
    state = neg_m = None
    for (p0, n, c0, w), xt in prefetched_steps(_steps(rows, width), _column_loader(logits)):
        first = c0 == 0
        if first:
            state = rows_ring.next()
            lab, lab1 = state[:2]
            nisa.dma_copy(dst=lab[0:n], src=labels[p0:p0 + n, :])
            nisa.tensor_scalar(dst=lab1[0:n], data=lab[0:n], op0=nl.add, operand0=1.0)
        lab, lab1, s, picked = state[:4]
        neg_cmax, neg_new, shift, alpha, part, pick = chunk_ring.next()
        x = xt[0:n, 0:w]
        # VectorE: the chunk's max, the running max, then the label's logit if it falls in this
        # chunk (elsewhere -inf, the max's identity); nothing here waits for ScalarE
        nisa.tensor_reduce(dst=(neg_new if first else neg_cmax)[0:n], op=nl.max, data=x, axis=1, negate=True)
        if not first:
            nisa.tensor_tensor(dst=neg_new[0:n], data1=neg_m[0:n], data2=neg_cmax[0:n], op=nl.minimum)
            nisa.tensor_tensor(dst=shift[0:n], data1=neg_new[0:n], data2=neg_m[0:n], op=nl.subtract)
        neg_m = neg_new
        nisa.range_select(dst=picked_all[0:n, 0:w], on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=lab[0:n], bound1=lab1[0:n], range_start=c0, on_false_value=-np.inf,
                          reduce_res=(picked if first else pick)[0:n])
        if not first:
            nisa.tensor_tensor(dst=picked[0:n], data1=picked[0:n], data2=pick[0:n], op=nl.maximum)
        # ScalarE: sum of exp(x - m); a later chunk rescales the running sum by
        # alpha = exp(m_old - m_new) = exp(shift) and adds its own: s = s * alpha + part
        nisa.activation(dst=discard[0:n, 0:w], op=nl.exp, data=x, bias=neg_m[0:n], reduce_op=nl.add,
                        reduce_res=(s if first else part)[0:n])
        if not first:
            nisa.activation(dst=alpha[0:n], op=nl.exp, data=shift[0:n])
            nisa.activation(dst=s[0:n], op=nl.copy, data=s[0:n], scale=alpha[0:n], bias=part[0:n])
        if c0 + w == width:  # the row tile's last chunk: lse = log(s) + m, loss = lse - picked
            log_s, lse_t, loss_t = state[4:]
            nisa.activation(dst=log_s[0:n], op=nl.log, data=s[0:n])
            nisa.tensor_tensor(dst=lse_t[0:n], data1=log_s[0:n], data2=neg_m[0:n], op=nl.subtract)
            nisa.tensor_tensor(dst=loss_t[0:n], data1=lse_t[0:n], data2=picked[0:n], op=nl.subtract)
            store(lse[p0:p0 + n, :], lse_t[0:n])
            store(loss[p0:p0 + n, :], loss_t[0:n])
    return loss, lse


@nki.jit
def cross_entropy_backward_kernel(logits, labels, lse, dloss):
    """logits [R, V], labels / lse / dloss [R, 1] fp32 -> dlogits [R, V] (logits' dtype)."""
    rows, width = logits.shape
    dx = nl.ndarray(logits.shape, dtype=logits.dtype, buffer=nl.shared_hbm)
    c = min(CHUNK, width)
    cols_i = scratch((P, c), nl.int32)
    nisa.iota(dst=cols_i, pattern=[[1, c]])
    cols = scratch((P, c), nl.float32)  # column index within a chunk, every partition
    nisa.tensor_copy(dst=cols, src=cols_i)
    e = scratch((P, c), nl.float32)
    hot = scratch((P, c), nl.float32)
    outs = Ring(2, ((P, c), logits.dtype))
    rows_ring = Ring(2, *[((P, 1), nl.float32)] * 5)  # label, -lse, dloss, -dloss, label - c0
    state = None
    for (p0, n, c0, w), xt in prefetched_steps(_steps(rows, width), _column_loader(logits)):
        if c0 == 0:
            state = rows_ring.next()
            lab, neg_lse, g, neg_g = state[:4]
            nisa.dma_copy(dst=lab[0:n], src=labels[p0:p0 + n, :])
            nisa.dma_copy(dst=neg_lse[0:n], src=lse[p0:p0 + n, :])
            nisa.dma_copy(dst=g[0:n], src=dloss[p0:p0 + n, :])
            nisa.tensor_scalar(dst=neg_lse[0:n], data=neg_lse[0:n], op0=nl.multiply, operand0=-1.0)
            nisa.tensor_scalar(dst=neg_g[0:n], data=g[0:n], op0=nl.multiply, operand0=-1.0)
        lab, neg_lse, g, neg_g, lab_c = state
        nisa.tensor_scalar(dst=lab_c[0:n], data=lab[0:n], op0=nl.subtract, operand0=float(c0))
        nisa.activation(dst=e[0:n, 0:w], op=nl.exp, data=xt[0:n, 0:w], bias=neg_lse[0:n])
        # hot = (column == label) * -dloss; dx = e * dloss + hot
        nisa.tensor_scalar(dst=hot[0:n, 0:w], data=cols[0:n, 0:w], op0=nl.equal, operand0=lab_c[0:n], op1=nl.multiply,
                           operand1=neg_g[0:n])
        (dxt,) = outs.next()
        nisa.scalar_tensor_tensor(dst=dxt[0:n, 0:w], data=e[0:n, 0:w], op0=nl.multiply, operand0=g[0:n], op1=nl.add,
                                  operand1=hot[0:n, 0:w])
        store(dx[p0:p0 + n, c0:c0 + w], dxt[0:n, 0:w])
    return dx


def _labels(name, labels, rows, width):
    """labels [R] of an integer dtype, each in [0, V), as the kernels' [R, 1] fp32 column."""
    dt = _checks.dtype_name(labels.dtype)
    if not (dt.startswith("int") or dt.startswith("uint")):
        raise _checks.NkilibError("dtype", f"{name} has dtype {dt}; class indices are an integer dtype")
    _checks.check_shape(name, labels, (rows,))
    if width > MAX_CLASSES:
        raise _checks.NkilibError("cross_entropy.classes", f"{width} classes; labels travel as fp32, exact below {MAX_CLASSES}")
    return labels


def check_forward(logits, labels) -> tuple[int, int]:
    """(rows, classes) of arguments cross_entropy takes; NkilibError for any it refuses."""
    _checks.check_float("logits", logits)
    if len(logits.shape) != 2:
        raise _checks.NkilibError("shape", f"logits has shape {list(logits.shape)}; expected [rows, classes]")
    rows, width = _checks.check_rows("logits", logits)
    _labels("labels", labels, rows, width)
    return rows, width


def check_backward(logits, labels, lse, dloss) -> tuple[int, int]:
    rows, width = check_forward(logits, labels)
    for name, t in (("lse", lse), ("dloss", dloss)):
        _checks.check_shape(name, t, (rows,))
        _checks.check_same_dtype(name, t, "float32")
    return rows, width


def _label_values(labels, width):
    """Host-side range check (numpy labels only: a device tensor's values stay on the device)."""
    if isinstance(labels, np.ndarray) and labels.size and (labels.min() < 0 or labels.max() >= width):
        bad = labels[(labels < 0) | (labels >= width)][0]
        raise _checks.NkilibError("cross_entropy.label", f"label {int(bad)} outside [0, {width})")


def cross_entropy(logits, labels):
    """(loss [R] fp32, lse [R] fp32) of logits [R, V] (fp32/bf16/fp16) and integer labels [R]."""
    rows, width = check_forward(logits, labels)
    _label_values(labels, width)
    loss, lse = cross_entropy_kernel(logits, _as_column(labels, rows))
    return loss.reshape(rows), lse.reshape(rows)


def cross_entropy_backward(logits, labels, lse, dloss):
    """dlogits [R, V] (logits' dtype) of cross_entropy for the per-row loss gradient dloss [R] fp32;
    lse is the forward's second result."""
    rows, width = check_backward(logits, labels, lse, dloss)
    _label_values(labels, width)
    return cross_entropy_backward_kernel(logits, _as_column(labels, rows), lse.reshape(rows, 1), dloss.reshape(rows, 1))


def _as_column(labels, rows):
    if isinstance(labels, np.ndarray):
        return labels.astype(np.float32).reshape(rows, 1)
    return labels.float().reshape(rows, 1)  # a torch tensor
