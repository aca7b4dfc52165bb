"""nki.isa: one function per NeuronCore instruction, destination first (NKI 0.6 style).

Each call validates its operands against the hardware rules (the simulator's ISA checks) and
appends the instruction to the kernel being traced. The legacy ``neuronxcc.nki.isa`` style, where
instructions return a new tile, is accepted too: omit ``dst`` and the result is returned.
"""

from __future__ import annotations

import warnings

from neuron_sim import isa as sim

from .. import tracing
from ..indexing import AffineExpr, AffinePredicate, IndexExpr, folds_constant_mask
from ..language import math_ops
from ..language.memory_ops import apply_mask, copy, dma_move, full, mark_psum_written, ndarray, psum_written
from ..tensor import NkiTensor
from . import constants as _constants
from .accumulators import range_select, select_reduce, tensor_scalar_cumulative, tensor_tensor_scan  # noqa: F401
from .common import (  # noqa: F401 - NkiInstruction and get_nc_version are re-exported
    NkiInstruction,
    _ap,
    _dst_or_new,
    _emit,
    _engine,
    _legacy_form,
    _op,
    _operand,
    get_nc_version,
)
from .constants import (  # noqa: F401 - re-exported (see __all__)
    dge_mode,
    dma_engine,
    engine,
    gpsimd_engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
    scalar_engine,
    tensor_engine,
    unknown_engine,
    vector_engine,
)
from .random import dropout, set_rng_seed  # noqa: F401 - re-exported (see __all__)
from .registers import register_alloc, register_load, register_move, register_store  # noqa: F401 - re-exported
from .search import max8, nc_find_index8, nc_match_replace8, sequence_bounds  # noqa: F401 - re-exported (see __all__)


# --- data movement -----------------------------------------------------------------------------
@folds_constant_mask
def dma_copy(dst: NkiTensor, src: NkiTensor, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None, mask=None, dst_rmw_op=None):
    """Copy by DMA; a legacy ``mask=`` restricts both sides to the elements it keeps.
    ``dst_rmw_op=nl.add`` adds into ``dst`` instead (the DMA engines' read-modify-write), for a
    scatter into an indirect HBM view (``table[idx, ...]``)."""
    mode = dge_mode.name if dge_mode.name != "unknown" else "none"
    trigger = _engine(engine, "sync")
    for operand, role in ((dst, "dst"), (src, "src")):
        if not isinstance(operand, NkiTensor):
            raise tracing.current().error("operand.type", f"{role} must be a tensor, got {type(operand).__name__}")
    accumulate = False
    if dst_rmw_op is not None:
        if _op(dst_rmw_op) != "add" or dst._indirect is None:
            raise tracing.current().error("dma.rmw", f"dst_rmw_op={dst_rmw_op!r}: only nl.add, into an indirect HBM view "
                                                     "(a scatter), is supported")
        accumulate = True
    dst, src = apply_mask(mask, dst, src)
    return NkiInstruction(dma_move(dst, src, oob_mode=oob_mode.name, dge=mode, engine=trigger, name=name,
                                   accumulate=accumulate))


def dma_transpose(dst: NkiTensor = None, src: NkiTensor = None, axes=None, priority=None, dge_mode=dge_mode.unknown,
                  oob_mode=oob_mode.error, name=None):
    """Transpose by DMA into ``dst``. Legacy form: ``nisa.dma_transpose(src)`` returns a new
    [F, P] SBUF tile (2-D transposes only)."""
    if src is None:
        src, dst = dst, None
    if dst is None:
        if src.ndim != 2 or (axes is not None and tuple(axes) != (1, 0)):
            raise tracing.current().error("dma_transpose.axes", f"nisa.dma_transpose(src) returns the transpose of a 2-D "
                                                                f"tensor; got {list(src.shape)} with axes={axes} (pass dst=)")
        dst = ndarray((src.shape[1], src.shape[0]), src.dtype, "sbuf")
    _emit(sim.DmaTranspose(dst=_ap(dst, "dst"), src=_ap(src, "src")), name)
    return dst


@_legacy_form("src")
def tensor_copy(dst: NkiTensor = None, src: NkiTensor = None, engine=engine.unknown, name=None, dtype=None):
    out = _dst_or_new(dst, src, dtype)
    _emit(sim.TensorCopy(dst=_ap(out, "dst"), src=_ap(src, "src"), engine=_engine(engine, "vector")), name)
    return out


