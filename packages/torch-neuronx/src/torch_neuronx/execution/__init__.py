"""The execution API: the one place torch-neuronx puts work on the simulated NeuronCore.

Every launch and every piece of host work of the ``neuron`` device goes through here - eager ops,
adaptive eager's fused runs, ``torch.compile`` graphs, NKI kernels, CPU-fallback ops and copies -
so there is one binding of tensors to device buffers, one mapping of torch streams to runtime
queues, and one point where each launch is published as an op-level record:

    from torch_neuronx import execution

    sub = execution.launch_neff(neff, {"in0": (x, x_nbytes), "out0": (y, y_nbytes)}, device=x.device,
                                name="aten::add", context="aten::add([4, 8], [4, 8])", framework="eager")
    sub.launch_id, sub.start_ns, sub.end_ns          # its place on the simulated timeline
    execution.submit_host(fn, device=x.device, device_time_ns=2_000.0, name="copy_h2d", kind="copy",
                          context="copy [4, 8] host -> neuron:0", framework="copy")
    execution.host_view(x)                           # a CPU tensor over x's device memory
    execution.check_readable(x)                      # before a host read: a failed launch's error, not garbage

Each launch and host task publishes a ``neuron_sim.trace.OpRecord`` (op or graph name, launch id,
framework path, stream id, host and simulated times) on the submitting thread, to the trace
sessions that listen:

    with neuron_sim.trace.TraceSession(kinds=["op"]) as session:
        y = x + 1
    [r.name for r in session.records]                # ['aten::add']

Work goes on the calling thread's current stream of the device unless a stream is given.
"""

from .host import check_readable, device_bytes, device_span, host_storage_bytes, host_view, written_span
from .launch import Buffer, launch_neff, mark_overwritten, mark_unwritten, queue, runtime, submit_host, user_stacklevel

__all__ = ["Buffer", "launch_neff", "submit_host", "mark_overwritten", "mark_unwritten", "queue", "runtime", "host_view", "host_storage_bytes",
           "device_bytes", "device_span", "written_span", "check_readable", "user_stacklevel"]
