"""Bugs the fuzz has found that another stream is fixing (/work/notes/BOARD.md, "Fuzz findings").

The random fuzz tests excuse a mismatch only when an entry of ``KNOWN_ISSUES`` describes it,
narrowly (the op, the dtypes, the error text), and the program keeps being checked after it
from the device's value. Each entry has a regression example in ``regressions.json`` marked
xfail(strict=True), which fails the moment the fix lands: then delete the entry here and the
xfail there. ``CRASHES`` are programs that kill or exhaust the process (a segfault, an abort,
unbounded memory): the random fuzz does not run them (the regression test runs its example in a
subprocess).

``LIMITATIONS`` are documented behaviours, not bugs: torch.compile raises NeuronCompileError
for a graph with an op that has no lowering (README, "torch.compile"; ``fallback="eager"`` runs
such graphs op by op).
"""

from __future__ import annotations

import re

import torch

DTYPES_BY_NAME = {str(d).removeprefix("torch."): d for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}


def _step_op(program, m) -> str | None:
    return program["steps"][m.step]["op"] if m.step is not None and m.step < len(program["steps"]) else None


def _out_shares_an_input(program, step: int) -> bool:
    """Does the ``out=`` operand of ``step`` share memory with one of its inputs (on CPU)?"""
    import warnings

    from tnx_fuzz_programs import materialize_inputs, run_step, step_name

    env = materialize_inputs(program, torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(step):
            env[step_name(i)] = run_step(program["steps"][i], env)
    *inputs, out = (env[name] for name in program["steps"][step]["args"])
    return any(t.untyped_storage().data_ptr() == out.untyped_storage().data_ptr() for t in inputs)


def _out_into_its_input(program, mode, m) -> bool:
    """Compiled, ``op(x, ..., out=x)`` (x also through an alias): the step's value or layout
    after neuron wrote (or resized) x."""
    if mode != "compile":
        return False
    step = program["steps"][m.step] if m.step is not None and m.step < len(program["steps"]) else None
    into_an_input = [s["args"][-1] for i, s in enumerate(program["steps"][:m.step])
                     if s["op"].endswith("_out_into") and (s["args"][-1] in s["args"][:-1] or _out_shares_an_input(program, i))]
    if m.kind in ("neuron error", "missing error", "error type") and m.step is not None:  # a later step on the shape neuron left
        return bool(into_an_input)
    if m.kind == "neuron error" and m.step is None:  # at the sync: the op's own task ran on the shape it had just given x
        return bool(into_an_input)
    if m.kind == "value" and m.step is None:  # that out= tensor itself, read after the program
        return any(m.message.startswith(f"{name} after the program:") for name in into_an_input)
    return (m.kind in ("value", "layout") and step is not None and step["op"].endswith("_out_into")
            and (step["args"][-1] in step["args"][:-1] or _out_shares_an_input(program, m.step)))


def _floor_division_layout(program, mode, m) -> bool:
    return mode == "compile" and m.kind == "layout" and _step_op(program, m) in ("floordiv", "div_floor")


_INT_OF_SIZE = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _only_nan_bits_differ(program, mode, m) -> bool:
    """Seen through a dtype view, the result differs only inside elements that are NaN on both
    sides when read as a float dtype of the program's views."""
    got, want = m.got, m.expected
    if m.kind != "value" or got is None or want is None or got.dtype != want.dtype or got.shape != want.shape:
        return False
    floats = {torch.float16, torch.bfloat16, torch.float32, torch.float64} & {
        DTYPES_BY_NAME.get(step.get("params", {}).get("dtype", {}).get("dtype")) for step in program["steps"] if step["op"] == "view_dtype"}
    floats |= {DTYPES_BY_NAME.get(spec["dtype"]) for spec in program["inputs"]} & {torch.float16, torch.bfloat16, torch.float32}
    raw_got, raw_want = got.contiguous().view(-1).view(torch.uint8), want.contiguous().view(-1).view(torch.uint8)
    for dtype in floats:
        size = dtype.itemsize
        if raw_got.numel() % size:
            continue
        g, w = raw_got.view(dtype), raw_want.view(dtype)
        both_nan = g.isnan() & w.isnan()
        if bool(both_nan.any()) and bool(((raw_got.view(_INT_OF_SIZE[size]) == raw_want.view(_INT_OF_SIZE[size])) | both_nan).all()):
            return True
    return False


KNOWN_ISSUES = [
    ("fuzz-31 - torchcore: compiled, floor division's result takes its second operand's layout where CPU's takes the first's",
     _floor_division_layout),
    ("nan-bits - not a bug: through a dtype view, the bits of a NaN an op made differ (IEEE 754 leaves its sign and payload "
     "unspecified; CPU's bfloat16 NaN is +0x7fc0, the device's keeps the sign)", _only_nan_bits_differ),
    ("fuzz-39 - torchcore: compiled, number ** tensor keeps a permuted tensor's strides (CPU's result is contiguous)",
     lambda program, mode, m: mode == "compile" and m.kind == "layout" and _step_op(program, m) == "rpow_s"),
    ("fuzz-41 - torchcore: compiled, item assignment or copy_ between overlapping views (v.unsqueeze(0)[()] = v, "
     "v.unsqueeze(-1).copy_(v)) raises nothing (CPU: the overlap error)",
     lambda program, mode, m: mode == "compile" and m.kind == "missing error" and "refer to a single memory location" in m.message
     and ((_step_op(program, m) or "").startswith("setitem") or _step_op(program, m) == "copy_")),
    ("fuzz-43 - numerics2: torch.compile of a program with copy_ into a matmul result, then in-place ops through its views, "
     "raises NeuronCompileError (Mixing fake modes NYI, in neuronxcc.frontend's from_fx)",
     lambda program, mode, m: mode == "compile" and m.kind == "neuron error" and "lowering to StableHLO failed: Mixing fake modes NYI" in m.message),
    ("fuzz-28 - torchcore: compiled, an out= that is (an alias of) its own input (sum(x, 0, out=x)) is not resized or written as CPU's",
     _out_into_its_input),
]

_NO_LOWERING = re.compile(r"NeuronCompileError: cannot compile '(torch\.)?(aten|stablehlo)\.[a-z_0-9.]+' at .*(torch-mlir cannot lower "
                          r"it to StableHLO: failed to legalize operation 'torch\.(operator|aten\.[a-z_0-9.]+)'( that was explicitly "
                          r"marked illegal|: torch-mlir has no StableHLO lowering of it)|unsupported op)")
LIMITATIONS = [
    ("torch.compile: an op with no lowering raises NeuronCompileError (documented)",
     lambda program, mode, m: mode == "compile" and m.kind in ("neuron error", "error type") and bool(_NO_LOWERING.search(m.message))),
]


CRASHES: list = []


def known_crash(program: dict, mode: str) -> str | None:
    """The reason ``program`` must not run in ``mode`` in this process, if it must not."""
    from tnx_fuzz_runner import operand_shapes

    shapes = operand_shapes(program)
    for reason, applies in CRASHES:
        if applies(program, mode, shapes):
            return reason
    return None
