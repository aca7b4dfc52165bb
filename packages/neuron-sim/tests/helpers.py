"""Shared test helpers: build access patterns tersely and run instruction lists on the exact executor.

Inputs are placed in memory directly (bit-exact, independent of any instruction's semantics) and
results are read back directly, so a test of one instruction exercises only that instruction.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from neuron_sim import ExactExecutor, Program, TensorDecl, dtypes, get_architecture
from neuron_sim.memory.access_pattern import HBM, PSUM, SBUF, AccessPattern, hbm, onchip

TRN2 = get_architecture("trn2")
TRN3 = get_architecture("trn3")

BF16 = np.dtype(ml_dtypes.bfloat16)
FP8_E4M3 = np.dtype(ml_dtypes.float8_e4m3)
FP8_E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)
FP8_E5M2 = np.dtype(ml_dtypes.float8_e5m2)


def sb(dtype, partitions, free, start=0, offset=0) -> AccessPattern:
    """A dense SBUF pattern: ``partitions`` x row-major ``free`` (an int or a tuple of counts)."""
    free = (free,) if isinstance(free, int) else tuple(free)
    return onchip(SBUF, dtype, start, partitions, free, offset)


def ps(dtype, partitions, free, start=0, offset=0) -> AccessPattern:
    free = (free,) if isinstance(free, int) else tuple(free)
    return onchip(PSUM, dtype, start, partitions, free, offset)


def hb(name, dtype, shape, offset_elements=0, row_stride=None) -> AccessPattern:
    return hbm(name, dtype, shape, offset_elements, row_stride)


_FP8_MAX = {"float8_e4m3": 240.0, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


def rounded(values, dtype) -> np.ndarray:
    """Reference write rounding, written independently of ``dtypes.convert``.

    fp32 first (the engines' precision), then: narrow floats by ml_dtypes/numpy casts (RNE), fp8
    saturating at its largest finite value, integers by round-half-even (np.rint) with saturation
    and NaN -> 0, bool as nonzero.
    """
    target = dtypes.to_numpy(dtype)
    x = np.asarray(values, dtype=np.float32)
    if dtype == "bool":
        return x != 0
    if target.kind in "iu":
        info = np.iinfo(target)
        y = np.rint(x.astype(np.float64))
        y = np.where(np.isnan(y), 0.0, np.clip(y, info.min, info.max))
        return y.astype(target)
    if dtype in _FP8_MAX:
        m = _FP8_MAX[dtype]
        x = np.where(np.isnan(x), x, np.minimum(np.maximum(x, -m), m)).astype(np.float32)
    with np.errstate(over="ignore"):
        return x.astype(target)


def as_f64(values) -> np.ndarray:
    return np.asarray(values).astype(np.float64)


class Run:
    """Result of :func:`execute`: the executor, the fetched arrays, and the HBM buffers by name."""

    def __init__(self, executor, fetched, hbm_arrays):
        self.executor = executor
        self.fetched = fetched
        self.hbm = hbm_arrays

    def __getitem__(self, i):
        return self.fetched[i]


def execute(
    instructions,
    *,
    preload=(),
    fetch=(),
    hbm_inputs=None,
    hbm_outputs=None,
    arch=TRN2,
    uninitialized=None,
    validate=True,
) -> Run:
    """Run ``instructions`` and return what ``fetch`` addresses afterwards.

    ``preload``: ``[(ap, array)]`` written bit-exactly into SBUF/PSUM before the run (marked as
    written). ``hbm_inputs``: ``{name: array}`` bound as input tensors. ``hbm_outputs``:
    ``{name: (shape, dtype)}`` bound as poisoned output tensors; ``run.hbm[name]`` gives them back.
    """
    hbm_inputs = dict(hbm_inputs or {})
    hbm_outputs = dict(hbm_outputs or {})
    tensors, buffers = [], {}
    for name, array in hbm_inputs.items():
        array = np.ascontiguousarray(array)
        tensors.append(TensorDecl(name, array.shape, dtypes.dtype_name(array.dtype), "input"))
        buffers[name] = array.reshape(-1).view(np.uint8).copy()
    for name, (shape, dtype) in hbm_outputs.items():
        decl = TensorDecl(name, tuple(shape), dtype, "output")
        tensors.append(decl)
        buffers[name] = np.full(decl.nbytes, 0xFF, dtype=np.uint8)
    program = Program("test", tensors, list(instructions), arch.name)
    if validate:
        program.validate(arch)
    ex = ExactExecutor(arch, uninitialized=uninitialized)
    ex.sbuf.reset()
    ex.psum.reset()
    for ap, array in preload:
        target = ex.view(ap)
        target[...] = np.asarray(array).astype(target.dtype).reshape(target.shape)
        memory = ex.sbuf if ap.memory == SBUF else ex.psum
        memory.mark_written(ap)
    ex.run(program, buffers, reset=False)
    fetched = [ex.view(ap).copy() for ap in fetch]
    out = {}
    for decl in tensors:
        out[decl.name] = buffers[decl.name].view(dtypes.to_numpy(decl.dtype)).reshape(decl.shape)
    return Run(ex, fetched, out)


def assert_bits_equal(actual, expected) -> None:
    """Equal element by element, bit for bit (NaN == NaN with the same payload)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[actual.dtype.itemsize]
    a = np.ascontiguousarray(actual).view(width)
    e = np.ascontiguousarray(expected).view(width)
    if not np.array_equal(a, e):
        bad = np.argwhere(a != e)[:5].tolist()
        raise AssertionError(
            f"{int((a != e).sum())} element(s) differ, first at {bad}: "
            f"actual {[actual[tuple(i)] for i in bad]} expected {[expected[tuple(i)] for i in bad]}"
        )


__all__ = [
    "TRN2", "TRN3", "BF16", "FP8_E4M3", "FP8_E4M3FN", "FP8_E5M2", "HBM", "SBUF", "PSUM",
    "sb", "ps", "hb", "rounded", "as_f64", "execute", "assert_bits_equal", "Run",
]
