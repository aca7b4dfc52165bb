"""CPU's kernel over stand-ins of a call's operands: what CPU says of the arguments, without the data.

Meta kernels do not always agree with CPU's kernels: they accept what CPU refuses (softmax over a
dim a 1-d tensor lacks - the device then lowered it for minutes), raise another error first
(``cat`` of 0-d tensors: IndexError, CPU RuntimeError), resize the tensor an in-place op writes
(``floor_divide_`` of a smaller ``self``) or an ``out=`` tensor that is also an input, and give a
resized ``out=`` tensor other strides than TensorIterator (``exp`` of a transposed tensor into an
empty ``out=``). CPU's kernel run over stand-ins - CPU tensors of the operands' shapes, strides and
dtypes - makes CPU's own checks, and resizes the written stand-ins as CPU resizes written tensors.
A tensor the call passes twice gets one stand-in, and tensors sharing a storage (a view and its
base) get views of one CPU storage at their own offsets, so CPU sees the aliasing the call has.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from .host import is_neuron

# Stand-ins of more bytes than this are not made: the call is left to the meta kernel's checks
# (a probe allocates host memory as large as the operands).
PROBE_MAX_BYTES = 256 << 20

# Ops CUDA's kernel computes over integer tensors and CPU's has no integer version of ("histogram_cpu"
# not implemented for 'Int'): CPU checks the rest of the call over float32 stand-ins of those.
CPU_LACKS_INTEGERS = {"aten::histc"}


def stand_ins(args, kwargs, fill: int | None = None, integers_as_float: bool = False):
    """``args, kwargs`` with each neuron tensor replaced by a CPU tensor of its shape, strides and
    dtype (one per tensor object; float32 for an integer one if ``integers_as_float``), holding
    ``fill`` (None: uninitialized), and neuron devices by the CPU."""
    flat, spec = tree_flatten((args, kwargs))
    tensors = {id(x): x for x in flat if is_neuron(x)}
    # One CPU buffer per shared device storage, covering every tensor of it the call passes.
    ends: dict[int, int] = {}
    for t in tensors.values():
        key = _storage_key(t)
        ends[key] = max(ends.get(key, 0), (t.storage_offset() + storage_span(t)) * t.element_size())
    buffers = {key: torch.empty(end, dtype=torch.uint8) for key, end in ends.items()}
    made: dict[int, torch.Tensor] = {}
    for i, t in tensors.items():
        buffer = buffers[_storage_key(t)]
        typed = buffer[: buffer.numel() // t.element_size() * t.element_size()].view(t.dtype)
        made[i] = stand_in = typed.as_strided(t.size(), t.stride(), t.storage_offset())
        if fill is not None and stand_in.numel():
            stand_in.fill_(fill)
        if integers_as_float and not (stand_in.is_floating_point() or stand_in.is_complex()):
            made[i] = stand_in.to(torch.float32)
    out = []
    for x in flat:
        if is_neuron(x):
            x = made[id(x)]
        elif isinstance(x, torch.device) and x.type == "neuron":
            x = torch.device("cpu")
        out.append(x)
    return tree_unflatten(out, spec)


def _storage_key(t: torch.Tensor) -> int:
    """Tensors of one storage share a stand-in buffer; storage-less (empty) ones get their own."""
    address = t.untyped_storage().data_ptr()
    return address if address else -id(t)


def probe(op, args, kwargs, result_bytes: int = 0):
    """Run ``op`` on CPU over stand-ins of the call's neuron tensors holding zeros, or ones if CPU
    refuses zeros (an integer division): CPU's error if it refuses both. Returns the stand-in
    ``(args, kwargs)`` after the call - the written ones resized as CPU resized them - and CPU's
    results (their layouts are CPU's: meta kernels give some results other strides, ``0.5 ** x``
    of a permuted ``x``), or None if the stand-ins and the ``result_bytes`` of CPU's results
    would exceed ``PROBE_MAX_BYTES``."""
    tensors = {id(x): x for x in tree_flatten((args, kwargs))[0] if is_neuron(x)}
    if result_bytes + sum(_storage_bytes(t) for t in tensors.values()) > PROBE_MAX_BYTES:
        return None
    as_float = op._schema.name in CPU_LACKS_INTEGERS
    try:
        cpu_args, cpu_kwargs = stand_ins(args, kwargs, fill=0, integers_as_float=as_float)
        result = op(*cpu_args, **cpu_kwargs)
    except Exception:  # noqa: BLE001 - the values may be what CPU refuses: try other ones
        cpu_args, cpu_kwargs = stand_ins(args, kwargs, fill=1, integers_as_float=as_float)
        result = op(*cpu_args, **cpu_kwargs)  # CPU refuses these arguments whatever their values: its error
    return cpu_args, cpu_kwargs, result


def resize_as(target: torch.Tensor, like: torch.Tensor) -> None:
    """Resize ``target`` to ``like``'s shape and strides, as CPU's kernels resize a written tensor
    (TensorIterator gives a resized ``out=`` tensor the layout of the result)."""
    if target.shape != like.shape:
        target.resize_(like.shape)
    if target.stride() != like.stride() and like.numel() > 1:
        target.as_strided_(like.shape, like.stride())


def storage_span(t: torch.Tensor) -> int:
    """Elements from ``t``'s first element to its last (0 if empty)."""
    return sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 1) + 1 if t.numel() else 0


def _storage_bytes(t: torch.Tensor) -> int:
    return storage_span(t) * t.element_size()