@folds_constant_mask
def memset(dst: NkiTensor = None, value=None, engine=engine.unknown, name=None, dtype=None, mask=None, shape=None):
    """Fill ``dst`` with ``value``. Legacy form: ``nisa.memset(shape, value, dtype)`` (or
    ``shape=`` by keyword) returns a new SBUF tile."""
    if dst is None and shape is not None:
        dst = tuple(shape)
    if isinstance(dst, (tuple, list)):  # legacy memset(shape, value, dtype)
        if not isinstance(engine, _constants.engine):  # the third positional argument is the dtype
            dtype, engine = dtype if dtype is not None else engine, _constants.engine.unknown
        dst = ndarray(dst, dtype, "sbuf")
    _emit(sim.Memset(dst=_ap(dst, "dst"), value=float(value), engine=_engine(engine, "vector")), name)
    if dst.buffer == "psum":
        mark_psum_written(dst)
    return dst


def tensor_copy_predicated(dst: NkiTensor, src, predicate: NkiTensor, reverse_pred=False, name=None):
    if not isinstance(src, NkiTensor):
        src = full(dst.shape, src, dst.dtype)
    return _emit(sim.CopyPredicated(dst=_ap(dst, "dst"), src=_ap(src, "src"), predicate=_ap(predicate, "predicate"),
                                    reverse=reverse_pred), name)


