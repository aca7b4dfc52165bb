"""NKI kernels called with torch tensors: torch-neuronx registers torch tensors as an NKI array
type when it is imported (nki itself imports no framework).

On ``neuron`` tensors a kernel runs asynchronously on the current stream: its NEFF is launched on
the simulator runtime with the tensors' device memory bound zero-copy, returned HBM tensors
become new neuron tensors, and parameters the kernel writes are updated in place. Under
FakeTensorMode (torch.compile tracing) only output metadata is produced. CPU tensors run through
``nki.simulate`` on numpy views of their memory (so written inputs update the tensors) and come
back as CPU tensors.
"""

from __future__ import annotations

import ml_dtypes
import nki
import numpy as np
import torch
from neuron_sim import dtypes
from torch._subclasses.fake_tensor import FakeTensor

from . import nki_fast_form
from .execution import launch_neff, runtime
from .ops import tracking
from .ops.host import is_neuron

_NUMPY = {
    torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16), torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
    torch.float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn), torch.float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
    torch.int8: np.dtype(np.int8), torch.uint8: np.dtype(np.uint8), torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32), torch.int64: np.dtype(np.int64), torch.bool: np.dtype(np.bool_),
    torch.uint16: np.dtype(np.uint16), torch.uint32: np.dtype(np.uint32),
}
_TORCH = {v: k for k, v in _NUMPY.items()}


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    if dtype not in _NUMPY:
        raise TypeError(f"{dtype} has no NeuronCore dtype for NKI kernels")
    return _NUMPY[dtype]


def torch_dtype(dtype) -> torch.dtype:
    return _TORCH[np.dtype(dtype)]


def _buffer(t: torch.Tensor) -> tuple:
    """A contiguous neuron tensor's device memory, as the execution API binds it."""
    return t, t.numel() * t.element_size()


def describe(t: torch.Tensor) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a tensor argument, for tracing (no data is read)."""
    return tuple(t.shape), numpy_dtype(t.dtype)


def host_array(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor's memory (bfloat16 and float8 through a same-size int view)."""
    t = t.detach()
    dtype = numpy_dtype(t.dtype)
    if dtype.type.__module__ == "ml_dtypes":  # numpy has no such dtype: view the bits
        bits = {1: torch.uint8, 2: torch.int16}[dtype.itemsize]
        return t.view(bits).numpy().view(dtype)
    return t.numpy()


def call_kernel(kernel, args, kwargs, executor: str | None = None):
    """Run ``kernel`` on torch tensors. ``executor`` (neuron tensors): None runs its fast form
    (``nki_fast_form``) under the device's mode when it has one, else its instructions; "exact"
    runs its instructions, "fast" its fast form."""
    tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
    if any(isinstance(t, FakeTensor) for t in tensors):
        return _fake_call(kernel, args, kwargs)
    if not any(is_neuron(t) for t in tensors):
        return _host_call(kernel, args, kwargs)
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise RuntimeError(f"NKI kernel {kernel.__name__} got tensors on several devices: {sorted(map(str, devices))}")
    device = devices.pop()
    if torch._C._autograd._profiler_enabled():
        # torch.profiler sees no ATen op for a kernel call: this scope is the op its launch (and
        # device time, with ProfilerActivity.PrivateUse1) is attributed to, as ATen ops' launches are.
        # A function scope, not record_function's user scope: Kineto forwards only non-user scopes'
        # correlation ids to the device profiler (user scopes get their own, annotation-only ids).
        with torch._C._profiler._RecordFunctionFast(f"nki::{kernel.__name__}"):
            return _device_call(kernel, args, kwargs, executor, device)
    return _device_call(kernel, args, kwargs, executor, device)


