"""torch.compile(backend="neuron") training of the 4-layer GPT (torch_neuronx.testing.gpt defaults:
d_model 256, seq 128, batch 8, AdamW)
vs eager on neuron and vs torch.compile(backend="inductor") on CPU, in the same run. The compiled
step compiles the model (forward + backward) and ``opt.step`` (the recipe PyTorch documents for
compiled training); eager runs both op by op.

Reports: simulated device time per train step compiled vs eager (target <= 0.5x), warm wall time
per step compiled vs eager (target <= 1.0x), cold compile time of the GPT forward+backward vs
inductor's on CPU (target <= 1.0x; each with a fresh cache), and the losses of both neuron runs.

    python benchmarks/compile_gpt_step.py [--steps 6] [--launches]

``--launches`` also prints the device launches of the last compiled step (count and device time
per name and kind): what a step spends besides its NEFFs (copies, uploads, CPU fallbacks).
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


def run(device: str, steps: int, backend: str | None, launches: list | None = None):
    """(losses, first step seconds, median warm step seconds, median device ms per step or None,
    first fwd+bwd seconds, median warm fwd+bwd seconds). ``launches``: gets the device's launch
    records of the last step."""
    import torch
    from torch_neuronx.testing.gpt import GPT, GPTConfig, batches

    cfg = GPTConfig()
    torch.manual_seed(0)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    step_fn = torch.compile(model, backend=backend) if backend else model
    opt_step = torch.compile(opt.step, backend=backend) if backend else opt.step
    torch.manual_seed(1)  # dropout masks: the same stream for both neuron runs
    losses, walls, device_ms, fwd_bwd = [], [], [], []
    trace = None
    for k, (x, y) in enumerate(batches(cfg, 8, steps + 1)):
        if launches is not None and k == steps:
            import torch_neuronx

            torch.neuron.synchronize()
            trace = torch_neuronx._state.bridge().runtime.device(0).trace
            handle = trace.subscribe(launches.append)
        if device == "neuron":
            start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        loss = step_fn(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        loss.item()  # the backward has run (for the fwd+bwd wall time)
        fwd_bwd.append(time.perf_counter() - t0)
        opt_step()
        losses.append(loss.item())
        walls.append(time.perf_counter() - t0)
        if device == "neuron":
            end.record()
            end.synchronize()
            device_ms.append(start.elapsed_time(end))
    if trace is not None:
        trace.unsubscribe(handle)
    return (losses, walls[0], statistics.median(walls[1:]), statistics.median(device_ms[1:]) if device_ms else None,
            fwd_bwd[0], statistics.median(fwd_bwd[1:]))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--launches", action="store_true", help="print the launches of the last compiled step")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    # Caches of this run only: the first compiled step really compiles (neuron and inductor alike).
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="compile-gpt-neff-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="compile-gpt-inductor-")
    os.environ.setdefault("TORCH_NEURONX_COMPILE_LOG", "1")
    import torch
    import torch_neuronx

    eager_losses, eager_first, eager_step, eager_ms, _, _ = run("neuron", args.steps, None)
    print(f"(eager neuron: first step {eager_first:.1f} s, warm {eager_step * 1e3:.0f} ms, {eager_ms:.2f} ms device)", flush=True)
    torch._dynamo.reset()
    launches = [] if args.launches else None
    compiled_losses, compiled_first, compiled_step, compiled_ms, neuron_fb_first, neuron_fb = run("neuron", args.steps, "neuron",
                                                                                                  launches)
    if launches:
        per_kind: dict = {}
        for r in launches:
            entry = per_kind.setdefault((r.name, r.kind), [0, 0.0])
            entry[0] += 1
            entry[1] += r.duration_ns / 1e3
        print("launches of the last compiled step (count, device us, name, kind):")
        for (name, kind), (count, us) in sorted(per_kind.items(), key=lambda kv: -kv[1][1]):
            print(f"  {count:5d} {us:10.1f} us  {name} ({kind})")
    print(f"(compiled neuron: first step {compiled_first:.1f} s, warm {compiled_step * 1e3:.0f} ms, "
          f"{compiled_ms:.2f} ms device)", flush=True)
    metrics = torch_neuronx.compile_metrics()
    torch._dynamo.reset()
    _, inductor_first, inductor_step, _, inductor_fb_first, inductor_fb = run("cpu", args.steps, "inductor")
    print(f"(inductor CPU: first step {inductor_first:.1f} s, warm {inductor_step * 1e3:.0f} ms)", flush=True)

    # Cold compile of the model's forward+backward: the first fwd+bwd minus a warm one (its own work).
    neuron_cold, inductor_cold = neuron_fb_first - neuron_fb, inductor_fb_first - inductor_fb
    print(f"GPT train step (4 layers, d_model 256, seq 128, batch 8), median of {args.steps} warm steps")
    report("simulated device time per step, compiled", f"{compiled_ms:.2f} ms", compiled_ms / eager_ms,
           "eager", f"<= 0.5x ({'met' if compiled_ms <= 0.5 * eager_ms else 'NOT met'})")
    report("wall time per step, compiled (warm)", f"{compiled_step * 1e3:.0f} ms", compiled_step / eager_step,
           "eager", f"<= 1.0x ({'met' if compiled_step <= eager_step else 'NOT met'})")
    report("cold compile of the GPT fwd+bwd, neuron", f"{neuron_cold:.1f} s", neuron_cold / inductor_cold,
           "inductor (CPU)", f"<= 1.0x ({'met' if neuron_cold <= inductor_cold else 'NOT met'})")
    print(f"{'simulated device time per step, eager':48s} {eager_ms:>19.2f} ms")
    print(f"{'wall time per step, eager (warm)':48s} {eager_step * 1e3:>19.0f} ms")
    print(f"{'cold compile of the GPT fwd+bwd, inductor (CPU)':48s} {inductor_cold:>20.1f} s")
    print(f"{'first step incl. opt.step: neuron / inductor':48s} {compiled_first:>9.1f} s / {inductor_first:.1f} s")
    print(f"neuron graphs: {metrics['graphs_compiled']} compiled, {metrics['cache_hits']} cache hits, "
          + ", ".join(f"{g['name']} {g['ops']} ops {g['seconds']:.1f} s {g['device_us'] / 1e3:.2f} ms device"
                      for g in metrics["graphs"]))
    diff = max(abs(a - b) for a, b in zip(eager_losses, compiled_losses))
    print(f"losses eager    {' '.join(f'{v:.4f}' for v in eager_losses)}")
    print(f"losses compiled {' '.join(f'{v:.4f}' for v in compiled_losses)}   max |diff| {diff:.2e}")


if __name__ == "__main__":
    main(sys.argv[1:])
