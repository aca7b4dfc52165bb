"""The device's random ops: ``neuron_rng::*`` operators whose bodies (Philox words -> a distribution)
are compiled onto the NeuronCore like any ATen op.

The words come from ``neuron_rng::random_words(key, count)``: on the device the hardware generator
(the compiler imports the call as neuron-sim's graph op ``random_words``, one RandomWords per tile),
on the host ``philox.words`` - the same bits, so a fallback draws what the device would.

Each distribution is a functional op (``neuron_rng::normal(self, key, mean, std)``: numbers of
``self``'s shape and dtype) and its in-place form (``normal_``), which the eager dispatcher compiles
as the functional op written into ``self``. ``key`` is the draw's int32 [seed lo, seed hi, offset lo,
offset hi] on the device (``philox.key_words``), so one NEFF per shape serves every seed and offset.
The bodies are CompositeImplicitAutograd: traced into the device program, and run as they are by
CPU kernels wherever a call falls back (float64, a compile failure), which then give the same
numbers the device would.
"""

from __future__ import annotations

import math

import torch
from neuronxcc.frontend import register_graph_op

from ...compiled import dispatch
from ...device.kernel_library import KernelLibrary
from . import philox

NAMESPACE = "neuron_rng"


def _words(key, n):
    return getattr(torch.ops, NAMESPACE).random_words(key, n)


def _uniform(key, n, low, high):
    return philox.unit_open_right(_words(key, n)) * (high - low) + low


def _normal(key, n, mean, std):
    return philox.standard_normal(_words(key, philox.normal_words(n)), n) * std + mean


def _bernoulli(key, n, p):
    return philox.unit_below(_words(key, n), p).to(torch.float32)


def _random(key, n, low, bound):
    """Integers in [low, low + bound) (as float32 would round them: callers cast from int32)."""
    return philox.below(_words(key, n), bound) + low


def _exponential(key, n, lambd):
    return -torch.log(philox.unit_open_left(_words(key, n))) / lambd


def _geometric(key, n, p):
    # The number of trials to the first success: ceil(log(u) / log(1 - p)), at least 1.
    u = philox.unit_open_left(_words(key, n))
    return torch.clamp(torch.ceil(torch.log(u) / math.log1p(-p)), min=1.0)


def _log_normal(key, n, mean, std):
    return torch.exp(_normal(key, n, mean, std))


def _cauchy(key, n, median, sigma):
    angle = (philox.unit_open_right(_words(key, n)) - 0.5) * math.pi
    return torch.sin(angle) / torch.cos(angle) * sigma + median


# name -> (schema of the parameters after ``key``, body(key, numel, *parameters) -> flat values)
DISTRIBUTIONS = {
    "uniform": ("float low, float high", _uniform),
    "normal": ("float mean, float std", _normal),
    "bernoulli.float": ("float p", _bernoulli),
    "random": ("int low, int bound", _random),
    "exponential": ("float lambd", _exponential),
    "geometric": ("float p", _geometric),
    "log_normal": ("float mean, float std", _log_normal),
    "cauchy": ("float median, float sigma", _cauchy),
}


def _functional(body):
    def functional(self, key, *params):
        return body(key, self.numel(), *params).reshape(self.shape).to(self.dtype)

    return functional


def _bernoulli_tensor(self, key, p):
    u = philox.unit_open_right(_words(key, self.numel())).reshape(self.shape)
    return (u < p.to(torch.float32)).to(self.dtype)


def _dropout(input, key, p):
    """CPU's native_dropout: keep with probability 1 - p, scale the kept by 1 / (1 - p). The words
    take the input's shape before the compare, so the mask is computed in the input's tiles, where
    the generator makes them (a mask over the flat words was a separate group, stored to HBM and
    loaded again for the multiply: 1.4x the device time)."""
    keep = philox.unit_below(_words(key, input.numel()).reshape(input.shape), 1.0 - p)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return input * keep.to(input.dtype) * scale, keep


def _random_words_shape(key, count):
    return key.new_empty((count,), dtype=torch.int32)


def _in_place(functional):
    def in_place(self, *args):
        return self.copy_(functional(self, *args))

    return in_place


def _device_kernel(op_name: str):
    def kernel(*args, **kwargs):
        base, _, overload = op_name.partition(".")
        op = getattr(getattr(getattr(torch.ops, NAMESPACE), base), overload or "default")
        return dispatch.neuron_kernel(op, *args, **kwargs)

    return kernel


_LIBRARIES: list = []


def define() -> None:
    """Define the ``neuron_rng`` operators (once per process)."""
    if _LIBRARIES:
        return
    lib = torch.library.Library(NAMESPACE, "DEF")
    impl = KernelLibrary(NAMESPACE, "IMPL")
    ops = {name: (params, _functional(body)) for name, (params, body) in DISTRIBUTIONS.items()}
    ops["bernoulli.Tensor"] = ("Tensor p", _bernoulli_tensor)
    for name, (params, functional) in ops.items():
        base, _, overload = name.partition(".")
        suffix = f".{overload}" if overload else ""
        lib.define(f"{base}{suffix}(Tensor self, Tensor key, {params}) -> Tensor")
        lib.define(f"{base}_{suffix}(Tensor(a!) self, Tensor key, {params}) -> Tensor(a!)")
        for op_name, fn in ((name, functional), (f"{base}_{suffix}", _in_place(functional))):
            impl.impl(op_name, fn, "CompositeImplicitAutograd")
            impl.impl(op_name, _device_kernel(op_name), "PrivateUse1")
    lib.define("random_words(Tensor key, int count) -> Tensor")
    impl.impl("random_words", philox.words, "CPU")
    impl.impl("random_words", _device_kernel("random_words"), "PrivateUse1")
    torch.library.register_fake(f"{NAMESPACE}::random_words", lib=lib)(_random_words_shape)
    register_graph_op(torch.ops.neuron_rng.random_words.default, "random_words", lambda key, count: {"count": int(count)})
    lib.define("dropout(Tensor input, Tensor key, float p) -> (Tensor, Tensor)")
    impl.impl("dropout", _dropout, "CompositeImplicitAutograd")
    impl.impl("dropout", _device_kernel("dropout"), "PrivateUse1")
    _LIBRARIES.extend([lib, impl])

