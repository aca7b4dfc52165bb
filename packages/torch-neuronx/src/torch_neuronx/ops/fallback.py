"""CPU fallback: run an ATen op with CPU kernels over zero-copy views of device memory.

Asynchronous like any device op: output shapes come from the op's meta kernel at submission, the
outputs are allocated on the device, and the computation is queued on the current stream of the
operands' device. Errors raised by the kernel are kept and re-raised at the next synchronization
point, with the op and its argument shapes. Ops whose results cannot be known without the data
(``nonzero``, ``item``, ``unique``...) synchronize the stream and run at once; view ops only
compute metadata and run at once.

Random ops that get here (those with no device form: ``multinomial``, ``poisson``...) draw with a
CPU generator seeded for one draw of the device's generator (``generators.HostRng``), so seeding
with ``torch.manual_seed`` makes them reproducible too.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..device import state as _state
from ..execution import check_readable, device_span, host_storage_bytes, host_view, queue, submit_host, written_span
from . import costs, overlap, stand_ins, tracking
from .generators import HostRng, generator_for
from .host import is_neuron
from .schema import OVERWRITES_SELF, arguments_by_name, mutated_arguments

NOT_META: set = set()  # ops with no meta kernel, or whose meta kernel returns non-tensors: run synchronously
# Ops that return host values or data-dependent shapes, known up front.
SYNC_OPS = {
    "aten::_local_scalar_dense", "aten::nonzero", "aten::nonzero_static", "aten::masked_select", "aten::unique",
    "aten::_unique", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive", "aten::equal", "aten::is_nonzero",
    "aten::item", "aten::repeat_interleave", "aten::bincount", "aten::allclose", "aten::is_set_to",
    # The CPU kernel's auxiliary outputs (offset2bag, bag_size...) are not the shapes the meta
    # kernel predicts, so they cannot be preallocated: run at once and take the kernel's shapes.
    "aten::_embedding_bag", "aten::_embedding_bag_forward_only",
}
_CPU = torch.device("cpu")


# Ops that take CPU index tensors with device operands, as CUDA's do (x_neuron[cpu_index]).
_CPU_INDICES_OK = {"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}


def device_of(flat, cpu_tensors_ok: bool = False) -> torch.device | None:
    device = None
    for x in flat:
        if is_neuron(x):
            if device is None:
                device = x.device
            elif x.device != device:
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found at least two devices, {device} and {x.device}!"
                )
    for x in flat:
        if isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.dim() > 0 and device is not None and not cpu_tensors_ok:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {device} and cpu!"
            )
        if device is None and isinstance(x, torch.device) and x.type == "neuron":
            device = torch.device("neuron", x.index if x.index is not None else _state.shim().current_device())
    return device


def _op_name(op) -> str:
    return op._schema.name


def has_generator_argument(op) -> bool:
    return any("Generator" in str(a.type) for a in op._schema.arguments)


def _uses_generator(op) -> bool:
    # Random ops without a Generator argument (native_dropout, the CPU flash-attention kernel...)
    # are tagged nondeterministic_seeded; their CPU kernels draw from the CPU default generator.
    return has_generator_argument(op) or torch.Tag.nondeterministic_seeded in op.tags


def _draws_random(op, args, kwargs) -> bool:
    """Whether this call consumes random numbers. Attention kernels are tagged random for their
    dropout: with dropout_p == 0 (inference, or no attention dropout) they draw nothing and
    need not run synchronously; neither does dropout with train=False."""
    if has_generator_argument(op):
        return True
    if torch.Tag.nondeterministic_seeded not in op.tags:
        return False
    by_name = arguments_by_name(op, args, kwargs)
    return by_name.get("dropout_p", 1.0) != 0 and by_name.get("train", True) is not False


def _to_cpu_value(x):
    """Operands as CPU kernels take them (generators are swapped in by _execute)."""
    if is_neuron(x):
        return host_view(x)
    if isinstance(x, torch.device) and x.type == "neuron":
        return _CPU
    return x


def _cpu_values(flat) -> list:
    """``flat`` with neuron operands as host views; a tensor passed twice is one view, so CPU's
    kernel sees the aliasing the call has (``maximum(a, b, out=b)`` writes an input: no resize)."""
    views = {}
    out = []
    for x in flat:
        if is_neuron(x):
            view = views.get(id(x))
            if view is None:
                view = views[id(x)] = host_view(x)
            out.append(view)
        else:
            out.append(_to_cpu_value(x))
    return out


def _to_meta_value(x):
    if getattr(x, "_tnx_wrapped_number", False):
        return x  # meta kernels take CPU scalars as they are
    if isinstance(x, torch.Tensor) and x.device.type in ("neuron", "cpu"):
        return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="meta").requires_grad_(False)
    if isinstance(x, torch.device) and x.type == "neuron":
        return torch.device("meta")
    if isinstance(x, torch.Generator):
        return None
    return x


def _describe(op, flat) -> str:
    shapes = [f"{list(x.shape)}:{str(x.dtype).replace('torch.', '')}" for x in flat if isinstance(x, torch.Tensor)]
    return f"{_op_name(op)}({', '.join(shapes)})"


def _nbytes(flat) -> int:
    return sum(x.numel() * x.element_size() for x in flat if isinstance(x, torch.Tensor))


def _rng_for(op, flat, device):
    if not _uses_generator(op):
        return None
    return HostRng(generator_for(flat, device), swap_default=not has_generator_argument(op))


def _rewrap_numbers(op, args, kwargs):
    """Python numbers given for Tensor arguments back into wrapped-number tensors.

    A Scalar overload that calls its Tensor overload (``remainder(x, 2)``) passes the number as a
    "wrapped number" tensor, which reaches this Python fallback as a plain int/float; calling the
    Tensor overload with it failed ("Expected a value of type 'Tensor' for argument 'other'").
    A wrapped number (not a 0-dim tensor) keeps the scalar's type-promotion rules."""
    def fix(arg, value):
        if isinstance(value, (bool, int, float, complex)) and str(arg.type) in ("Tensor", "Optional[Tensor]"):
            wrapped = _state.shim().wrapped_number(value)
            wrapped._tnx_wrapped_number = True
            return wrapped
        return value

    positional = [a for a in op._schema.arguments if not a.kwarg_only]
    by_name = {a.name: a for a in op._schema.arguments}
    args = tuple(fix(a, v) for a, v in zip(positional, args)) + tuple(args[len(positional):])
    kwargs = {k: fix(by_name[k], v) if k in by_name else v for k, v in kwargs.items()}
    return args, kwargs


