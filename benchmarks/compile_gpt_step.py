"""torch.compile(backend="neuron") training of the 4-layer GPT (torch_neuronx.testing.gpt defaults:
d_model 256, seq 128, batch 8, AdamW)
vs eager on neuron and vs torch.compile(backend="inductor") on CPU, in the same run. The compiled
step compiles the model (forward + backward) and ``opt.step`` (the recipe PyTorch documents for
compiled training); eager runs both op by op.

Reports: simulated device time per train step compiled vs eager (target <= 0.5x), warm wall time
per step compiled vs eager (target <= 1.0x), cold compile time of the GPT forward+backward vs
inductor's on CPU (target <= 1.0x; each with a fresh cache), and the losses of both neuron runs.
The eager and compiled runs take their warm steps in turns (each with its own dropout stream), so
a slower or faster spell of a shared machine weighs on both alike.

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


class Run:
    """One training run, advanced a step at a time (``step()``), so two runs can take turns.

    Each run keeps its own random state (the CPU and neuron generators, which draw the dropout
    masks) and swaps it in for its steps: taking turns does not change either run's masks."""

    def __init__(self, device: str, backend: str | None, compile_optimizer: bool = True, **opt_kwargs):
        import torch
        from torch_neuronx.testing.gpt import GPT, GPTConfig

        self.torch, self.device, self.cfg = torch, device, GPTConfig()
        torch.manual_seed(0)
        self.model = GPT(self.cfg).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, **opt_kwargs)
        self.step_fn = torch.compile(self.model, backend=backend) if backend else self.model
        compiled_opt = backend and compile_optimizer
        self.opt_step = torch.compile(self.opt.step, backend=backend) if compiled_opt else self.opt.step
        torch.manual_seed(1)  # dropout masks: the same stream for both neuron runs
        self.rng = self._rng_state()
        self.losses, self.walls, self.device_ms, self.fwd_bwd = [], [], [], []

    def _rng_state(self):
        on_neuron = self.device == "neuron"
        return self.torch.get_rng_state(), self.torch.neuron.get_rng_state() if on_neuron else None

    def _set_rng_state(self, state) -> None:
        self.torch.set_rng_state(state[0])
        if state[1] is not None:
            self.torch.neuron.set_rng_state(state[1])

    def step(self, x, y, launches: list | None = None) -> None:
        """One training step; ``launches`` gets the device's launch records of this step."""
        torch, device = self.torch, self.device
        self._set_rng_state(self.rng)
        trace = None
        if launches is not None:
            from torch_neuronx import execution

            torch.neuron.synchronize()
            trace = execution.runtime().device(0).trace
            handle = trace.subscribe(launches.append)
        if device == "neuron":
            start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        loss = self.step_fn(x.to(device), y.to(device))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        loss.item()  # the backward has run (for the fwd+bwd wall time)
        self.fwd_bwd.append(time.perf_counter() - t0)
        self.opt_step()
        self.losses.append(loss.item())
        self.walls.append(time.perf_counter() - t0)
        if device == "neuron":
            end.record()
            end.synchronize()
            self.device_ms.append(start.elapsed_time(end))
        if trace is not None:
            trace.unsubscribe(handle)
        self.rng = self._rng_state()

    def warm(self) -> tuple[float, float | None, float]:
        """Median warm step seconds, device ms per step (neuron) and fwd+bwd seconds."""
        return (statistics.median(self.walls[1:]), statistics.median(self.device_ms[1:]) if self.device_ms else None,
                statistics.median(self.fwd_bwd[1:]))


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
    from neuron_sim.trace import LaunchRecord
    from torch_neuronx.testing.gpt import GPTConfig, batches

    data = list(batches(GPTConfig(), 8, args.steps + 1))
    eager, compiled = Run("neuron", None), Run("neuron", "neuron")
    eager.step(*data[0])
    print(f"(eager neuron: first step {eager.walls[0]:.1f} s)", flush=True)
    compiled.step(*data[0])
    print(f"(compiled neuron: first step {compiled.walls[0]:.1f} s)", flush=True)
    # Warm steps taking turns, so both runs see the machine in the same state (a busy neighbour
    # on a shared host slows whichever run it overlaps).
    launches = [] if args.launches else None
    for k, (x, y) in enumerate(data[1:], start=1):
        eager.step(x, y)
        compiled.step(x, y, launches if k == args.steps else None)
    eager_step, eager_ms, _ = eager.warm()
    compiled_step, compiled_ms, neuron_fb = compiled.warm()
    compiled_first, neuron_fb_first = compiled.walls[0], compiled.fwd_bwd[0]
    if launches:
        per_kind: dict = {}
        for r in launches:
            if not isinstance(r, LaunchRecord):
                continue  # the ops' own records (OpRecord) name what launched; the launch records hold the time
            entry = per_kind.setdefault((r.name, r.kind), [0, 0.0])
            entry[0] += 1
            entry[1] += r.duration_ns / 1e3
        print("launches of the last compiled step (count, device us, name, kind):")
        for (name, kind), (count, us) in sorted(per_kind.items(), key=lambda kv: -kv[1][1]):
            print(f"  {count:5d} {us:10.1f} us  {name} ({kind})")
    metrics = torch_neuronx.compile_metrics()
    torch._dynamo.reset()
    inductor = Run("cpu", "inductor")
    for x, y in data:
        inductor.step(x, y)
    inductor_step, _, inductor_fb = inductor.warm()
    inductor_first, inductor_fb_first = inductor.walls[0], inductor.fwd_bwd[0]
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
    diff = max(abs(a - b) for a, b in zip(eager.losses, compiled.losses))
    print(f"losses eager    {' '.join(f'{v:.4f}' for v in eager.losses)}")
    print(f"losses compiled {' '.join(f'{v:.4f}' for v in compiled.losses)}   max |diff| {diff:.2e}")


if __name__ == "__main__":
    main(sys.argv[1:])
