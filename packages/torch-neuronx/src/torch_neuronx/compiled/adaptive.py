"""Adaptive eager: consecutive compiled ops of a stream run as one fused NEFF.

Opt-in (``TORCH_NEURONX_ADAPTIVE_EAGER=1``, or ``torch_neuronx.set_adaptive_eager(True)``).
A compiled op is not launched at once: its outputs are allocated and returned (an in-place or
``out=`` op returns the tensors it will write), and the op joins its stream's pending *run*. The
run is flushed - its ops' graphs joined into one graph, compiled once per run signature, launched
as one NEFF - when anything else touches that stream's queue: a CPU-fallback op, a copy
(``.cpu()``, printing, ``.item()``), an NKI kernel, an event or a synchronization; or before an op
that cannot join (a write into memory the run reads, a row scatter). A run also ends at
``TORCH_NEURONX_ADAPTIVE_EAGER_MAX_OPS`` ops (default 512: a whole AdamW step of a small model fuses).

Inside the fused graph an op reads its producers' values directly (the compiler keeps them on
chip where it can), and results nobody holds any more by flush time are never written to HBM.
Every op's nodes are kept as they are - dtype conversions included - so results are identical to
plain eager. The same signature flushed again reuses its NEFF (memory and disk cache).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import torch
from neuron_sim.graph import Graph, graph_of
from neuron_sim.graph.ops import ops_with
from neuron_sim.timing import program_timing
from neuronxcc.compiler import compile_neff

from ..device import env as _env
from ..device import hooks
from ..device import state as _state
from ..execution import device_bytes, launch_neff, mark_unwritten
from ..ops import index_errors
from ..ops.transfers import submit_upload
from .cache import disk_cache, neff_key
from .entry import CompiledNeff
from .launch import writes_in_place

ENABLE_ENV = "TORCH_NEURONX_ADAPTIVE_EAGER"
MAX_OPS_ENV = "TORCH_NEURONX_ADAPTIVE_EAGER_MAX_OPS"
DEFAULT_MAX_OPS = 512

_override: bool | None = None  # set_adaptive_eager() wins over the environment
_lock = threading.RLock()
_runs: dict[tuple[int, int], _Run] = {}
# A stream's runs are launched in the order they were taken, one flush at a time: while one is
# being compiled and launched, other work on the stream (another thread's op, copy or wait) waits
# for it (``_flush_before_queue_use``) instead of overtaking it. ``_in_flight`` counts flushes
# under way; ``_flushing.keys`` are the streams this thread is flushing (its own launches ask for
# their queue too, and must not take the next run before this one is launched).
_stream_locks: dict[tuple[int, int], threading.RLock] = {}
_in_flight = 0
_flushing = threading.local()
_fused: OrderedDict[tuple, object] = OrderedDict()  # run signature -> NEFF (None: launch its ops one by one)
_FUSED_KEPT = 1024  # runs remembered in memory (the disk cache keeps the rest)
stats = {"runs": 0, "ops": 0, "fused_compiles": 0, "dead_outputs": 0, "split_runs": 0}


def set_adaptive_eager(enabled: bool | None) -> None:
    """Turn adaptive eager on or off for this process (None: follow the environment again)."""
    global _override
    try:
        flush_all()
    finally:  # a flush that raises still switches the mode: the error is the pending work's
        _override = enabled


def enabled() -> bool:
    if getattr(_scope, "depth", 0):
        return True
    if _override is not None:
        return _override
    return _env.get(ENABLE_ENV, "0") not in ("", "0")


_scope = threading.local()  # depth of this thread's deferred() scopes


class deferred:
    """Adaptive eager for this thread's ops inside the ``with`` block (whatever the process-wide
    mode), their runs launched when it ends: ``with adaptive.deferred(): opt.step()``. Nested
    scopes launch at the outermost end. Results are those of plain eager, bit for bit."""

    def __enter__(self):
        _scope.depth = getattr(_scope, "depth", 0) + 1
        return self

    def __exit__(self, *exc):
        _scope.depth -= 1
        if not _scope.depth and not enabled():
            flush_all()
        return False


# Ops whose writes land where their index operands say (the registry's indexed_writes: row scatters
# with DMA accumulate): the compiler orders every other access of a fused program around them, so a
# run holding one was slower than its ops launched one by one (the embedding backward run: 1032 us
# vs ~250 us).
_SOLO_OPS = ops_with("indexed_writes")


def _max_ops() -> int:
    return max(1, int(os.environ.get(MAX_OPS_ENV, DEFAULT_MAX_OPS)))


class _Run:
    """The pending ops of one (device, stream)."""

    def __init__(self, device: torch.device, stream_id: int):
        self.device = device
        self.stream_id = stream_id
        # (op, input sources, output storages). The run holds its results' storages until it is
        # launched, so their memory is not handed out again meanwhile; a storage nobody else
        # references by then (no tensor, view or saved tensor) is a result never written.
        self.items: list[tuple[CompiledNeff, list, list]] = []
        # Inputs from outside the run: (storage - held, so its memory is not reused meanwhile -,
        # address of the input's first element and element size when it joined: its tensor may
        # change before the flush, and an out= that resizes it to empty has no data pointer).
        self.externals: list[tuple[torch.UntypedStorage, int, int]] = []
        self.external_index: dict[tuple, int] = {}
        self.produced: dict[int, tuple[int, int]] = {}  # storage data_ptr -> (item, output) holding its value
        self.memory_readers: dict[int, set[int]] = {}  # storage data_ptr -> items reading it from memory
        self.in_place_writers: dict[int, set[int]] = {}  # storage data_ptr -> items writing it in place
        self.superseded: set[tuple[int, int]] = set()  # results rewritten later in the run: never written
        self.uploads: list[tuple[torch.Tensor, torch.Tensor]] = []  # (device tensor, host data), before the launch
        self.launched = 0  # items launched by its flush (the rest are unwritten if the flush raises)

    def source(self, t: torch.Tensor, in_type) -> tuple | None:
        """Where input ``t`` (declared ``in_type`` in its op's graph) comes from, or None when it
        cannot be expressed (a view of a produced tensor with another dtype...)."""
        base = t.untyped_storage().data_ptr()
        hit = self.produced.get(base)
        if hit is None:
            key = (t.data_ptr(), tuple(in_type.shape), in_type.dtype)
            index = self.external_index.get(key)
            if index is None:
                index = self.external_index[key] = len(self.externals)
                self.externals.append((t.untyped_storage(), t.data_ptr(), t.element_size()))
            self.memory_readers.setdefault(base, set()).add(len(self.items))
            return ("ext", index)
        k, j = hit
        out_type = graph_of(self.items[k][0].neff.program).outputs[j].type
        offset, itemsize = divmod(t.data_ptr() - base, t.element_size())
        if itemsize or out_type.dtype != in_type.dtype or offset + in_type.num_elements > out_type.num_elements:
            return None
        return ("run", k, j, offset)


def defer(entry: CompiledNeff, op, tensors: list[torch.Tensor], device: torch.device,
          targets: list[torch.Tensor] | None = None):
    """Queue ``entry`` on the current stream's run and return its results, or None if it cannot
    join the run (the caller then launches it on its own, after the run). ``targets`` are the
    tensors an in-place or ``out=`` op writes: they join only where their memory can be written
    by the fused launch itself (see ``_writable``)."""
    graph = graph_of(entry.neff.program)
    if any(node.op in _SOLO_OPS for node in graph.nodes):
        return None
    stream_id = _state.shim().current_stream_id(device.index)
    with _lock:
        run = _runs.get((device.index, stream_id))
        if run is None:
            run = _runs[(device.index, stream_id)] = _Run(device, stream_id)
        if targets is not None and not _writable(run, entry, tensors, targets):
            return None
        sources = []
        for t, value in zip(tensors, graph.inputs):
            src = run.source(t, value.type)
            if src is None:
                return None
            sources.append(src)
        if targets is None:
            results = [torch.empty_strided(spec.shape, spec.strides, dtype=spec.dtype, device=device)
                       for spec in entry.outputs]
        else:
            results = entry.output_targets(targets)
        k = len(run.items)
        for j, out in enumerate(results):
            base = out.untyped_storage().data_ptr()
            earlier = run.produced.get(base)
            if earlier is not None:  # written again: only the last value reaches memory
                run.superseded.add(earlier)
            run.produced[base] = (k, j)
            if targets is not None:
                run.in_place_writers.setdefault(base, set()).add(k)
        run.items.append((entry, sources, [out.untyped_storage() for out in results]))
        full = len(run.items) >= _max_ops()
    if full:
        flush(device.index, stream_id)
    if targets is not None:
        return entry.out_spec.unflatten(targets[: entry.out_spec.num_leaves])
    leaves = entry.result_leaves(results, device)
    return entry.out_spec.unflatten(leaves)


def _writable(run: _Run, entry: CompiledNeff, tensors, targets) -> bool:
    """Whether the fused launch can write ``targets`` in place: each is a whole, compiled-layout
    buffer from the start of its storage that plain eager would write in place too; that no
    earlier op of the run read from memory except the in-place ops that rewrote it (a fused
    program may write a buffer before another op has read all of it; an elementwise in-place op
    reads each element before the write that depends on it); and that, if an earlier op of the run
    wrote it, is rewritten whole."""
    for j, target in enumerate(entry.output_targets(targets)):
        spec = entry.outputs[j]
        if target.storage_offset() != 0 or not writes_in_place(entry, j, target, targets, tensors):
            return False
        base = target.untyped_storage().data_ptr()
        if not run.memory_readers.get(base, set()) <= run.in_place_writers.get(base, set()):
            return False
        earlier = run.produced.get(base)
        if earlier is not None and run.items[earlier[0]][0].outputs[earlier[1]].nbytes != spec.nbytes:
            return False
    return True


def defer_upload(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Make the host-to-device copy of ``src`` into ``dst`` part of the pending run of ``dst``'s
    stream (submitted just before its launch) instead of launching the run for it. Only into
    memory the run has neither read nor written, so the upload's place before the run's ops
    changes nothing they see. False: no pending run, or not such memory (copy as usual)."""
    stream_id = _state.shim().current_stream_id(dst.device.index)
    with _lock:
        run = _runs.get((dst.device.index, stream_id))
        base = dst.untyped_storage().data_ptr()
        if run is None or not run.items or base in run.produced or base in run.memory_readers:
            return False
        run.uploads.append((dst.detach(), src))  # its shape as it is now (an out= may resize dst)
        return True


def flush(device_index: int, stream_id: int) -> None:
    """Launch the pending run of (device, stream), if any, after any flush of that stream another
    thread has under way."""
    global _in_flight
    key = (device_index, stream_id)
    mine = _flushing.__dict__.setdefault("keys", set())
    if key in mine:
        return  # this thread's own launches of the run it is flushing
    with _lock:
        stream_lock = _stream_locks.setdefault(key, threading.RLock())
    with stream_lock:
        with _lock:
            run = _runs.pop(key, None)
            if run is None or not run.items:
                return
            _in_flight += 1
            stats["runs"] += 1
            stats["ops"] += len(run.items)
        mine.add(key)
        try:
            _launch_run(run, device_index, stream_id)
        except BaseException as err:
            _mark_unlaunched(run, err)
            raise
        finally:
            mine.discard(key)
            with _lock:
                _in_flight -= 1


def _launch_run(run: _Run, device_index: int, stream_id: int) -> None:
    outputs = [(k, j, storage) for k, (_, _, storages) in enumerate(run.items) for j, storage in enumerate(storages)]
    live = [(k, j, storage) for k, j, storage in outputs
            if (k, j) not in run.superseded and torch._C._storage_Use_Count(storage._cdata) > 1]
    with _lock:
        stats["dead_outputs"] += len(outputs) - len(live)
    signature = (tuple((entry.key, tuple(srcs)) for entry, srcs, _ in run.items),
                 tuple((k, j) for k, j, _ in live), _state.bridge().runtime.config.arch.name)
    for dst, src in run.uploads:
        submit_upload(dst, src, stream=stream_id)
    if len(run.items) == 1 and len(live) == len(outputs):
        _launch_each(run)  # a run of one op whose results all live: its own NEFF, as plain eager
        return
    with _lock:
        known = signature in _fused
        if known:
            _fused.move_to_end(signature)
            neff = _fused[signature]
    if not known:
        neff = _worth_fusing(_compile(run, live, signature), run)  # outside the lock: other streams go on
        with _lock:
            _fused[signature] = neff
            if len(_fused) > _FUSED_KEPT:
                _fused.popitem(last=False)
    if neff is None:
        _launch_each(run)
        return
    buffers = {}
    graph = graph_of(neff.program)
    for value in graph.inputs:
        _, address, element_size = run.externals[int(value.name[1:])]
        buffers[value.name] = (address, value.type.num_elements * element_size)
    for m, (k, j, storage) in enumerate(live):
        buffers[f"y{m}"] = (storage, run.items[k][0].outputs[j].nbytes)
    names = ", ".join(entry.name for entry, _, _ in run.items[:6]) + (", ..." if len(run.items) > 6 else "")
    launch_neff(neff, buffers, device=device_index, name="adaptive_eager_run", context=f"{len(run.items)} fused ops on {run.device}: {names}",
                framework="adaptive_eager", stream=stream_id, errors=index_errors.of_run(entry.errors for entry, _, _ in run.items))
    run.launched = len(run.items)


def _mark_unlaunched(run: _Run, error: BaseException) -> None:
    """A flush raised ``error`` at the call (the fused compile failed...): the results of the
    run's ops that were not launched hold no valid data - later work reading them is skipped
    with ``error`` and host reads raise it, as after a failed launch, instead of returning the
    bytes their memory held before."""
    unlaunched = run.items[run.launched:]
    if not unlaunched:
        return
    writes = [device_bytes(storage.data_ptr(), entry.outputs[j].nbytes)
              for entry, _, storages in unlaunched for j, storage in enumerate(storages) if storage.nbytes()]
    names = ", ".join(entry.name for entry, _, _ in unlaunched[:6]) + (", ..." if len(unlaunched) > 6 else "")
    mark_unwritten(writes, error, device=run.device, name="adaptive_eager_run", stream=run.stream_id,
                   context=f"{len(unlaunched)} fused ops on {run.device}, not launched: {names}")


def _worth_fusing(neff, run: _Run):
    """``neff``, or None when the timing model gives it more device time than the run's ops
    launched one by one (a fused program can serialize around one op's access pattern): adaptive
    eager never makes a run slower on the device."""
    arch = _state.bridge().runtime.config.arch
    fused_ns = program_timing(neff, arch).total_ns
    parts_ns = sum(program_timing(entry.neff, arch).total_ns for entry, _, _ in run.items)
    if fused_ns <= parts_ns:
        return neff
    with _lock:
        stats["split_runs"] += 1
    return None


def _launch_each(run: _Run) -> None:
    """The run's ops one by one, in order, each into the memory its results already have."""
    for entry, sources, storages in run.items:
        buffers = {}
        for i, (src, nbytes) in enumerate(zip(sources, entry.in_nbytes)):
            if src[0] == "ext":
                ptr = run.externals[src[1]][1]
            else:
                _, k, j, offset = src
                producer = run.items[k][0].outputs[j]
                ptr = run.items[k][2][j].data_ptr() + offset * producer.dtype.itemsize
            buffers[f"in{i}"] = (ptr, nbytes)
        for j, storage in enumerate(storages):
            buffers[f"out{j}"] = (storage, entry.outputs[j].nbytes)
        launch_neff(entry.neff, buffers, device=run.device, name=entry.name, context=entry.context, framework="adaptive_eager",
                    stream=run.stream_id, errors=entry.errors)
        run.launched += 1


def flush_all() -> None:
    """Launch every stream's pending run, and wait for those other threads are launching."""
    with _lock:
        keys = set(_runs) | set(_stream_locks)
    for device_index, stream_id in keys:
        flush(device_index, stream_id)


def pending() -> bool:
    """Whether any stream has deferred ops not launched yet (pending, or being launched)."""
    return bool(_runs) or _in_flight > 0


def _flush_before_queue_use(device_index: int, stream_id: int) -> None:
    if _runs or _in_flight:
        flush(device_index, stream_id)


hooks.on_queue_use(_flush_before_queue_use)
hooks.on_synchronize(flush_all)


def _compile(run: _Run, live, signature):
    """The fused graph of ``run``: external inputs ``x{n}``, live results ``y{m}``."""
    disk = disk_cache()
    key = neff_key("torch_neuronx.adaptive", repr(signature)) if disk is not None else None
    neff = disk.get(key) if disk is not None else None
    if neff is not None:
        return neff
    g = Graph(f"adaptive_run_{len(run.items)}_ops")
    externals = [None] * len(run.externals)
    values: dict[tuple[int, int], object] = {}
    for k, (entry, sources, _) in enumerate(run.items):
        sub = graph_of(entry.neff.program)
        mapping = {}
        for value, src in zip(sub.inputs, sources):
            if src[0] == "ext":
                n = src[1]
                if externals[n] is None:
                    externals[n] = g.add_input(f"x{n}", value.type.shape, value.type.dtype)
                mapping[value.id] = externals[n]
            else:
                mapping[value.id] = _view_of(g, values[(src[1], src[2])], value.type, src[3])
        for node in sub.nodes:
            outs = g.add(node.op, [mapping[v.id] for v in node.inputs], node.attrs, node.location)
            for old, new in zip(node.outputs, outs):
                mapping[old.id] = new
        for j, value in enumerate(sub.outputs):
            values[(k, j)] = mapping[value.id]
    g.set_outputs([values[(k, j)] for k, j, _ in live], [f"y{m}" for m in range(len(live))])
    neff = compile_neff(g, _state.bridge().runtime.config.arch)
    with _lock:
        stats["fused_compiles"] += 1
    if disk is not None:
        disk.put(key, neff)
    return neff


def _view_of(g: Graph, value, in_type, offset: int):
    """``value`` (a produced buffer) as another op's input of ``in_type`` starting ``offset``
    elements into it."""
    if offset == 0 and tuple(value.type.shape) == tuple(in_type.shape):
        return value
    n = value.type.num_elements
    flat = value if len(value.type.shape) == 1 else g.add1("reshape", value, shape=(n,))
    if offset or in_type.num_elements != n:
        flat = g.add1("slice", flat, start=[offset], limit=[offset + in_type.num_elements])
    return g.add1("reshape", flat, shape=tuple(in_type.shape))
