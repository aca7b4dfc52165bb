"""Drop-in modules: ``swap_modules(model)`` turns a model's ``nn.RMSNorm`` and ``nn.LayerNorm``
(over the last dim) into kernel-backed subclasses in place.

The swap changes only each module's class, so its parameters, buffers, hooks and state_dict keys
stay exactly as they were (an optimizer built before the swap keeps working, a checkpoint loads
either way). Shapes the kernels do not take run the original forward through the wrappers'
fallback.
"""

from __future__ import annotations

import torch
from torch import nn

from nkilib.torch.norm import layer_norm, rms_norm


class RMSNorm(nn.RMSNorm):
    """nn.RMSNorm whose forward is nkilib.torch.rms_norm (last-dim norms)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(self.normalized_shape) != 1:
            return super().forward(x)
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps  # nn.RMSNorm's default
        return rms_norm(x, self.weight, eps)


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm whose forward is nkilib.torch.layer_norm (last-dim norms)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(self.normalized_shape) != 1:
            return super().forward(x)
        return layer_norm(x, self.weight, self.bias, self.eps)


SWAPS = {nn.RMSNorm: RMSNorm, nn.LayerNorm: LayerNorm}


def swap_modules(model: nn.Module) -> list[str]:
    """Swap every nn.RMSNorm / nn.LayerNorm in ``model`` (exact class, not subclasses with a
    forward of their own) for its kernel-backed form; returns the swapped modules' names."""
    swapped = []
    for name, module in model.named_modules():
        kernel_class = SWAPS.get(type(module))
        if kernel_class is not None:
            module.__class__ = kernel_class
            swapped.append(name)
    return swapped
