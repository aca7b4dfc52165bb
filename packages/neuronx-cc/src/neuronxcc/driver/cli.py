"""``neuronx-cc``: compile StableHLO to a NEFF, and show what a NEFF holds.

    neuronx-cc compile model.mlir -o model.neff [--target trn2|trn3] [--func main]
    neuronx-cc inspect model.neff [--json]

Exit codes: 0 success; 1 the input was rejected (an op without a graph form, an op the compiler
cannot lower, MLIR that does not parse); 2 bad command line; 3 a file cannot be read or written;
4 not an intact NEFF; 5 a required package (torch-mlir) is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from neuron_sim import dtypes
from neuron_sim.arch import get_architecture
from neuron_sim.errors import ConfigurationError, NeffFormatError, NeuronSimError
from neuron_sim.neff import Neff, inspect
from neuron_sim.timing import estimate

from ..compiler import compile_neff
from ..frontend import FrontendError, MissingDependency, UnsupportedOp, import_text

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_IO, EXIT_BAD_NEFF, EXIT_MISSING_DEPENDENCY = 0, 1, 2, 3, 4, 5
TARGETS = ("trn2", "trn3")
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")


class CliError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuronx-cc", description="The Neuron compiler for a software NeuronCore (neuron-sim).",
        epilog="exit codes: 0 ok, 1 input rejected (unsupported op, compile error, bad MLIR), 2 usage, "
               "3 file not readable/writable, 4 corrupt NEFF, 5 missing package (torch-mlir)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{compile,inspect}")
    c = sub.add_parser("compile", help="compile StableHLO (torch-mlir output, .mlir text or bytecode) to a NEFF")
    c.add_argument("input", help="the StableHLO module (.mlir)")
    c.add_argument("-o", "--output", help="the NEFF to write (default: the input's name with .neff)")
    c.add_argument("--target", choices=TARGETS, default=None,
                   help="NeuronCore generation (default: $NEURON_PLATFORM_TARGET_OVERRIDE, else trn2)")
    c.add_argument("--func", default=None, help="the function to compile (default: @main, else the first public one)")
    i = sub.add_parser("inspect", help="print a NEFF's tensor table, instruction counts and timing summary")
    i.add_argument("neff", help="the NEFF file")
    i.add_argument("--json", action="store_true", help="print everything as one JSON object")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "compile":
            return compile_command(args)
        return inspect_command(args)
    except CliError as err:
        print(f"neuronx-cc {args.command}: error: {err}", file=sys.stderr)
        return err.code


# --- compile -------------------------------------------------------------------------------------------


def _read_module(path: str):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CliError(f"no such file: {path}", EXIT_IO) from None
    except OSError as err:
        raise CliError(f"cannot read {path}: {err.strerror or err}", EXIT_IO) from None
    if data.startswith(b"ML\xefR"):  # MLIR bytecode
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{path} is neither MLIR text nor MLIR bytecode", EXIT_REJECTED) from None


def compile_command(args) -> int:
    try:
        arch = get_architecture(args.target)
    except ConfigurationError as err:
        raise CliError(str(err), EXIT_USAGE) from None
    module = _read_module(args.input)
    output = args.output or os.path.splitext(args.input)[0] + ".neff"
    try:
        graph = import_text(module, source=args.input, func_name=args.func)
    except MissingDependency as err:
        raise CliError(str(err), EXIT_MISSING_DEPENDENCY) from None
    except UnsupportedOp as err:
        raise CliError(f"{args.input}: {err}", EXIT_REJECTED) from None
    except FrontendError as err:
        raise CliError(str(err), EXIT_REJECTED) from None
    try:
        neff = compile_neff(graph, arch)
    except NeuronSimError as err:  # CompileError (a ValidationError) and the simulator's own checks
        raise CliError(f"{args.input}: cannot compile: {err}", EXIT_REJECTED) from None
    try:
        if isinstance(neff, (bytes, bytearray)):
            with open(output, "wb") as f:
                f.write(neff)
        else:
            neff.save(output)
    except OSError as err:
        raise CliError(f"cannot write {output}: {err.strerror or err}", EXIT_IO) from None
    size = os.path.getsize(output)
    summary = getattr(neff, "timing_summary", None) or {}
    n_inst = len(neff.program.instructions) if hasattr(neff, "program") else None
    parts = [f"{len(graph.nodes)} graph ops"]
    if n_inst is not None:
        parts.append(f"{n_inst} instructions")
    if "total_time_ns" in summary:
        parts.append(f"{_fmt_time(summary['total_time_ns'])} estimated on {arch.name}")
    print(f"{args.input} -> {output} ({_fmt_bytes(size)}): {', '.join(parts)}")
    return EXIT_OK


# --- inspect -------------------------------------------------------------------------------------------


def _load(path: str):
    try:
        info = inspect(path)
        neff = Neff.load(path)
    except FileNotFoundError:
        raise CliError(f"no such file: {path}", EXIT_IO) from None
    except IsADirectoryError:
        raise CliError(f"{path} is a directory, not a NEFF", EXIT_IO) from None
    except NeffFormatError as err:
        raise CliError(f"not a valid NEFF: {err}", EXIT_BAD_NEFF) from None
    except OSError as err:
        raise CliError(f"cannot read {path}: {err.strerror or err}", EXIT_IO) from None
    return info, neff


def _timing(neff) -> tuple[dict | None, str]:
    if neff.timing_summary:
        return neff.timing_summary, "recorded in the NEFF"
    try:
        return estimate(neff.program).summary, "estimated now (the NEFF has none recorded)"
    except Exception as err:  # programs with run-time loop bounds need a run's trip counts
        return None, f"not available ({type(err).__name__}: {err})"


def inspect_command(args) -> int:
    info, neff = _load(args.neff)
    summary, origin = _timing(neff)
    if args.json:
        print(json.dumps({"neff": args.neff, **info, "timing_summary": summary, "timing_origin": origin,
                          "metadata": neff.metadata}, indent=2, default=str))
        return EXIT_OK
    print(f"{args.neff}: NEFF v{info.get('version')}, program {info.get('program')!r}, target {info.get('target')}, "
          f"{_fmt_bytes(info['file_size'])}, sha256 {info['sha256'][:16]}")
    if info.get("producer"):
        print(f"  produced by {info['producer']}")
    print()
    print(_tensor_table(info.get("tensors", [])))
    print()
    counts = info.get("instruction_counts", {})
    print(f"instructions: {info.get('num_instructions', 0)}")
    for engine in [e for e in ENGINES if e in counts] + sorted(set(counts) - set(ENGINES)):
        print(f"  {engine:<8}{counts[engine]:>10}")
    print()
    print(f"timing ({origin}):" if summary else f"timing: {origin}")
    if summary:
        print(_timing_lines(summary))
    return EXIT_OK


def _tensor_table(tensors: list[dict]) -> str:
    rows = [("tensor", "kind", "shape", "dtype", "bytes")]
    for t in tensors:
        shape = "x".join(map(str, t["shape"])) or "scalar"
        n = 1
        for s in t["shape"]:
            n *= s
        rows.append((t["name"], t.get("kind", "input"), shape, t["dtype"], _fmt_bytes(n * dtypes.itemsize(t["dtype"]))))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) if i < 4 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    return "\n".join(["tensors:", *("  " + line.rstrip() for line in lines)])


def _timing_lines(s: dict) -> str:
    lines = [f"  total time        {_fmt_time(s.get('total_time_ns', 0.0))}"
             + (f"  ({s['neuroncore_cycle_count']} cycles)" if "neuroncore_cycle_count" in s else "")]
    busy = [f"{e} {s[f'{e}_active_time_percent']:.1f}%" for e in ENGINES if f"{e}_active_time_percent" in s]
    if busy:
        lines.append(f"  engine busy       {', '.join(busy)}")
    if "mfu_estimated_percent" in s:
        lines.append(f"  MFU               {s['mfu_estimated_percent']:.2f}%"
                     + (f"  (HFU {s['hfu_estimated_percent']:.2f}%)" if "hfu_estimated_percent" in s else ""))
    if "hbm_read_bytes" in s or "hbm_write_bytes" in s:
        r, w = s.get("hbm_read_bytes", 0), s.get("hbm_write_bytes", 0)
        lines.append(f"  HBM bytes         {_fmt_bytes(r + w)} ({_fmt_bytes(r)} read, {_fmt_bytes(w)} written)"
                     + (f", MBU {s['mbu_estimated_percent']:.2f}%" if "mbu_estimated_percent" in s else ""))
    if "model_flops" in s:
        lines.append(f"  model FLOPs       {s['model_flops']:,}")
    return "\n".join(lines)


def _fmt_time(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3f} us"
    return f"{ns:.1f} ns"


def _fmt_bytes(n: float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


if __name__ == "__main__":
    sys.exit(main())
