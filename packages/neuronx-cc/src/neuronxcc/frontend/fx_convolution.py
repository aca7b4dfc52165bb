"""Convolutions as im2col matrix products (torch-mlir lowers ``aten.convolution`` to
``stablehlo.convolution``, which the graph IR has no form for).

A direct convolution pads its input, takes one strided window per kernel offset (a strided slice
each), stacks them into columns ``[groups, C/groups * K, N * P]`` and multiplies them by the
weight ``[groups, O/groups, C/groups * K]``: one batched ``dot_general`` that contracts over
channels times kernel offsets, so TensorE does the convolution's multiply-adds (and no more) with
PSUM accumulation over the whole contraction. The columns are K times the input (what a
convolution engine streams from the input window by window); their copies are DMA time.

A transposed convolution is the direct convolution (stride 1) of its input with ``stride - 1``
zeros between elements, padded by ``dilation * (k - 1) - padding`` (cropped where negative), with
the weight's channel axes swapped within each group and its kernel flipped (the windows are
taken in reverse order; no gather). Backward (``aten.convolution_backward``): the input gradient
is the adjoint convolution (transposed for a direct one, direct for a transposed one), the weight
gradient the product of the output gradient and the columns of the forward's input (of the output
gradient, for a transposed convolution), the bias gradient a sum.
"""

from __future__ import annotations

import itertools
import math


def _torch():
    import torch

    return torch


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    if input.dim() != weight.dim() or input.dim() < 3:
        return NotImplemented
    if transposed:
        out = _transposed(input, weight, stride, padding, dilation, output_padding, groups)
    else:
        out = _direct(input, weight, stride, padding, dilation, groups)
    if bias is not None:
        out = out + bias.reshape([1, -1] + [1] * (out.dim() - 2)).to(out.dtype)
    return out


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    if input.dim() != weight.dim() or input.dim() < 3:
        return NotImplemented
    kernel = list(weight.shape[2:])
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:
            grad_input = _direct(grad_output, weight, stride, padding, dilation, groups, out_sizes=input.shape[2:])
        else:
            # the rows and columns the forward's last window did not reach get a zero gradient
            extra = [s + 2 * p - d * (k - 1) - 1 - (o - 1) * st for s, p, d, k, o, st in
                     zip(input.shape[2:], padding, dilation, kernel, grad_output.shape[2:], stride)]
            grad_input = _transposed(grad_output, weight, stride, padding, dilation, extra, groups)
    if output_mask[1]:
        if transposed:  # the adjoint direct convolution's weight gradient: input and output gradient swap roles
            grad_weight = _weight_gradient(input, grad_output, kernel, stride, padding, dilation, groups)
        else:
            grad_weight = _weight_gradient(grad_output, input, kernel, stride, padding, dilation, groups)
    if output_mask[2]:
        grad_bias = grad_output.sum([0] + list(range(2, grad_output.dim())))
    return grad_input, grad_weight, grad_bias


def _columns(x, kernel, stride, padding, dilation, groups, out_sizes=None, flip=False):
    """``[groups, C/groups * prod(kernel), N * prod(out_sizes)]``: for every kernel offset (row-major,
    reversed where ``flip``), the input window it multiplies, one strided slice each."""
    torch = _torch()
    if any(padding):
        x = torch.nn.functional.pad(x, [p for pad in reversed(padding) for p in (pad, pad)])
    n, c, sizes = x.shape[0], x.shape[1], x.shape[2:]
    if out_sizes is None:
        out_sizes = [(s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(sizes, kernel, stride, dilation)]
    windows = []
    for offsets in itertools.product(*(range(k) for k in kernel)):
        if flip:
            offsets = [k - 1 - o for o, k in zip(offsets, kernel)]
        index = [slice(None), slice(None)]
        index += [slice(o * d, o * d + (m - 1) * st + 1, st) for o, d, m, st in zip(offsets, dilation, out_sizes, stride)]
        windows.append(x[tuple(index)])
    columns = windows[0].unsqueeze(2) if len(windows) == 1 else torch.stack(windows, 2)  # [N, C, K, *out]
    positions = math.prod(out_sizes)
    columns = columns.reshape(n, groups, c // groups * len(windows), positions).permute(1, 2, 0, 3)
    return columns.contiguous().reshape(groups, c // groups * len(windows), n * positions), list(out_sizes)


def _direct(x, weight, stride, padding, dilation, groups, out_sizes=None, flip=False):
    """The direct convolution of ``x [N, C, *S]`` with ``weight [O, C/groups, *K]``."""
    kernel = list(weight.shape[2:])
    columns, out_sizes = _columns(x, kernel, stride, padding, dilation, groups, out_sizes, flip)
    o, n = weight.shape[0], x.shape[0]
    w = weight.reshape(groups, o // groups, -1).to(columns.dtype)
    out = w @ columns  # [groups, O/groups, N * P]
    return out.reshape(groups, o // groups, n, -1).permute(2, 0, 1, 3).contiguous().reshape([n, o] + out_sizes)


def _transposed(x, weight, stride, padding, dilation, output_padding, groups):
    """The transposed convolution of ``x [N, C, *S]`` with ``weight [C, O/groups, *K]``."""
    torch = _torch()
    kernel = list(weight.shape[2:])
    for axis, st in enumerate(stride):  # stride - 1 zeros between elements
        if st > 1:
            d = axis + 2
            size = x.shape[d]
            zeros = x.new_zeros(list(x.shape[: d + 1]) + [st - 1] + list(x.shape[d + 1:]))
            x = torch.cat([x.unsqueeze(d + 1), zeros], d + 1).flatten(d, d + 1).narrow(d, 0, (size - 1) * st + 1)
    pads = []  # F.pad order: last dim first; negative values crop
    for k, p, d, extra in reversed(list(zip(kernel, padding, dilation, output_padding))):
        pads += [d * (k - 1) - p, d * (k - 1) - p + extra]
    if any(pads):
        x = torch.nn.functional.pad(x, pads)
    c, o = weight.shape[0], weight.shape[1] * groups
    swapped = weight.reshape([groups, c // groups, o // groups] + kernel).transpose(1, 2).contiguous().reshape([o, c // groups] + kernel)
    ones = [1] * len(kernel)
    return _direct(x, swapped, ones, [0] * len(kernel), dilation, groups, flip=True)


def _weight_gradient(grad_output, input, kernel, stride, padding, dilation, groups):
    """``[O, C/groups, *K]``: the output gradient times the forward's columns, summed over the batch."""
    columns, out_sizes = _columns(input, kernel, stride, padding, dilation, groups, grad_output.shape[2:])
    n, o = grad_output.shape[0], grad_output.shape[1]
    g = grad_output.reshape(n, groups, o // groups, -1).permute(1, 2, 0, 3).contiguous().reshape(groups, o // groups, -1)
    grad = g.to(columns.dtype) @ columns.transpose(1, 2)  # [groups, O/groups, C/groups * K]
    return grad.reshape([o, input.shape[1] // groups] + list(kernel))
