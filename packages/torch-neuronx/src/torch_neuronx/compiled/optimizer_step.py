"""An eager ``optimizer.step()`` over neuron parameters runs under adaptive eager: its ops are
deferred and launched as a few fused NEFFs when the step ends, instead of one launch per op.

A foreach AdamW step is ~15 multi-tensor ops, each a full pass over every parameter-sized tensor
in HBM; fused, the intermediates (``exp_avg_sq.sqrt()``, the step sizes) stay on chip and only
what the step writes reaches memory - the device time of a ``fused=True`` step, with PyTorch's
default optimizer. Results are plain eager's, bit for bit (adaptive eager's guarantee).

Hooked through ``torch.optim``'s global step hooks, so every optimizer, PyTorch's or a user's, is
covered; an optimizer with no neuron parameter, a step dynamo is compiling, a step inside a
torch.profiler window (a fused run's device time would be tied to no op of the step) and a
process already in adaptive eager are left alone. ``TORCH_NEURONX_FUSE_OPTIMIZER_STEP=0`` turns it off.

A step hook sees the step begin and end, not an exception inside it: a step that raises leaves
this thread deferring until that optimizer's next step ends (deferred ops still launch at every
synchronization, copy and print, with eager's values). For the same reason the end of a step
closes every step of that optimizer opened since its outermost one: a subclass whose ``step``
calls ``super().step()`` and then does more runs that remainder plainly eager.
"""

from __future__ import annotations

import threading

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from ..device import env as _env
from . import adaptive

ENABLE_ENV = "TORCH_NEURONX_FUSE_OPTIMIZER_STEP"

_steps = threading.local()  # .open: the optimizers whose steps this thread is inside, outermost first


def _wanted(optimizer) -> bool:
    if _env.get(ENABLE_ENV, "1") in ("", "0") or torch.compiler.is_compiling():
        return False
    if torch._C._autograd._profiler_enabled():
        return False  # a fused run's device time is tied to no op of the step: profile it op by op
    return any(p.device.type == "neuron" for group in optimizer.param_groups for p in group["params"][:1])


def _before_step(optimizer, args, kwargs) -> None:
    if not _wanted(optimizer):
        return
    open_steps = _steps.__dict__.setdefault("open", [])
    scope = adaptive.deferred()
    scope.__enter__()
    open_steps.append((optimizer, scope))


def _after_step(optimizer, args, kwargs) -> None:
    open_steps = getattr(_steps, "open", None)
    if not open_steps:
        return
    # This optimizer's step and any step opened inside it that raised (never closed) end here.
    first = next((k for k, (opt, _) in enumerate(open_steps) if opt is optimizer), None)
    if first is None:
        return
    ending = open_steps[first:]
    del open_steps[first:]
    for _opt, scope in reversed(ending):
        scope.__exit__(None, None, None)


def register() -> None:
    register_optimizer_step_pre_hook(_before_step)
    register_optimizer_step_post_hook(_after_step)
