"""Profiling overhead: the eager GPT training step (torch_neuronx.testing.gpt defaults: 4 layers,
d_model 256, seq 128, batch 8, AdamW) inside torch.profiler with ProfilerActivity.PrivateUse1 and
a NeuronConfig(modes=[DEVICE, RUNTIME]) - device time per op, the Neuron Explorer session with a
device trace of every execution - vs the same steps unprofiled, in the same run.

Unprofiled steps run before and after the profiled window (their median is the baseline), so a
change in the machine's load shows as a spread between the two. The window's close (waiting for
the capture writer, handing the device events to Kineto) and torch.profiler's own processing are
reported separately and amortized over the window's steps.

    python benchmarks/explorer_profiler_overhead.py [--steps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

from _harness import report


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="profiler-overhead-neff-")
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torch_neuronx.profiling import NeuronConfig, ProfileMode
    from torch_neuronx.testing import GPT, GPTConfig
    from torch_neuronx.testing.gpt import batches

    cfg = GPTConfig()
    torch.manual_seed(0)
    model = GPT(cfg).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = [(x.to("neuron"), y.to("neuron")) for x, y in batches(cfg, 8, 4, 0)]

    def step(i: int) -> float:
        x, y = data[i % len(data)]
        start = time.perf_counter()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        return time.perf_counter() - start

    for i in range(2):
        step(i)  # compiled and warm
    before = [step(i) for i in range(args.steps)]
    with tempfile.TemporaryDirectory(prefix="profiler-overhead-out-") as out:
        config = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=out)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=config) as prof:
            profiled = [step(i) for i in range(args.steps)]
            closing = time.perf_counter()
        close_s = time.perf_counter() - closing
        averages_start = time.perf_counter()
        averages = prof.key_averages()
        averages_s = time.perf_counter() - averages_start
        launches = sum(e.count for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU)
    after = [step(i) for i in range(args.steps)]

    baseline = statistics.median(before + after)
    step_profiled = statistics.median(profiled)
    amortized = (sum(profiled) + close_s) / len(profiled)
    print(f"eager GPT train step (4 layers, d_model 256, seq 128, batch 8), {args.steps} steps per arm")
    print(f"{'unprofiled step (median, before and after)':48s} {baseline * 1e3:>19.0f} ms   "
          f"(before {statistics.median(before) * 1e3:.0f} ms, after {statistics.median(after) * 1e3:.0f} ms)")
    report("profiled step, DEVICE+RUNTIME (median)", f"{step_profiled * 1e3:.0f} ms", step_profiled / baseline,
           "unprofiled", f"<= 1.3x ({'met' if step_profiled <= 1.3 * baseline else 'NOT met'})")
    report("... with the window's close amortized", f"{amortized * 1e3:.0f} ms", amortized / baseline, "unprofiled",
           "(informational)")
    print(f"{'window close (capture writer, Kineto events)':48s} {close_s * 1e3:>19.0f} ms")
    print(f"{'key_averages() over the window':48s} {averages_s * 1e3:>19.0f} ms   "
          f"({len(averages)} op kinds, {launches} device events)")


if __name__ == "__main__":
    main(sys.argv[1:])
