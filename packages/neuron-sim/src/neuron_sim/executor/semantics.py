"""What each instruction does to memory: one function per instruction class.

Handlers read operands through the executor (which applies the fp32 compute view and the
uninitialized-read policy) and write through ``ex.write`` (which rounds to the destination dtype).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import AccessPatternError
from ..isa import (
    Activation,
    AffineSelect,
    Barrier,
    BnAggr,
    BnStats,
    CopyPredicated,
    DmaCopy,
    DmaIndirect,
    DmaTranspose,
    Iota,
    LocalGather,
    Matmul,
    Memset,
    PartitionReduce,
    Reciprocal,
    ScalarTensorTensor,
    Select,
    SemaphoreSignal,
    SemaphoreWait,
    StreamShuffle,
    TensorCopy,
    TensorReduce,
    TensorScalar,
    TensorTensor,
    Transpose,
    ops,
)

HANDLERS = {}


def handles(cls):
    def register(fn):
        HANDLERS[cls] = fn
        return fn

    return register


def _flat_rows(values: np.ndarray) -> np.ndarray:
    """(P, ...) -> (P, F)."""
    return values.reshape(values.shape[0], -1)


def _binary(op: str, a, b):
    if op in ops.BITVEC_OPS:
        return ops.BITVEC_OPS[op](a, b)
    return np.asarray(ops.ARITHMETIC_OPS[op](a, b), dtype=np.float32)


def _apply_scalar_op(op, data, operand, reverse):
    if op is None:
        return data
    if operand is None:  # unary ALU op
        return np.asarray(ops.UNARY_ALU_OPS[op](data), dtype=np.float32)
    if op in ops.BITVEC_OPS:
        data = data.astype(np.int64)
        operand = np.asarray(operand).astype(np.int64)
    return _binary(op, operand, data) if reverse else _binary(op, data, operand)


# --- DMA -------------------------------------------------------------------------------------


def _dma_convert(values: np.ndarray, dst_dtype: str) -> np.ndarray:
    """DMA casts go through fp32; integer-to-integer copies keep their exact values (saturating)."""
    if values.dtype == dtypes.to_numpy(dst_dtype):
        return values
    if values.dtype.kind in "iub" and dtypes.is_int(dst_dtype):
        return values
    return values.astype(np.float32)


@handles(DmaCopy)
def _dma_copy(ex, inst: DmaCopy):
    src = ex.read(inst.src, "src")
    ex.write(inst.dst, _dma_convert(src, inst.dst.dtype).reshape(-1))


@handles(DmaTranspose)
def _dma_transpose(ex, inst: DmaTranspose):
    src = ex.read(inst.src, "src").reshape(inst.src.partition_count, inst.src.free_size)
    ex.write(inst.dst, src.T)


@handles(DmaIndirect)
def _dma_indirect(ex, inst: DmaIndirect):
    index = ex.read(inst.index, "index").reshape(-1).astype(np.int64)
    rows = inst.table.partition_count
    valid = (index >= 0) & (index < rows)
    if not valid.all():
        if inst.oob_mode == "error":
            bad = index[~valid]
            raise AccessPatternError(
                "dma.index_out_of_bounds",
                f"indirect DMA index {int(bad[0])} is outside the {rows} rows of {inst.table.tensor!r} "
                f"({int(bad.size)} bad index(es)); use oob_mode='skip' to drop such rows",
            )
    table = ex.view(inst.table).reshape(rows, -1)
    if inst.direction == "gather":
        onchip = ex.view(inst.onchip).reshape(inst.onchip.partition_count, -1)
        gathered = _dma_convert(table[index[valid]], inst.onchip.dtype)
        if valid.all():
            ex.write(inst.onchip, gathered)
        else:  # skipped rows keep their previous contents
            merged = onchip.copy().astype(gathered.dtype)
            merged[valid] = gathered
            ex.write(inst.onchip, merged)
        return
    src = ex.read(inst.onchip, "src").reshape(inst.onchip.partition_count, -1)[valid]
    target = index[valid]
    if inst.accumulate:
        acc = table.astype(np.float32) if table.dtype.kind == "f" or table.dtype == dtypes.to_numpy("bfloat16") else table.astype(np.int64)
        np.add.at(acc, target, src.astype(acc.dtype))
        table[...] = dtypes.convert(acc, inst.table.dtype)
    else:
        table[target] = dtypes.convert(_dma_convert(src, inst.table.dtype), inst.table.dtype)


# --- TensorE ---------------------------------------------------------------------------------


def _tf32(values: np.ndarray) -> np.ndarray:
    """Round fp32 to tf32's 10 mantissa bits (nearest even), kept in fp32 storage."""
    bits = values.astype(np.float32).view(np.uint32)
    rounding = np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))
    return ((bits + rounding) & np.uint32(0xFFFFE000)).view(np.float32)


