"""Fixtures for the runtime tests: small real programs, their buffers, and private runtimes.

Each test gets its own Runtime and TraceSink, so tests never share queues, clocks or subscribers.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from neuron_sim import ProgramBuilder, get_architecture
from neuron_sim.isa import DmaCopy
from neuron_sim.programs import tiled_matmul
from neuron_sim.runtime import Runtime, RuntimeConfig, reset_runtime
from neuron_sim.trace import TraceSink

ARCH = get_architecture("trn2")


def make_runtime(blocking: bool = False, **env) -> Runtime:
    config = RuntimeConfig.from_env({k: str(v) for k, v in env.items()}, arch=ARCH)
    return Runtime(config, blocking=blocking, trace=TraceSink())


@pytest.fixture
def runtime():
    rt = make_runtime()
    yield rt
    _drain(rt)


@pytest.fixture
def blocking_runtime():
    rt = make_runtime(blocking=True)
    yield rt
    _drain(rt)


def _drain(rt: Runtime) -> None:
    for d in rt.devices:
        for q in d.queues:
            q.wait_idle()
            q.take_failure()


@pytest.fixture(autouse=True)
def _no_global_runtime():
    reset_runtime()
    yield
    reset_runtime()


def copy_program(cols: int = 64, internal: bool = True, name: str = "copy_via_hbm"):
    """y = x for a [128, cols] fp32 tensor, bouncing through an internal HBM tensor if asked."""
    b = ProgramBuilder(name, ARCH)
    x = b.input("x", (128, cols), "float32")
    y = b.output("y", (128, cols), "float32")
    t = b.sbuf((128, cols), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[:, :]))
    if internal:
        tmp = b.internal("tmp", (128, cols), "float32")
        b.emit(DmaCopy(dst=tmp[:, :], src=t[:, :]))
        b.emit(DmaCopy(dst=t[:, :], src=tmp[:, :]))
    b.emit(DmaCopy(dst=y[:, :], src=t[:, :]))
    return b.build()


def failing_program(cols: int = 64):
    """A valid-looking program that fails at run time: its first DMA reads through a register
    that no instruction sets."""
    p = copy_program(cols, internal=False, name="reads_unset_register")
    first = p.instructions[0]
    broken = dataclasses.replace(first, src=dataclasses.replace(first.src, dynamic=(("r_unset", 1),)))
    return dataclasses.replace(p, instructions=[broken] + p.instructions[1:])


def copy_buffers(cols: int = 64, seed: int = 0):
    x = np.random.default_rng(seed).standard_normal((128, cols)).astype(np.float32)
    return {"x": x, "y": np.zeros_like(x)}


@pytest.fixture
def matmul():
    return tiled_matmul(256, 256, 512, dtype="float32", arch=ARCH)


def matmul_buffers(seed: int = 0):
    rng = np.random.default_rng(seed)
    lhsT = rng.standard_normal((256, 256)).astype(np.float32)
    rhs = rng.standard_normal((256, 512)).astype(np.float32)
    return {"lhsT": lhsT, "rhs": rhs, "out": np.zeros((256, 512), np.float32)}


class Helpers:
    make_runtime = staticmethod(make_runtime)
    copy_program = staticmethod(copy_program)
    failing_program = staticmethod(failing_program)
    copy_buffers = staticmethod(copy_buffers)
    matmul_buffers = staticmethod(matmul_buffers)


@pytest.fixture(name="h")
def _helpers():
    return Helpers