def cpu_fallback(op, *args, **kwargs):
    """The boxed fallback kernel for every ATen op without a neuron kernel."""
    return _fallback(op, args, kwargs, at_once=False)


def cpu_fallback_at_once(op, *args, **kwargs):
    """The fallback, run on CPU at the call (after the work queued before it): for calls whose
    arguments CPU's kernel refuses, so its error is raised at the call, as CPU raises it."""
    return _fallback(op, args, kwargs, at_once=True)


def _fallback(op, args, kwargs, at_once: bool):
    args, kwargs = _rewrap_numbers(op, args, kwargs)
    flat, spec = tree_flatten((args, kwargs))
    name = _op_name(op)
    device = device_of(flat, cpu_tensors_ok=name in _CPU_INDICES_OK)
    if device is None:  # no neuron operand at all: nothing to do on the device
        return op(*args, **kwargs)
    tracking.record(name, fallback=True)
    returns = op._schema.returns
    if any(r.alias_info is not None and not r.alias_info.is_write for r in returns):
        return _run_view(op, flat, spec)
    if at_once or name in SYNC_OPS or op in NOT_META or _draws_random(op, args, kwargs):
        # Random ops run now, in program order (their draw is reserved at the call either way;
        # running at once keeps the CPU default generator's swap, for ops that draw from it, on
        # this thread).
        return _run_now(op, flat, spec, device)
    try:
        meta_flat = [_to_meta_value(x) for x in flat]
        meta_args, meta_kwargs = tree_unflatten(meta_flat, spec)
        meta_out = op(*meta_args, **meta_kwargs)
    except Exception as err:  # noqa: BLE001 - the meta kernel refuses (AssertionError too): CPU's error, at the call
        # CPU's error, not the meta kernel's: CPU checks in another order (argmax of an empty bool
        # tensor: dtype first). Only a missing meta kernel is a fact of the op; a meta kernel that
        # refuses or cannot run *these* arguments (index with a boolean mask calls nonzero) says
        # nothing about other calls: remembering it made every later call of the op run
        # synchronously, waiting for whatever the stream held.
        if _meta_kernel_missing(err):
            NOT_META.add(op)
        return _run_now(op, flat, spec, device)
    if _has_non_tensor(meta_out):
        NOT_META.add(op)
        return _run_now(op, flat, spec, device)
    if writes_overlapping_memory(op, args, kwargs, arguments_by_name(op, meta_args, meta_kwargs)):
        # A written tensor whose elements share memory (an expanded view), or that overlaps what
        # the op reads other than as the same elements: CPU's kernel decides, at the call -
        # fill_ writes an expanded view, an arithmetic op raises, cat(out=) of its own input
        # raises. (add(a, b, out=a) - attention's math path - stays queued.)
        return _run_now(op, flat, spec, device)
    layouts = None
    if any(is_neuron(x) and m.shape != x.shape for x, m in zip(flat, meta_flat)):
        # The meta kernel resized a written tensor: CPU's kernel says whether it may (never the
        # self of an in-place op, nor an out= tensor that is also an input) and with which strides.
        try:
            probed = stand_ins.probe(op, args, kwargs)
        except Exception:  # noqa: BLE001 - CPU refuses the arguments: its error, at the call
            return _run_now(op, flat, spec, device)
        if probed is not None:
            layouts = {id(x): c for x, c in zip(flat, tree_flatten(probed[:2])[0]) if is_neuron(x)}
    return _run_async(op, flat, spec, device, as_cpu_kernel_returns(op, args, kwargs, meta_out), layouts)


