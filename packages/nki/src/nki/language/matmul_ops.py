"""nl.matmul and nl.transpose: TensorE work that lands in PSUM."""

from __future__ import annotations

from neuron_sim.isa import Matmul, TensorCopy, Transpose

from .. import tracing
from ..indexing import Mask, folds_constant_mask
from ..storage import ON_CHIP
from ..tensor import NkiTensor
from .memory_ops import apply_mask, mark_psum_written, ndarray


def _sbuf_operand(x: NkiTensor, role: str) -> NkiTensor:
    ctx = tracing.current()
    if x.buffer not in ON_CHIP:
        raise ctx.error("engine.memory_access", f"matmul {role} {x!r} is in HBM; TensorE reads SBUF (nl.load it first)")
    if x.buffer == "psum":  # TensorE reads SBUF only: evacuate first, as a compiler would
        tile = ndarray(x.shape, x.dtype, "sbuf")
        ctx.emit(TensorCopy(dst=tile.access_pattern(), src=x.access_pattern(), engine="vector"))
        return tile
    return x


@folds_constant_mask
def transpose(x: NkiTensor, dtype=None, mask: Mask | None = None) -> NkiTensor:
    """Swap a [P, F] tile's partition and free dims on TensorE; the result is in PSUM."""
    ctx = tracing.current()
    (x,) = apply_mask(mask, x)
    x = _sbuf_operand(x, "x")
    if x.ndim != 2:
        raise ctx.error("transpose.rank", f"nl.transpose takes a 2-D tile, got shape {list(x.shape)}")
    out = ndarray((x.shape[1], x.shape[0]), dtype or x.dtype, "psum")
    ctx.emit(Transpose(dst=out.access_pattern(), src=x.access_pattern()))
    return out


@folds_constant_mask
def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False, mask: Mask | None = None) -> NkiTensor:
    """``x @ y`` (or ``x.T @ y`` with ``transpose_x=True``) into a new fp32 PSUM tile.

    TensorE contracts over partitions, so ``x`` is transposed first unless it is already given as
    [K, M]. The returned tile remembers its matmul, so ``psum[...] += nl.matmul(...)`` turns into
    an accumulating matmul straight into ``psum``.
    """
    ctx = tracing.current()
    x, y = apply_mask(mask, x, y)
    x, y = _sbuf_operand(x, "x"), _sbuf_operand(y, "y")
    if not transpose_x:
        xt = transpose(x)
        x = _sbuf_operand(xt, "x")
    k, m = x.shape[0], x.size // x.shape[0]
    if y.shape[0] != k:
        raise ctx.error("matmul.k_mismatch", f"contraction sizes differ: x has K={k}, y has K={y.shape[0]} (shapes {list(x.shape)}, {list(y.shape)})")
    out = ndarray((m, y.size // y.shape[0]), "float32", "psum")
    inst = ctx.emit(Matmul(dst=out.access_pattern(), stationary=x.access_pattern(), moving=y.access_pattern()))
    mark_psum_written(out)
    out._pending_matmul = inst  # type: ignore[attr-defined]
    return out
