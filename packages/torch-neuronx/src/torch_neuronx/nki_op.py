"""``nki_op``: register a function that calls NKI kernels as a PyTorch custom operator.

    @nki.jit
    def sin_kernel(in_ptr0, out_ptr):
        t = nl.load(in_ptr0[0:128]); nl.store(out_ptr[0:128], value=nl.sin(t))

    @nki_op("mylib::my_sin", mutates_args={})
    def my_sin(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        sin_kernel(x, out)
        return out

    my_sin.register_autograd(backward, setup_context=setup_context)

The result is a ``torch.library.custom_op``: callable eagerly on neuron tensors, visible to
torch.compile (its fake implementation runs the function on fake tensors, where kernel calls
only produce output metadata; a compiled graph is split around the op's call, see
``dynamo/kernel_calls.py``), and trainable through ``register_autograd``.
"""

from __future__ import annotations

import torch


def nki_op(name: str, fn=None, *, mutates_args=(), device_types=None, schema: str | None = None):
    """Decorator form: ``@nki_op("ns::name", mutates_args={...})``."""

    def register(func):
        op = torch.library.custom_op(name, func, mutates_args=mutates_args, device_types=device_types, schema=schema)
        op.register_fake(func)  # kernel calls on fake tensors only compute output metadata
        return op

    return register(fn) if fn is not None else register


def wrap_nki(kernel):
    """Torch-facing handle of an NKI kernel (``wrap_nki(kernel)[grid](...)``): nki.jit kernels
    already accept torch tensors, so this returns the kernel itself."""
    return kernel
