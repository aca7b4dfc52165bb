"""Pooling and upsampling as strided slices, gathers, elementwise ops and scatter-adds.

torch-mlir lowers ``avg_pool2d``, ``max_pool2d_with_indices`` and ``adaptive_max_pool2d`` to
``stablehlo.reduce_window``, which the graph IR has no form for (it keeps the cumulative-sum
window only), and has no StableHLO lowering at all of the pooling and upsampling backwards. These
decompositions give each op CPU's semantics exactly:

* Windows are static, so everything about them - which input rows a window covers, which of them
  are padding, a window's divisor, an upsampling source row and its weight - is computed here, in
  Python, the way CPU's kernel computes it (``np.float32`` where CPU computes in float), and enters
  the graph as constants.
* A fixed-size window (``max_pool2d``, ``avg_pool2d``) is read as one strided slice of the padded
  input per kernel offset; an adaptive window as one gather of rows and columns per offset (of the
  largest window), masked where a smaller window ends.
* Max pooling walks the offsets in CPU's order (row-major within the window) with CPU's rule
  ``val > max || isnan(val)``: the first maximum wins, a NaN wins over numbers (the last NaN), and a
  window of ``-inf`` keeps the index of its first element that is not padding. Padding is never
  chosen.
* Sums (average pooling, every backward) accumulate 16-bit floats in fp32 and round once, as CPU's
  kernels do.
* Backwards scatter-add the output gradient along the rows, then along the columns (the windows are
  separable), so an ``inf`` stays in the elements it reaches.
"""

from __future__ import annotations

import math

import numpy as np


def _torch():
    import torch

    return torch


def _pair(value, default=None) -> list[int]:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return list(default)
    if isinstance(value, int):
        return [value, value]
    return [int(value[0]), int(value[0])] if len(value) == 1 else [int(value[0]), int(value[1])]


def _as_batched(x):
    """``x`` as ``[N, C, H, W]``: a ``[C, H, W]`` input gets a batch of one."""
    return (x, False) if x.dim() == 4 else (x.unsqueeze(0), True)


def _floating(*tensors) -> bool:
    return all(t.is_floating_point() for t in tensors)


def _accumulation_dtype(dtype):
    torch = _torch()
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _constant(values, dtype=None, device=None):
    """A constant of the graph: made on the host and copied to ``device`` (a constant made on the
    device would be copied there by an op of the device while the graph is traced)."""
    return _torch().as_tensor(values, dtype=dtype).to(device)


def _static_sizes(x, *dims) -> bool:
    return all(isinstance(x.shape[d], int) for d in dims)


# --- max pooling ------------------------------------------------------------------------------------


def _fixed_windows(size, kernel, stride, pad, dilation, out):
    """For each kernel offset, the input row each output row reads there (may be padding)."""
    return [[o * stride - pad + i * dilation for o in range(out)] for i in range(kernel)]


def _max_over_offsets(offsets, first, out_shape):
    """Max and flat index over ``offsets`` - ``(values, valid or None, index)`` each, visited in
    CPU's window order - from ``-inf`` and ``first``, the index of each window's first element."""
    torch = _torch()
    best, best_index = None, first.expand(out_shape)
    for values, valid, index in offsets:
        if best is None:
            best = torch.full(out_shape, -math.inf, dtype=values.dtype, device=values.device)
        take = (values > best) | (values != values)
        if valid is not None:
            take = take & valid
        best = torch.where(take, values, best)
        best_index = torch.where(take, index, best_index)
    return best, best_index


def _flat_indices(rows, cols, width, device):
    torch = _torch()
    return _constant([[r * width + c for c in cols] for r in rows], dtype=torch.int64, device=device)


