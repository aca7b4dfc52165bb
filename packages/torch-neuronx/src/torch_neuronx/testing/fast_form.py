"""The differential test of a kernel's fast form: the kernel run both ways on the same inputs."""

from __future__ import annotations

import torch

from ..nki_integration import call_kernel


def check_fast_form(kernel, *args, rtol: float = 1.3e-6, atol: float = 1e-5, **kwargs):
    """Run ``kernel`` on neuron tensors twice from the same inputs - its own instructions
    (``exact``) and its fast form (``fast``) - and assert that everything it writes and returns
    agrees (``torch.testing.assert_close``) and that both launches took the same device time.
    Returns the exact run's result (the arguments are not written)."""
    runs = {}
    for mode in ("exact", "fast"):
        call_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        call_kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        result = call_kernel(kernel, call_args, call_kwargs, executor=mode)
        torch.neuron.synchronize()
        runs[mode] = (call_args, call_kwargs, result, kernel.last_device_time_ns)
    (ex_args, ex_kwargs, ex_result, ex_ns), (fa_args, fa_kwargs, fa_result, fa_ns) = runs["exact"], runs["fast"]
    name = kernel.__name__
    for i, (a, b) in enumerate(zip(ex_args, fa_args)):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(b.cpu(), a.cpu(), rtol=rtol, atol=atol, msg=lambda m, i=i: f"{name} argument {i}: {m}")
    for key in ex_kwargs:
        if isinstance(ex_kwargs[key], torch.Tensor):
            torch.testing.assert_close(fa_kwargs[key].cpu(), ex_kwargs[key].cpu(), rtol=rtol, atol=atol,
                                       msg=lambda m, key=key: f"{name} argument {key}: {m}")
    torch.testing.assert_close(_cpu(fa_result), _cpu(ex_result), rtol=rtol, atol=atol,
                               msg=lambda m: f"{name} result: {m}")
    if abs(ex_ns - fa_ns) > 1e-9 * max(ex_ns, fa_ns):  # one timing; read off the device's absolute clock
        raise AssertionError(f"{name}: device time {fa_ns} ns with its fast form, {ex_ns} ns with its instructions")
    return ex_result


def _cpu(value):
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, (tuple, list)):
        return type(value)(_cpu(v) for v in value)
    return value
