"""nki.language: tensors, data movement, math and loops for NKI kernels.

Every function here must be called inside a kernel being traced (``@nki.jit``). Functions that
compute return new tiles (both the current API and the legacy ``neuronxcc.nki`` style); ops can
also be passed as ``op=`` arguments to ``nki.isa`` instructions (``nisa.tensor_tensor(..., op=nl.add)``).
"""

from __future__ import annotations

from types import SimpleNamespace

from neuron_sim import get_architecture as _get_architecture

from ..indexing import DynSlice, IndexExpr, Mask, arange, ds, mgrid, par_dim  # noqa: F401 - re-exported (see __all__)
from ..registers import VirtualRegister  # noqa: F401 - re-exported (see __all__)
from ..tensor import NkiTensor
from ..tensor import broadcast_view as _broadcast_view
from . import constants as _constants
from . import math_ops as _m
from . import operators as _operators  # noqa: F401 - attaches NkiTensor's legacy operators
from .debug import device_print  # noqa: F401 - re-exported (see __all__)
from .dtypes import (  # noqa: F401 - re-exported (see __all__)
    DType,
    bfloat16,
    bfp16,
    bool_,
    finfo,
    float8_e4m3,
    float8_e4m3fn,
    float8_e5m2,
    float8_e8m0fnu,
    float16,
    float32,
    fp32,
    int8,
    int16,
    int32,
    static_cast,
    tfloat32,
    uint8,
    uint16,
    uint32,
)
from .loops import (  # noqa: F401 - re-exported (see __all__)
    affine_range,
    dynamic_range,
    fori_loop,
    no_reorder,
    sequential_range,
    static_range,
    while_loop,
)
from .matmul_ops import matmul, transpose  # noqa: F401 - re-exported (see __all__)
from .memory_ops import (  # noqa: F401 - re-exported (see __all__)
    copy,
    empty_like,
    full,
    load,
    load_transpose2d,
    loop_reduce,
    ndarray,
    ones,
    shared_constant,
    shared_identity_matrix,
    store,
    zeros,
    zeros_like,
)
from .objects import NKIObject  # noqa: F401 - re-exported (see __all__)
from .random import dropout, rand, random_seed  # noqa: F401 - re-exported (see __all__)
from .spmd import nc, num_programs, program_id, program_ndim, spmd_dim  # noqa: F401 - re-exported (see __all__)

tensor = NkiTensor

# --- buffers -----------------------------------------------------------------------------------
sbuf, psum, hbm, shared_hbm, private_hbm = "sbuf", "psum", "hbm", "shared_hbm", "private_hbm"


def is_hbm(buffer) -> bool:
    return getattr(buffer, "buffer", buffer) in (hbm, shared_hbm, private_hbm)


def is_on_chip(buffer) -> bool:
    return getattr(buffer, "buffer", buffer) in (sbuf, psum)


def is_psum(buffer) -> bool:
    return getattr(buffer, "buffer", buffer) == psum


def is_sbuf(buffer) -> bool:
    return getattr(buffer, "buffer", buffer) == sbuf


# --- tile sizes ----------------------------------------------------------------------------------
class _TileSize:
    """Hardware tile limits of the target (NEURON_PLATFORM_TARGET_OVERRIDE), as nl.tile_size."""

    @property
    def _arch(self):
        return _get_architecture()

    pmax = property(lambda self: self._arch.num_partitions)
    psum_bank_fmax = property(lambda self: self._arch.psum_bank_bytes // 4)
    psum_fmax = psum_bank_fmax
    psum_bank_fmax_bytes = property(lambda self: self._arch.psum_bank_bytes)
    psum_num_banks = property(lambda self: self._arch.psum_banks)
    gemm_stationary_fmax = property(lambda self: self._arch.tensor.cols)
    gemm_moving_fmax = property(lambda self: self._arch.tensor.moving_fmax)
    bn_stats_fmax = 512
    psum_min_align = _constants.psum_min_align
    sbuf_min_align = _constants.sbuf_min_align
    sbuf_fmax_bytes = property(lambda self: self._arch.sbuf_usable_bytes_per_partition)
    total_available_sbuf_size = sbuf_fmax_bytes
    sbuf_fmax = property(lambda self: self._arch.sbuf_usable_bytes_per_partition // 4)
    sbuf_size_bytes = property(lambda self: self._arch.sbuf_bytes_per_partition * self._arch.num_partitions)


tile_size = _TileSize()


# --- elementwise ops -----------------------------------------------------------------------------
def _binary_op(name: str):
    def op(x, y, dtype=None, mask: Mask | None = None):
        return _m.binary(name, x, y, dtype, mask)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{name}`` of two tiles (or a tile and a scalar / [P, 1] tile); a new SBUF tile."
    op.op_name = name
    return op


def _unary_op(name: str):
    def op(x, dtype=None, mask: Mask | None = None):
        return _m.unary(name, x, dtype, mask)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{name}`` of a tile; a new SBUF tile."
    op.op_name = name
    return op


for _name in _m.BINARY_OPS:
    globals()[_name] = _binary_op(_name)
for _name in _m.ACTIVATION_FUNCS + _m.COMPOSITE_ACTIVATIONS + ("negative", "abs", "reciprocal", "invert", "logical_not",
                                                                "trunc", "floor", "ceil", "tan"):
    globals()[_name] = _unary_op(_name)

# Activation-table names that exist only as nisa.activation ops.
identity = SimpleNamespace(op_name="identity")
bypass = SimpleNamespace(op_name="bypass")


# --- reductions ----------------------------------------------------------------------------------
def sum(x, axis, dtype=None, keepdims=False, mask=None):  # noqa: A001 - NKI's name
    return _m.reduce("add", x, axis, dtype, keepdims, mask)


def max(x, axis, dtype=None, keepdims=False, mask=None):  # noqa: A001
    return _m.reduce("maximum", x, axis, dtype, keepdims, mask)


def min(x, axis, dtype=None, keepdims=False, mask=None):  # noqa: A001
    return _m.reduce("minimum", x, axis, dtype, keepdims, mask)


def prod(x, axis, dtype=None, keepdims=False, mask=None):
    return _m.reduce("multiply", x, axis, dtype, keepdims, mask)


def all(x, axis, dtype=None, mask=None):  # noqa: A001
    return _m.reduce("logical_and", x, axis, dtype, False, mask)


# The reductions double as ALU ops of nisa instructions (``nisa.tensor_reduce(op=nl.max, ...)``).
sum.op_name, max.op_name, min.op_name, prod.op_name = "add", "maximum", "minimum", "multiply"

mean = _m.mean
var = _m.var
softmax = _m.softmax
rms_norm = _m.rms_norm
where = _m.where


# --- shape helpers -------------------------------------------------------------------------------
def expand_dims(x: NkiTensor, axis) -> NkiTensor:
    for a in sorted(axis if isinstance(axis, (tuple, list)) else (axis,)):
        x = x.expand_dim(a)
    return x


def broadcast_to(x: NkiTensor, shape, dtype=None) -> NkiTensor:
    """Broadcast ``x`` to ``shape``: a view along free dims; across partitions through TensorE."""
    shape = tuple(shape)
    if x.buffer in (sbuf, psum) and x.shape[0] != shape[0]:
        x = _m.broadcast_partitions(x, shape[0])
    out = _broadcast_view(x, shape)
    return copy(out, dtype) if dtype is not None else out


__all__ = [n for n in dir() if not n.startswith("_")]
