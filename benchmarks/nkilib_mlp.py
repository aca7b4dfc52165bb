"""nki-lib's gated MLP forward (SwiGLU) against the same computation in plain torch ops
(nkilib.torch.mlp.gated_mlp_plain) compiled by torch.compile(backend="neuron"), same shapes, same
run: simulated trn2 device time of one warm call (stream events on both sides) and the kernel's
MFU (the timing model's estimate: TensorE FLOPs over the kernel's time at the bf16 peak).

    python benchmarks/nkilib_mlp.py           # bf16, 1024 tokens, H = 1024, I = 2816
    python benchmarks/nkilib_mlp.py --quick   # 256 tokens, H = 512, I = 1408
"""

from __future__ import annotations

import argparse
import warnings

import torch
from _harness import report
from nkilib_norms import device_ns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from nkilib.mlp.gated_mlp import gated_mlp_kernel
    from nkilib.torch import mlp

    tokens, hidden, inter = (256, 512, 1408) if args.quick else (1024, 1024, 2816)
    g = torch.Generator().manual_seed(0)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16).to("neuron")

    x, wg, wu, wd = (
        rand(tokens, hidden),
        rand(hidden, inter, scale=0.03),
        rand(hidden, inter, scale=0.03),
        rand(inter, hidden, scale=0.03),
    )
    compiled = torch.compile(mlp.gated_mlp_plain, backend="neuron", dynamic=False)
    print(f"gated MLP (SwiGLU) forward, bf16, x [{tokens}, {hidden}], I = {inter}; simulated trn2 device time")
    k_ns = device_ns(lambda: mlp.gated_mlp_op(x, wg, wu, wd, "silu"))
    mfu = gated_mlp_kernel.last_timing[0].summary["mfu_estimated_percent"]
    c_ns = device_ns(lambda: compiled(x, wg, wu, wd))
    report(
        "gated MLP forward",
        f"{k_ns / 1e3:9.1f} us, MFU {mfu:4.1f}%",
        c_ns / k_ns,
        f"compiled {c_ns / 1e3:.1f} us",
        "kernel faster" + (" (met)" if k_ns < c_ns else " (NOT met)"),
    )


if __name__ == "__main__":
    main()