def _device_call(kernel, args, kwargs, executor: str | None, device: torch.device):
    """Launch ``kernel`` on ``device`` with neuron tensors (see ``call_kernel``)."""
    # Contiguous operands: the kernel addresses HBM row-major. Written parameters that had to be
    # copied are copied back after the kernel.
    write_back = []

    def operand(value):
        if not isinstance(value, torch.Tensor):
            return value
        if value.is_contiguous():
            return value
        dense = value.contiguous()
        write_back.append((value, dense))
        return dense

    t_args = [operand(a) for a in args]
    t_kwargs = {k: operand(v) for k, v in kwargs.items()}
    compiled = kernel.compile(t_args, t_kwargs, arch=runtime().device(device.index).arch)  # the device's generation
    buffers = {}
    for i, name in compiled.params.items():
        buffers[name] = _buffer(t_args[i])
    for key, name in compiled.kw_params.items():
        buffers[name] = _buffer(t_kwargs[key])
    outputs = _returned_arguments(compiled, args, kwargs)
    decls = compiled.tensors
    for name in compiled.returned_names:
        if name in outputs:
            continue
        decl = decls[name]
        out = torch.empty(decl.shape, dtype=torch_dtype(dtypes.to_numpy(decl.dtype)), device=device)
        outputs[name] = out
        buffers[name] = _buffer(out)
    shapes = ", ".join(f"{list(a.shape)}" for a in t_args if isinstance(a, torch.Tensor))
    programs = compiled.programs  # an LNC=2 kernel: one launch of both cores' programs, timed as both at once
    fast = executor != "exact" and nki_fast_form.attach(kernel, compiled, t_args, t_kwargs, torch_dtype)
    if executor == "fast" and not fast:
        raise ValueError(f"NKI kernel {kernel.__name__} has no fast form to run (torch_neuronx.fast_form)")
    submission = launch_neff(programs if len(programs) > 1 else programs[0], buffers, device=device, name=kernel.__name__,
                             context=f"NKI kernel {kernel.__name__}({shapes}) on {device}", framework="nki",
                             executor=executor if fast else "exact")
    kernel.record(last_timing=list(submission.timings), last_device_time_ns=submission.device_time_ns)
    tracking.record(f"nki::{kernel.__name__}", fallback=False)
    for original, dense in write_back:
        original.copy_(dense)
    return compiled.structure(outputs)


def _host_call(kernel, args, kwargs):
    """CPU tensors: run on numpy views of their memory; returned arrays become CPU tensors."""
    def host(v):
        return host_array(v) if isinstance(v, torch.Tensor) else v

    result = nki.simulate(kernel)(*map(host, args), **{k: host(v) for k, v in kwargs.items()})
    return _to_torch(result)


def _to_torch(value):
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        dtype = torch_dtype(value.dtype)
        if value.dtype.type.__module__ == "ml_dtypes":
            bits = {1: np.uint8, 2: np.int16}[value.dtype.itemsize]
            return torch.from_numpy(value.view(bits)).view(dtype)
        return torch.from_numpy(value)
    return type(value)(_to_torch(v) for v in value)


def _fake_call(kernel, args, kwargs):
    """Under FakeTensorMode: trace for the outputs' metadata; write nothing."""
    compiled = kernel.compile(args, kwargs)
    device = next(a.device for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor))
    decls = compiled.tensors
    outputs = _returned_arguments(compiled, args, kwargs)
    outputs.update({name: torch.empty(decls[name].shape, dtype=torch_dtype(dtypes.to_numpy(decls[name].dtype)), device=device)
                    for name in compiled.returned_names if name not in outputs})
    return compiled.structure(outputs)


def _returned_arguments(compiled, args, kwargs) -> dict:
    """Returned tensors that are the kernel's own arguments (``return out_ptr``), by name: the
    caller's tensor itself comes back, holding what the kernel wrote into it."""
    given = {name: args[i] for i, name in compiled.params.items()}
    given.update({name: kwargs[key] for key, name in compiled.kw_params.items()})
    return {name: given[name] for name in compiled.returned_names if name in given}


nki.register_array_type(nki.ArrayType("torch", lambda x: isinstance(x, torch.Tensor), describe, call_kernel))
