"""The kernel behind every ATen op on ``neuron`` tensors: compiled on the NeuronCore, or CPU fallback.

Per call: compute the signature (op, tensor shapes/strides/dtypes, other arguments), look the
compiled op up (memory, then disk, then trace + compile), and launch it on the current stream.
Calls that cannot run on the device (no lowering, a dtype the hardware lacks, CPU operands,
random numbers, data-dependent results, views) go to the CPU fallback, which records them.
This runs for every op, so the hit path does as little as it can: per-op facts are computed once.

Options (docs/environment.md):

* ``TORCH_NEURONX_EAGER_BACKEND`` = ``compiled`` (default) or ``fallback`` (every op through CPU
  kernels; useful to bisect a numerics difference).
* ``TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1``: an op the compiler accepts but then
  fails to compile raises instead of falling back (ops without any lowering still fall back).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict

import torch
from neuron_sim.memory.validity import INVALID
from neuronxcc.compiler import CompileError, compile_neff
from torch.utils._pytree import tree_flatten

from ..device import env as _env
from ..device import hooks
from ..device import state as _state
from ..execution import mark_overwritten, user_stacklevel
from ..ops import fallback, index_errors, overlap, tracking
from ..ops.schema import OVERWRITES_SELF, argument, mutated_arguments, with_argument
from . import adaptive
from .build import CpuRefuses, build
from .cache import CACHE
from .dtypes import NotLowerable
from .empty import EmptyOperand, run_without_kernel
from .launch import OverlappingTarget, launch_op
from .signature import call_signature
from .variants import RUNTIME_SCALARS, functional_variant, scalar_overload

BACKEND_ENV = "TORCH_NEURONX_EAGER_BACKEND"
STRICT_ENV = "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"
_BACKENDS = ("compiled", "fallback")


class CompileFailedWarning(UserWarning):
    """The compiler accepted an op but failed on it; the op ran through CPU fallback."""


class OpFacts:
    """What the hit path needs to know about an op, computed on its first call."""

    __slots__ = ("refused", "name", "written", "out_names", "tensor_args", "runtime_scalar")

    def __init__(self, op):
        self.name = op._schema.name
        self.refused = _refused(op)
        positional = [a.name for a in op._schema.arguments if not a.kwarg_only]
        # Where each written argument is: (position if positional, name).
        self.written = [(positional.index(n) if n in positional else None, n) for n in mutated_arguments(op)]
        # Tensor arguments by position, to spot Python numbers handed over for them.
        self.tensor_args = [(i, a.name) for i, a in enumerate(op._schema.arguments) if str(a.type) == "Tensor"]
        # out= overloads: the written arguments are results only (in-place ones are read too).
        self.out_names = frozenset() if self.name.endswith("_") else frozenset(n for _, n in self.written)
        # The float Scalar argument passed as a 0-d device input rather than compiled in.
        functional = functional_variant(op) if self.written else op
        self.runtime_scalar = RUNTIME_SCALARS[functional][0] if functional in RUNTIME_SCALARS else None

    def written_tensors(self, args, kwargs) -> list[torch.Tensor]:
        out = []
        for pos, name in self.written:
            value = args[pos] if pos is not None and pos < len(args) else kwargs[name]
            if isinstance(value, (list, tuple)):
                out.extend(value)
            else:
                out.append(value)
        return out


_FACTS: dict = {}


# Ops that write an argument their schema does not mark as written (the running statistics of
# a training batch norm): a functional graph would silently drop the update.
_HIDDEN_MUTATION = {"aten::native_batch_norm", "aten::_batch_norm_impl_index", "aten::_fused_moving_avg_obs_fq_helper"}


def _refused(op) -> bool:
    """Ops that never compile: views (metadata only), random draws, host results, dynamic shapes,
    hidden mutation."""
    if op._schema.name in fallback.SYNC_OPS or op._schema.name in _HIDDEN_MUTATION:
        return True
    if any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns):
        return True
    tags = op.tags
    dynamic = torch.Tag.dynamic_output_shape in tags and op._schema.name not in _SHAPE_FROM_MASKS
    return (torch.Tag.nondeterministic_seeded in tags or dynamic
            or torch.Tag.data_dependent_output in tags or fallback.has_generator_argument(op))


# Ops whose result shape depends on the data only through a bool (or uint8) mask index: with
# integer indices (``x[ids]``, ``hidden[perm // k]`` in MoE routing) the shape is the indices'.
_SHAPE_FROM_MASKS = {"aten::index"}


def _mask_indexed(facts, args, kwargs) -> bool:
    """Whether an op of ``_SHAPE_FROM_MASKS`` is called with a mask index (its shape is the data's)."""
    if facts.name not in _SHAPE_FROM_MASKS:
        return False
    indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
    return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices)


