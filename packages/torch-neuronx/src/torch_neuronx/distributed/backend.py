"""The ``neuron`` process group: c10d collectives on neuron tensors, over PyTorch's ProcessGroupGloo.

A Python ``ProcessGroup`` (PyTorch's trampoline; a C++ ``c10d::Backend`` cannot be subclassed
from Python) that wraps a ``ProcessGroupGloo`` on the same store. It replaces the whole group
(torch's ``_new_process_group_helper`` returns a Python group as is), so CPU tensors come here
too: they go to gloo unchanged and behave exactly as on gloo.

A collective on neuron tensors is device work on the tensor's device's current stream:

1. the stream is synchronized, so the collective reads what the work queued before it wrote
   (and a failed launch's error is raised here, not sent to the other ranks as garbage);
2. gloo runs on host views of the tensors (zero-copy; non-contiguous ones are staged through
   contiguous host copies), issued on the calling thread so every rank issues its collectives
   in program order;
3. the collective takes its modelled device time (``timing``) on the stream, as a
   ``collective`` record on the simulated timeline and in traces, starting when the latest
   rank's stream reached it (exchanged with the shape check, ``checks``).

The returned Work completes when gloo has and the results are in device memory (an AVG divided,
staged outputs written back); ``wait()`` blocks the host until then and raises the transport's
error, so work queued after it sees the results. As on CUDA, using an async collective's tensors
before ``wait()`` is undefined. Nothing blocks a stream at issue: an ``isend`` followed by an
``irecv`` on both ranks completes. The future's value is the output tensors, as DDP's reducer
expects.
"""

from __future__ import annotations

import datetime
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ReduceOp,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
)

from .. import execution
from . import checks, timing
from .staging import HostStaging, flatten

BACKEND_NAME = "neuron"


class NeuronWork(dist.Work):
    """A collective's Work: done when its future is. ``wait()`` raises the collective's error
    (the Work of ``_create_work_from_future`` returns True from ``wait()`` even when its future
    failed: a peer's death went unnoticed). Python subclass of the c10d Work trampoline, so C++
    callers (DDP's reducer, functional collectives) reach these methods too."""

    def __init__(self, future: torch.futures.Future, gloo_work=None) -> None:
        super().__init__()
        self._future = future
        self._gloo_work = gloo_work  # a recv's: who sent (recv from any source)

    def _source_rank(self) -> int:
        if self._gloo_work is None:
            return super()._source_rank()
        self._future.wait()
        return self._gloo_work._source_rank()

    source_rank = _source_rank

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        # gloo's operations time out at the process group's timeout; a shorter one is not honoured
        self._future.wait()  # raises the collective's error
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future

    def is_completed(self) -> bool:
        return self._future.done()

    def is_success(self) -> bool:
        if not self._future.done():
            return False
        try:
            self._future.wait()
        except Exception:
            return False
        return True

    def exception(self):
        try:
            self._future.wait()
        except Exception as err:
            return err
        return None

    def result(self):
        return self._future.wait()


def _work_from(gloo_work, value, what: str, post=None, host_writes=None, staging=None) -> NeuronWork:
    """A Work completing when ``gloo_work`` has and ``post(host_writes)`` and the staged
    write-back ran (on the thread completing it); its future's value is ``value``. A failure is
    a RuntimeError naming ``what`` (the collective and the rank), from the transport's error."""
    done = torch.futures.Future()

    def complete(fut) -> None:
        try:
            fut.wait()
            if post is not None:
                post(host_writes)
            if staging is not None:
                staging.finish()
        except Exception as err:  # every error goes to the Work's future
            failure = RuntimeError(f"neuron process group: {what} failed: {err}")
            failure.__cause__ = err
            done.set_exception(failure)
        else:
            done.set_result(value)

    _future_of(gloo_work).add_done_callback(complete)
    return NeuronWork(done, gloo_work)


def _future_of(gloo_work) -> torch.futures.Future:
    """Gloo's future of ``gloo_work``. Some gloo works have none (``_reduce_scatter_base``,
    ``alltoall_base``, send / recv: "Work::getFuture not implemented"): a thread waits for them.
    Everyone else waits on the future: two threads in ``wait()`` of one gloo send or recv race
    for its single completion, and the loser waits until the timeout."""
    try:
        return gloo_work.get_future()
    except RuntimeError:
        pass
    future = torch.futures.Future()

    def wait() -> None:
        try:
            gloo_work.wait()
        except BaseException as err:  # the waiter must hand every error to the future
            future.set_exception(err)
        else:
            future.set_result(None)

    threading.Thread(target=wait, name="neuron c10d work", daemon=True).start()
    return future


