"""The quick-start demo: a software NeuronCore at work.

Runs a tiled bf16 matmul program on the simulated NeuronCore-v3 (exact executor: the hardware's
numerics), checks it against numpy, and prints the device-time estimate with the per-engine
picture Neuron Explorer would show. Then the same program on Trainium3.
"""

from __future__ import annotations

import argparse
import time

import ml_dtypes
import numpy as np

from neuron_sim import ExactExecutor, get_architecture
from neuron_sim.programs import tiled_matmul
from neuron_sim.timing import estimate


def fmt_time(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us" if ns < 1e6 else f"{ns / 1e6:,.3f} ms"


def run_matmul(size: int, target: str) -> None:
    arch = get_architecture(target)
    program = tiled_matmul(size, size, size, dtype="bfloat16", arch=arch)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((size, size), dtype=np.float32).astype(ml_dtypes.bfloat16)
    out = np.empty((size, size), dtype=ml_dtypes.bfloat16)
    buffers = {
        "lhsT": np.ascontiguousarray(a.T).view(np.uint8).reshape(-1),
        "rhs": b.view(np.uint8).reshape(-1),
        "out": out.view(np.uint8).reshape(-1),
    }
    started = time.perf_counter()
    ExactExecutor(arch).run(program, buffers)
    wall = time.perf_counter() - started
    reference = a.astype(np.float32) @ b.astype(np.float32)
    err = np.abs(out.astype(np.float32) - reference).max() / np.abs(reference).max()

    timing = estimate(program, arch)
    s = timing.summary
    roofline_ns = 2 * size**3 / arch.tensor.peak_bf16_flops * 1e9
    print(f"\n== {size}x{size}x{size} bf16 matmul on {arch.name} ({arch.neuron_core}) ==")
    print(f"  instructions        {len(program.instructions):,}  (host run {wall * 1e3:.0f} ms on the exact executor)")
    print(f"  max error vs numpy  {err:.2e} (relative to max |C|; bf16 output rounding)")
    print(f"  device time         {fmt_time(s['total_time_ns'])}   TensorE roofline {fmt_time(roofline_ns)}")
    print(f"  MFU {s['mfu_estimated_percent']:5.1f}%   MBU {s['mbu_estimated_percent']:5.1f}%   "
          f"HBM read {s['hbm_read_bytes'] / 2**20:,.1f} MiB, written {s['hbm_write_bytes'] / 2**20:,.1f} MiB")
    print("  engine busy:")
    for engine in ("tensor", "vector", "scalar", "gpsimd", "sync", "dma"):
        pct = s[f"{engine}_active_time_percent"]
        bar = "#" * int(round(pct / 2.5))
        print(f"    {engine:7s} {pct:5.1f}% {bar}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024, help="matrix size (multiple of 512)")
    args = parser.parse_args()
    print("Software NeuronCore demo: a tiled matmul, run and timed without a Trainium chip.")
    for target in ("trn2", "trn3"):
        run_matmul(args.size, target)


if __name__ == "__main__":
    main()
