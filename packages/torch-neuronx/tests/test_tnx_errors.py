"""Bad input: simulated HBM exhaustion, invalid device indices, mixed devices, use after a failed
launch, and a fork after the runtime started - each a clear Python exception, never a crash."""

from __future__ import annotations

import re
import resource

import pytest
import torch
import torch_neuronx
from neuron_sim.errors import ExecutionError
from tnx_helpers import run_python


# --- out of memory ---------------------------------------------------------------------------
def test_allocation_larger_than_hbm_is_refused_before_using_host_memory():
    capacity = torch.neuron.get_device_properties(0).total_memory
    ooms = torch.neuron.memory_stats()["num_ooms"]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    with pytest.raises(torch.OutOfMemoryError, match="neuron:0 out of memory") as info:
        torch.empty(capacity + 1, dtype=torch.uint8, device="neuron")
    assert isinstance(info.value, torch_neuronx.NeuronOutOfMemoryError)
    assert str(capacity) in str(info.value)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 64 * 1024
    assert torch.neuron.memory_stats()["num_ooms"] == ooms + 1
    assert (torch.ones(3, device="neuron") * 2).sum().item() == 6.0  # the device keeps working


def test_hbm_exhaustion_can_be_caught_and_recovered_from():
    # A 64 MiB HBM (the runtime's test knob), so exhausting it costs little host memory.
    proc = run_python(
        """
        import dataclasses, os
        from neuron_sim.runtime import Runtime, RuntimeConfig, runtime
        runtime._set(Runtime(dataclasses.replace(RuntimeConfig.from_env(), hbm_capacity=64 << 20)))
        import torch, torch_neuronx
        assert torch.neuron.get_device_properties(0).total_memory == 64 << 20
        held = []
        try:
            while True:
                held.append(torch.empty(8 << 20, dtype=torch.uint8, device="neuron"))
        except torch.OutOfMemoryError as err:
            assert isinstance(err, torch_neuronx.NeuronOutOfMemoryError), type(err)
            print("oom after", len(held), "|", str(err).splitlines()[0])
        assert torch.neuron.memory_stats()["num_ooms"] == 1
        held.clear()
        # An op whose output does not fit fails at submission, with nothing queued.
        x = torch.ones(1024, 1024, device="neuron")
        try:
            torch.cat([x] * 16)
        except torch.OutOfMemoryError:
            print("op oom")
        torch.neuron.synchronize()
        y = torch.ones(15 * 1024, 1024, device="neuron")  # all the rest of HBM
        del y
        print("after", (x * 2).sum().item(), torch.neuron.memory_allocated())
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("oom after 8 | neuron:0 out of memory")
    assert lines[1] == "op oom"
    assert lines[2] == f"after {2.0 * 1024 * 1024} {4 << 20}"


# --- devices ---------------------------------------------------------------------------------
def test_invalid_device_index():
    n = torch.neuron.device_count()
    with pytest.raises(IndexError, match=rf"invalid neuron device index {n}: {n} device\(s\) are visible"):
        torch.ones(2, device=f"neuron:{n}")
    with pytest.raises(IndexError, match="invalid neuron device index"):
        torch.ones(2).to(f"neuron:{n + 5}")
    with pytest.raises(ValueError, match="invalid neuron device index"):
        torch.neuron.set_device(n)
    with pytest.raises(ValueError, match="invalid neuron device index -2"):
        torch.neuron.synchronize(-2)
    assert torch.neuron.current_device() == 0


def test_ops_mixing_devices():
    a = torch.ones(3, device="neuron:0")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:0 and cpu"):
        a + torch.ones(3)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3) @ a
    with pytest.raises(RuntimeError, match="same device"):
        a.index_select(0, torch.tensor([0]))
    if torch.neuron.device_count() > 1:
        with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
            a * torch.ones(3, device="neuron:1")
    # A 0-dim CPU tensor is a scalar operand, as with CUDA.
    assert (a + torch.tensor(2.0)).cpu().tolist() == [3.0, 3.0, 3.0]


# --- asynchronous errors -----------------------------------------------------------------------
def test_launch_error_is_raised_at_synchronize_with_the_op():
    weight = torch.randn(10, 4, device="neuron")
    bad = torch.tensor([1, 10], device="neuron")
    out = torch.embedding(weight, bad)  # queued: returns at once
    assert out.shape == (2, 4)
    with pytest.raises(ExecutionError) as info:
        torch.neuron.synchronize()
    message = str(info.value)
    # CPU's type and words for the op, then what the device found (the simulator's rule and instruction).
    assert "aten::index_select" in message and "IndexError: index out of range in self" in message
    assert "the device found IndexOutOfBoundsError" in message and "[graph.index_out_of_bounds] gather" in message
    assert "index 10 is out of bounds for a dimension of size 10" in message
    assert "[10, 4]:float32" in message and "neuron:0" in message
    assert isinstance(info.value.original, IndexError)  # as CPU's "index out of range" is
    assert isinstance(info.value, RuntimeError)
    torch.neuron.synchronize()  # reported once, then the device works again
    assert torch.embedding(weight, torch.tensor([9], device="neuron")).shape == (1, 4)


def test_launch_error_is_raised_at_item():
    x = torch.randn(5, device="neuron")
    y = x.index_select(0, torch.tensor([7], device="neuron")).sum()
    with pytest.raises(RuntimeError, match="aten::index_select") as info:
        y.item()
    message = str(info.value)
    assert "IndexError: index out of range in self" in message and isinstance(info.value.original, IndexError)
    assert "the device found IndexOutOfBoundsError" in message and "index 7 is out of bounds" in message


def test_use_after_a_failed_launch():
    x = torch.randn(5, device="neuron")
    y = x.index_select(0, torch.tensor([9], device="neuron"))
    z = (y * 2).exp()  # depends on the failed result: skipped, not computed on garbage
    with pytest.raises(RuntimeError, match="aten::index_select") as info:
        z.cpu()
    assert re.search(r"\d+ later task\(s\) on this queue were skipped", str(info.value))
    assert info.value.skipped >= 2  # y * 2 and exp
    # The error was delivered; new work runs normally.
    assert torch.equal((x * 0).cpu(), torch.zeros(5))


def test_argument_errors_are_raised_at_the_call():
    a = torch.ones(2, 3, device="neuron")
    with pytest.raises(RuntimeError, match="size of tensor a|broadcast"):
        a + torch.ones(4, device="neuron")
    with pytest.raises(RuntimeError, match="cannot be multiplied|must have same reduction dim"):
        a @ a
    with pytest.raises(IndexError):
        a[5]
    torch.neuron.synchronize()


def test_launch_blocking_raises_at_the_op():
    proc = run_python(
        """
        import torch
        x = torch.randn(5, device="neuron")
        try:
            x.index_select(0, torch.tensor([9], device="neuron"))
        except RuntimeError as err:
            print("raised at the op:", "aten::index_select" in str(err))
        from torch_neuronx import execution
        print("blocking:", execution.runtime().blocking)
        print((x * 0).sum().item())
        """,
        env={"NEURON_LAUNCH_BLOCKING": "1"},
    )
    assert proc.stdout.splitlines() == ["raised at the op: True", "blocking: True", "0.0"]


# --- processes -----------------------------------------------------------------------------
def test_fork_after_runtime_start_says_use_spawn():
    proc = run_python(
        """
        import multiprocessing as mp
        import torch

        torch.ones(2, device="neuron").sum().item()  # the runtime is running

        def child(q):
            try:
                torch.ones(2, device="neuron")
                q.put("no error")
            except Exception as err:
                q.put(type(err).__name__ + ": " + str(err))

        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        print(q.get(timeout=60))
        p.join(60)
        print("exitcode", p.exitcode)
        # spawn works: a fresh interpreter initializes its own runtime.
        sctx = mp.get_context("spawn")
        sq = sctx.Queue()
        sp = sctx.Process(target=exec, args=("import torch; torch.ones(2, device='neuron').sum().item()",))
        sp.start(); sp.join(120)
        print("spawn exitcode", sp.exitcode)
        """
    )
    lines = proc.stdout.splitlines()
    assert "spawn" in lines[0] and "fork" in lines[0], lines[0]
    assert lines[1] == "exitcode 0"
    assert lines[2] == "spawn exitcode 0"


def test_exit_with_queued_work_does_not_abort():
    # The interpreter must not finalize under a queue worker still running a CPU kernel.
    proc = run_python(
        """
        import torch
        x = torch.randn(192, 192, device="neuron")
        for _ in range(30):
            x = (x @ x).tanh()
        print("queued")
        """
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "queued"


def test_fork_before_any_device_use_is_fine():
    # Importing torch registers the device, but like CUDA before its first call, a child forked
    # from a parent that never used it gets a runtime of its own.
    proc = run_python(
        """
        import multiprocessing as mp
        import torch

        assert torch.neuron.device_count() >= 1  # queries do not count as use

        def child(q):
            try:
                q.put(str(torch.arange(4.0, device="neuron").sum().item()))
            except Exception as err:
                q.put(type(err).__name__ + ": " + str(err))

        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        print(q.get(timeout=60))
        p.join(60)
        print(torch.ones(2, device="neuron").sum().item())  # the parent still works
        """
    )
    assert proc.stdout.split() == ["6.0", "2.0"]
