"""Multi-tensor ops - ``torch._foreach_*``, ``torch.optim``'s fused kernels (``fused=True``) and
GradScaler's unscale and scale update - as one compiled launch per call over the whole list.

PyTorch's default for a device without foreach kernels is a loop of per-tensor ops: an AdamW step
with ``foreach=True`` (the default on accelerators) made eight launches per parameter. Here each
call is one op for the compiler (neuronx-cc decomposes it into the per-tensor ops, CPU's numerics)
and one NEFF, with an optimizer's learning rate, betas and bias corrections as runtime inputs
(``compiled.variants.RUNTIME_SCALARS``), so a new value per step never recompiles. A fused
optimizer step (``_fused_adamw_``...) is one launch for the whole parameter group. ``out=`` forms
keep PyTorch's default.
"""

from __future__ import annotations

import torch

from ..compiled import dispatch

PREFIX = "aten::_foreach_"
# Their own kernels' rules (copy_'s cross-device copies, zero_'s fill, mm's matmul path).
_KEPT = {"_foreach_copy_", "_foreach_copy", "_foreach_zero_", "_foreach_zero", "_foreach_mm", "_foreach_powsum"}


FUSED_OPTIMIZERS = ("_fused_adam", "_fused_adamw", "_fused_sgd", "_fused_adagrad")


# GradScaler's kernels: unscale every gradient and check them for infs; update the scale.
AMP_OPS = ("_amp_foreach_non_finite_check_and_unscale", "_amp_update_scale")


def multi_tensor_ops() -> list:
    """The functional and in-place overloads this module registers."""
    ops = [getattr(getattr(torch.ops.aten, name + suffix), overload)
           for name in FUSED_OPTIMIZERS for suffix in ("", "_") for overload in ("default", "tensor_lr")]
    ops += [getattr(torch.ops.aten, name + suffix).default for name in AMP_OPS for suffix in ("", "_")]
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith(PREFIX):
            continue
        base, _, overload = name[len("aten::"):].partition(".")
        if overload.endswith("out") or base in _KEPT:
            continue
        ops.append(getattr(getattr(torch.ops.aten, base), overload or "default"))
    return ops


def fused_optimizers_without_meta() -> list:
    """The in-place fused optimizer overloads PyTorch gives no meta kernel (``_fused_sgd_``,
    ``_fused_adagrad_``, the ``tensor_lr`` forms): the compiled path reads a call's result layout
    from its meta kernel, and an in-place step on meta tensors has nothing to do."""
    ops = [getattr(getattr(torch.ops.aten, name + "_"), overload)
           for name in FUSED_OPTIMIZERS for overload in ("default", "tensor_lr")]
    return [op for op in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta")]


def meta_in_place_step(*args, **kwargs) -> None:
    """Meta kernel of an in-place fused optimizer step: meta tensors hold no values to update."""


def multi_tensor_kernel(op):
    returns_nothing = not op._schema.returns  # the in-place forms: ``-> ()``
    # addcmul / addcdiv with ``Tensor scalars`` (one value per tensor, a CPU tensor as PyTorch's
    # own kernels take it): CPU reads it into a Scalar[] and runs that overload; so does this.
    as_scalar_list = None
    if op._overloadname == "Tensor" and any(a.name == "scalars" for a in op._schema.arguments):
        as_scalar_list = getattr(torch.ops.aten, op._schema.name.split("::")[1]).ScalarList

    def kernel(*args, **kwargs):
        if as_scalar_list is not None:
            *lists, scalars = args if len(args) == 4 else (*args, kwargs.pop("scalars"))
            if scalars.device.type == "cpu":
                return kernel_for_scalar_list(*lists, scalars.tolist(), **kwargs)
            args = (*lists, scalars)
        result = dispatch.neuron_kernel(op, *args, **kwargs)
        return None if returns_nothing else result

    kernel_for_scalar_list = multi_tensor_kernel(as_scalar_list) if as_scalar_list is not None else None
    return kernel
