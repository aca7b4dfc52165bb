"""What each instruction does to memory: one function per instruction class.

Handlers read operands through the executor (which applies the fp32 compute view and the
uninitialized-read policy) and write through ``ex.write`` (which rounds to the destination dtype).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import AccessPatternError, IndexOutOfBoundsError
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
from ..isa.control import RegisterLoad, RegisterSet, RegisterStore
from ..memory.access_pattern import AccessPattern

HANDLERS = {}


def handles(cls):
    def register(fn):
        HANDLERS[cls] = fn
        return fn

    return register


def _flat_rows(values: np.ndarray) -> np.ndarray:
    """(P, ...) -> (P, F)."""
    return values.reshape(values.shape[0], -1)


def _as_int(x) -> np.ndarray:
    """An operand of a bitvec op as integers: integer data as stored, fp32 values rounded (RNE, saturating to int32)."""
    x = np.asarray(x)
    if x.dtype.kind in "iu":
        return x
    if x.dtype.kind == "b":
        return x.astype(np.int32)
    return dtypes.convert(x.astype(np.float32), "int32")


def _binary(op: str, a, b, int_dtype=None):
    """``a op b``. Arithmetic ops compute in fp32; bitvec ops on the bits of ``int_dtype``.

    Bitvec operands are cast (wrapping) to ``int_dtype``, the integer type of the instruction's
    tensor data, so immediates like 0xFFFFFFFF mean "all 32 bits" and shifts drop bits that leave
    the word instead of saturating.
    """
    if op in ops.BITVEC_OPS:
        a, b = _as_int(a), _as_int(b)
        dt = np.dtype(int_dtype) if int_dtype is not None else np.result_type(a.dtype, b.dtype)
        return ops.BITVEC_OPS[op](a.astype(dt, copy=False), b.astype(dt, copy=False))
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    out = np.asarray(ops.ARITHMETIC_OPS[op](a, b), dtype=np.float32)
    # ``bypass`` returns its first input as is: a reversed bypass yields the [P, 1] operand, which
    # still fills every element of the tile.
    return np.broadcast_to(out, np.broadcast_shapes(a.shape, b.shape))


def _apply_scalar_op(op, data, operand, reverse, int_dtype=None):
    if op is None:
        return data
    if operand is None:  # unary ALU op
        return np.asarray(ops.UNARY_ALU_OPS[op](np.asarray(data, dtype=np.float32)), dtype=np.float32)
    return _binary(op, operand, data, int_dtype) if reverse else _binary(op, data, operand, int_dtype)


def _operand(ex, operand, role: str, bitvec: bool):
    """A scalar operand: fp32 for arithmetic ops; exact integers (immediate or [P, 1] tile) for bitvec ops."""
    if not bitvec:
        return ex.scalar_operand(operand, role)
    if isinstance(operand, AccessPattern):
        return _as_int(ex.read(operand, role)).reshape(operand.partition_count, 1)
    if float(operand).is_integer():
        # Keep every bit of an integer immediate (fp32 would round 0x7FFFFFF0 to 2**31); wrap to 64 bits.
        return np.asarray(int(operand) % (1 << 64), dtype=np.uint64).astype(np.int64)
    return np.asarray(operand)


# --- DMA -------------------------------------------------------------------------------------


def _dma_convert(values: np.ndarray, dst_dtype: str) -> np.ndarray:
    """A DMA between equal dtypes moves bytes; between different dtypes it casts the source to
    fp32 and that to the destination (RNE, saturating): integers above 2**24 round on the way,
    integer-to-integer casts included (nki.isa.dma_copy, "Data types", NKI 0.6)."""
    if values.dtype == dtypes.to_numpy(dst_dtype):
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
            raise IndexOutOfBoundsError(
                "dma.index_out_of_bounds",
                f"indirect DMA index {int(bad[0])} is outside the {rows} rows of {inst.table.tensor!r} "
                f"({int(bad.size)} bad index(es)); use oob_mode='skip' to drop such rows",
                index=int(bad[0]), size=rows,
            )
    table_view = ex.view(inst.table)  # (rows, ...) view into the bound HBM buffer
    table = table_view.reshape(rows, -1)  # may be a copy when a row is not contiguous: read only
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
    row_shape = table_view.shape[1:]
    # Writes go through ``table_view`` (never through the reshaped ``table``, which is a copy for
    # non-contiguous rows), and only touch the indexed rows.
    if inst.accumulate:
        # DMA compute casts both sides to fp32, adds, and casts the sum to the table's dtype - for
        # integer tables too (nki.isa.dma_copy with dst_rmw_op, "Data types", NKI 0.6).
        rows_hit = np.unique(target)
        acc = dtypes.compute_view(table[rows_hit]).copy()
        position = np.searchsorted(rows_hit, target)
        np.add.at(acc, position, dtypes.compute_view(src))
        table_view[rows_hit] = dtypes.convert(acc, inst.table.dtype).reshape((len(rows_hit),) + row_shape)
    else:
        values = dtypes.convert(_dma_convert(src, inst.table.dtype), inst.table.dtype)
        table_view[target] = values.reshape((len(target),) + row_shape)


# --- TensorE ---------------------------------------------------------------------------------


def _tf32(values: np.ndarray) -> np.ndarray:
    """Round fp32 to tf32's 10 mantissa bits (nearest even), kept in fp32 storage."""
    bits = values.astype(np.float32).view(np.uint32)
    rounding = np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))
    return ((bits + rounding) & np.uint32(0xFFFFE000)).view(np.float32)


