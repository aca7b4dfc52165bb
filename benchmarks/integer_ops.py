"""Simulated device time of integer ops on the NeuronCore (GpSimd's integer ALU, int64 by 32-bit
words, reductions and scans as trees of exact steps) against two baselines computed in the same
run: the same op in fp32 (the VectorE/ScalarE path, which is not exact past 2**24), and the
modelled device time of running the op through CPU fallback instead (torch-neuronx's host-link
model: operands out, results back). Times come from the timing model of the compiled program
(data-independent), so they do not depend on this machine's load.

    python benchmarks/integer_ops.py [--rows 8 --cols 4096]
"""

from __future__ import annotations

import argparse

from _harness import report
from neuron_sim import dtypes, get_architecture
from neuron_sim.graph import Graph
from neuron_sim.timing import program_timing
from neuronxcc.compiler import compile_graph
from torch_neuronx.ops.costs import fallback_ns

OPS = {
    "add": lambda g, x: g.add1("add", x, x),
    "multiply": lambda g, x: g.add1("multiply", x, x),
    "sum (last dim)": lambda g, x: g.add1("reduce", x, kind="sum", dims=[1]),
    "max (last dim)": lambda g, x: g.add1("reduce", x, kind="max", dims=[1]),
    "argmax (last dim)": lambda g, x: g.add1("argmax", x, dim=1, dtype="int64"),
    "cumsum (last dim)": lambda g, x: g.add1("cumsum", x, dim=1),
}


def device_ns(op: str, shape, dtype: str, arch) -> tuple[float, int]:
    g = Graph("bench")
    x = g.add_input("x", shape, dtype)
    out = OPS[op](g, x)
    g.set_outputs([out], ["out"])
    program = compile_graph(g, arch)
    nbytes = out.type.num_elements * dtypes.itemsize(out.type.dtype)
    return program_timing(program, arch).summary["total_time_ns"], nbytes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--target", default="trn2")
    args = parser.parse_args()
    arch = get_architecture(args.target)
    shape = (args.rows, args.cols)
    for op in OPS:
        fp32, _ = device_ns(op, shape, "float32", arch)
        for dtype in ("int32", "int64"):
            ns, out_bytes = device_ns(op, shape, dtype, arch)
            in_bytes = args.rows * args.cols * dtypes.itemsize(dtype)
            name = f"{op} {dtype} {list(shape)}"
            report(name, f"{ns / 1000:.1f} us", ns / fp32, "fp32 (inexact)", "exact, on device")
            report(
                "",
                f"fallback {fallback_ns(in_bytes, out_bytes) / 1000:.1f} us",
                fallback_ns(in_bytes, out_bytes) / ns,
                "this op on device",
                "> 1 (device faster)",
            )


if __name__ == "__main__":
    main()