def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    torch = _torch()
    from torch._meta_registrations import pooling_output_shape

    if self.dim() not in (3, 4) or not _floating(self) or not _static_sizes(self, -2, -1) or self.numel() == 0:
        return NotImplemented
    k, s = _pair(kernel_size), _pair(stride, _pair(kernel_size))
    p, d = _pair(padding), _pair(dilation)
    x, unbatched = _as_batched(self)
    size = list(x.shape[-2:])
    out = [pooling_output_shape(size[i], k[i], p[i], s[i], d[i], ceil_mode) for i in range(2)]
    if min(out) <= 0 or any(2 * p[i] > k[i] for i in range(2)):
        return NotImplemented  # CPU's checks raise
    rows = [_fixed_windows(size[i], k[i], s[i], p[i], d[i], out[i]) for i in range(2)]
    # padded so that every offset's strided slice is whole; what padding holds is never chosen
    extent = [(out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 for i in range(2)]
    after = [max(0, extent[i] - size[i] - p[i]) for i in range(2)]
    padded = torch.constant_pad_nd(x, [p[1], after[1], p[0], after[0]], 0.0)
    offsets = []
    for i in range(k[0]):
        r = rows[0][i]
        band = padded[:, :, i * d[0]: i * d[0] + (out[0] - 1) * s[0] + 1: s[0]]
        for j in range(k[1]):
            c = rows[1][j]
            values = band[:, :, :, j * d[1]: j * d[1] + (out[1] - 1) * s[1] + 1: s[1]]
            valid = [[0 <= a < size[0] and 0 <= b < size[1] for b in c] for a in r]
            mask = None if all(map(all, valid)) else _constant(valid, device=x.device)
            offsets.append((values, mask, _flat_indices(r, c, size[1], x.device)))
    # a window's first element that is not padding (CPU steps its start by the dilation)
    first = [[next(rows[i][a][o] for a in range(k[i]) if 0 <= rows[i][a][o] < size[i]) for o in range(out[i])]
             for i in range(2)]
    values, index = _max_over_offsets(offsets, _flat_indices(first[0], first[1], size[1], x.device),
                                      [x.shape[0], x.shape[1], *out])
    if unbatched:
        values, index = values.squeeze(0), index.squeeze(0)
    return values, index


def _adaptive_bounds(size, out):
    """CPU's adaptive windows: ``[floor(o * size / out), ceil((o + 1) * size / out))``."""
    return [((o * size) // out, ((o + 1) * size + out - 1) // out) for o in range(out)]


def adaptive_max_pool2d(self, output_size):
    torch = _torch()
    if self.dim() not in (3, 4) or not _floating(self) or not _static_sizes(self, -2, -1):
        return NotImplemented
    x, unbatched = _as_batched(self)
    size = list(x.shape[-2:])
    out = [int(o) if o is not None else size[i] for i, o in enumerate(_pair(output_size))]
    if min(size) <= 0 or min(out) <= 0 or x.numel() == 0:
        return NotImplemented  # CPU's checks raise, or nothing to compute
    bounds = [_adaptive_bounds(size[i], out[i]) for i in range(2)]
    widths = [max(e - b for b, e in bounds[i]) for i in range(2)]
    offsets = []
    for a in range(widths[0]):
        r = [min(b + a, size[0] - 1) for b, _ in bounds[0]]
        r_valid = [b + a < e for b, e in bounds[0]]
        band = x.index_select(2, _constant(r, dtype=torch.int64, device=x.device))
        for b_ in range(widths[1]):
            c = [min(b + b_, size[1] - 1) for b, _ in bounds[1]]
            c_valid = [b + b_ < e for b, e in bounds[1]]
            values = band.index_select(3, _constant(c, dtype=torch.int64, device=x.device))
            valid = [[u and v for v in c_valid] for u in r_valid]
            mask = None if all(map(all, valid)) else _constant(valid, device=x.device)
            offsets.append((values, mask, _flat_indices(r, c, size[1], x.device)))
    first = _flat_indices([b for b, _ in bounds[0]], [b for b, _ in bounds[1]], size[1], x.device)
    values, index = _max_over_offsets(offsets, first, [x.shape[0], x.shape[1], *out])
    if unbatched:
        values, index = values.squeeze(0), index.squeeze(0)
    return values, index


def _scatter_by_index(grad_output, self, indices):
    """``grad_input`` with each output gradient added at its flat ``indices`` (the max-pooling backwards)."""
    torch = _torch()
    if not _floating(grad_output) or grad_output.numel() == 0 or not _static_sizes(self, -2, -1):
        return NotImplemented
    dtype = _accumulation_dtype(grad_output.dtype)
    planes = list(self.shape[:-2])
    flat = torch.zeros([*planes, self.shape[-2] * self.shape[-1]], dtype=dtype, device=grad_output.device)
    flat = flat.scatter_add(-1, indices.flatten(-2), grad_output.flatten(-2).to(dtype))
    return flat.reshape(self.shape).to(grad_output.dtype)


def adaptive_max_pool2d_backward(grad_output, self, indices):
    return _scatter_by_index(grad_output, self, indices)


# --- average pooling --------------------------------------------------------------------------------


def _avg_divisors(size, kernel, stride, pad, out, count_include_pad):
    """Per output row: (the window's rows within the input, its divisor's factor) as CPU's kernel."""
    rows, factors = [], []
    for o in range(out):
        start = o * stride - pad
        end = min(start + kernel, size + pad)
        pool = end - start
        start, end = max(start, 0), min(end, size)
        rows.append(list(range(start, end)))
        factors.append(pool if count_include_pad else end - start)
    return rows, factors


def _avg_setup(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """(batched input, unbatched?, kernel, stride, padding, output size, divisor [OH, OW]) or None."""
    from torch._meta_registrations import pooling_output_shape

    if self.dim() not in (3, 4) or not _floating(self) or not _static_sizes(self, -2, -1) or self.numel() == 0:
        return None
    k, s, p = _pair(kernel_size), _pair(stride, _pair(kernel_size)), _pair(padding)
    x, unbatched = _as_batched(self)
    size = list(x.shape[-2:])
    out = [pooling_output_shape(size[i], k[i], p[i], s[i], 1, ceil_mode) for i in range(2)]
    if min(out) <= 0 or any(2 * p[i] > k[i] for i in range(2)) or divisor_override == 0:
        return None  # CPU's checks raise
    (_, fh), (_, fw) = (_avg_divisors(size[i], k[i], s[i], p[i], out[i], count_include_pad) for i in range(2))
    if divisor_override:
        divisor = [[float(divisor_override)] * out[1] for _ in range(out[0])]
    else:
        divisor = [[float(a * b) for b in fw] for a in fh]
    if any(v == 0 for row in divisor for v in row):
        return None  # a window of padding only: CPU writes 0 there
    dtype = _accumulation_dtype(x.dtype)
    return x, unbatched, k, s, p, size, out, _constant(divisor, dtype=dtype, device=x.device)


def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    torch = _torch()
    setup = _avg_setup(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    if setup is None:
        return NotImplemented
    x, unbatched, k, s, p, size, out, divisor = setup
    extent = [(out[i] - 1) * s[i] + k[i] for i in range(2)]
    after = [max(0, extent[i] - size[i] - p[i]) for i in range(2)]
    padded = torch.constant_pad_nd(x.to(divisor.dtype), [p[1], after[1], p[0], after[0]], 0.0)
    total = None
    for i in range(k[0]):
        band = padded[:, :, i: i + (out[0] - 1) * s[0] + 1: s[0]]
        for j in range(k[1]):
            values = band[:, :, :, j: j + (out[1] - 1) * s[1] + 1: s[1]]
            total = values if total is None else total + values
    result = (total / divisor).to(x.dtype)
    return result.squeeze(0) if unbatched else result


def _scatter_rows(t, dim, size, targets):
    """``sum_k t * weight_k`` added at row ``index_k[o]`` of a ``size``-row result along ``dim``:
    ``targets`` is a list of (index per row of ``t``, weight per row or None)."""
    torch = _torch()
    shape = list(t.shape)
    shape[dim] = size
    result = torch.zeros(shape, dtype=t.dtype, device=t.device)
    view = [1] * t.dim()
    view[dim] = t.shape[dim]
    for index, weight in targets:
        part = t if weight is None else t * _constant(weight, dtype=t.dtype, device=t.device).reshape(view)
        result = result.index_add(dim, _constant(index, dtype=torch.int64, device=t.device), part)
    return result


def _window_targets(rows_per_output):
    """(index, weight) pairs covering each output's rows: offset ``a`` adds at its ``a``-th row,
    with weight 0 where the window has fewer."""
    width = max(len(r) for r in rows_per_output)
    return [([r[min(a, len(r) - 1)] for r in rows_per_output], [1.0 if a < len(r) else 0.0 for r in rows_per_output])
            for a in range(width)]


def _separable_backward(grad, size, rows_h, rows_w, unbatched, dtype):
    g = _scatter_rows(grad, 2, size[0], _window_targets(rows_h))
    g = _scatter_rows(g, 3, size[1], _window_targets(rows_w)).to(dtype)
    return g.squeeze(0) if unbatched else g


def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    setup = _avg_setup(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    if setup is None or not _floating(grad_output):
        return NotImplemented
    x, unbatched, k, s, p, size, out, divisor = setup
    grad, _ = _as_batched(grad_output)
    (rows_h, _), (rows_w, _) = (_avg_divisors(size[i], k[i], s[i], p[i], out[i], count_include_pad) for i in range(2))
    return _separable_backward(grad.to(divisor.dtype) / divisor, size, rows_h, rows_w, unbatched, x.dtype)


def adaptive_avg_pool2d_backward(grad_output, self):
    if self.dim() not in (3, 4) or not _floating(grad_output) or not _static_sizes(self, -2, -1) or self.numel() == 0:
        return NotImplemented
    x, unbatched = _as_batched(self)
    grad, _ = _as_batched(grad_output)
    size, out = list(x.shape[-2:]), list(grad.shape[-2:])
    bounds = [_adaptive_bounds(size[i], out[i]) for i in range(2)]
    dtype = _accumulation_dtype(grad.dtype)
    # CPU: grad_output / kh / kw, added to each element of the window
    kh = _constant([float(e - b) for b, e in bounds[0]], dtype=dtype, device=x.device).reshape(-1, 1)
    kw = _constant([float(e - b) for b, e in bounds[1]], dtype=dtype, device=x.device).reshape(1, -1)
    g = grad.to(dtype) / kh / kw
    rows = [[list(range(b, e)) for b, e in bounds[i]] for i in range(2)]
    return _separable_backward(g, size, rows[0], rows[1], unbatched, x.dtype)


# --- upsampling -------------------------------------------------------------------------------------


def _scale_value(scale, size, out):
    """CPU's ``compute_scales_value<float>``."""
    return np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(size) / np.float32(out)


def _nearest_sources(size, out, scale):
    """CPU's ``nearest_idx``: the input row each output row copies."""
    if out == size:
        return list(range(out))
    if out == 2 * size:
        return [o >> 1 for o in range(out)]
    ratio = _scale_value(scale, size, out)
    return [min(int(np.floor(np.float32(o) * ratio)), size - 1) for o in range(out)]


def upsample_nearest_backward(grad_output, output_size, input_size, *scales):
    """``upsample_nearest{1,2,3}d_backward``: each output gradient added at its source, dim by dim."""
    spatial = len(output_size)
    if grad_output.dim() != spatial + 2 or not _floating(grad_output) or grad_output.numel() == 0:
        return NotImplemented
    size, out = [int(v) for v in input_size[2:]], [int(v) for v in output_size]
    scales = list(scales) + [None] * (spatial - len(scales))
    dtype = _accumulation_dtype(grad_output.dtype)
    g = grad_output.to(dtype)
    for i in range(spatial):
        g = _scatter_rows(g, 2 + i, size[i], [(_nearest_sources(size[i], out[i], scales[i]), None)])
    return g.to(grad_output.dtype)  # the caller gives the result CPU's layout


def _linear_sources(size, out, align_corners, scale):
    """CPU's ``compute_source_index_and_lambda`` (float): per output row (row0, row1, lambda0, lambda1)."""
    if out == size:
        return [(o, o, np.float32(1), np.float32(0)) for o in range(out)]
    if align_corners:
        ratio = np.float32(size - 1) / np.float32(out - 1) if out > 1 else np.float32(0)
    else:
        ratio = _scale_value(scale, size, out)
    result = []
    for o in range(out):
        if align_corners:
            real = ratio * np.float32(o)
        else:
            real = max(ratio * (np.float32(o) + np.float32(0.5)) - np.float32(0.5), np.float32(0))
        row0 = min(int(np.floor(real)), size - 1)
        lam1 = np.float32(min(max(real - np.float32(row0), np.float32(0)), np.float32(1)))
        row1 = row0 + (1 if row0 < size - 1 else 0)
        result.append((row0, row1, np.float32(1) - lam1, lam1))
    return result


def upsample_bilinear2d_backward(grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    if grad_output.dim() != 4 or not _floating(grad_output) or grad_output.numel() == 0:
        return NotImplemented
    size, out = [int(v) for v in input_size[-2:]], [int(v) for v in output_size]
    dtype = _accumulation_dtype(grad_output.dtype)
    g = grad_output.to(dtype)
    for dim, i, scale in ((2, 0, scales_h), (3, 1, scales_w)):
        src = _linear_sources(size[i], out[i], align_corners, scale)
        g = _scatter_rows(g, dim, size[i], [([r0 for r0, _, _, _ in src], [float(w0) for _, _, w0, _ in src]),
                                            ([r1 for _, r1, _, _ in src], [float(w1) for _, _, _, w1 in src])])
    return g.to(grad_output.dtype)


def table() -> dict:
    """These decompositions by ATen overload, and PyTorch's own where its numerics are CPU's."""
    torch = _torch()
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    found = {
        aten.max_pool2d_with_indices.default: max_pool2d_with_indices,
        aten.adaptive_max_pool2d.default: adaptive_max_pool2d,
        aten.adaptive_max_pool2d_backward.default: adaptive_max_pool2d_backward,
        aten.avg_pool2d.default: avg_pool2d,
        aten.avg_pool2d_backward.default: avg_pool2d_backward,
        aten._adaptive_avg_pool2d_backward.default: adaptive_avg_pool2d_backward,
        aten.upsample_nearest1d_backward.default: upsample_nearest_backward,
        aten.upsample_nearest2d_backward.default: upsample_nearest_backward,
        aten.upsample_nearest3d_backward.default: upsample_nearest_backward,
        aten.upsample_bilinear2d_backward.default: upsample_bilinear2d_backward,
    }
    # scatter-adds of the gradient at the forward's indices; bilinear weights computed in float
    found.update(get_decompositions([aten.max_pool2d_with_indices_backward.default, aten.upsample_bilinear2d.default]))
    return found
