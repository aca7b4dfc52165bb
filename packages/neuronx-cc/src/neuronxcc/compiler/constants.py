"""Constants: generated on chip when they have structure, read from HBM when they do not.

* one value everywhere -> a scalar view (an immediate operand, or one Memset);
* an integer-valued affine function of the index (``arange``-like) -> an iota view (GpSimd Iota);
* up to ``SMALL_CONSTANT`` values -> Memsets into SBUF and one DMA into a scratch HBM tensor;
* anything larger -> an *input* tensor of the program whose bytes are stored in the program's
  metadata (``program.metadata["constants"]``, base64), which the NEFF keeps: the runtime binds
  them at launch when the caller does not (``neuron_sim.runtime.constants``);
  ``constant_arrays(program)`` decodes them for any other launcher.

The value is the graph's: ``dtypes.convert(value, dtype)``, as the fast executor computes it.
"""

from __future__ import annotations

import base64

import numpy as np
from neuron_sim import dtypes
from neuron_sim.isa import Memset

from .dma import hbm_pattern
from .emitter import onchip_dtype
from .sbuf import tile_ap
from .views import View

SMALL_CONSTANT = 16
_INT32 = (-(1 << 31), (1 << 31) - 1)


def constant_value(node) -> np.ndarray:
    t = node.outputs[0].type
    return np.asarray(dtypes.convert(np.asarray(node.attrs["value"]), t.dtype)).reshape(t.shape)


def constant_view(ctx, node) -> View:
    return array_view(ctx, constant_value(node), node.outputs[0])


def array_view(ctx, array: np.ndarray, value) -> View:
    """The view of graph value ``value`` whose elements are ``array`` (known at compile time)."""
    t = value.type
    array = np.asarray(array).reshape(t.shape)
    if array.size == 0:
        return View.scalar(0, t.shape, t.dtype)
    flat = array.reshape(-1)
    bits = flat.view(f"u{flat.dtype.itemsize}") if flat.dtype.itemsize in (1, 2, 4, 8) else None
    if bits is not None and np.all(bits == bits[0]):
        return View.scalar(scalar(flat[0]), t.shape, t.dtype)
    affine = _affine(array)
    if affine is not None:
        offset, coefs = affine
        return View("iota", t.dtype, t.shape, coefs, offset)
    if array.size <= SMALL_CONSTANT:
        return _generated(ctx, array, value)
    return ctx.constant_input(np.ascontiguousarray(array), f"_const{value.id}")


def scalar(value):
    """A numpy scalar as a Python number (bool -> bool, integers exact)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    return float(value)


def _affine(array: np.ndarray):
    """(offset, coefficients) when ``array[i] == offset + sum(i[d] * coef[d])`` in int32 math."""
    if array.dtype == np.bool_ or array.ndim == 0:
        return None
    values = array.astype(np.float64)
    if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
        return None
    if dtypes.is_float(dtypes.dtype_name(array.dtype)) and np.abs(values).max() > (1 << 24):
        return None
    offset = int(values.reshape(-1)[0])
    coefs = []
    for d, size in enumerate(array.shape):
        if size > 1:
            index = [0] * array.ndim
            index[d] = 1
            coefs.append(int(values[tuple(index)]) - offset)
        else:
            coefs.append(0)
    predicted = np.full(array.shape, offset, dtype=np.int64)
    for d, c in enumerate(coefs):
        shape = [1] * array.ndim
        shape[d] = array.shape[d]
        predicted = predicted + c * np.arange(array.shape[d], dtype=np.int64).reshape(shape)
    if not np.array_equal(predicted, values) or predicted.min() < _INT32[0] or predicted.max() > _INT32[1]:
        return None
    return offset, tuple(coefs)


def _generated(ctx, array: np.ndarray, value) -> View:
    """A small constant written by Memsets into one SBUF row, then DMA'd to a scratch tensor."""
    dtype = dtypes.dtype_name(array.dtype)
    chip = onchip_dtype(dtype)
    flat = array.reshape(-1)
    dest = ctx.internal(array.shape, dtype, f"_const{value.id}")
    if dtypes.is_int(dtype) and flat.itemsize == 8:  # int64: written as its int32 words (exact)
        flat, dtype = np.ascontiguousarray(flat).view(np.int32), "int32"
        chip = dtype
    tile = ctx.builder.sbuf((1, flat.size), chip)
    start = 0
    while start < flat.size:  # one Memset per run of equal values
        end = start + 1
        while end < flat.size and _same(flat[end], flat[start]):
            end += 1
        number = scalar(flat[start])
        number = (1.0 if number else 0.0) if isinstance(number, bool) else number
        ctx.em.emit(Memset(dst=tile_ap(tile, 1, (end - start,), offset=start), value=number,
                           engine=ctx.em.pick("vector", "gpsimd")))
        start = end

    ctx.em.store(hbm_pattern(dest.tensor, dtype, 0, 0, 1, [(1, flat.size)]), tile_ap(tile, 1, (flat.size,)))
    ctx.builder.release(tile)
    return dest


def _same(a, b) -> bool:
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


def constant_arrays(program) -> dict[str, np.ndarray]:
    """The data of a compiled program's constant input tensors, by tensor name."""
    out = {}
    for name, entry in (program.metadata.get("constants") or {}).items():
        raw = base64.b64decode(entry["data"])
        out[name] = np.frombuffer(raw, dtype=dtypes.to_numpy(entry["dtype"])).reshape(entry["shape"]).copy()
    return out
