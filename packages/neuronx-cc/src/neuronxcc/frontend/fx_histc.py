"""``aten.histc`` (torch-mlir has no lowering of it) as a bin position per element and a scatter-add.

Mixture-of-experts routing counts the tokens of each expert with ``histc`` over integer expert
ids (Transformers' grouped-experts path, most MoE models' load-balancing loss), which CUDA's
kernel accepts and CPU's does not. The bin of each element follows the kernel that defines it:

* floats, as CPU's ``histogramdd`` kernel computes it in the input's dtype (every step rounded to
  it): ``trunc((x - lo) * bins / (hi - lo))``, where ``lo`` and ``hi`` are ``min`` and ``max``
  held in the dtype and ``hi - lo`` is rounded to it as well;
* integers, as CUDA's ``histc`` computes it in int64: ``(x - lo) * bins // (hi - lo)``. That is
  ``x``'s position among the bins' integer left edges ``lo + ceil(k * (hi - lo) / bins)``, found
  by comparing it with each edge (an element per value and bin, at most ``HISTC_DENSE_MAX``) -
  comparisons only, exact for every value of the dtype.

Elements outside ``[lo, hi]`` (and NaN) count nowhere; the last bin includes ``hi``. Counts are
added in float32, which is exact while no count can pass what the result's dtype holds exactly
(``numel`` below 2**24, or 2**11 / 2**8 for a float16 / bfloat16 result, whose CPU counts stop
there); larger calls, and calls whose range comes from the data (``min == max``), are not
decomposed.
"""

from __future__ import annotations

import math

# The largest count each result dtype holds exactly, by name (torch may not be importable here).
_EXACT_COUNTS = {"float16": 2**11, "bfloat16": 2**8}
_FLOAT32_EXACT = 2**24
# Integer inputs compare every element with every bin edge: larger calls are not decomposed
# (torch_neuronx's histc counts such a call in parts of this size).
HISTC_DENSE_MAX = 1 << 22


def histc(self, bins=100, min=0, max=0):  # noqa: A002 - ATen's argument names
    import torch

    dtype = self.dtype
    if dtype.is_complex or dtype == torch.bool or bins <= 0 or self.numel() == 0:
        return NotImplemented
    limit = _EXACT_COUNTS.get(str(dtype).removeprefix("torch."), _FLOAT32_EXACT)
    if self.numel() >= limit:
        return NotImplemented
    x = self.reshape(-1)
    if dtype.is_floating_point:
        # The bin edges CPU's kernel reads: min and max as the dtype holds them (a linspace's ends).
        lo, hi = (torch.tensor(float(v), dtype=dtype) for v in (min, max))
        if not (math.isfinite(lo.item()) and math.isfinite(hi.item())) or not lo.item() < hi.item():
            return NotImplemented  # the data's range, or CPU's error for the call
        lo_value, hi_value, width = lo.item(), hi.item(), (hi - lo).item()
        position = ((x - lo_value) * bins / width).to(torch.int64)  # truncates, as static_cast
    else:
        lo_value, hi_value = int(min), int(max)  # CUDA converts the Scalars to the input's type
        info = torch.iinfo(dtype)
        if not lo_value < hi_value or lo_value < info.min or hi_value > info.max:
            return NotImplemented
        if self.numel() * (bins - 1) > HISTC_DENSE_MAX:
            return NotImplemented
        span = hi_value - lo_value
        # Bin k >= 1 starts at its first integer: x is in bin k or later iff x >= that edge.
        edges = torch.tensor([lo_value - (-(k * span) // bins) for k in range(1, bins)], dtype=dtype)
        position = (x.unsqueeze(1) >= edges).to(torch.float32).sum(1).to(torch.int64)
    inside = (x >= lo_value) & (x <= hi_value)
    position = position.clamp(0, bins - 1)  # the last bin holds hi; elements outside add 0 anywhere
    counts = torch.zeros(bins, dtype=torch.float32).scatter_add(0, position, inside.to(torch.float32))
    return counts.to(dtype)