@handles(Matmul)
def _matmul(ex, inst: Matmul):
    stationary = ex.read_f32(inst.stationary, "stationary").reshape(inst.k, inst.m)
    moving = ex.read_f32(inst.moving, "moving").reshape(inst.k, inst.n)
    if "tfloat32" in (inst.stationary.dtype, inst.moving.dtype):
        stationary, moving = _tf32(stationary), _tf32(moving)
    result = stationary.T @ moving  # fp32 multiply-accumulate
    if inst.accumulate:
        result = result + ex.read_f32(inst.dst, "dst (accumulate)").reshape(inst.m, inst.n)
    ex.write(inst.dst, result)


@handles(Transpose)
def _transpose(ex, inst: Transpose):
    src = ex.read(inst.src, "src").reshape(inst.src.partition_count, inst.src.free_size)
    ex.write(inst.dst, src.T)


# --- VectorE / ScalarE / GpSimd elementwise ----------------------------------------------------


def _alu_input(ex, ap, role, op):
    return ex.read(ap, role) if op in ops.BITVEC_OPS else ex.read_f32(ap, role)


@handles(TensorTensor)
def _tensor_tensor(ex, inst: TensorTensor):
    a = _flat_rows(_alu_input(ex, inst.in0, "in0", inst.op))
    b = _flat_rows(_alu_input(ex, inst.in1, "in1", inst.op))
    ex.write(inst.dst, _binary(inst.op, a, b))


@handles(TensorScalar)
def _tensor_scalar(ex, inst: TensorScalar):
    bitvec = inst.op0 in ops.BITVEC_OPS or inst.op1 in ops.BITVEC_OPS
    data = _flat_rows(ex.read(inst.src, "src") if bitvec else ex.read_f32(inst.src, "src"))
    op0 = ex.scalar_operand(inst.operand0, "operand0") if inst.operand0 is not None else None
    op1 = ex.scalar_operand(inst.operand1, "operand1") if inst.operand1 is not None else None
    out = _apply_scalar_op(inst.op0, data, op0, inst.reverse0)
    out = _apply_scalar_op(inst.op1, out, op1, inst.reverse1)
    ex.write(inst.dst, out)


@handles(ScalarTensorTensor)
def _scalar_tensor_tensor(ex, inst: ScalarTensorTensor):
    data = _flat_rows(ex.read_f32(inst.src, "src"))
    other = _flat_rows(ex.read_f32(inst.in1, "in1"))
    first = _apply_scalar_op(inst.op0, data, ex.scalar_operand(inst.operand0, "operand0"), inst.reverse0)
    out = _binary(inst.op1, other, first) if inst.reverse1 else _binary(inst.op1, first, other)
    ex.write(inst.dst, out)


def _reduce_trailing(op: str, values: np.ndarray, naxes: int) -> np.ndarray:
    """Reduce the last ``naxes`` axes of ``values``."""
    flat = values.reshape(values.shape[: values.ndim - naxes] + (-1,))
    if op == "subtract":  # a0 - a1 - a2 - ...
        return flat[..., 0] - flat[..., 1:].sum(axis=-1)
    fn, _ = ops.REDUCE_OPS[op]
    return fn(flat, axis=-1)


