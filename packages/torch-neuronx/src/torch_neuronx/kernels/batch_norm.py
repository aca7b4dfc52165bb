"""Batch norm as compiled ops. ``native_batch_norm`` writes the running statistics its schema does
not mark as written, so it is never compiled itself (a functional graph would drop the update):
a training call runs ``_native_batch_norm_legit_functional`` (normalized output, saved statistics
and the updated running statistics as results) and copies the new statistics into the running
ones on the device; an eval call runs ``_native_batch_norm_legit_no_training``, one without
running statistics ``_native_batch_norm_legit.no_stats``. Results are CPU's ``native_batch_norm``'s."""

from __future__ import annotations

import torch

from ..compiled import dispatch

_aten = torch.ops.aten


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    have_stats = running_mean is not None and running_var is not None
    if training and have_stats:
        out, mean, invstd, new_mean, new_var = dispatch.neuron_kernel(
            _aten._native_batch_norm_legit_functional.default, input, weight, bias, running_mean, running_var, True,
            momentum, eps)
        running_mean.copy_(new_mean)
        running_var.copy_(new_var)
        return out, mean, invstd
    if training and running_mean is None and running_var is None:
        return dispatch.neuron_kernel(_aten._native_batch_norm_legit.no_stats, input, weight, bias, True, momentum, eps)
    if not training and have_stats:
        return dispatch.neuron_kernel(_aten._native_batch_norm_legit_no_training.default, input, weight, bias,
                                      running_mean, running_var, momentum, eps)
    # one running statistic without the other, or eval without them: CPU's kernel (and its error)
    return dispatch.neuron_kernel(_aten.native_batch_norm.default, input, weight, bias, running_mean, running_var,
                                  training, momentum, eps)
