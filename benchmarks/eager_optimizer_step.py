"""The GPT train step (torch_neuronx.testing.gpt defaults, AdamW) with the model compiled by
torch.compile(backend="neuron") and the optimizer step left eager - the announcement's
``model.compile()`` loop - against the same step fully eager, in the same run: PyTorch's default
AdamW (foreach, its step fused by torch_neuronx.compiled.optimizer_step), the same with step
fusion off (each foreach op one launch), ``fused=True``, and with the optimizer compiled too.

Reports simulated device time per step and its ratio to two fully eager baselines of the same
run: eager as it runs by default, and eager with a per-parameter AdamW launched op by op - what
neuron ran before multi-tensor kernels, the baseline the <= 0.55x target was set against - and
the device launches of one optimizer step.

    python benchmarks/eager_optimizer_step.py [--steps 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings

from _harness import report
from compile_gpt_step import Run

FUSE_ENV = "TORCH_NEURONX_FUSE_OPTIMIZER_STEP"


def optimizer_launches(run: Run) -> int:
    """Device launches (NEFFs and host work) of one ``opt.step()`` of ``run``."""
    import torch
    from neuron_sim.trace import LaunchRecord
    from torch_neuronx import execution

    torch.neuron.synchronize()
    records: list = []
    trace = execution.runtime().device(0).trace
    handle = trace.subscribe(records.append)
    run.opt_step()
    torch.neuron.synchronize()
    trace.unsubscribe(handle)
    return sum(isinstance(r, LaunchRecord) for r in records)


def unfused(run: Run) -> Run:
    """``run`` with its optimizer steps launched op by op (TORCH_NEURONX_FUSE_OPTIMIZER_STEP=0)."""
    step = run.opt_step

    def opt_step():
        os.environ[FUSE_ENV] = "0"
        try:
            step()
        finally:
            os.environ.pop(FUSE_ENV)

    run.opt_step = opt_step
    return run


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="eager-opt-neff-")
    os.environ.setdefault("TORCH_NEURONX_COMPILE_LOG", "0")
    from torch_neuronx.testing.gpt import GPTConfig, batches

    data = list(batches(GPTConfig(), 8, args.steps + 1))
    runs = {
        "eager": Run("neuron", None),
        "eager, step fusion off": unfused(Run("neuron", None)),
        "eager, AdamW foreach=False, step fusion off": unfused(Run("neuron", None, foreach=False)),
        "compiled model, eager AdamW (default)": Run("neuron", "neuron", compile_optimizer=False),
        "compiled model, eager AdamW (foreach, step fusion off)": unfused(Run("neuron", "neuron", compile_optimizer=False)),
        "compiled model, eager AdamW (fused=True)": Run("neuron", "neuron", compile_optimizer=False, fused=True),
        "compiled model and optimizer": Run("neuron", "neuron"),
    }
    for x, y in data:  # the runs take their steps in turns
        for run in runs.values():
            run.step(x, y)
    eager_ms = runs["eager"].warm()[1]
    per_parameter_ms = runs["eager, AdamW foreach=False, step fusion off"].warm()[1]
    print(f"GPT train step (4 layers, d_model 256, seq 128, batch 8), median of {args.steps} warm steps")
    for name, run in runs.items():
        ms = run.warm()[1]
        if name == "eager":
            print(f"{'simulated device time per step, eager':48s} {ms:>19.2f} ms   ({optimizer_launches(run)} launches per opt.step)")
            continue
        report(f"device time, {name}", f"{ms:.2f} ms", ms / eager_ms, "eager", "reported")
        if name.startswith("compiled"):
            met = "met" if ms <= 0.55 * per_parameter_ms else "NOT met"
            report("", "", ms / per_parameter_ms, "eager with per-parameter AdamW", f"<= 0.55x ({met})")
        print(f"{'':48s} {optimizer_launches(run):>19d} launches per opt.step")
    losses = {name: run.losses for name, run in runs.items()}
    base = losses.pop("eager")
    for name, values in losses.items():
        print(f"losses {name}: max |diff| vs eager {max(abs(a - b) for a, b in zip(values, base)):.2e}")


if __name__ == "__main__":
    main(sys.argv[1:])