def writes_overlapping_memory(op, args, kwargs, meta_by_name: dict) -> bool:
    """Whether ``op`` writes a neuron tensor some of whose elements share memory, or memory that
    also holds one of its inputs other than plain in-place (``overlap.cpu_decides``, given the
    shapes the meta kernel gave the written tensors: ``meta_by_name``, the meta call's
    arguments by name)."""
    written = mutated_arguments(op)
    if not written:
        return False
    by_name = arguments_by_name(op, args, kwargs)
    targets, result_shapes = [], []
    for name in written:
        value, meta = by_name.get(name), meta_by_name.get(name)
        metas = meta if isinstance(meta, (list, tuple)) else (meta,)
        for i, t in enumerate(value if isinstance(value, (list, tuple)) else (value,)):
            if is_neuron(t):
                if torch._debug_has_internal_overlap(t) == 1:
                    return True
                targets.append(t)
                result_shapes.append(tuple(metas[i].shape) if i < len(metas) and isinstance(metas[i], torch.Tensor)
                                     else tuple(t.shape))
    if not targets:
        return False
    inputs = [x for name, value in by_name.items() if name not in written or _op_name(op).endswith("_")
              for x in (value if isinstance(value, (list, tuple)) else (value,)) if is_neuron(x)]
    return overlap.cpu_decides(_op_name(op), _op_name(op).endswith("_"), targets, inputs, result_shapes)


def as_cpu_kernel_returns(op, args, kwargs, meta_out):
    """Meta results adjusted where the CPU kernel returns other shapes or dtypes (outputs are
    preallocated from the meta results). Batch norm in eval mode returns empty save_mean /
    save_invstd on CPU, not [C]: every BatchNorm in eval() failed on neuron."""
    name = _op_name(op)
    if name in _CONVOLUTION_OPS:
        return _convolution_layout(arguments_by_name(op, args, kwargs), meta_out)
    if name not in _NORM_OPS:
        return meta_out
    by_name = arguments_by_name(op, args, kwargs)
    out = list(meta_out)
    # The saved statistics: CPU keeps them in the input's dtype unless a reduced-precision input
    # comes with float32 parameters ("mixed type"); the meta kernels say float32 for bf16/fp16.
    x = by_name["input"]
    param = by_name.get("weight")
    param = param if param is not None else by_name.get("running_mean")
    mixed = x.dtype in (torch.bfloat16, torch.float16) and param is not None and param.dtype == torch.float32
    stat_dtype = torch.float32 if mixed else x.dtype
    for i in (1, 2):
        if out[i].dtype != stat_dtype:
            out[i] = out[i].to(stat_dtype)
    if (name in ("aten::native_batch_norm", "aten::_native_batch_norm_legit") and not by_name.get("training", True)
            or name == "aten::_native_batch_norm_legit_no_training"):
        out[1], out[2] = out[1].new_empty(0), out[2].new_empty(0)
    return type(meta_out)(out) if isinstance(meta_out, tuple) else out