@handles(Matmul)
def _matmul(ex, inst: Matmul):
    # (partitions, rows_per_partition, F) -> (K, F): double_row's two rows per partition are
    # consecutive contraction indices.
    stationary = ex.read_f32(inst.stationary, "stationary").reshape(inst.k, inst.m)
    moving = ex.read_f32(inst.moving, "moving").reshape(inst.k, inst.n)
    if "tfloat32" in (inst.stationary.dtype, inst.moving.dtype):
        stationary, moving = _tf32(stationary), _tf32(moving)
    if inst.dst.dtype == "float32":
        # The usual case: fp32 PSUM. Multiply (and accumulate) in place, without temporaries.
        acc = ex.read(inst.dst, "dst (accumulate)") if inst.accumulate else ex.view(inst.dst)
        dst = acc.reshape(inst.m, inst.n)
        if inst.accumulate:
            dst += stationary.T @ moving
        else:
            np.matmul(stationary.T, moving, out=dst)
        if not np.shares_memory(dst, acc):  # reshape had to copy: store the result
            acc[...] = dst.reshape(acc.shape)
        ex.mark_written(inst.dst)
        return
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
    if inst.op in ops.INTEGER_ALU_OPS and ops.integer_mode(inst.engine, inst.dst, inst.in0, inst.in1):
        a = _flat_rows(ex.read(inst.in0, "in0")).astype(np.int64)
        b = _flat_rows(ex.read(inst.in1, "in1")).astype(np.int64)
        # 32-bit results wrap (written as they are, not saturated by the write's conversion).
        ex.write(inst.dst, ops.INTEGER_ALU_OPS[inst.op](a, b).astype(dtypes.to_numpy(inst.dst.dtype)))
        return
    a = _flat_rows(_alu_input(ex, inst.in0, "in0", inst.op))
    b = _flat_rows(_alu_input(ex, inst.in1, "in1", inst.op))
    ex.write(inst.dst, _binary(inst.op, a, b))


def _int_dtype(ap: AccessPattern):
    return dtypes.to_numpy(ap.dtype) if dtypes.is_int(ap.dtype) else np.dtype(np.int32)


@handles(TensorScalar)
def _tensor_scalar(ex, inst: TensorScalar):
    bitvec = inst.op0 in ops.BITVEC_OPS or inst.op1 in ops.BITVEC_OPS
    data = _flat_rows(ex.read(inst.src, "src") if bitvec else ex.read_f32(inst.src, "src"))
    op0 = _operand(ex, inst.operand0, "operand0", inst.op0 in ops.BITVEC_OPS) if inst.operand0 is not None else None
    op1 = _operand(ex, inst.operand1, "operand1", inst.op1 in ops.BITVEC_OPS) if inst.operand1 is not None else None
    int_dtype = _int_dtype(inst.src)
    out = _apply_scalar_op(inst.op0, data, op0, inst.reverse0, int_dtype)
    out = _apply_scalar_op(inst.op1, out, op1, inst.reverse1, int_dtype)
    ex.write(inst.dst, out)


