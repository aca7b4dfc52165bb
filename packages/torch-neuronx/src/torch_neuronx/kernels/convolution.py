"""Convolutions as compiled ops (neuronx-cc's decompositions make them im2col matrix products on
TensorE), or through CPU fallback where the compiler refuses them.

``convolution`` and ``convolution_backward`` are registered whole: their composite kernels reach
other backends' ``*_overrideable`` ops only after making the input contiguous, so a channels_last
input cost a transposing copy and gave a contiguous result where CPU's is channels_last. The
``*_overrideable`` ops take the same path for callers that use them directly."""

from __future__ import annotations

import torch

from ..compiled import dispatch

_aten = torch.ops.aten


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return dispatch.neuron_kernel(_aten.convolution.default, input, weight, bias, stride, padding, dilation,
                                  transposed, output_padding, groups)


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    return dispatch.neuron_kernel(_aten.convolution_backward.default, grad_output, input, weight, bias_sizes,
                                  stride, padding, dilation, transposed, output_padding, groups, output_mask)


def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                                      groups, output_mask):
    # convolution_backward needs the bias shape whenever the bias gradient is asked for (its
    # kernel allocates grad_bias from it; None failed every conv with a bias): one value per
    # output channel.
    bias_sizes = [weight.shape[1] * groups] if transposed else [weight.shape[0]]
    return convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                                output_padding, groups, output_mask)


KERNELS = {
    "convolution": convolution,
    "convolution_backward": convolution_backward,
    "convolution_overrideable": convolution_overrideable,
    "convolution_backward_overrideable": convolution_backward_overrideable,
}