def _collective_device(name: str, tensors: list[torch.Tensor]) -> torch.device | None:
    """The one neuron device of a collective's tensors; None when they are all CPU tensors."""
    devices = {t.device for t in tensors}
    if not devices or devices == {torch.device("cpu")}:
        return None
    if len(devices) > 1:
        raise ValueError(f"neuron process group: {name} needs all its tensors on one device (a collective does not "
                         f"mix devices), got tensors on {sorted(str(d) for d in devices)}")
    (device,) = devices
    if device.type != "neuron":
        raise ValueError(f"neuron process group: {name} takes neuron or CPU tensors, got tensors on {device}")
    return device


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in flatten(tensors))


def _shapes(tree) -> str:
    if isinstance(tree, torch.Tensor):
        return str(list(tree.shape))
    return "[" + ", ".join(_shapes(t) for t in tree) + "]"


def _sum_instead_of_avg(op_holder):
    """(options with SUM, True) if ``op_holder.reduceOp`` is AVG (gloo has no AVG: the neuron
    group sums and divides), else (``op_holder``, False). PREMUL_SUM is refused: its factor is
    not visible from Python."""
    op = op_holder.reduceOp
    if op == ReduceOp.PREMUL_SUM:
        raise ValueError("neuron process group: ReduceOp.PREMUL_SUM is not supported (a Python process group cannot "
                         "read its factor); multiply the tensor by the factor and use ReduceOp.SUM")
    if op != ReduceOp.AVG:
        return op_holder, False
    copy = type(op_holder)()
    for field in ("rootRank", "rootTensor", "timeout", "asyncOp"):
        if hasattr(op_holder, field):
            setattr(copy, field, getattr(op_holder, field))
    copy.reduceOp = ReduceOp.SUM
    return copy, True


def _divide(hosts: list[torch.Tensor], n: int) -> None:
    """AVG from SUM: floating tensors divide, integer ones truncate like an integer division."""
    for h in hosts:
        if h.is_floating_point() or h.is_complex():
            h.div_(n)
        else:
            h.copy_(torch.div(h, n, rounding_mode="trunc"))