@handles(ScalarTensorTensor)
def _scalar_tensor_tensor(ex, inst: ScalarTensorTensor):
    bitvec0, bitvec1 = inst.op0 in ops.BITVEC_OPS, inst.op1 in ops.BITVEC_OPS
    data = _flat_rows(ex.read(inst.src, "src") if bitvec0 else ex.read_f32(inst.src, "src"))
    other = _flat_rows(ex.read(inst.in1, "in1") if bitvec1 else ex.read_f32(inst.in1, "in1"))
    int_dtype = _int_dtype(inst.src)
    first = _apply_scalar_op(inst.op0, data, _operand(ex, inst.operand0, "operand0", bitvec0), inst.reverse0, int_dtype)
    out = _binary(inst.op1, other, first, int_dtype) if inst.reverse1 else _binary(inst.op1, first, other, int_dtype)
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
    out = np.asarray(
        _reduce_trailing(inst.op, values, len(inst.axes)), dtype=values.dtype if inst.op in ops.BITVEC_OPS else np.float32
    )  # logical reductions give bools: make them numbers before negating
    if inst.negate:
        out = -out
    ex.write(inst.dst, out)


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
    # Kept elements must stay bit-exact (an fp32 round trip would change int32 values above 2**24
    # and NaN payloads), and a same-dtype copy is bit-exact like tensor_copy.
    target = dtypes.to_numpy(inst.dst.dtype)
    old = _flat_rows(ex.read(inst.dst, "dst"))
    src = _flat_rows(ex.read(inst.src, "src"))
    if src.dtype != target:
        src = dtypes.convert(dtypes.compute_view(src), inst.dst.dtype)
    ex.write(inst.dst, np.where(pred, src, old))


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
    # A float value is an fp32 immediate; an integer value is stored exactly (float64 holds every
    # int32/uint32) and saturates to the dtype's range.
    value_dtype = np.float32 if dtypes.is_float(inst.dst.dtype) else np.float64
    ex.write(inst.dst, np.full(inst.dst.shape, float(inst.value), dtype=value_dtype))


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
    # The output has the destination's partitions (the source may span fewer: a broadcast).
    rows = inst.dst.partition_count
    out = (_flat_rows(ex.view(inst.dst)).copy() if 255 in inst.mask
           else np.empty((rows, src.shape[1]), dtype=dtypes.to_numpy(inst.dst.dtype)))
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
    e, n = inst.num_elem_per_idx, inst.valid_indices
    out = np.empty((inst.dst.partition_count, n * e), dtype=src.dtype)
    for g in range(0, src.shape[0], 16):
        idx = index[g : g + 16].reshape(-1, order="F")[:n]  # partition-first: column after column
        bad = idx[(idx < 0) | (idx + e > src.shape[1])]
        if bad.size:
            raise IndexOutOfBoundsError(
                "local_gather.index_out_of_bounds",
                f"local_gather index {int(bad[0])} (+{e} elements) is outside the {src.shape[1]} elements per partition "
                f"of partition group {g}..{g + 15}",
                index=int(bad[0]), size=int(src.shape[1]),
            )
        offsets = (idx[:, None] + np.arange(e)).reshape(-1)
        out[g : g + 16] = src[g : g + 16][:, offsets]
    ex.write(inst.dst, out if out.dtype == dtypes.to_numpy(inst.dst.dtype) else dtypes.compute_view(out))


# --- registers ------------------------------------------------------------------------------


@handles(RegisterSet)
def _register_set(ex, inst: RegisterSet):
    ex.registers[inst.register] = ex.register(inst.value, inst) if isinstance(inst.value, str) else int(inst.value)


@handles(RegisterLoad)
def _register_load(ex, inst: RegisterLoad):
    value = ex.read(inst.src, "src").reshape(-1)[0]
    ex.registers[inst.register] = int(value)


@handles(RegisterStore)
def _register_store(ex, inst: RegisterStore):
    ex.write(inst.dst, np.array([ex.register(inst.register, inst)], dtype=np.int64))


# --- synchronization: ordering only; the interpreter is already sequential ------------------


@handles(SemaphoreSignal)
@handles(SemaphoreWait)
@handles(Barrier)
def _ordering_only(ex, inst):
    return None