@handles(TensorReduce)
def _tensor_reduce(ex, inst: TensorReduce):
    values = _alu_input(ex, inst.src, "src", inst.op)
    out = _reduce_trailing(inst.op, values, len(inst.axes))
    if inst.negate:
        out = -out
    ex.write(inst.dst, np.asarray(out, dtype=values.dtype if inst.op in ops.BITVEC_OPS else np.float32))


@handles(TensorCopy)
def _tensor_copy(ex, inst: TensorCopy):
    src = ex.read(inst.src, "src")
    same = src.dtype == dtypes.to_numpy(inst.dst.dtype)
    ex.write(inst.dst, src.reshape(-1) if same else dtypes.compute_view(src).reshape(-1))


@handles(CopyPredicated)
def _copy_predicated(ex, inst: CopyPredicated):
    pred = _flat_rows(ex.read_f32(inst.predicate, "predicate")) != 0
    if inst.reverse:
        pred = ~pred
    old = _flat_rows(ex.read_f32(inst.dst, "dst"))
    ex.write(inst.dst, np.where(pred, _flat_rows(ex.read_f32(inst.src, "src")), old))


@handles(Select)
def _select(ex, inst: Select):
    pred = _flat_rows(ex.read_f32(inst.predicate, "predicate")) != 0
    on_true = _flat_rows(ex.read_f32(inst.on_true, "on_true"))
    on_false = (
        _flat_rows(ex.read_f32(inst.on_false, "on_false")) if not isinstance(inst.on_false, (int, float)) else np.float32(inst.on_false)
    )
    ex.write(inst.dst, np.where(pred, on_true, on_false))


@handles(Memset)
def _memset(ex, inst: Memset):
    ex.write(inst.dst, np.full(inst.dst.shape, inst.value, dtype=np.float64 if dtypes.is_float(inst.dst.dtype) else np.int64))


@handles(Reciprocal)
def _reciprocal(ex, inst: Reciprocal):
    ex.write(inst.dst, np.float32(1.0) / _flat_rows(ex.read_f32(inst.src, "src")))


@handles(Activation)
def _activation(ex, inst: Activation):
    data = _flat_rows(ex.read_f32(inst.src, "src"))
    scale = ex.scalar_operand(inst.scale, "scale")
    bias = ex.scalar_operand(inst.bias, "bias") if inst.bias is not None else np.float32(0.0)
    out = np.asarray(ops.ACTIVATIONS[inst.func](data * scale + bias), dtype=np.float32)
    ex.write(inst.dst, out)
    if inst.reduce_op is not None:
        fn = {"add": np.sum, "maximum": np.max, "minimum": np.min}[inst.reduce_op]
        ex.write(inst.reduce_res, fn(out, axis=1, keepdims=True))


@handles(BnStats)
def _bn_stats(ex, inst: BnStats):
    data = _flat_rows(ex.read_f32(inst.src, "src")).astype(np.float64)
    stats = []
    for half in (data[:, 0::2], data[:, 1::2]):
        n = half.shape[1]
        if n == 0:
            stats += [np.zeros(data.shape[0])] * 3
            continue
        mean = half.mean(axis=1)
        stats += [np.full(data.shape[0], float(n)), mean, ((half - mean[:, None]) ** 2).sum(axis=1)]
    ex.write(inst.dst, np.stack(stats, axis=1).astype(np.float32))


@handles(BnAggr)
def _bn_aggr(ex, inst: BnAggr):
    groups = _flat_rows(ex.read_f32(inst.src, "src")).astype(np.float64).reshape(inst.src.partition_count, -1, 3)
    count, mean, m2 = groups[..., 0], groups[..., 1], groups[..., 2]
    total = count.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    grand_mean = (count * mean).sum(axis=1) / safe
    # Chan et al.: combine per-group M2 with the spread of the group means.
    m2_total = m2.sum(axis=1) + (count * (mean - grand_mean[:, None]) ** 2).sum(axis=1)
    ex.write(inst.dst, np.stack([grand_mean, m2_total / safe], axis=1).astype(np.float32))


