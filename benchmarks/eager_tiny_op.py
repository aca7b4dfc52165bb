"""Per-op overhead of eager mode: a tiny ``x + y`` ([4, 8] fp32) on ``neuron`` vs on CPU, measured
in the same run (target: median <= 40 us per op on neuron, warm NEFF cache).

Each sample issues a batch of adds and synchronizes once, so the figure is the cost per op of
dispatch, signature lookup, output allocation, launch and the fast executor's run - what an
eager loop of small ops pays. The median over samples is reported.
"""

from __future__ import annotations

import statistics
import time
import warnings

import torch
from _harness import report

BATCH = 500
SAMPLES = 15


def per_op_seconds(x, y, sync) -> float:
    times = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        for _ in range(BATCH):
            x + y
        sync()
        times.append((time.perf_counter() - start) / BATCH)
    return statistics.median(times)


def main() -> None:
    warnings.simplefilter("ignore")
    import torch_neuronx

    a, b = torch.randn(4, 8), torch.randn(4, 8)
    x, y = a.to("neuron"), b.to("neuron")
    for _ in range(50):  # compile (or load) the NEFF, warm the allocator cache
        x + y
    torch.neuron.synchronize()
    torch_neuronx.clear_op_tracking()
    neuron = per_op_seconds(x, y, torch.neuron.synchronize)
    cpu = per_op_seconds(a, b, lambda: None)
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_ops()  # it ran on the device
    print(f"eager tiny add [4, 8] fp32, median of {SAMPLES} batches of {BATCH}")
    report("neuron x + y per op (compiled, fast executor)", f"{neuron * 1e6:.1f} us", neuron / cpu, "CPU x + y",
           f"<= 40 us ({'met' if neuron <= 40e-6 else 'NOT met'})")
    print(f"{'CPU x + y per op':48s} {cpu * 1e6:>19.2f} us")


if __name__ == "__main__":
    main()
