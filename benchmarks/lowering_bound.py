"""What bounding torch-mlir's lowering costs: its pass pipeline run in the bounded worker process
(``neuronxcc.frontend.pipeline``, the default) against the same pipeline in the compiling process
(``NEURONX_CC_LOWERING_ISOLATION=0``), and against one fresh MLIR context per graph (how graphs
were lowered before the worker kept its pipelines warm), in the same run.

The graphs are what eager mode lowers (one ATen op each, as its first step compiles them) and a
GPT block's forward and backward from AOTAutograd. Per graph: median wall time and CPU time
(compiling process + worker) over interleaved rounds.

    python benchmarks/lowering_bound.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

from _harness import report


def torch_modules() -> dict[str, bytes]:
    """name -> the Torch-dialect module (bytecode) the frontend hands the pipeline."""
    import torch
    import torch.nn.functional as F
    from functorch.compile import aot_function
    from neuronxcc.frontend import fx_rewrites
    from neuronxcc.frontend.fx import decompositions, strip_none_outputs, torch_dialect_module
    from torch.fx.experimental.proxy_tensor import make_fx

    def module_of(gm) -> bytes:  # as neuronxcc.frontend.fx hands it to the pipeline
        strip_none_outputs(gm)
        fx_rewrites.rewrite(gm)
        return torch_dialect_module(gm)

    x, w, ids = torch.randn(8, 128, 256), torch.randn(256, 256), torch.randint(0, 256, (8, 128))
    ops = {"add": (lambda x: x + x, x), "mul_scalar": (lambda x: x * 0.5, x), "mm": (lambda x, w: x.view(-1, 256) @ w, x, w),
           "gelu": (lambda x: F.gelu(x), x), "layer_norm": (lambda x: F.layer_norm(x, (256,)), x), "softmax": (lambda x: x.softmax(-1), x),
           "sum": (lambda x: x.sum(-1), x), "embedding": (lambda i, w: F.embedding(i, w), ids, w),
           "addcmul": (lambda w: torch.addcmul(w, w, w, value=0.1), w),
           "gelu_backward": (lambda g, x: torch.ops.aten.gelu_backward(g, x), x, x)}
    modules = {}
    for name, (fn, *inputs) in ops.items():
        gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*inputs)
        modules[f"eager {name}"] = module_of(gm)

    def block(x, wq, wo, w1, w2):
        q = x @ wq
        att = (q @ q.transpose(-2, -1) / 16).softmax(-1) @ q
        h = F.layer_norm(x + att @ wo, (256,))
        return (h + F.gelu(h @ w1) @ w2).sum()

    graphs = {}

    def keep(kind):
        def compile_graph(gm, _inputs):
            graphs[kind] = module_of(torch.fx.GraphModule(gm, copy.deepcopy(gm.graph)))
            return gm

        return compile_graph

    weights = [torch.randn(256, 256, requires_grad=True) for _ in range(2)]
    ffn = [torch.randn(256, 1024, requires_grad=True), torch.randn(1024, 256, requires_grad=True)]
    aot_function(block, fw_compiler=keep("forward"), bw_compiler=keep("backward"),
                 decompositions=decompositions())(torch.randn(2, 64, 256), *weights, *ffn).backward()
    modules.update({f"GPT block {k}": v for k, v in graphs.items()})
    return modules


def worker_cpu_seconds() -> float:
    from neuronxcc.frontend import pipeline

    worker = pipeline._worker
    if worker is None:
        return 0.0
    fields = open(f"/proc/{worker.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    from neuronxcc.frontend import pipeline
    from neuronxcc.frontend.pipeline_worker import _Pipelines

    modules = torch_modules()
    modes = {
        "worker": lambda m: pipeline.lower(m, "bench"),
        "in process": lambda m: pipeline.lower(m, "bench"),
        "fresh context": lambda m: _Pipelines().run(m),
    }
    wall = {mode: [] for mode in modes}
    cpu = {mode: [] for mode in modes}
    for mode, lower in modes.items():  # warm: the worker started, the pipelines parsed
        os.environ[pipeline.ISOLATION_ENV] = "0" if mode == "in process" else "1"
        lower(next(iter(modules.values())))
    for _ in range(args.rounds):
        for mode, lower in modes.items():
            os.environ[pipeline.ISOLATION_ENV] = "0" if mode == "in process" else "1"
            started, cpu_started, worker_started = time.perf_counter(), time.process_time(), worker_cpu_seconds()
            for module in modules.values():
                lower(module)
            wall[mode].append((time.perf_counter() - started) / len(modules))
            cpu[mode].append((time.process_time() - cpu_started + worker_cpu_seconds() - worker_started) / len(modules))
    med = {mode: (statistics.median(wall[mode]) * 1e3, statistics.median(cpu[mode]) * 1e3) for mode in modes}
    print(f"{len(modules)} graphs ({', '.join(modules)}), {args.rounds} rounds, os.getloadavg() = "
          f"{', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for mode in ("worker", "in process"):
        print(f"  {mode:14s} wall {med[mode][0]:6.2f} ms  cpu {med[mode][1]:6.2f} ms per graph")
    print(f"  {'fresh context':14s} wall {med['fresh context'][0]:6.2f} ms  cpu {med['fresh context'][1]:6.2f} ms per graph")
    report("lowering in the bounded worker (wall per graph)", f"{med['worker'][0]:.2f} ms",
           med["worker"][0] / med["in process"][0], "in process", "<= 1.5x (one pipe round trip and a process switch per graph)")
    report("lowering in the bounded worker (cpu per graph)", f"{med['worker'][1]:.2f} ms",
           med["worker"][1] / med["in process"][1], "in process", "~1.0x")
    report("warm pipelines (in process, wall per graph)", f"{med['in process'][0]:.2f} ms",
           med["in process"][0] / med["fresh context"][0], "fresh context per graph", "< 1.0x")


if __name__ == "__main__":
    main(sys.argv[1:])