def backend() -> str:
    value = _env.get(BACKEND_ENV, "compiled").strip().lower() or "compiled"
    if value not in _BACKENDS:
        raise ValueError(f"{BACKEND_ENV}={os.environ[BACKEND_ENV]!r}: expected one of {list(_BACKENDS)}")
    return value


def neuron_kernel(op, *args, **kwargs):
    """Boxed kernel for any op: the compiled path when it applies, else the CPU fallback."""
    facts = _FACTS.get(op)
    if facts is None:
        facts = _FACTS[op] = OpFacts(op)
    if facts.refused or op in fallback.NOT_META or backend() == "fallback" or _mask_indexed(facts, args, kwargs):
        return fallback.cpu_fallback(op, *args, **kwargs)
    numbers = tuple(name for i, name in facts.tensor_args
                    if isinstance(args[i] if i < len(args) else kwargs.get(name), (bool, int, float)))
    if numbers:
        # Not into an empty out= tensor: the Scalar forms of out= overloads (add.Scalar_out) are
        # composites that resize it contiguous, where CPU's add.out gives it TensorIterator's layout.
        resizes = facts.out_names and any(t.numel() == 0 for t in facts.written_tensors(args, kwargs))
        scalar_op = None if resizes else scalar_overload(op, numbers)
        if scalar_op is not None:
            return neuron_kernel(scalar_op, *args, **kwargs)
        # No Scalar overload (mul.out): a host 0-dim tensor promotes as the number does.
        args, kwargs = _numbers_as_host_scalars(facts, args, kwargs)
    # The device call may take a float Scalar as a 0-d device tensor; every fallback below gets
    # the caller's own arguments (CPU's kernel wants the number).
    run_args, run_kwargs = args, kwargs
    if facts.runtime_scalar is not None:
        run_args, run_kwargs = _runtime_scalar(op, facts.runtime_scalar, args, kwargs)
    try:
        key, tensors = call_signature(run_args, run_kwargs, facts.out_names)
    except EmptyOperand:
        return _without_kernel(op, facts, args, kwargs)
    except NotLowerable as reason:
        tracking.note_fallback_reason(facts.name, str(reason))
        return fallback.cpu_fallback(op, *args, **kwargs)
    if tensors:
        device = fallback.device_of(tensors)
    else:  # a factory: its device is an argument, or that of its out= tensor
        outs = facts.written_tensors(args, kwargs) if facts.written else []
        device = outs[0].device if outs else _factory_device(kwargs)
        if device is None or device.type != "neuron":
            return fallback.cpu_fallback(op, *args, **kwargs)
    arch = _state.bridge().runtime.config.arch
    full_key = (op, arch.name, key)
    entry = CACHE.lookup(full_key)
    if entry is None:
        entry = CACHE.get_or_build(full_key, lambda: _build(op, run_args, run_kwargs, tensors, arch))
        if not isinstance(entry, NotLowerable):
            entry.context = _describe(op, tensors)
            entry.errors = index_errors.for_call(op, run_args, run_kwargs)
    if isinstance(entry, EmptyOperand):
        return _without_kernel(op, facts, args, kwargs)
    if isinstance(entry, CpuRefuses):  # CPU's kernel, now: its error at the call
        tracking.note_fallback_reason(facts.name, str(entry))
        return fallback.cpu_fallback_at_once(op, *args, **kwargs)
    if isinstance(entry, NotLowerable):
        tracking.note_fallback_reason(facts.name, str(entry))
        return fallback.cpu_fallback(op, *args, **kwargs)
    targets = facts.written_tensors(args, kwargs) if facts.written else None
    if targets is not None and overlap.cpu_decides(facts.name, not facts.out_names, targets, tensors,
                                                   [spec.shape for spec in entry.outputs]):
        return fallback.cpu_fallback(op, *args, **kwargs)  # runs CPU's kernel at once: its checks, its aliasing
    if targets is not None and _resize_outs(entry, targets):
        return neuron_kernel(op, *args, **kwargs)  # the resized out= tensors make a new signature
    if INVALID.count and facts.name in OVERWRITES_SELF:  # only after a failed launch
        mark_overwritten(targets[0], name=facts.name, framework="eager")
    tracking.record(facts.name, fallback=False)
    if adaptive.enabled():
        result = adaptive.defer(entry, op, tensors, device, targets)
        if result is not None:
            return result
    try:
        return launch_op(entry, op, tensors, targets, device)
    except OverlappingTarget:
        return fallback.cpu_fallback(op, *args, **kwargs)


