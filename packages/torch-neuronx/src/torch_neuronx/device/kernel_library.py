"""``KernelLibrary``: the ``torch.library.Library`` every Python kernel of the device is registered
through, so that the kernels are opaque to Dynamo.

A kernel runs as a Python frame entered from the C++ dispatcher. When that happens inside a
``torch.compile``d region Dynamo does not trace (a bare ``nn.Linear``'s ``model.compile()``:
Dynamo skips torch.nn's own frames and runs them eagerly), Dynamo would start tracing our kernel
as user code and compile its internals (meta tensors, the NEFF cache) into a graph. Each kernel's
code is marked to run without Dynamo, and everything it calls with it - at no cost to eager calls.
"""

from __future__ import annotations

import torch


class KernelLibrary(torch.library.Library):
    def impl(self, op_name, fn, dispatch_key="", *args, **kwargs):
        _skip_for_dynamo(fn)
        return super().impl(op_name, fn, dispatch_key, *args, **kwargs)

    def fallback(self, fn, dispatch_key="", *args, **kwargs):
        _skip_for_dynamo(fn)
        return super().fallback(fn, dispatch_key, *args, **kwargs)


def _skip_for_dynamo(fn) -> None:
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

    code = getattr(fn, "__code__", None)
    if code is not None:
        set_code_exec_strategy(code, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))
