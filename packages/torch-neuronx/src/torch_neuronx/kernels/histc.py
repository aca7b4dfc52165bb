"""``histc`` on the device, for float and integer inputs as CUDA's kernel takes them.

Mixture-of-experts routing counts tokens per expert with ``histc`` over integer expert ids; CPU's
kernel has no integer version, so the CPU fallback raised ``"histogram_cpu" not implemented for
'Int'``. The compiled op is neuronx-cc's decomposition (``neuronxcc.frontend.fx_histc``: floats as
CPU's kernel bins them, integers as CUDA's). Two cases are settled here first, as CUDA does:

* ``min == max`` (the range of the data): the data's extremes are read back (a synchronization, as
  CUDA's ``histc`` makes) and widened by one each way when equal; the histogram is then the one of
  that range. A non-finite range is CPU's error, at the call.
* integer inputs too large for the decomposition (it compares every element with every bin
  edge): counted in parts it takes, and the parts' counts added.
"""

from __future__ import annotations

import builtins

import torch
from neuronxcc.frontend.fx_histc import HISTC_DENSE_MAX

from ..compiled import dispatch

_histc = torch.ops.aten.histc.default


def histc(self: torch.Tensor, bins: int = 100, min=0, max=0) -> torch.Tensor:  # noqa: A002 - ATen's names
    if min == max and self.numel() > 0 and bins > 0 and not self.is_complex():
        lo, hi = (v.item() for v in torch.aminmax(self))
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        min, max = lo, hi  # noqa: A001
    part = builtins.max(1, HISTC_DENSE_MAX // builtins.max(bins - 1, 1))
    if not self.is_floating_point() and self.numel() > part and bins > 0:
        parts = [dispatch.neuron_kernel(_histc, p, bins, min, max) for p in self.reshape(-1).split(part)]
        return torch.stack(parts).sum(0, dtype=self.dtype)
    return dispatch.neuron_kernel(_histc, self, bins, min, max)