def _runtime_scalar(op, name: str, args, kwargs):
    """The float Scalar ``name`` of a call over float32 neuron tensors as a 0-d device tensor (a
    Scalar[] of floats: a 1-d one)."""
    value = argument(op, args, kwargs, name)
    floats = isinstance(value, (list, tuple)) and value and all(type(v) is float for v in value)
    if type(value) is not float and not floats:
        return args, kwargs
    tensors = [x for x in _leaves(args, kwargs) if isinstance(x, torch.Tensor)]
    if not tensors or any(t.dtype != torch.float32 or t.device.type != "neuron" for t in tensors):
        return args, kwargs
    if floats:
        scalar = torch.tensor(value, dtype=torch.float32).to(tensors[0].device)
    else:
        scalar = _device_scalar(value, tensors[0].device)
    return with_argument(op, args, kwargs, name, scalar)


def _leaves(args, kwargs):
    """The values of a call's arguments, with those of list arguments (an ATen call nests no deeper)."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, (list, tuple)):
            yield from value
        else:
            yield value


_SCALARS: OrderedDict = OrderedDict()  # (device, stream, float.hex()) -> 0-d device tensor
_SCALARS_KEPT = 256
_SCALARS_LOCK = threading.Lock()


def _device_scalar(value: float, device: torch.device) -> torch.Tensor:
    """A 0-d float32 tensor holding ``value`` on ``device``, uploaded once per value and stream
    until the next synchronization (an optimizer step uploads its step size once for all its
    parameters, not once per parameter). Kept per stream, so every reader is ordered after the
    upload; dropped at ``torch.neuron.synchronize()``, a stream's synchronize and
    ``torch_neuronx.empty_cache()``, so a synchronized program's ``memory_allocated()`` holds
    only its own tensors."""
    # Keyed by the float's exact text (0.0 and -0.0 differ; every NaN is "nan"): two floats that
    # round to one fp32 value get an upload each, which is only a little waste.
    key = (device.index, _state.shim().current_stream_id(device.index), value.hex())
    with _SCALARS_LOCK:
        found = _SCALARS.get(key)
        if found is not None:
            _SCALARS.move_to_end(key)
            return found
    uploaded = torch.tensor(value, dtype=torch.float32).to(device)
    with _SCALARS_LOCK:
        _SCALARS[key] = uploaded
        if len(_SCALARS) > _SCALARS_KEPT:
            _SCALARS.popitem(last=False)
    return uploaded


def forget_device_scalars() -> None:
    """Drop the kept scalar inputs: their memory goes back to the allocator, reused only by work
    queued after the launches that read them."""
    with _SCALARS_LOCK:
        _SCALARS.clear()


hooks.on_release_memory(forget_device_scalars)


def _without_kernel(op, facts, args, kwargs):
    """A call over empty tensors: its empty results, or the fallback if it computes values."""
    flat = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor) and x.device.type == "neuron"]
    device = flat[0].device if flat else _factory_device(kwargs)
    targets = facts.written_tensors(args, kwargs) if facts.written else None
    try:
        result = run_without_kernel(op, args, kwargs, targets, device)
    except NotLowerable as reason:
        tracking.note_fallback_reason(facts.name, str(reason))
        return fallback.cpu_fallback(op, *args, **kwargs)
    tracking.record(facts.name, fallback=False)
    return result


def _numbers_as_host_scalars(facts, args, kwargs):
    """Python numbers given for Tensor arguments as wrapped numbers: 0-d CPU tensors that promote
    as the number does (``3 - x`` of an int16 ``x`` is int16; a plain 0-d int64 tensor made it
    int64)."""
    def host(value):
        if isinstance(value, (bool, int, float)):
            wrapped = _state.shim().wrapped_number(value)
            wrapped._tnx_wrapped_number = True
            return wrapped
        return value

    args = list(args)
    for i, name in facts.tensor_args:
        if i < len(args):
            args[i] = host(args[i])
        elif name in kwargs:
            kwargs = {**kwargs, name: host(kwargs[name])}
    return tuple(args), kwargs


def _build(op, args, kwargs, tensors, arch):
    try:
        return build(op, args, kwargs, tensors, arch, compile_neff)
    except CompileError as err:
        if err.rule == "compile.unsupported_op":
            raise NotLowerable(str(err)) from None
        if os.environ.get(STRICT_ENV, "0") not in ("", "0"):
            raise RuntimeError(f"{_describe(op, tensors)} failed to compile for the NeuronCore ({STRICT_ENV}=1): {err}") from err
        warnings.warn(f"{_describe(op, tensors)}: compile failed, running through CPU fallback: {err}",
                      CompileFailedWarning, stacklevel=user_stacklevel())
        raise NotLowerable(str(err)) from None


def _resize_outs(entry, targets) -> bool:
    """Resize out= tensors whose shape is not the result's, with the result's strides, as CPU
    kernels do."""
    resized = False
    for target, spec in zip(entry.output_targets(targets), entry.outputs):
        if tuple(target.shape) != spec.shape:
            target.resize_(spec.shape)
            if target.stride() != spec.strides:
                target.as_strided_(spec.shape, spec.strides)
            resized = True
    return resized


def _factory_device(kwargs) -> torch.device | None:
    device = kwargs.get("device")
    if isinstance(device, torch.device) and device.type == "neuron":
        index = device.index if device.index is not None else _state.shim().current_device()
        return torch.device("neuron", index)
    return None


def _describe(op, tensors) -> str:
    shapes = ", ".join(f"{list(t.shape)}:{str(t.dtype).removeprefix('torch.')}" for t in tensors)
    return f"{op._schema.name}({shapes})"


def register_functional_kernels(lib: torch.library.Library, skip: set[str]) -> None:
    """Route the functional overloads of structured ops (``add.Tensor``) here directly. By default
    PrivateUse1 runs them as ``empty`` + their ``out=`` overload: two dispatches, an extra
    allocation and an out= launch for every ``x + y``."""
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in torch._C._dispatch_get_all_op_names():
        if (not name.startswith("aten::") or not has_kernel(name, "CompositeExplicitAutogradNonFunctional")
                or has_kernel(name, "PrivateUse1")):
            continue
        base, _, overload = name[len("aten::"):].partition(".")
        if name[len("aten::"):] in skip or (not overload and base in skip):
            continue  # registered whole (kernels.whole_ops)
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
        if mutated_arguments(op) or any(r.alias_info is not None for r in op._schema.returns):
            continue
        lib.impl(op, _kernel_for(op), "PrivateUse1")


def _kernel_for(op):
    def kernel(*args, **kwargs):
        return neuron_kernel(op, *args, **kwargs)

    return kernel
