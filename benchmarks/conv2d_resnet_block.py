"""Convolution on the NeuronCore: forward + backward of a ResNet basic block's convolutions
(x -> conv3x3 -> relu -> conv3x3 -> + x -> relu, 64 channels, 56x56, batch 8, no batch norm),
eager and compiled on ``neuron`` vs CPU PyTorch, in the same run.

Reports per step: the simulated device time (NeuronCore timeline between two events), MFU (the
convolutions' model FLOPs - forward, input and weight gradients - over TensorE's BF16 peak x
device time, Neuron Explorer's definition), and CPU's wall time for the same step over the
device time.

    python benchmarks/conv2d_resnet_block.py [--steps 3] [--dtype float32|bfloat16] [--batch 8]
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

CHANNELS, SIZE, KERNEL = 64, 56, 3


def block(torch):
    class BasicBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(CHANNELS, CHANNELS, KERNEL, padding=1, bias=False)
            self.conv2 = torch.nn.Conv2d(CHANNELS, CHANNELS, KERNEL, padding=1, bias=False)

        def forward(self, x):
            return torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)

    return BasicBlock()


def conv_flops(batch: int) -> float:
    """Two convolutions; forward, input gradient and weight gradient each 2 x MACs."""
    macs = batch * CHANNELS * SIZE * SIZE * CHANNELS * KERNEL * KERNEL
    return 2 * 3 * 2.0 * macs


def steps(torch, module, x, n: int, device: str) -> tuple[float, float | None]:
    """Median wall seconds and device ms (neuron) of ``n`` forward + backward steps, after one warm-up."""
    walls, device_ms = [], []
    for k in range(n + 1):
        if device == "neuron":
            start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        module.zero_grad(set_to_none=True)
        module(x).sum().backward()
        if device == "neuron":
            end.record()
            end.synchronize()
        if k:
            walls.append(time.perf_counter() - t0)
            if device == "neuron":
                device_ms.append(start.elapsed_time(end))
    return statistics.median(walls), statistics.median(device_ms) if device_ms else None


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="conv2d-neff-")
    import torch
    import torch_neuronx
    from torch_neuronx import execution

    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    cpu_block = block(torch).to(dtype)
    x = torch.randn(args.batch, CHANNELS, SIZE, SIZE, dtype=dtype)
    cpu_wall, _ = steps(torch, cpu_block, x, args.steps, "cpu")
    peak = execution.runtime().config.arch.tensor.peak_bf16_flops
    flops = conv_flops(args.batch)
    print(f"ResNet basic block convolutions (2x conv3x3, {CHANNELS} ch, {SIZE}x{SIZE}, batch {args.batch}, "
          f"{args.dtype}), forward + backward, median of {args.steps} warm steps; CPU wall {cpu_wall * 1e3:.1f} ms")
    for mode in ("eager", "compiled"):
        dev_block = block(torch).to(dtype).to("neuron")
        dev_block.load_state_dict(cpu_block.state_dict())
        fn = torch.compile(dev_block, backend="neuron", dynamic=False) if mode == "compiled" else dev_block
        torch_neuronx.clear_op_tracking()
        wall, device_ms = steps(torch, fn, x.to("neuron"), args.steps, "neuron")
        fallbacks = torch_neuronx.get_fallback_ops()
        mfu = flops / (peak * device_ms * 1e-3)
        report(f"{mode} device time per step", f"{device_ms:.3f} ms", cpu_wall / (device_ms * 1e-3),
               "CPU wall (CPU wall / device time)", "report only")
        print(f"{'':48s} MFU {100 * mfu:.1f}% (BF16 peak {peak / 1e12:.0f} TF/s), host wall {wall * 1e3:.0f} ms, "
              f"CPU fallbacks: {fallbacks or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