_CONVOLUTION_OPS = {"aten::convolution", "aten::convolution_backward"}


def _convolution_layout(by_name, meta_out):
    """CPU's convolutions compute in channels_last when the input or the weight is in it (4-d and
    5-d tensors), and return their results (the gradients of the input and the weight too) so;
    the meta kernels always give contiguous ones."""
    x, w = by_name["input"], by_name["weight"]
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    layout = formats.get(x.dim())
    if layout is None or not (x.is_contiguous(memory_format=layout) and not x.is_contiguous()
                              or w.is_contiguous(memory_format=layout) and not w.is_contiguous()):
        return meta_out
    if isinstance(meta_out, torch.Tensor):
        return meta_out.contiguous(memory_format=layout)
    return type(meta_out)(t.contiguous(memory_format=layout) if t is not None and t.dim() == x.dim() else t
                          for t in meta_out)


_NORM_OPS = {"aten::native_layer_norm", "aten::native_group_norm", "aten::native_batch_norm",
             "aten::_native_batch_norm_legit", "aten::_batch_norm_with_update",
             "aten::_native_batch_norm_legit_functional", "aten::_native_batch_norm_legit_no_training"}


def _meta_kernel_missing(err: Exception) -> bool:
    """Whether ``err`` says the op has no meta kernel (the dispatcher's "Could not run ... 'Meta'
    backend", a NotImplementedError), as opposed to one call's arguments or data."""
    text = str(err)
    return isinstance(err, NotImplementedError) and "data-independent" not in text and "data-dependent" not in text


def _has_non_tensor(out) -> bool:
    leaves, _ = tree_flatten(out)
    return any(not isinstance(x, torch.Tensor) and x is not None for x in leaves)


def _written_inputs(op, args_flat_by_name):
    """Map of alias-set names to the input tensors the op writes (in-place and out= arguments)."""
    written = {}
    for arg in op._schema.arguments:
        info = arg.alias_info
        if info is not None and info.is_write:
            value = args_flat_by_name.get(arg.name)
            for alias in info.before_set:
                written[alias] = value
    return written


def _resized_inputs(before: dict) -> dict:
    """An out= tensor that is also an input and that the call resized (``torch.sum(x, -1, out=x)``
    of a (4, 0) ``x``): CPU's kernel resizes it, then computes from the input as it was, geometry
    and values. By id: (a function giving a CPU copy of the input as it was - called when the
    stream reaches the op -, the host view of the resized tensor the result is copied into). The
    copy is one object wherever the call passes the tensor, so CPU's kernel sees the call's
    aliasing; a host view of the device tensor is the resized one, read as the bigger input."""
    found = {}
    for key, (t, size, stride, offset) in before.items():
        if (tuple(t.size()), t.stride(), t.storage_offset()) == (size, stride, offset):
            continue
        raw = host_storage_bytes(t)  # the resized storage starts with the bytes it had (resize_ keeps them)

        def as_it_was(raw=raw, dtype=t.dtype, size=size, stride=stride, offset=offset):
            return torch.as_strided(raw.view(dtype), size, stride, offset).clone()

        found[key] = (as_it_was, host_view(t))
    return found


