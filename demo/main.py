"""The quick-start demo: Trainium as a PyTorch device, on a software NeuronCore.

1. Train a small GPT on CPU, on the ``neuron`` device in eager mode (each op compiled to its own
   NEFF) and with ``torch.compile(backend="neuron")`` (whole forward and backward graphs), from
   the same initial weights and seeds: losses side by side, the simulated device time per step,
   compile metrics and the ops that ran through CPU fallback.
2. Profile one eager training step with torch.profiler: the top-5 ops by simulated device time,
   and a Neuron Explorer profile of the same step for its UI.
3. Run an NKI kernel (a tiled matmul) on the simulated NeuronCore and show its device-time
   estimate, engine by engine, as Neuron Explorer would.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings

import ml_dtypes
import numpy as np


def train_demo(steps: int) -> None:
    import torch_neuronx
    from torch_neuronx.testing import GPTConfig, train_run

    cfg = GPTConfig(vocab=256, d_model=128, n_layers=2, n_heads=4, seq_len=64, dropout=0.1)
    print(f"\n== Training a {cfg.n_layers}-layer GPT (d={cfg.d_model}, seq {cfg.seq_len}, batch 8) ==")
    print("  eager: every ATen op compiled by neuronx-cc to its own NEFF (cached), run on the simulated NeuronCore")
    torch_neuronx.clear_op_tracking()
    cpu = train_run("cpu", steps, cfg=cfg, lr=1e-3)
    eager = train_run("neuron", steps, cfg=cfg, lr=1e-3)
    fallback = torch_neuronx.get_fallback_ops()
    torch_neuronx.reset_compile_metrics()
    compiled = train_run("neuron", steps, cfg=cfg, lr=1e-3, compile_backend="neuron")
    metrics = torch_neuronx.compile_metrics()
    print(f"  {'step':>4}  {'loss (cpu)':>11}  {'loss (eager)':>12}  {'loss (compiled)':>15}  "
          f"{'device ms (eager)':>17}  {'device ms (compiled)':>20}")
    for i in range(steps):
        print(f"  {i:>4}  {cpu.losses[i]:11.6f}  {eager.losses[i]:12.6f}  {compiled.losses[i]:15.6f}  "
              f"{eager.device_ms[i]:17.3f}  {compiled.device_ms[i]:20.3f}")
    diff = max(abs(a - b) for a, b in zip(cpu.losses, eager.losses))
    print(f"  largest loss difference eager vs CPU: {diff:.2e} (fp32 on different hardware: rounding, not bugs)")
    print(f"  compiled losses equal eager's: {compiled.losses == eager.losses}")

    def warm_ms(run):
        warm = run.step_seconds[1:] or run.step_seconds
        return sum(warm) / len(warm) * 1e3

    print(f"  host wall time per step after the first: cpu {warm_ms(cpu):.0f} ms, eager {warm_ms(eager):.0f} ms, "
          f"compiled {warm_ms(compiled):.0f} ms")
    print(f"  torch.compile: {metrics['graphs_compiled']} graphs compiled in {metrics['compile_seconds']:.1f} s, "
          f"{metrics['cache_hits']} cache hits, {metrics['eager_fallbacks']} eager fallbacks")
    print(f"  ops that ran through CPU fallback in eager ({len(fallback)}): {', '.join(fallback) or 'none'}")


def profile_demo(output_dir: str) -> None:
    import torch
    from neuron_explorer import open_profile
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode
    from torch_neuronx.testing import GPT, GPTConfig
    from torch_neuronx.testing.gpt import batches

    cfg = GPTConfig(vocab=256, d_model=128, n_layers=2, n_heads=4, seq_len=64, dropout=0.1)
    print("\n== Where the device time goes: torch.profiler over one eager training step ==")
    torch.manual_seed(0)
    model = GPT(cfg).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    (x, y), = batches(cfg, 8, 1, 0)
    x, y = x.to("neuron"), y.to("neuron")

    def step():
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.neuron.synchronize()

    step()  # warm: every op compiled
    config = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=output_dir)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=config,
                 on_trace_ready=NeuronProfiler(config).export_trace) as prof:
        step()
    # key_averages() has a row per op and per launched program; the ops' rows carry what they issued.
    ops = [e for e in prof.key_averages() if e.device_type == DeviceType.CPU and e.self_device_time_total > 0]
    total_us = sum(e.self_device_time_total for e in ops)
    print(f"  top-5 ops by simulated device time (self_privateuse1_time_total), of {total_us / 1e3:.3f} ms in the step:")
    print(f"    {'op':28s} {'calls':>6s} {'device time':>12s} {'share':>7s}")
    for e in sorted(ops, key=lambda e: -e.self_device_time_total)[:5]:
        print(f"    {e.key:28s} {e.count:6d} {fmt_time(e.self_device_time_total * 1e3):>12s} "
              f"{100 * e.self_device_time_total / total_us:6.1f}%")
    session = config.get_session_dir()
    summary = open_profile(session).summary  # ingested into <session>/profile/ (Parquet tables)
    print(f"  device-profiled executions: {fmt_time(summary['total_time'] * 1e9)}, {summary['instruction_count']:,} "
          f"instructions, MFU {summary['mfu_estimated_percent']:.1f}%")
    print(f"  open the profile in the UI: neuron-explorer view -d {session}")


def fmt_time(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us" if ns < 1e6 else f"{ns / 1e6:,.3f} ms"


def nki_demo(size: int, target: str) -> None:
    import nki
    import nki.isa as nisa
    import nki.language as nl
    from neuron_sim import get_architecture
    from neuron_sim.arch import PLATFORM_ENV

    arch = get_architecture(target)

    @nki.jit
    def matmul(lhsT, rhs):
        K, M = lhsT.shape
        _, N = rhs.shape
        out = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        for m in nl.affine_range(M // 128):
            for n in nl.affine_range(N // 512):
                acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // 128):
                    a = nl.ndarray((128, 128), lhsT.dtype, buffer=nl.sbuf)
                    b = nl.ndarray((128, 512), rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                    nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
                res = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
                nisa.tensor_copy(dst=res, src=acc)
                nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], src=res)
        return out

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((size, size), dtype=np.float32).astype(ml_dtypes.bfloat16)
    os.environ[PLATFORM_ENV] = target  # NKI compiles for the target this variable names
    started = time.perf_counter()
    c = matmul(np.ascontiguousarray(a.T), b)
    wall = time.perf_counter() - started
    reference = a.astype(np.float32) @ b.astype(np.float32)
    err = np.abs(c.astype(np.float32) - reference).max() / np.abs(reference).max()
    s = matmul.last_timing[0].summary
    roofline_ns = 2 * size**3 / arch.tensor.peak_bf16_flops * 1e9
    print(f"\n== NKI kernel: {size}x{size}x{size} bf16 matmul on {arch.name} ({arch.neuron_core}) ==")
    print(f"  traced + run on the exact executor in {wall * 1e3:.0f} ms; max error vs numpy {err:.1e} (bf16 output)")
    print(f"  device time {fmt_time(s['total_time_ns'])} (TensorE roofline {fmt_time(roofline_ns)}), "
          f"MFU {s['mfu_estimated_percent']:.1f}%, HBM traffic {(s['hbm_read_bytes'] + s['hbm_write_bytes']) / 2**20:.1f} MiB")
    for engine in ("tensor", "vector", "scalar", "gpsimd", "sync", "dma"):
        pct = s[f"{engine}_active_time_percent"]
        print(f"    {engine:7s} {pct:5.1f}% {'#' * int(round(pct / 2.5))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5, help="training steps")
    parser.add_argument("--size", type=int, default=1024, help="NKI matmul size (multiple of 512)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Operator '.*' executed via CPU fallback")
    print("Trainium as a native PyTorch device, on a software NeuronCore (no Trainium chip needed).")
    train_demo(args.steps)
    profile_demo(os.path.join(tempfile.gettempdir(), "neuron-demo-profile"))
    for target in ("trn2", "trn3"):
        nki_demo(args.size, target)


if __name__ == "__main__":
    main()
