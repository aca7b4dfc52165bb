"""Position embeddings: rotary (RoPE) in the rotate-half and interleaved layouts."""

from nkilib.embeddings.rotary import rope, rope_backward

__all__ = ["rope", "rope_backward"]
