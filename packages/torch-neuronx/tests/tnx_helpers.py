"""Helpers of the torch-neuronx tests (a module name unique across the monorepo)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading

import nki
import nki.language as nl
import torch
import torch_neuronx

FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]
INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + [torch.bool]


# The ways a test runs an eager op on the device; ``execution_mode`` sets one up.
MODES = ["eager", "adaptive", "compile"]


@contextlib.contextmanager
def execution_mode(mode: str):
    """Run the block in ``mode``: plain eager, adaptive eager, or (``compile``: the block calls
    ``torch.compile`` itself) with dynamo reset, so each case compiles its own graph instead of
    meeting dynamo's recompile limit. Dynamo is reset in every mode, as a case before may have
    compiled."""
    torch._dynamo.reset()
    if mode == "adaptive":
        torch_neuronx.set_adaptive_eager(True)
    try:
        yield
    finally:
        if mode == "adaptive":
            torch_neuronx.set_adaptive_eager(None)


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (same venv) with extra environment variables."""
    full_env = dict(os.environ)
    full_env.pop("NEURON_LAUNCH_BLOCKING", None)
    full_env.pop("NEURON_RT_VISIBLE_CORES", None)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed with rc {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc


def assert_equal(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bitwise-equal values (NaNs in the same places), same dtype and shape; ``actual`` may be on neuron."""
    actual = actual.cpu()
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


# Compiled ops compute in fp32 and round once, in the engines' own order (reductions, fused
# chains): results match CPU to these tolerances, not bit for bit.
TOLERANCES = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
              torch.float16: dict(rtol=5e-3, atol=5e-3)}


def assert_close_to_cpu(actual: torch.Tensor, expected: torch.Tensor, **overrides) -> None:
    """A device result against CPU's: same dtype and shape; integers and bools bit for bit, floats
    within the dtype's tolerance (``TOLERANCES``, or ``rtol``/``atol`` given)."""
    actual = actual.cpu()
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    tol = TOLERANCES.get(expected.dtype, dict(rtol=0, atol=0)) | overrides
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)


def check_against_cpu(fn, *inputs: torch.Tensor, fallback=(), **tol) -> None:
    """``fn`` of neuron copies of ``inputs`` against ``fn`` of ``inputs`` on CPU: no op but those in
    ``fallback`` ran through CPU fallback, same dtype and shape, values within ``tol`` (torch's
    defaults when none is given; NaNs in the same places)."""
    torch_neuronx.clear_op_tracking()
    got = fn(*(x.to("neuron") for x in inputs)).cpu()
    assert set(torch_neuronx.get_fallback_ops()) <= set(fallback), torch_neuronx.get_fallback_reasons()
    expected = fn(*inputs)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, equal_nan=True, **tol)


# A held stream waits for its block to end; this bounds the wait should a test never get there
# (a generous bound: a compile under a loaded machine takes far longer than an idle one).
HELD_STREAM_BOUND_S = 600


def gate_stream(device: int | None = None, bound_s: float = HELD_STREAM_BOUND_S) -> threading.Event:
    """Hold the current stream of ``device`` (a host task waiting) until the returned event is set,
    or ``bound_s`` has passed: work issued meanwhile is queued behind it, not run."""
    from torch_neuronx import execution

    gate = threading.Event()
    execution.queue(torch.neuron.current_device() if device is None else device).submit(
        lambda: gate.wait(bound_s), name="gate")
    return gate


@contextlib.contextmanager
def held_stream(device: int | None = None):
    """``gate_stream`` for the block: released when the block ends, also when it raises; yields the
    ``threading.Event`` that releases it earlier."""
    gate = gate_stream(device)
    try:
        yield gate
    finally:
        gate.set()


def sim_now_ns(device: int = 0) -> float:
    """Simulated time at which everything queued on ``device`` completes."""
    return torch_neuronx_runtime().device(device).sim_time_ns


def torch_neuronx_runtime():
    from torch_neuronx import execution

    return execution.runtime()


@contextlib.contextmanager
def op_records():
    """The op records (``neuron_sim.trace.OpRecord``: name, framework, task_kind, simulated times)
    of the work issued inside the block, which is settled on entry and exit."""
    from neuron_sim.trace import RecordKind, TraceSession

    records: list = []
    torch.neuron.synchronize()
    with TraceSession(kinds=[RecordKind.OP], on_record=records.append):
        yield records
        torch.neuron.synchronize()


# The announcement's NKI kernels, exactly as written (they return the output parameter).
@nki.jit
def sin_kernel(in_ptr0, out_ptr):
    input_tile = nl.load(in_ptr0[0:128])
    output_tile = nl.sin(input_tile)
    nl.store(out_ptr[0:128], value=output_tile)
    return out_ptr


@nki.jit
def cos_kernel(in_ptr0, out_ptr):
    input_tile = nl.load(in_ptr0[0:128])
    output_tile = nl.cos(input_tile)
    nl.store(out_ptr[0:128], value=output_tile)
    return out_ptr


def nki_sin_cos_ops(namespace: str):
    """``sin_kernel`` and ``cos_kernel`` as custom ops ``<namespace>::sin`` and ``<namespace>::cos``
    (``torch_neuronx.nki_op``), sin trainable: its backward calls the cos op. Each test file
    registers its own namespace (a custom op name is registered once per process)."""
    from torch_neuronx import nki_op

    @nki_op(f"{namespace}::sin", mutates_args={})
    def sin(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        sin_kernel(x, out)
        return out

    @nki_op(f"{namespace}::cos", mutates_args={})
    def cos(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        cos_kernel(x, out)
        return out

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * cos(x)

    sin.register_autograd(backward, setup_context=setup_context)
    return sin, cos
