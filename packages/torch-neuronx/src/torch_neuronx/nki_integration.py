"""NKI kernels called with torch tensors.

On ``neuron`` tensors a kernel runs asynchronously on the current stream: its NEFF is launched on
the simulator runtime with the tensors' device memory bound zero-copy, returned HBM tensors
become new neuron tensors, and parameters the kernel writes are updated in place. Under
FakeTensorMode (torch.compile tracing) only output metadata is produced. CPU tensors run through
``nki.simulate`` and come back as CPU tensors.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from . import _state
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


def device_array(t: torch.Tensor) -> np.ndarray:
    """A numpy array over a contiguous neuron tensor's device memory (zero-copy)."""
    nbytes = t.numel() * t.element_size()
    raw = _state.bridge().numpy_bytes(t.data_ptr(), nbytes) if nbytes else np.empty(0, dtype=np.uint8)
    return raw.view(numpy_dtype(t.dtype)).reshape(tuple(t.shape))


def _placeholder(t: torch.Tensor) -> np.ndarray:
    """Shape and dtype stand-in for tracing (no data is read while tracing)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype=numpy_dtype(t.dtype)), shape=tuple(t.shape),
                                           strides=(0,) * t.dim())


def call_kernel(kernel, args, kwargs):
    tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
    if any(isinstance(t, FakeTensor) for t in tensors):
        return _fake_call(kernel, args, kwargs)
    if not any(is_neuron(t) for t in tensors):
        import nki

        return nki.simulate(kernel)(*args, **kwargs)
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise RuntimeError(f"NKI kernel {kernel.__name__} got tensors on several devices: {sorted(map(str, devices))}")
    device = devices.pop()

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
    compiled = kernel.compile([_placeholder(a) if isinstance(a, torch.Tensor) else a for a in t_args],
                              {k: _placeholder(v) if isinstance(v, torch.Tensor) else v for k, v in t_kwargs.items()})
    buffers = {}
    for i, name in compiled.params.items():
        buffers[name] = device_array(t_args[i])
    for key, name in compiled.kw_params.items():
        buffers[name] = device_array(t_kwargs[key])
    outputs = {}
    decls = compiled.tensors
    for name in _flatten(compiled.returned):
        decl = decls[name]
        out = torch.empty(decl.shape, dtype=torch_dtype(np.dtype(_np_name(decl.dtype))), device=device)
        outputs[name] = out
        buffers[name] = device_array(out)
    queue = _state.current_queue(device.index)
    shapes = ", ".join(f"{list(a.shape)}" for a in t_args if isinstance(a, torch.Tensor))
    for program in compiled.programs:
        queue.launch(program, {n: buffers[n] for n in (t.name for t in program.tensors) if n in buffers},
                     name=kernel.__name__, context=f"NKI kernel {kernel.__name__}({shapes}) on {device}")
    tracking.record(f"nki::{kernel.__name__}", fallback=False)
    for original, dense in write_back:
        original.copy_(dense)
    return _structure(compiled.returned, outputs)


def _np_name(dtype: str) -> np.dtype:
    from neuron_sim import dtypes

    return dtypes.to_numpy(dtype)


def _flatten(returned) -> list[str]:
    if returned is None:
        return []
    if isinstance(returned, str):
        return [returned]
    return [n for r in returned for n in _flatten(r)]


def _structure(returned, outputs):
    if returned is None:
        return None
    if isinstance(returned, str):
        return outputs[returned]
    return type(returned)(_structure(r, outputs) for r in returned)


def _fake_call(kernel, args, kwargs):
    """Under FakeTensorMode: trace for the outputs' metadata; write nothing."""
    compiled = kernel.compile([_placeholder(a) if isinstance(a, torch.Tensor) else a for a in args],
                              {k: _placeholder(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()})
    device = next(a.device for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor))
    decls = compiled.tensors
    outputs = {name: torch.empty(decls[name].shape, dtype=torch_dtype(_np_name(decls[name].dtype)), device=device)
               for name in _flatten(compiled.returned)}
    return _structure(compiled.returned, outputs)