def _run_async(op, flat, spec, device, meta_out, layouts: dict | None = None):
    """Queue ``op`` on CPU over host views; ``layouts``: CPU stand-ins of the written tensors the
    call resizes, by id (None: resize to the meta kernel's shapes, contiguous)."""
    args, kwargs = tree_unflatten(flat, spec)
    by_name = arguments_by_name(op, args, kwargs)
    written = _written_inputs(op, by_name)
    returns = op._schema.returns
    meta_leaves, out_spec = tree_flatten(meta_out)

    # Written tensors the call also passes as inputs, as they are before a resize below.
    before = {id(t): (t, tuple(t.size()), t.stride(), t.storage_offset()) for t in written.values()
              if is_neuron(t) and sum(x is t for x in flat) > 1}

    # Device outputs: inputs for in-place / out= returns (resized now if needed), new tensors otherwise.
    results = []
    fresh = []  # (device tensor, index in the CPU result leaves)
    ret_leaf_alias = _return_aliases(returns, meta_out)
    for i, meta in enumerate(meta_leaves):
        if meta is None:
            results.append(None)
            continue
        alias = ret_leaf_alias[i]
        target = written.get(alias) if alias is not None else None
        if isinstance(target, (list, tuple)):
            target = None  # list outputs aliasing list inputs are handled by position below
        if target is not None and is_neuron(target):
            like = layouts.get(id(target)) if layouts else None
            if like is not None:
                stand_ins.resize_as(target, like)
            elif tuple(target.shape) != tuple(meta.shape):
                target.resize_(meta.shape)
            results.append(target)
        else:
            out = torch.empty_strided(meta.size(), meta.stride(), dtype=meta.dtype, device=device)
            results.append(out)
            fresh.append((out, i))
    # Inputs written in place (including through list arguments, _foreach_*_) are written by the
    # CPU kernel itself through their host views.
    rng = None  # random draws never get here: they run synchronously, in program order
    # CPU operands (index tensors, 0-dim scalars) are snapshotted: the caller may change them
    # before the stream reaches the op, as with a host-to-device copy.
    # (Not our wrapped numbers: nobody else holds them, and clone() would drop the wrapped-number
    # flag, changing type promotion - rad2deg of an int tensor then computed in float64.)
    cpu_flat = [x.clone() if isinstance(x, torch.Tensor) and x.device.type == "cpu" and not getattr(x, "_tnx_wrapped_number", False)
                else x for x in flat]
    cpu_flat = _cpu_values(cpu_flat)
    out_views = [(host_view(out), i) for out, i in fresh]
    resized_inputs = _resized_inputs(before)
    nbytes_in = _nbytes([x for x in flat if is_neuron(x)])
    nbytes_out = sum(out.numel() * out.element_size() for out, _ in fresh)
    context = _describe(op, flat)

    def run():
        values = cpu_flat
        if resized_inputs:
            copies = {key: as_it_was() for key, (as_it_was, _) in resized_inputs.items()}
            values = [copies.get(id(x), value) if is_neuron(x) else value for x, value in zip(flat, cpu_flat)]
        leaves, _ = tree_flatten(_execute(op, values, spec, rng))
        for view, i in out_views:
            if leaves[i].shape != view.shape:  # say what went wrong, and run it synchronously from now on
                NOT_META.add(op)
                raise RuntimeError(
                    f"{_op_name(op)}: the CPU kernel returned output {i} with shape {list(leaves[i].shape)} where its "
                    f"meta kernel promised {list(view.shape)}; later calls run synchronously"
                )
            view.copy_(leaves[i])
        for key, (_, view) in resized_inputs.items():
            view.copy_(copies[key])  # as CPU's kernel resized it: the device tensor was resized so (the probe)

    not_read = {id(t) for t in _only_written(op, by_name)}
    reads = [device_span(x) for x in flat if is_neuron(x) and id(x) not in not_read]
    writes = [written_span(t) for t in results if t is not None and is_neuron(t)]
    submit_host(run, device=device, device_time_ns=costs.fallback_ns(nbytes_in, nbytes_out), name=_op_name(op),
                kind="cpu_fallback", context=f"{context} on {device} (CPU fallback)", framework="cpu_fallback",
                reads=reads, writes=writes)
    return tree_unflatten(results, out_spec)


def _execute(op, cpu_values, spec, rng: HostRng | None):
    """Call ``op`` on CPU operands; a random op draws from the device generator's state."""
    args, kwargs = tree_unflatten(cpu_values, spec)
    if rng is None:
        return op(*args, **kwargs)
    with rng as generator:
        if rng.swap_default:
            return op(*args, **kwargs)
        args, kwargs = list(args), dict(kwargs)
        for i, a in enumerate(op._schema.arguments):  # the Generator? argument, positional or keyword
            if "Generator" in str(a.type):
                if not a.kwarg_only and i < len(args):
                    args[i] = generator
                else:
                    kwargs[a.name] = generator
        return op(*args, **kwargs)


