"""nki-lib's row kernels (norms, RoPE, softmax) against the same computation through
torch-neuronx's eager path, on the same shapes in the same run: simulated device time (trn2),
measured alike for both with stream events around the call (the eager side is every op's NEFF
launch the call makes; warm: each signature compiled before it is timed).

Also each kernel's MBU: the bytes it must move through HBM (inputs read once, outputs written
once) over its device time, against one NeuronCore's share of HBM bandwidth.

    python benchmarks/nkilib_norms.py            # bf16, 4096 x 4096 rows (RoPE: 4 x 1024 x 32 x 128;
                                                 # cross-entropy: 2048 x 32768 logits)
    python benchmarks/nkilib_norms.py --quick    # small shapes (a smoke run)
"""

from __future__ import annotations

import argparse
import warnings

import torch
import torch.nn.functional as F
from _harness import report


def device_ns(fn) -> float:
    """Simulated device time of fn's launches: events on the current stream around one call,
    after one untimed call (compiles every NEFF the call needs)."""
    fn()
    torch.neuron.synchronize()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.neuron.synchronize()
    return start.elapsed_time(end) * 1e6


def grad_of(forward, inputs, dy):
    """A closure computing the gradients of forward(*inputs) for dy (the forward outside the
    timed part: it runs once, its graph kept)."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    out = forward(*leaves)
    return lambda: torch.autograd.grad(out, leaves, dy, retain_graph=True)


def cases(rows, hidden, rope_shape, dtype):
    import nkilib.torch as nkt
    from nkilib.torch import embeddings, misc, norm

    dev = "neuron"
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(dtype).to(dev)

    x, r, dy = rand(rows, hidden), rand(rows, hidden), rand(rows, hidden)
    w, b = rand(hidden), rand(hidden)
    y_sm = torch.softmax(x.float(), -1).to(dtype)
    q = rand(*rope_shape)
    seq, half = rope_shape[1], rope_shape[3] // 2
    cos, sin = rand(seq, half), rand(seq, half)
    nbytes = x.element_size() * x.numel()
    row_io = nbytes * 2 + 2 * w.element_size() * hidden  # x in, y out, weights
    return [
        # name, kernel call, eager call, HBM bytes the kernel must move
        ("RMSNorm forward", lambda: norm.rms_norm_op(x, w, 1e-6), lambda: F.rms_norm(x, (hidden,), w, 1e-6), row_io),
        ("RMSNorm backward", lambda: norm.rms_norm_backward_op(dy, x, w, 1e-6),
         grad_of(lambda x, w: F.rms_norm(x, (hidden,), w, 1e-6), (x, w), dy), row_io + nbytes),
        ("LayerNorm forward", lambda: norm.layer_norm_op(x, w, b, 1e-5),
         lambda: F.layer_norm(x, (hidden,), w, b, 1e-5), row_io + w.element_size() * hidden),
        ("LayerNorm backward", lambda: norm.layer_norm_backward_op(dy, x, w, 1e-5),
         grad_of(lambda x, w, b: F.layer_norm(x, (hidden,), w, b, 1e-5), (x, w, b), dy), row_io + nbytes + 8 * hidden),
        ("residual add + RMSNorm", lambda: norm.residual_rms_norm_op(x, r, w, 1e-6),
         lambda: F.rms_norm(x + r, (hidden,), w, 1e-6), row_io + 2 * nbytes),
        ("RoPE forward (rotate-half)", lambda: embeddings.rope_op(q, cos, sin, "half", False),
         lambda: nkt.rope_plain(q, cos, sin), 2 * q.element_size() * q.numel() + 2 * cos.element_size() * cos.numel()),
        ("softmax forward", lambda: misc.softmax_op(x), lambda: torch.softmax(x, -1), 2 * nbytes),
        ("softmax backward", lambda: misc.softmax_backward_op(dy, y_sm),
         grad_of(lambda x: torch.softmax(x, -1), (x,), dy), 3 * nbytes),
    ]


def loss_cases(rows, classes, dtype):
    from nkilib.torch import loss

    g = torch.Generator().manual_seed(1)
    logits = torch.randn(rows, classes, generator=g).to(dtype).to("neuron")
    labels = torch.randint(0, classes, (rows,), generator=g).to("neuron")
    dloss = torch.randn(rows, generator=g).to("neuron")
    _, lse = loss.cross_entropy_op(logits, labels)
    nbytes = logits.element_size() * logits.numel()
    return [
        ("cross-entropy forward", lambda: loss.cross_entropy_op(logits, labels),
         lambda: F.cross_entropy(logits, labels, reduction="none"), nbytes),
        ("cross-entropy backward", lambda: loss.cross_entropy_backward_op(logits, labels, lse, dloss),
         grad_of(lambda x: F.cross_entropy(x, labels, reduction="none"), (logits,), dloss.to(dtype)), 2 * nbytes),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small shapes")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch_neuronx
    from neuron_sim.arch import get_architecture

    dtype = getattr(torch, args.dtype)
    rows, hidden, rope_shape = (256, 1024, (1, 256, 8, 64)) if args.quick else (4096, 4096, (4, 1024, 32, 128))
    hbm = get_architecture().hbm_bytes_per_ns_per_core
    print(f"nki-lib kernels vs torch-neuronx eager, {args.dtype}, rows x hidden {rows} x {hidden}, "
          f"RoPE x {list(rope_shape)}; simulated trn2 device time (HBM {hbm:.0f} B/ns per core)")
    ce_rows, classes = (256, 5000) if args.quick else (2048, 32768)
    print(f"cross-entropy: logits [{ce_rows}, {classes}], per-row losses")
    for name, kernel, eager, hbm_bytes in cases(rows, hidden, rope_shape, dtype) + loss_cases(ce_rows, classes, dtype):
        k_ns = device_ns(kernel)
        torch_neuronx.clear_op_tracking()
        e_ns = device_ns(eager)
        # ops of the eager side that ran as CPU fallbacks (their host-link transfers are in its time)
        fallbacks = torch_neuronx.get_fallback_ops()
        mbu = 100.0 * hbm_bytes / k_ns / hbm
        report(f"{name}", f"{k_ns / 1e3:9.1f} us, MBU {mbu:4.1f}%", e_ns / k_ns, f"eager {e_ns / 1e3:.1f} us",
               "kernel faster" + (" (met)" if k_ns < e_ns else " (NOT met)"))
        if fallbacks:
            print(f"    eager CPU fallbacks: {', '.join(fallbacks)}")


if __name__ == "__main__":
    main()
