"""nki-lib's blockwise expert matmul (MoE grouped GEMM, dropless blocks) against the same
product in plain torch ops (nkilib.torch.moe.blockwise_matmul_plain: gather the rows, one bmm per
block against its expert's weight) compiled by torch.compile(backend="neuron"), same shapes,
same run: simulated trn2 device time of one warm call (stream events on both sides) and the
kernel's MFU - the timing model's estimate (TensorE FLOPs, padding rows included, over the
kernel's time at the bf16 peak) and the useful one (2 * T * k * K * N per matmul over the same time).

    python benchmarks/nkilib_moe.py           # bf16, 2048 tokens top-2 of 8 experts, blocks of 512;
                                              # forward K = N = 2048, backward K = N = 1024 (its SBUF limit)
    python benchmarks/nkilib_moe.py --quick   # 512 tokens, K = N = 1024 / 512
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
    import torch_neuronx
    from neuron_sim.arch import get_architecture
    from nkilib.moe.blockwise_matmul import blockwise_matmul_backward_kernel, blockwise_matmul_kernel
    from nkilib.torch import block_layout, moe

    tokens, dims = (512, (1024, 512)) if args.quick else (2048, (2048, 1024))
    experts, top_k, block = 8, 2, 512
    g = torch.Generator().manual_seed(0)
    ids = torch.topk(torch.randn(tokens, experts, generator=g), top_k).indices.to(torch.int32).to("neuron")
    token_ids, block_experts, _ = block_layout(ids, experts, block)
    peak = get_architecture("trn2").tensor.peak_bf16_flops
    compiled = torch.compile(moe.blockwise_matmul_plain, backend="neuron", dynamic=False)
    print(
        f"blockwise expert matmul, bf16, {tokens} tokens top-{top_k} of {experts} experts, blocks of {block} "
        f"({block_experts.shape[0]} blocks); simulated trn2 device time"
    )
    for name, dim in zip(("forward", "backward"), dims):
        x = torch.randn(tokens, dim, generator=g).to(torch.bfloat16).to("neuron")
        w = (torch.randn(experts, dim, dim, generator=g) * 0.02).to(torch.bfloat16).to("neuron")
        if name == "forward":
            kernel, matmuls = blockwise_matmul_kernel, 1

            def kernel_call(x=x, w=w):
                return moe.blockwise_matmul_op(x, w, token_ids, block_experts)

            def plain_call(x=x, w=w):
                return compiled(x, w, token_ids, block_experts)
        else:
            kernel, matmuls = blockwise_matmul_backward_kernel, 2
            dout = torch.randn(token_ids.shape[0], dim, generator=g).to(torch.bfloat16).to("neuron")
            xs, ws = x.detach().requires_grad_(), w.detach().requires_grad_()
            out = compiled(xs, ws, token_ids, block_experts)

            def kernel_call(x=x, w=w, dout=dout):
                return moe.blockwise_matmul_backward_op(dout, x, w, token_ids, block_experts)

            def plain_call(out=out, xs=xs, ws=ws, dout=dout):
                return torch.autograd.grad(out, (xs, ws), dout, retain_graph=True)

        k_ns = device_ns(kernel_call)
        mfu = kernel.last_timing[0].summary["mfu_estimated_percent"]
        useful = 100.0 * matmuls * 2.0 * tokens * top_k * dim * dim / (peak * k_ns * 1e-9)
        torch_neuronx.clear_op_tracking()
        c_ns = device_ns(plain_call)
        report(
            f"{name} K = N = {dim}",
            f"{k_ns / 1e3:9.1f} us, MFU {mfu:4.1f}% ({useful:4.1f}% useful)",
            c_ns / k_ns,
            f"compiled {c_ns / 1e3:.1f} us",
            "MFU >= 60%" + (" (met)" if mfu >= 60 else " (NOT met)"),
        )
        if torch_neuronx.get_fallback_ops():
            print(f"    eager CPU fallbacks: {', '.join(torch_neuronx.get_fallback_ops())}")


if __name__ == "__main__":
    main()