def _return_aliases(returns, meta_out) -> list:
    """Alias-set name (or None) for each leaf of the flattened return value."""
    leaves, _ = tree_flatten(meta_out)
    if len(returns) == len(leaves):
        return [next(iter(r.alias_info.after_set), None) if r.alias_info is not None else None for r in returns]
    return [None] * len(leaves)  # a list return: fresh tensors (or written through list inputs)


def _run_now(op, flat, spec, device):
    """Synchronize the operands' stream, run on CPU at once, and map the results back."""
    queue(device).synchronize()
    read = [x for x in flat if is_neuron(x)]
    if op._schema.name in OVERWRITES_SELF and read and read[0] is flat[0]:
        read = read[1:]  # a random fill never reads the tensor it overwrites: nothing goes to the host
    for t in read:
        check_readable(t)  # what failed work left unwritten raises its error, not computed on
    rng = _rng_for(op, flat, device)
    cpu_flat = _cpu_values(flat)
    args, kwargs = tree_unflatten(flat, spec)
    by_name = arguments_by_name(op, args, kwargs)
    written = [t for name in mutated_arguments(op) for t in _tensors_in(by_name.get(name))]
    try:
        result = _execute(op, cpu_flat, spec, rng)
    except RuntimeError as err:
        if rng is not None or _NOT_RESIZABLE not in str(err):
            raise
        _grow_as_cpu_does(op, args, kwargs, flat, written)
        cpu_flat = _cpu_values(flat)
        try:
            result = _execute(op, cpu_flat, spec, rng)
        except RuntimeError as again:
            if _NOT_RESIZABLE not in str(again):
                raise
            # A size the values decide (nonzero(out=) of more non-zeros than the probe's zeros
            # gave): CPU's kernel writes CPU copies of the written tensors, which it can grow;
            # the device tensors then take their geometry and values (_take_geometry).
            cpu_flat = [x.clone() if any(f is t for t in written) else x for f, x in zip(flat, cpu_flat)]
            result = _execute(op, cpu_flat, spec, rng)
    _take_geometry(written, flat, cpu_flat)
    mapped = _map_back(result, flat, cpu_flat, device)
    written += [t for t in tree_flatten(mapped)[0] if is_neuron(t)]
    nbytes = _nbytes(read) + _nbytes([x for x in tree_flatten(result)[0]])
    # Declared written (after the fact): memory that held a failed task's garbage is valid again.
    submit_host(None, device=device, device_time_ns=costs.fallback_ns(nbytes, 0), name=_op_name(op), kind="cpu_fallback",
                context=f"{_describe(op, flat)} on {device} (CPU fallback, synchronous)", framework="cpu_fallback",
                writes=[written_span(t) for t in written])
    return mapped


_NOT_RESIZABLE = "Trying to resize storage that is not resizable"


def _grow_as_cpu_does(op, args, kwargs, flat, written) -> None:
    """CPU's kernel grew a written tensor past its storage, which a host view of device memory
    cannot do. CPU's kernel over resizable stand-ins raises CPU's own error if CPU refuses the
    call (``floor_divide`` of bools into a small out=: NotImplementedError, not the resize's
    error), else shows the layout CPU gives the written tensors: the device tensors get it."""
    probed = stand_ins.probe(op, args, kwargs)
    if probed is None:
        raise RuntimeError(f"{_op_name(op)} grows a written tensor, and its operands are too large to probe on CPU")
    layouts = {id(x): c for x, c in zip(flat, tree_flatten(probed[:2])[0]) if is_neuron(x)}
    for t in written:
        if id(t) in layouts:
            stand_ins.resize_as(t, layouts[id(t)])


