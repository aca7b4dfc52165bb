"""Convolutions: PyTorch routes them on other backends to ``convolution_overrideable``; they run
through the CPU fallback (the compiler has no convolution lowering)."""

from __future__ import annotations

import torch

from ..ops import fallback


def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return fallback.cpu_fallback(torch.ops.aten.convolution.default, input, weight, bias, stride, padding, dilation,
                                 transposed, output_padding, groups)


def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                                      groups, output_mask):
    # convolution_backward needs the bias shape whenever the bias gradient is asked for (its
    # kernel allocates grad_bias from it; None failed every conv with a bias): one value per
    # output channel.
    bias_sizes = [weight.shape[1] * groups] if transposed else [weight.shape[0]]
    return fallback.cpu_fallback(torch.ops.aten.convolution_backward.default, grad_output, input, weight, bias_sizes,
                                 stride, padding, dilation, transposed, output_padding, groups, output_mask)
