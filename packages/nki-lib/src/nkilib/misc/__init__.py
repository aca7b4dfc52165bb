"""Row-wise building blocks: softmax over the last dim."""

from nkilib.misc.lastdim_softmax import softmax, softmax_backward

__all__ = ["softmax", "softmax_backward"]
