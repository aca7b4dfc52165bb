"""nki-lib's flash attention forward against F.scaled_dot_product_attention through torch-neuronx's
eager path, same shapes, same run: simulated trn2 device time (stream events around one warm
call on both sides) and the kernel's MFU (the timing model's estimate: TensorE FLOPs over the
kernel's time at the bf16 peak).

    python benchmarks/nkilib_attention.py           # bf16, one head, S=4096, d=128
    python benchmarks/nkilib_attention.py --quick   # S=512
"""

from __future__ import annotations

import argparse
import warnings

import torch
import torch.nn.functional as F
from _harness import report
from nkilib_norms import device_ns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch_neuronx
    from nkilib.attention.flash_attention import flash_attention_kernel
    from nkilib.torch import attention

    seq, dim = (512, 128) if args.quick else (4096, 128)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, seq, dim, generator=g).to(torch.bfloat16).to("neuron") for _ in range(3))
    print(f"flash attention forward vs torch-neuronx eager SDPA, bf16, [1, 1, {seq}, {dim}]; simulated trn2 device time")
    for causal in (True, False):
        k_ns = device_ns(lambda causal=causal: attention.flash_attention_op(q, k, v, causal, dim ** -0.5))
        mfu = flash_attention_kernel.last_timing[0].summary["mfu_estimated_percent"]
        torch_neuronx.clear_op_tracking()
        e_ns = device_ns(lambda causal=causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        report(f"{'causal' if causal else 'full'} attention", f"{k_ns / 1e3:9.1f} us, MFU {mfu:4.1f}%", e_ns / k_ns,
               f"eager {e_ns / 1e3:.1f} us", "kernel faster" + (" (met)" if k_ns < e_ns else " (NOT met)"))
        if torch_neuronx.get_fallback_ops():
            print(f"    eager CPU fallbacks: {', '.join(torch_neuronx.get_fallback_ops())}")


if __name__ == "__main__":
    main()