def _take_geometry(written, flat, cpu_flat) -> None:
    """Written tensors whose host view CPU's kernel resized (``torch.sum(x, 0, out=x)`` of a
    (2, 3) ``x`` becomes (3,), with CPU's deprecation warning) take the view's new size, strides
    and offset: where that fits the tensor's storage, the view wrote the values in place. A view
    grown past it (into its allocation's slack, or a storage of its own: ``nonzero(out=)`` of more
    results) wrote elsewhere: the device tensor is resized so and gets the values."""
    views = {id(x): cpu for x, cpu in zip(flat, cpu_flat) if is_neuron(x)}
    for t in written:
        cpu = views.get(id(t))
        if cpu is None or (cpu.size(), cpu.stride(), cpu.storage_offset()) == (t.size(), t.stride(), t.storage_offset()):
            continue
        same_storage = t.untyped_storage().nbytes() and cpu.untyped_storage().data_ptr() == host_storage_bytes(t).data_ptr()
        if same_storage and (cpu.storage_offset() + stand_ins.storage_span(cpu)) * cpu.element_size() <= t.untyped_storage().nbytes():
            t.as_strided_(cpu.size(), cpu.stride(), cpu.storage_offset())
        else:
            values = cpu.clone()  # before the resize: the memory it lies in may be the old storage's
            stand_ins.resize_as(t, values)
            host_view(t).copy_(values)


def _tensors_in(value) -> list:
    return [t for t in (value if isinstance(value, (list, tuple)) else (value,)) if is_neuron(t)]


def _only_written(op, by_name) -> list:
    """The written arguments whose values ``op`` does not read: ``out=`` tensors, and ``self``
    of an op that overwrites it."""
    if op._schema.name in OVERWRITES_SELF:
        return _tensors_in(by_name.get("self"))
    if op._schema.name.endswith("_"):
        return []
    return [t for name in mutated_arguments(op) for t in _tensors_in(by_name.get(name))]


def _run_view(op, flat, spec):
    """A view op: metadata only, so it runs now without waiting for the data."""
    device = device_of(flat)
    cpu_flat = [host_view(x) if is_neuron(x) else (_CPU if isinstance(x, torch.device) and x.type == "neuron" else x) for x in flat]
    args, kwargs = tree_unflatten(cpu_flat, spec)
    return _map_back(op(*args, **kwargs), flat, cpu_flat, device)


def _map_back(result, flat, cpu_flat, device):
    """CPU results -> neuron tensors: aliases of inputs become the inputs (or views of them);
    new CPU tensors are copied to new device tensors."""
    by_key = {}
    bases = {}
    for orig, cpu in zip(flat, cpu_flat):
        if is_neuron(orig):
            by_key[(cpu.data_ptr(), cpu.dtype, tuple(cpu.shape), cpu.stride())] = orig
            if cpu.untyped_storage().nbytes():
                bases[cpu.untyped_storage().data_ptr()] = orig

    def back(o):
        if not isinstance(o, torch.Tensor):
            return o
        key = (o.data_ptr(), o.dtype, tuple(o.shape), o.stride())
        if key in by_key:
            return by_key[key]
        base = bases.get(o.untyped_storage().data_ptr()) if o.untyped_storage().nbytes() else None
        if base is not None:  # a view of an input (possibly reinterpreted, e.g. view_as_real)
            if base.dtype != o.dtype:
                # Reinterpreted as the whole storage, 1-d and contiguous: view(dtype) of the input
                # itself refuses what the CPU view allows (view_as_real of a 0-d or transposed
                # complex tensor: "self.dim() cannot be 0", "self.stride(-1) must be 1").
                whole = torch.ops.aten.as_strided.default(
                    base, (base.untyped_storage().nbytes() // base.element_size(),), (1,), 0)
                base = torch.ops.aten.view.dtype(whole, o.dtype)
            return torch.ops.aten.as_strided.default(base, o.shape, o.stride(), o.storage_offset())
        out = torch.empty_strided(o.size(), _dense_strides(o), dtype=o.dtype, device=device)
        host_view(out).copy_(o)
        return out

    leaves, spec = tree_flatten(result)
    return tree_unflatten([back(o) for o in leaves], spec)


def _dense_strides(t: torch.Tensor):
    # Tensor has no is_non_overlapping_and_dense() in Python (the old check raised AttributeError
    # for every non-contiguous result of a synchronous op, e.g. nonzero's transposed output).
    # empty_like(preserve_format) keeps the strides of a non-overlapping dense tensor and
    # makes anything else contiguous - the rule wanted here.
    return torch.empty_like(t, device="meta").stride()
