"""MLP: the gated MLP (SwiGLU / GeGLU) forward."""

from nkilib.mlp.gated_mlp import gated_mlp

__all__ = ["gated_mlp"]
