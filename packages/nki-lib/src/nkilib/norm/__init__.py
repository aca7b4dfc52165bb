"""Normalizations over the last dim: RMSNorm, LayerNorm (forward and backward) and the fused
residual add + RMSNorm."""

from nkilib.norm.layernorm import layer_norm, layer_norm_backward
from nkilib.norm.residual_rmsnorm import residual_rms_norm
from nkilib.norm.rmsnorm import rms_norm, rms_norm_backward

__all__ = ["layer_norm", "layer_norm_backward", "residual_rms_norm", "rms_norm", "rms_norm_backward"]
