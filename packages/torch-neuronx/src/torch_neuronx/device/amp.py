"""Autocast for ``torch.autocast(device_type="neuron")`` (bf16 by default on Trainium).

Ops listed here are cast like CUDA autocast casts them: matrix products and convolutions to the
autocast dtype; numerically sensitive reductions and losses to fp32. Everything else runs in the
dtype it gets (a fallthrough on the AutocastPrivateUse1 key).
"""

from __future__ import annotations

import torch

from .kernel_library import KernelLibrary

LOWER_PRECISION_OPS = [
    "aten::mm", "aten::bmm", "aten::matmul", "aten::addmm", "aten::addbmm", "aten::baddbmm", "aten::linear",
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d", "aten::prelu", "aten::_convolution", "aten::chain_matmul", "aten::addmv",
    "aten::addr", "aten::dot", "aten::mv", "aten::scaled_dot_product_attention",
]
FP32_OPS = [
    "aten::softmax", "aten::log_softmax", "aten::cross_entropy_loss", "aten::nll_loss", "aten::layer_norm",
    "aten::group_norm", "aten::rms_norm", "aten::norm", "aten::mse_loss", "aten::binary_cross_entropy_with_logits",
    "aten::cumsum", "aten::cumprod", "aten::exp", "aten::log", "aten::pow", "aten::sum", "aten::prod",
    "aten::erfinv", "aten::acos", "aten::asin", "aten::cosh", "aten::sinh", "aten::tan", "aten::reciprocal",
    "aten::rsqrt", "aten::logsumexp", "aten::kl_div", "aten::smooth_l1_loss", "aten::huber_loss",
]


_AUTOCAST_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _cast(value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.device.type == "neuron" and value.dtype != dtype:
            return value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _kernel(op, fp32: bool):
    def autocast(*args, **kwargs):
        dtype = torch.float32 if fp32 else torch.get_autocast_dtype("neuron")
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_KEYS):
            return op(*_cast(args, dtype), **{k: _cast(v, dtype) for k, v in kwargs.items()})

    return autocast


def register(libraries: list) -> None:
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    lib = KernelLibrary("aten", "IMPL")
    for names, fp32 in ((LOWER_PRECISION_OPS, False), (FP32_OPS, True)):
        for qualified in names:
            name = qualified.split("::")[1]
            packet = getattr(torch.ops.aten, name, None)
            if packet is None:
                continue
            for overload in packet.overloads():
                op = getattr(packet, overload)
                lib.impl(op._schema.name.split("::")[1] + ("." + overload if overload != "default" else ""),
                         _kernel(op, fp32), "AutocastPrivateUse1")
    libraries.extend([fallthrough, lib])
