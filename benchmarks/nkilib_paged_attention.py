"""nki-lib's attention over a paged KV cache (decoding and chunked prefill) against the same
computation in plain torch ops (the block-table gather, then masked SDPA:
nkilib.torch.attention.cached_attention_plain) through torch-neuronx, eager and
torch.compile(backend="neuron"), same shapes, same run: simulated trn2 device time of one warm
call (stream events on both sides), and the kernel's MBU (the K/V bytes its block tables name,
read once, over its time, against one NeuronCore's 725 B/ns of HBM).

    python benchmarks/nkilib_paged_attention.py           # bf16, d=128, Hq=32, Hkv=8, block 16
    python benchmarks/nkilib_paged_attention.py --quick   # smaller contexts
"""

from __future__ import annotations

import argparse
import warnings

import torch
from _harness import report
from nkilib_norms import device_ns

HBM_BYTES_PER_NS = 725.0  # one NeuronCore's share of trn2 HBM (2.9 TB/s / 4 logical cores)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch_neuronx
    from nkilib.torch import attention

    def plain(q, kc, vc, tables, lens):
        return attention.cached_attention_plain(q, attention.gather_cache(kc, tables), attention.gather_cache(vc, tables), lens)

    compiled = torch.compile(plain, backend="neuron", dynamic=False)
    heads, kv_heads, dim, block = 32, 8, 128, 16
    ctx = 512 if args.quick else 2048
    # name, batch, queries per sequence, context per sequence (the table's width)
    cases = [("decode", 8, 1, ctx), ("chunked prefill", 1, 128 if args.quick else 256, ctx)]
    g = torch.Generator().manual_seed(0)
    print(
        f"attention over a paged KV cache, bf16, Hq={heads}, Hkv={kv_heads}, d={dim}, block {block}; simulated trn2 device time"
    )
    for name, batch, sq, width in cases:
        blocks = batch * width // block
        q = torch.randn(batch, heads, sq, dim, generator=g).to(torch.bfloat16).to("neuron")
        kc, vc = (torch.randn(blocks, block, kv_heads, dim, generator=g).to(torch.bfloat16).to("neuron") for _ in range(2))
        tables = torch.randperm(blocks, generator=g).to(torch.int32).reshape(batch, width // block).to("neuron")
        lens = torch.full((batch,), width, dtype=torch.int32).to("neuron")
        inputs = (q, kc, vc, tables, lens)
        k_ns = device_ns(lambda inputs=inputs: attention.paged_attention_op(*inputs, dim**-0.5))
        mbu = 100.0 * 2 * batch * width * kv_heads * dim * 2 / k_ns / HBM_BYTES_PER_NS
        torch_neuronx.clear_op_tracking()
        c_ns = device_ns(lambda inputs=inputs: compiled(*inputs))
        e_ns = device_ns(lambda inputs=inputs: plain(*inputs))
        label = f"{name} B={batch} Sq={sq} ctx={width}"
        report(
            label,
            f"{k_ns / 1e3:9.1f} us, MBU {mbu:4.1f}%",
            c_ns / k_ns,
            f"compiled {c_ns / 1e3:.1f} us",
            "kernel faster" + (" (met)" if k_ns < c_ns else " (NOT met)"),
        )
        print(f"{'':48s} eager plain torch {e_ns / 1e3:.1f} us ({e_ns / k_ns:.2f}x the kernel)")
        if torch_neuronx.get_fallback_ops():
            print(f"    eager CPU fallbacks: {', '.join(torch_neuronx.get_fallback_ops())}")


if __name__ == "__main__":
    main()
