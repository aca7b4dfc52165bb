"""Eager training of the 4-layer GPT (torch_neuronx.testing.gpt defaults: d_model 256, seq 128,
batch 8, AdamW) on ``neuron`` vs CPU PyTorch, in the same run.

Reports: the first step on neuron with a cold NEFF cache (every op signature traced and
compiled), the median warm step wall time on neuron vs CPU (target: <= 2.0x), and the simulated
device time per step (NeuronCore timeline between two events).

    python benchmarks/eager_gpt_step.py [--steps 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import warnings

from _harness import report


def run(device: str, steps: int, adaptive: bool = False):
    """(first step seconds, warm step seconds (median), simulated ms per step or None, losses)."""
    import torch_neuronx
    from torch_neuronx.testing import train_run

    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        result = train_run(device, steps + 1)
    finally:
        torch_neuronx.set_adaptive_eager(None)
    device_ms = statistics.median(result.device_ms[1:]) if result.device_ms else None
    return result.step_seconds[0], statistics.median(result.step_seconds[1:]), device_ms, result.losses


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    # A cache of this run only: the first step really compiles every op signature.
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="eager-gpt-neff-")
    import torch_neuronx

    _, cpu_step, _, _ = run("cpu", args.steps)
    torch_neuronx.clear_op_tracking()
    cold, neuron_step, device_ms, losses = run("neuron", args.steps)
    fallback = torch_neuronx.get_fallback_ops()
    _, adaptive_step, adaptive_ms, adaptive_losses = run("neuron", args.steps, adaptive=True)
    print(f"eager GPT train step (4 layers, d_model 256, seq 128, batch 8), median of {args.steps} warm steps")
    report("neuron step wall time (warm NEFF cache)", f"{neuron_step * 1e3:.0f} ms", neuron_step / cpu_step, "CPU step",
           f"<= 2.0x ({'met' if neuron_step <= 2 * cpu_step else 'NOT met'})")
    print(f"{'CPU step wall time':48s} {cpu_step * 1e3:>19.0f} ms")
    print(f"{'neuron first step, cold NEFF cache':48s} {cold:>20.1f} s")
    print(f"{'neuron simulated device time per step':48s} {device_ms:>19.2f} ms")
    report("... with adaptive eager", f"{adaptive_ms:.2f} ms", adaptive_ms / device_ms, "plain eager",
           f"<= 0.7x ({'met' if adaptive_ms <= 0.7 * device_ms else 'NOT met'}); losses "
           f"{'identical' if adaptive_losses == losses else 'DIFFER'}")
    print(f"{'adaptive eager step wall time (warm)':48s} {adaptive_step * 1e3:>19.0f} ms")
    print(f"ops through CPU fallback: {', '.join(fallback) or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