@handles(StreamShuffle)
def _stream_shuffle(ex, inst: StreamShuffle):
    src = _flat_rows(ex.read(inst.src, "src"))
    out = _flat_rows(ex.view(inst.dst)).copy() if 255 in inst.mask else np.empty_like(src, dtype=dtypes.to_numpy(inst.dst.dtype))
    q = len(inst.mask)
    for r in range(inst.dst.partition_count):
        m = inst.mask[r % q]
        if m == 255:
            continue
        source = (r // q) * q + m
        if source >= src.shape[0]:
            raise AccessPatternError("shuffle.source", f"shuffle reads partition {source} of a {src.shape[0]}-partition source")
        out[r] = src[source] if src.dtype == out.dtype else dtypes.convert(dtypes.compute_view(src[source]), inst.dst.dtype)
    ex.write(inst.dst, out)


# --- GpSimd ----------------------------------------------------------------------------------


def _affine_values(shape, pattern, offset, channel_multiplier) -> np.ndarray:
    p = np.arange(shape[0], dtype=np.int64).reshape(-1, 1)
    free = np.zeros(1, dtype=np.int64)
    for step, count in pattern:
        free = (free[:, None] + step * np.arange(count, dtype=np.int64)[None, :]).reshape(-1)
    return offset + p * channel_multiplier + free[None, :]


@handles(Iota)
def _iota(ex, inst: Iota):
    values = _affine_values(inst.dst.shape, inst.pattern, inst.offset, inst.channel_multiplier)
    values = np.clip(values, -(2**31), 2**31 - 1).astype(np.int32)  # int32 math
    ex.write(inst.dst, values if dtypes.is_int(inst.dst.dtype) else values.astype(np.float32))


@handles(AffineSelect)
def _affine_select(ex, inst: AffineSelect):
    values = _affine_values(inst.dst.shape, inst.pattern, inst.offset, inst.channel_multiplier).astype(np.float32)
    keep = np.asarray(ops.ARITHMETIC_OPS[inst.cmp_op](values, np.float32(0.0))) != 0
    src = _flat_rows(ex.read_f32(inst.src, "src"))
    ex.write(inst.dst, np.where(keep, src, np.float32(inst.on_false_value)))


@handles(PartitionReduce)
def _partition_reduce(ex, inst: PartitionReduce):
    values = _flat_rows(_alu_input(ex, inst.src, "src", inst.op))
    ex.write(inst.dst, _reduce_trailing(inst.op, values.T, 1).reshape(1, -1))


@handles(LocalGather)
def _local_gather(ex, inst: LocalGather):
    src = _flat_rows(ex.read(inst.src, "src"))
    index = _flat_rows(ex.read(inst.index, "index")).astype(np.int64)
    e = inst.num_elem_per_idx
    out = np.empty((inst.dst.partition_count, index.shape[1] * e), dtype=src.dtype)
    for g in range(0, src.shape[0], 16):
        pool = src[g : g + 16].reshape(-1)
        idx = index[g : g + 16]
        if idx.size and (idx.min() < 0 or (idx.max() + 1) * e > pool.size):
            raise AccessPatternError(
                "local_gather.index_out_of_bounds",
                f"local_gather index {int(idx.max() if idx.max() >= 0 else idx.min())} is outside the "
                f"{pool.size // e} entries of partition group {g}..{g + 15}",
            )
        offsets = (idx[..., None] * e + np.arange(e)).reshape(idx.shape[0], -1)
        out[g : g + 16] = pool[offsets]
    ex.write(inst.dst, out if out.dtype == dtypes.to_numpy(inst.dst.dtype) else dtypes.compute_view(out))


# --- synchronization: ordering only; the interpreter is already sequential ------------------


@handles(SemaphoreSignal)
@handles(SemaphoreWait)
@handles(Barrier)
def _ordering_only(ex, inst):
    return None
