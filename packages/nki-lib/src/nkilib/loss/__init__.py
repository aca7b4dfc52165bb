"""Losses: cross-entropy over a vocabulary of any width (processed in column chunks)."""

from nkilib.loss.cross_entropy import cross_entropy, cross_entropy_backward

__all__ = ["cross_entropy", "cross_entropy_backward"]