# --- TensorE -----------------------------------------------------------------------------------
@_legacy_form("stationary", "moving")
def nc_matmul(dst: NkiTensor = None, stationary: NkiTensor = None, moving: NkiTensor = None, is_stationary_onezero=False,
              is_moving_onezero=False, is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None):
    """``dst[M, N] = stationary[K, M].T @ moving[K, N]`` in PSUM; ``accumulate=None`` overwrites on
    the first write to a PSUM region and accumulates afterwards."""
    if is_transpose:
        return nc_transpose(dst, stationary, engine=engine.tensor, name=name)
    mode = perf_mode.value if isinstance(perf_mode, matmul_perf_mode) else str(perf_mode)
    mode = {"double_row_gen3": "double_row"}.get(mode, mode)  # the legacy name of NC-v3's FP8 double-row mode
    fresh = dst is None
    if fresh:  # legacy: returns a new PSUM tile
        rows = 2 if mode == "double_row" else 1
        dst = ndarray((stationary.size // stationary.shape[0] // rows, moving.size // moving.shape[0] // rows), "float32", "psum")
    written = psum_written(dst) if dst.buffer == "psum" else False
    if accumulate is None:
        acc = written
    else:
        acc = bool(accumulate)
        if acc and not written:
            warnings.warn(
                f"{tracing.user_location()}: nc_matmul accumulate=True into a PSUM region no matmul has initialized "
                "is undefined behaviour on hardware (the simulator adds to its current contents)",
                RuntimeWarning, stacklevel=2)
    handle = _emit(sim.Matmul(dst=_ap(dst, "dst"), stationary=_ap(stationary, "stationary"), moving=_ap(moving, "moving"),
                              accumulate=acc, perf_mode=mode), name)
    if dst.buffer == "psum":
        mark_psum_written(dst)
    if fresh:  # ``psum[...] += nisa.nc_matmul(a, b)`` turns into a matmul accumulating into psum
        dst._pending_matmul = handle.instruction
    return dst


@_legacy_form("data")
def nc_transpose(dst: NkiTensor = None, data: NkiTensor = None, engine=engine.unknown, name=None):
    """Swap partitions and free elements: TensorE (<= 128x128, into PSUM) or VectorE (<= 32x32)."""
    eng = _engine(engine, None)
    if eng is None:
        eng = "vector" if data.shape[0] <= 32 and data.size // data.shape[0] <= 32 and (dst is None or dst.buffer == "sbuf") else "tensor"
    out = dst if dst is not None else ndarray((data.size // data.shape[0], data.shape[0]), data.dtype, "psum" if eng == "tensor" else "sbuf")
    _emit(sim.Transpose(dst=_ap(out, "dst"), src=_ap(data, "data"), engine=eng), name)
    return out


# --- VectorE / ScalarE / GpSimd ----------------------------------------------------------------
@_legacy_form("data1", "data2")
def tensor_tensor(dst: NkiTensor = None, data1: NkiTensor = None, data2: NkiTensor = None, op=None, engine=engine.unknown,
                  name=None, dtype=None):
    out = _dst_or_new(dst, data1, dtype)
    _emit(sim.TensorTensor(dst=_ap(out, "dst"), in0=_ap(data1, "data1"), in1=_ap(data2, "data2"), op=_op(op),
                           engine=_engine(engine, "vector")), name)
    return out


@_legacy_form("data")
def tensor_scalar(dst: NkiTensor = None, data: NkiTensor = None, op0=None, operand0=None, reverse0=False, op1=None,
                  operand1=None, reverse1=False, engine=engine.unknown, name=None, dtype=None):
    out = _dst_or_new(dst, data, dtype)
    _emit(sim.TensorScalar(dst=_ap(out, "dst"), src=_ap(data, "data"), op0=_op(op0),
                           operand0=None if operand0 is None else _operand(operand0), reverse0=reverse0,
                           op1=None if op1 is None else _op(op1), operand1=None if operand1 is None else _operand(operand1),
                           reverse1=reverse1, engine=_engine(engine, "vector")), name)
    return out


@_legacy_form("data")
def tensor_scalar_reduce(dst: NkiTensor = None, data: NkiTensor = None, op0=None, operand0=None, reduce_op=None,
                         reduce_res: NkiTensor | None = None, reverse0=False, reduce_cmd=reduce_cmd.reset_reduce,
                         reduce_init=None, reduce_res_negate=False, name=None, dtype=None):
    """``dst = data op0 operand0`` and ``reduce_res = reduce_op(dst)`` over the free dims (VectorE).

    The simulator has no fused instruction for this: it runs as a tensor_scalar followed by a
    tensor_reduce (one extra VectorE instruction in the timing). The engine's accumulator
    registers are not modelled, so ``reduce_cmd=reduce`` and ``reduce_res=None`` are refused;
    ``load_reduce`` combines ``reduce_init`` with this instruction's reduction.
    """
    ctx = tracing.current()
    mode = reduce_cmd.name if isinstance(reduce_cmd, _constants.reduce_cmd) else str(reduce_cmd)
    if mode not in ("reset_reduce", "load_reduce") or reduce_res is None:
        raise ctx.error("tensor_scalar_reduce.accumulator",
                        f"reduce_cmd={mode} with reduce_res={'None' if reduce_res is None else 'a tile'}: the Vector engine's "
                        "accumulator registers are not simulated; use reset_reduce (or load_reduce) with a reduce_res tile")
    if (mode == "load_reduce") != (reduce_init is not None):
        raise ctx.error("tensor_scalar_reduce.reduce_init", "reduce_init goes with reduce_cmd=load_reduce (and only with it)")
    out = tensor_scalar(dst=dst, data=data, op0=op0, operand0=operand0, reverse0=reverse0, name=name, dtype=dtype)
    flat = out.reshape((out.shape[0], out.size // out.shape[0])) if out.ndim > 2 else out
    if reduce_init is None:
        tensor_reduce(dst=reduce_res, op=reduce_op, data=flat, axis=1, negate=reduce_res_negate)
    else:
        partial = ndarray((out.shape[0], 1), "float32", "sbuf")
        tensor_reduce(dst=partial, op=reduce_op, data=flat, axis=1)
        init = reduce_init if isinstance(reduce_init, NkiTensor) else None
        if init is None:
            tensor_scalar(dst=reduce_res, data=partial, op0=reduce_op, operand0=float(reduce_init),
                          op1="multiply" if reduce_res_negate else None, operand1=-1.0 if reduce_res_negate else None)
        else:
            tensor_tensor(dst=reduce_res, data1=partial, data2=init, op=reduce_op)
            if reduce_res_negate:
                tensor_scalar(dst=reduce_res, data=reduce_res, op0="multiply", operand0=-1.0)
    return out


@_legacy_form("data", "operand1")
def scalar_tensor_tensor(dst: NkiTensor = None, data: NkiTensor = None, op0=None, operand0=None, op1=None, operand1=None,
                         reverse0=False, reverse1=False, name=None, dtype=None):
    out = _dst_or_new(dst, data, dtype)
    _emit(sim.ScalarTensorTensor(dst=_ap(out, "dst"), src=_ap(data, "data"), op0=_op(op0), operand0=_operand(operand0),
                                 op1=_op(op1), in1=_ap(operand1, "operand1"), reverse0=reverse0, reverse1=reverse1), name)
    return out


@_legacy_form("data")
def tensor_reduce(dst: NkiTensor = None, op=None, data: NkiTensor = None, axis=None, negate=False, keepdims=False,
                  name=None, dtype=None):
    ctx = tracing.current()
    if dst is None:
        return math_ops.reduce(_op(op), data, axis, dtype, keepdims, negate=negate)
    axes = math_ops._axes(data, axis)
    split = data.ndim - len(axes)
    if axes != tuple(range(split, data.ndim)) or split == 0:
        raise ctx.error("reduce.axes", f"tensor_reduce reduces trailing free axes of {list(data.shape)}, got axis={axis}")
    src = data.access_pattern(keep_split=split)
    reduced = len(math_ops._merged(data.shape[split:], data.strides[split:]))
    free_axes = tuple(range(len(src.free) - reduced + 1, len(src.free) + 1))
    _emit(sim.TensorReduce(dst=_ap(dst, "dst"), src=src, op=_op(op), axes=free_axes, negate=negate), name)
    return dst


@_legacy_form("data")
def tensor_partition_reduce(dst: NkiTensor = None, op=None, data: NkiTensor = None, name=None, dtype=None):
    out = dst if dst is not None else ndarray((1,) + data.shape[1:], dtype or data.dtype, "sbuf")
    _emit(sim.PartitionReduce(dst=_ap(out, "dst"), src=_ap(data, "data"), op=_op(op)), name)
    return out


@_legacy_form("data")
def activation(dst: NkiTensor = None, op=None, data: NkiTensor = None, bias=None, scale=1.0, reduce_op=None,
               reduce_res: NkiTensor | None = None, reduce_cmd=reduce_cmd.idle, name=None, dtype=None):
    """``dst = op(data * scale + bias)`` on ScalarE; with ``reduce_op`` also reduces each row."""
    out = _dst_or_new(dst, data, dtype)
    _emit(sim.Activation(dst=_ap(out, "dst"), src=_ap(data, "data"), func=_op(op), scale=_operand(scale),
                         bias=None if bias is None else _operand(bias),
                         reduce_op=None if reduce_op is None else _op(reduce_op),
                         reduce_res=None if reduce_res is None else _operand(reduce_res)), name)
    return out


@_legacy_form("data")
def activation_reduce(dst: NkiTensor = None, op=None, data: NkiTensor = None, reduce_op=None, reduce_res: NkiTensor = None,
                      bias=None, scale=1.0, name=None, dtype=None):
    return activation(dst=dst, op=op, data=data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                      name=name, dtype=dtype)


@_legacy_form("data")
def reciprocal(dst: NkiTensor = None, data: NkiTensor = None, name=None, dtype=None):
    out = _dst_or_new(dst, data, dtype)
    _emit(sim.Reciprocal(dst=_ap(out, "dst"), src=_ap(data, "data")), name)
    return out


@folds_constant_mask
def iota(dst: NkiTensor = None, pattern=None, offset=0, channel_multiplier=0, name=None, dtype=None, mask=None):
    """``dst[p, i...] = offset + p * channel_multiplier + sum(step * i)`` on GpSimd (int32 math).

    Legacy form: ``nisa.iota(expr, dtype)`` with an ``nl.arange`` / ``nl.mgrid`` expression
    returns a new tile shaped like the expression's index grid.
    """
    if isinstance(dst, (IndexExpr, AffineExpr)):  # legacy iota(expr, dtype)
        expr = AffineExpr.of(dst)
        dtype = dtype if dtype is not None else pattern
        channel_multiplier, pattern = expr.pattern()
        shape = expr.shape()
        out = ndarray(shape if len(shape) > 1 else shape + (1,), dtype, "sbuf")
        _emit(sim.Iota(dst=_ap(out, "dst"), pattern=pattern, offset=expr.const, channel_multiplier=channel_multiplier), name)
        return out
    _emit(sim.Iota(dst=_ap(dst, "dst"), pattern=tuple(tuple(int(v) for v in p) for p in pattern),
                   offset=int(offset), channel_multiplier=int(channel_multiplier)), name)
    return dst


@folds_constant_mask
def affine_select(dst: NkiTensor = None, pattern=None, channel_multiplier=None, on_true_tile: NkiTensor = None,
                  on_false_value=None, cmp_op=None, offset=0, name=None, pred=None, dtype=None, mask=None):
    """``dst = cmp_op(offset + p * channel_multiplier + sum(step * i), 0) ? on_true_tile : on_false_value``
    on GpSimd - causal masks. Legacy form: ``nisa.affine_select(pred, on_true_tile, on_false_value)``
    with ``pred`` a comparison of ``nl.arange`` / ``nl.mgrid`` expressions (``i_q >= i_k``)."""
    if pred is not None or isinstance(dst, AffinePredicate):  # legacy: (pred, on_true_tile, on_false_value)
        if pred is None:
            pred, on_true_tile, on_false_value = dst, pattern if on_true_tile is None else on_true_tile, (
                channel_multiplier if on_false_value is None else on_false_value)
        elif on_true_tile is None:
            on_true_tile, on_false_value = dst, pattern if on_false_value is None else on_false_value
        if not isinstance(pred, AffinePredicate):
            raise tracing.current().error("affine_select.pred", f"pred must compare nl.arange/nl.mgrid expressions (i_q >= i_k), got {pred!r}")
        if mask is not None:
            (on_true_tile,) = apply_mask(mask, on_true_tile)
        if isinstance(on_true_tile, NkiTensor) and on_true_tile.buffer == "psum":
            # GpSimd reads SBUF only; the legacy compiler accepts a PSUM on_true_tile (nki-samples'
            # flash attention masks its QK^T scores in PSUM) by copying it to SBUF first, as here.
            on_true_tile = copy(on_true_tile)
        channel_multiplier, pattern = pred.expr.pattern()
        offset, cmp_op = pred.expr.const, pred.op
        dst = ndarray(on_true_tile.shape, dtype or on_true_tile.dtype, "sbuf")
    _emit(sim.AffineSelect(dst=_ap(dst, "dst"), src=_ap(on_true_tile, "on_true_tile"),
                           pattern=tuple(tuple(int(v) for v in p) for p in pattern),
                           on_false_value=float(on_false_value), offset=int(offset),
                           channel_multiplier=int(channel_multiplier),
                           cmp_op=_op(cmp_op) if cmp_op is not None else "equal"), name)
    return dst


@_legacy_form("src_buffer", "index")
def local_gather(dst: NkiTensor = None, src_buffer: NkiTensor = None, index: NkiTensor = None, num_elem_per_idx=1,
                 num_valid_indices=None, name=None):
    """Gather within 16-partition groups (see neuron_sim.isa.LocalGather): every partition takes,
    for each of its group's first ``num_valid_indices`` indices (read partition-first), the
    ``num_elem_per_idx`` elements at that offset of its own row. The legacy form returns a new
    [P, num_valid_indices * num_elem_per_idx] tile."""
    valid = int(num_valid_indices) if num_valid_indices is not None else 16 * (index.size // index.shape[0])
    out = dst if dst is not None else ndarray((index.shape[0], valid * int(num_elem_per_idx)), src_buffer.dtype, "sbuf")
    _emit(sim.LocalGather(dst=_ap(out, "dst"), src=_ap(src_buffer, "src_buffer"), index=_ap(index, "index"),
                          num_elem_per_idx=int(num_elem_per_idx), num_valid_indices=valid), name)
    return out


@_legacy_form("data")
def bn_stats(dst: NkiTensor = None, data: NkiTensor = None, name=None, dtype=None):
    """Per-partition [count, mean, count * var] of the even and odd elements (6 values)."""
    out = dst if dst is not None else ndarray((data.shape[0], sim.vector.BN_STATS_WIDTH), dtype or data.dtype, "sbuf")
    _emit(sim.BnStats(dst=_ap(out, "dst"), src=_ap(data, "data")), name)
    return out


@_legacy_form("data")
def bn_aggr(dst: NkiTensor = None, data: NkiTensor = None, name=None, dtype=None):
    """[mean, variance] per partition from one or more bn_stats results."""
    out = dst if dst is not None else ndarray((data.shape[0], sim.vector.BN_AGGR_WIDTH), dtype or data.dtype, "sbuf")
    _emit(sim.BnAggr(dst=_ap(out, "dst"), src=_ap(data, "data")), name)
    return out


def nc_stream_shuffle(dst: NkiTensor, src: NkiTensor, shuffle_mask, name=None):
    return _emit(sim.StreamShuffle(dst=_ap(dst, "dst"), src=_ap(src, "src"), mask=tuple(int(m) for m in shuffle_mask)), name)


def select(dst: NkiTensor, predicate: NkiTensor, on_true: NkiTensor, on_false, name=None):
    return _emit(sim.Select(dst=_ap(dst, "dst"), predicate=_ap(predicate, "predicate"), on_true=_ap(on_true, "on_true"),
                            on_false=_ap(on_false, "on_false") if isinstance(on_false, NkiTensor) else float(on_false)), name)


__all__ = [n for n, v in list(globals().items())
           if not n.startswith("_") and not isinstance(v, type(sim)) and getattr(v, "__module__", "").startswith(__name__)]