class NeuronProcessGroup(dist.ProcessGroup):
    """The process group ``init_process_group("neuron")`` creates (see the module docstring)."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: datetime.timedelta) -> None:
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("neuron_gloo/", store), rank, size, timeout)
        self._timeout = timeout
        self._group_name = ""
        self._group_desc = ""
        self._coalescing: list | None = None  # the Works issued since _start_coalescing

    # -- identity (DeviceMesh and FSDP2 look groups up by name) --------------------------------

    def getBackendName(self) -> str:  # noqa: N802  (the trampoline's C++ names)
        return BACKEND_NAME

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = name

    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = desc

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    @property
    def gloo(self) -> dist.ProcessGroupGloo:
        """The ProcessGroupGloo that carries the bytes."""
        return self._gloo

    # -- the one path of every collective ------------------------------------------------------

    def _run(self, name: str, kind: str, reads, writes, issue, *, nbytes: int, agree=(), post=None, value=None) -> dist.Work:
        """Run collective ``name`` (time model ``kind``) on tensors ``reads`` (read) and ``writes``
        (written; both nested lists). ``issue(host_reads, host_writes)`` starts it on gloo and
        returns gloo's Work; ``post(host_writes)`` runs on the host tensors after it completed
        (before staged outputs are written back). ``agree``: the tensors whose dtypes and shapes
        every rank must share (``checks``); None for point-to-point ops, which are not checked."""
        tensors = flatten(reads) + flatten(writes)
        device = _collective_device(name, tensors)
        result = writes if value is None else value
        what = f"{name} on rank {self.rank()} of {self.size()}"
        if device is None:  # CPU tensors: gloo's own behaviour (AVG: the sum divided, as on neuron)
            if agree is not None and checks.enabled():
                checks.check_agreement(self._gloo, name, flatten(agree))
            return self._collected(_work_from(issue(reads, writes), result, what, post, writes))
        q = execution.queue(device)
        q.synchronize()
        start_ns = 0.0
        if agree is not None and checks.enabled():
            start_ns = checks.check_agreement(self._gloo, name, flatten(agree), q.sim_time_ns)
        for t in flatten(reads):
            execution.check_readable(t)
        staging = HostStaging()
        host_reads = staging.host(reads, read=True, write=False)
        host_writes = staging.host(writes, read=False, write=True)
        work = _work_from(issue(host_reads, host_writes), result, what, post, host_writes, staging)
        arch = execution.runtime().device(device.index).arch.name
        execution.submit_host(None, device=device, device_time_ns=timing.collective_ns(kind, nbytes, self.size(), arch_name=arch),
                              name=f"c10d::{name}", kind="collective", framework="distributed", not_before_ns=start_ns,
                              context=f"{name} {_shapes(writes if flatten(writes) else reads)} on {device}, rank {self.rank()} of {self.size()}")
        return self._collected(work)

    # -- all-reduce ----------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        opts = AllreduceOptions() if opts is None else opts
        sum_opts, avg = _sum_instead_of_avg(opts)
        post = (lambda hosts: _divide(hosts, self.size())) if avg else None
        return self._run("all_reduce", "all_reduce", tensors, tensors, lambda r, w: self._gloo.allreduce(w, sum_opts),
                         nbytes=_nbytes(tensors), agree=tensors, post=post)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = AllreduceCoalescedOptions() if opts is None else opts
        sum_opts, avg = _sum_instead_of_avg(opts)
        post = (lambda hosts: _divide(hosts, self.size())) if avg else None
        return self._run("all_reduce_coalesced", "all_reduce", tensors, tensors,
                         lambda r, w: self._gloo.allreduce_coalesced(w, sum_opts), nbytes=_nbytes(tensors), agree=tensors, post=post)

    # -- one to all, all to one ----------------------------------------------------------------

    def broadcast(self, tensors, opts=None):
        opts = BroadcastOptions() if opts is None else opts
        return self._run("broadcast", "broadcast", tensors, tensors, lambda r, w: self._gloo.broadcast(w, opts),
                         nbytes=_nbytes(tensors), agree=tensors)

    def reduce(self, tensors, opts=None):
        opts = ReduceOptions() if opts is None else opts
        sum_opts, avg = _sum_instead_of_avg(opts)
        root = opts.rootRank
        post = (lambda hosts: _divide(hosts, self.size()) if self.rank() == root else None) if avg else None
        return self._run("reduce", "reduce", tensors, tensors, lambda r, w: self._gloo.reduce(w, sum_opts),
                         nbytes=_nbytes(tensors), agree=tensors, post=post)

    def gather(self, output_tensors, input_tensors, opts=None):
        opts = GatherOptions() if opts is None else opts
        return self._run("gather", "gather", input_tensors, output_tensors,
                         lambda r, w: self._gloo.gather(w, r, opts), nbytes=_nbytes(input_tensors) * self.size(),
                         agree=input_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        opts = ScatterOptions() if opts is None else opts
        return self._run("scatter", "scatter", input_tensors, output_tensors,
                         lambda r, w: self._gloo.scatter(w, r, opts), nbytes=_nbytes(output_tensors) * self.size(),
                         agree=output_tensors)

    # -- all-gather ----------------------------------------------------------------------------

    def allgather(self, output_tensors, input_tensors, opts=None):
        opts = AllgatherOptions() if opts is None else opts
        return self._run("all_gather", "all_gather", input_tensors, output_tensors,
                         lambda r, w: self._gloo.allgather(w, r, opts), nbytes=_nbytes(output_tensors),
                         agree=[input_tensors, output_tensors])

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        opts = AllgatherOptions() if opts is None else opts
        return self._run("all_gather_coalesced", "all_gather", input_list, output_lists,
                         lambda r, w: self._gloo.allgather_coalesced(w, r, opts), nbytes=_nbytes(output_lists),
                         agree=[input_list, output_lists])

    def all_gather_single(self, output, input, opts=None):  # noqa: A002  (c10d's names)
        opts = AllgatherOptions() if opts is None else opts
        return self._run("all_gather_into_tensor", "all_gather", [input], [output],
                         lambda r, w: self._gloo._allgather_base(w[0], r[0], opts), nbytes=_nbytes([output]),
                         agree=[input, output], value=[output])

    _allgather_base = all_gather_single  # the pre-2.13 name, still what some callers use

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        opts = AllgatherOptions() if opts is None else opts
        return self._coalesced([self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)], outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    # -- reduce-scatter ------------------------------------------------------------------------

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        opts = ReduceScatterOptions() if opts is None else opts
        sum_opts, avg = _sum_instead_of_avg(opts)
        post = (lambda hosts: _divide(flatten(hosts), self.size())) if avg else None
        return self._run("reduce_scatter", "reduce_scatter", input_lists, output_tensors,
                         lambda r, w: self._gloo.reduce_scatter(w, r, sum_opts), nbytes=_nbytes(input_lists),
                         agree=[output_tensors, input_lists], post=post)

    def reduce_scatter_single(self, output, input, opts=None):  # noqa: A002
        opts = ReduceScatterOptions() if opts is None else opts
        sum_opts, avg = _sum_instead_of_avg(opts)
        post = (lambda hosts: _divide(hosts, self.size())) if avg else None
        return self._run("reduce_scatter_tensor", "reduce_scatter", [input], [output],
                         lambda r, w: self._gloo._reduce_scatter_base(w[0], r[0], sum_opts), nbytes=_nbytes([input]),
                         agree=[output, input], post=post, value=[output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        opts = ReduceScatterOptions() if opts is None else opts
        return self._coalesced([self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs)], outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # -- all-to-all ----------------------------------------------------------------------------

    def alltoall(self, output_tensors, input_tensors, opts=None):
        opts = AllToAllOptions() if opts is None else opts
        return self._run("all_to_all", "all_to_all", input_tensors, output_tensors,
                         lambda r, w: self._gloo.alltoall(w, r, opts), nbytes=_nbytes(input_tensors))

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):  # noqa: A002
        opts = AllToAllOptions() if opts is None else opts
        return self._run("all_to_all_single", "all_to_all", [input], [output],
                         lambda r, w: self._gloo.alltoall_base(w[0], r[0], list(output_split_sizes), list(input_split_sizes), opts),
                         nbytes=_nbytes([input]), value=[output])

    alltoall_base = all_to_all_single

    # -- synchronization and point to point ----------------------------------------------------

    def barrier(self, opts=None):
        opts = BarrierOptions() if opts is None else opts
        device = getattr(opts, "device", None)
        neuron = device is not None and device.type == "neuron"
        if neuron:
            # as a barrier on a device stream would: it returns after the work queued before it
            execution.queue(device).synchronize()
        start_ns = 0.0
        if checks.enabled():
            start_ns = checks.check_agreement(self._gloo, "barrier", [], execution.queue(device).sim_time_ns if neuron else 0.0)
        work = _work_from(self._gloo.barrier(_barrier_options(opts)), [], f"barrier on rank {self.rank()} of {self.size()}")
        if neuron:
            work.wait()
            execution.submit_host(None, device=device, device_time_ns=timing.collective_ns("barrier", 0, self.size()),
                                  name="c10d::barrier", kind="collective", framework="distributed", not_before_ns=start_ns,
                                  context=f"barrier on {device}, rank {self.rank()} of {self.size()}")
        return self._collected(work)

    def send(self, tensors, dst_rank, tag=0):
        return self._run("send", "send", tensors, [], lambda r, w: self._gloo.send(r, dst_rank, tag), nbytes=_nbytes(tensors),
                         agree=None, value=tensors)

    def recv(self, tensors, src_rank, tag=0):
        return self._run("recv", "recv", [], tensors, lambda r, w: self._gloo.recv(w, src_rank, tag), nbytes=_nbytes(tensors),
                         agree=None)

    def recv_anysource(self, tensors, tag=0):
        return self._run("recv", "recv", [], tensors, lambda r, w: self._gloo.recv_anysource(w, tag), nbytes=_nbytes(tensors),
                         agree=None)

    # -- coalescing (torch's _coalescing_manager; each op here is already issued in order) -----

    def _coalesced(self, works: list, value) -> dist.Work:
        futures = [w.get_future() for w in works]

        def result(fut):
            for f in fut.wait():
                f.wait()  # re-raises the first op's error
            return value

        return NeuronWork(torch.futures.collect_all(futures).then(result))

    def _start_coalescing(self, device) -> None:
        if self._coalescing is not None:
            raise RuntimeError("neuron process group: coalescing was already started (nested _coalescing_manager)")
        self._coalescing = []

    start_coalescing = _start_coalescing

    def _end_coalescing(self, device):
        works, self._coalescing = self._coalescing or [], None
        return self._coalesced(works, [])

    end_coalescing = _end_coalescing

    def _collected(self, work):
        """``work``, also kept for the Work ``_end_coalescing`` returns while coalescing."""
        if self._coalescing is not None:
            self._coalescing.append(work)
        return work

    def shutdown(self) -> None:
        self._gloo.shutdown()

    def abort(self) -> None:
        self._gloo.abort()


def _barrier_options(opts) -> BarrierOptions:
    copy = BarrierOptions()
    copy.timeout = opts.timeout
    return copy


def create(store: dist.Store, rank: int, size: int, timeout: datetime.timedelta) -> NeuronProcessGroup:
    """The factory ``Backend.register_backend`` calls for every group of the ``neuron`` backend."""
    return NeuronProcessGroup(store, rank, size, timeout)
