"""Building captures for the tests: programs with known schedules, NKI kernels launched raw on a
private runtime (no torch), and a recorder on a private trace sink."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from neuron_explorer import CaptureConfig, Recorder
from neuron_sim import ProgramBuilder, get_architecture
from neuron_sim.isa import Activation, DmaCopy, SemaphoreSignal, SemaphoreWait, TensorTensor
from neuron_sim.programs import tiled_matmul
from neuron_sim.runtime import Runtime, RuntimeConfig
from neuron_sim.trace import TraceSink

ARCH = get_architecture("trn2")


def private_runtime(cores: str = "0-1") -> tuple[Runtime, TraceSink]:
    sink = TraceSink()
    runtime = Runtime(RuntimeConfig.from_env({"NEURON_RT_VISIBLE_CORES": cores}, arch=ARCH), trace=sink)
    return runtime, sink


def capture(out: Path, work, config: CaptureConfig | None = None, cores: str = "0-1") -> Recorder:
    """Run ``work(runtime)`` under a recorder; returns the (stopped) recorder."""
    runtime, sink = private_runtime(cores)
    recorder = Recorder(out, config or CaptureConfig(device_profile="session"), sink=sink,
                        cores_available=list(runtime.config.visible_cores))
    with recorder:
        work(runtime)
        runtime.synchronize()
    return recorder


def chain_program():
    """DMA in -> exp on ScalarE -> add on VectorE -> DMA out: every step waits for the one before."""
    b = ProgramBuilder("chain", ARCH)
    x = b.input("x", (128, 256), "float32")
    y = b.output("y", (128, 256), "float32")
    t = b.sbuf((128, 256), "float32")
    u = b.sbuf((128, 256), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[:, :]))
    b.emit(Activation(dst=u[:, :], src=t[:, :], func="exp"))
    b.emit(TensorTensor(dst=u[:, :], in0=u[:, :], in1=t[:, :], op="add"))
    b.emit(DmaCopy(dst=y[:, :], src=u[:, :]))
    return b.build()


def semaphore_program():
    """GpSimd signals a semaphore after a copy; VectorE waits for it, then computes."""
    b = ProgramBuilder("semaphores", ARCH)
    x = b.input("x", (128, 64), "float32")
    y = b.output("y", (128, 64), "float32")
    t = b.sbuf((128, 64), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[:, :], engine="gpsimd", queue="qGpSimdIO0"))
    b.emit(SemaphoreSignal(semaphore="ready", engine="gpsimd"))
    b.emit(SemaphoreWait(semaphore="ready", engine="vector"))
    b.emit(TensorTensor(dst=t[:, :], in0=t[:, :], in1=t[:, :], op="add", engine="vector"))
    b.emit(DmaCopy(dst=y[:, :], src=t[:, :]))
    return b.build()


def buffers_for(program, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for t in program.tensors:
        if t.kind == "internal":
            continue
        dtype = np.dtype(t.dtype) if t.dtype in ("float32", "int32") else np.float32
        out[t.name] = (rng.standard_normal(t.shape).astype(dtype) if t.kind != "output" else np.zeros(t.shape, dtype))
    return out


def nki_program(kernel, *args):
    return kernel.compile(args, {}).programs[0]


@dataclass
class MixedRun:
    session_dir: Path
    programs: dict  # name -> Program


def mixed_run(out: Path) -> MixedRun:
    import kernels

    a = np.random.default_rng(1).standard_normal((128, 512)).astype(np.float32)
    lhsT = np.random.default_rng(2).standard_normal((256, 128)).astype(np.float32)
    rhs = np.random.default_rng(3).standard_normal((256, 512)).astype(np.float32)
    programs = {
        "matmul": tiled_matmul(256, 256, 512, dtype="float32", arch=ARCH),
        "scale_add": nki_program(kernels.scale_add, a, a),
        "matmul_relu": nki_program(kernels.matmul_relu, lhsT, rhs),
        "chain": chain_program(),
        "semaphores": semaphore_program(),
    }

    def work(rt):
        q0 = rt.device(0).default_queue
        q1 = rt.device(1).new_queue("side")
        for i in range(2):
            q0.launch(programs["matmul"], buffers_for(programs["matmul"], i), name="aten::mm", context="aten::mm [256, 512]")
        q0.submit(lambda: None, device_time_ns=800.0, name="copy_h2d", kind="copy", context="copy [128, 512] host -> neuron:0")
        q0.launch(programs["scale_add"], buffers_for(programs["scale_add"]), name="scale_add", context="NKI kernel scale_add")
        q0.launch(programs["chain"], buffers_for(programs["chain"]), name="aten::exp")
        q0.submit(lambda: None, name="aten::nonzero", context="aten::nonzero (CPU fallback)")
        q1.launch(programs["matmul_relu"], buffers_for(programs["matmul_relu"]), name="matmul_relu",
                  context="NKI kernel matmul_relu")
        q1.launch(programs["semaphores"], buffers_for(programs["semaphores"]), name="aten::add")

    recorder = capture(out, work)
    return MixedRun(recorder.session_dir, programs)
