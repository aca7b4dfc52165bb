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

import math
import re

import torch
from tnx_fuzz_values import is_int

INT_BEYOND_FP32 = "13.1 - numerics"  # issue 13 item 1: integers beyond 2**24 go through float32
_BOOL_REDUCTIONS = {"amax", "amin", "max", "min", "max_dim"}
_SCALAR_COMPARISONS = {"eq_s", "ne_s", "lt_s", "le_s", "gt_s", "ge_s"}


def _ints_past_2_24(*tensors) -> bool:
    return any(isinstance(t, torch.Tensor) and is_int(t.dtype) and t.numel() and bool((t.long().abs() > 2 ** 24).any())
               for t in tensors)


def _step_op(program, m) -> str | None:
    return program["steps"][m.step]["op"] if m.step is not None and m.step < len(program["steps"]) else None


def _message(*patterns):
    return lambda program, mode, m: any(p in m.message for p in patterns)


def _compile_message(*patterns):
    return lambda program, mode, m: mode == "compile" and any(p in m.message for p in patterns)


_DIVISIONS = {"remainder", "remainder_s", "remainder_s_", "remainder_out", "remainder_out_into", "fmod", "fmod_s", "floordiv",
              "floordiv_s", "div_floor", "div_trunc", "floor_divide_", "floor_divide_out", "floor_divide_out_into"}

KNOWN_ISSUES = [
    (INT_BEYOND_FP32, lambda program, mode, m: m.kind == "value" and _ints_past_2_24(*m.operands, m.expected, m.got)),
    ("13.2 - numerics: float remainder, fmod and floor division",
     lambda program, mode, m: m.kind == "value" and _step_op(program, m) in _DIVISIONS
     and any(t.dtype.is_floating_point for t in m.operands)),
    ("fuzz-2 - lowering: bool amax/amin/max/min (torch-mlir's i1 reduce init)",
     lambda program, mode, m: m.kind == "value" and _step_op(program, m) in _BOOL_REDUCTIONS
     and m.operands and m.operands[0].dtype == torch.bool),
    ("fuzz-17 - numerics: cat(out=) of signed integers into uint8 saturates negatives to 0 (CPU wraps)",
     lambda program, mode, m: m.kind == "value" and (_step_op(program, m) or "").startswith("cat")
     and m.expected is not None and m.expected.dtype == torch.uint8 and any(t.dtype.is_signed for t in m.operands)),
    ("fuzz-4 - torchcore: a resized out= tensor is contiguous, CPU's takes the input's layout",
     lambda program, mode, m: m.kind == "layout" and (_step_op(program, m) or "").endswith(("_out", "_out_into"))),
    ("fuzz-5 - torchcore: copy_ of a shape that does not broadcast fails at sync with numpy's ValueError",
     lambda program, mode, m: m.kind == "error type" and _step_op(program, m) == "copy_" and "could not broadcast" in m.message),
    ("fuzz-6 - torchcore: a compiled graph with an empty tensor", _compile_message("is not neuron device memory")),
    ("fuzz-7 - torchcore: out= of another shape inside a compiled function",
     lambda program, mode, m: mode == "compile" and any(s["op"].endswith(("_out", "_out_into")) for s in program["steps"])
     and ("RecursionError" in m.message or m.kind in ("layout", "value") and (_step_op(program, m) or "").endswith("_out"))),
    ("fuzz-8 - lowering: a dim argument over a 0-d tensor (neuronxcc.frontend.fx._lift_dim_ops_over_0dim)",
     lambda program, mode, m: _compile_message("Mixing fake modes", "a dim argument over a 0-dim tensor")(program, mode, m)
     or m.kind == "neuron error" and m.operands and m.operands[0].dim() == 0 and "is invalid for input of size 0" in m.message),
    ("fuzz-9 - lowering: compiled abs of unsigned or bool tensors", _compile_message("'stablehlo.abs' op operand")),
    ("fuzz-10 - lowering: compiled negative advanced indices", _compile_message("take_along_axis: index -")),
    ("fuzz-11 - lowering: compiled graphs with zero-size dims or a constant 0.0 divisor",
     _compile_message("failed to legalize operation 'torch.constant.", "is incompatible with return type")),
    ("fuzz-14 - torchcore: an out-of-range gather index raises IndexError at sync, CPU's gather a RuntimeError",
     lambda program, mode, m: m.kind == "error type" and "CPU raised RuntimeError: index" in m.message
     and "neuron raised IndexOutOfBoundsError" in m.message),
    ("fuzz-15 - torchcore: argument errors come from the meta kernels, in another order than CPU's checks",
     lambda program, mode, m: m.kind == "error type" and mode != "compile"
     and "CPU raised RuntimeError: zero-dimensional tensor (at position 0) cannot be concatenated" in m.message
     and "neuron raised IndexError: Dimension out of range" in m.message),
    ("fuzz-19 - torchcore: adaptive eager's flush reads a tensor that out= resized to empty (address 0x0)",
     lambda program, mode, m: mode == "adaptive" and "is not neuron device memory" in m.message),
    ("fuzz-20 - lowering: gelu of float16/bfloat16 computes in the 16-bit dtype (CPU: in fp32, rounded once)",
     lambda program, mode, m: m.kind == "value" and _step_op(program, m) == "gelu"
     and m.operands and m.operands[0].dtype in (torch.float16, torch.bfloat16)),
    ("fuzz-21 - torchcore: floor_divide_ of a smaller self resizes self to the broadcast shape (CPU raises)",
     lambda program, mode, m: m.kind == "missing error" and _step_op(program, m) == "floor_divide_"
     and "doesn't match the broadcast shape" in m.message),
    ("fuzz-22 - torchcore: an empty out= tensor that is also an input is resized to another empty shape (CPU raises)",
     lambda program, mode, m: m.kind == "missing error" and (_step_op(program, m) or "").endswith("_out_into")
     and "doesn't match the broadcast shape" in m.message and any(t.numel() == 0 for t in m.operands)
     and program["steps"][m.step]["args"][-1] in program["steps"][m.step]["args"][:-1]),
    ("fuzz-23 - numerics: a bool tensor compared with an int scalar outside {0, 1} casts the scalar to bool",
     lambda program, mode, m: m.kind == "value" and _step_op(program, m) in _SCALAR_COMPARISONS
     and m.operands and m.operands[0].dtype == torch.bool
     and type(s := program["steps"][m.step]["params"]["s"]) is int and s not in (0, 1)),
    ("fuzz-12 - numerics: compiled integer division by zero and int ** negative int do not raise",
     lambda program, mode, m: mode == "compile" and m.kind == "missing error"
     and ("negative integer powers" in m.message or "ZeroDivisionError" in m.message)),
]

_NO_LOWERING = re.compile(r"NeuronCompileError: cannot compile '(aten|stablehlo)\.[a-z_0-9.]+' at .*(torch-mlir cannot lower it to "
                          r"StableHLO: failed to legalize operation 'torch\.operator' that was explicitly marked illegal|unsupported op)")
LIMITATIONS = [
    ("torch.compile: an op with no lowering raises NeuronCompileError (documented)",
     lambda program, mode, m: mode == "compile" and m.kind in ("neuron error", "error type") and bool(_NO_LOWERING.search(m.message))),
]


def _remainder_by_zero_or_inf(program, mode, shapes) -> bool:
    return mode != "compile" and any(step["op"] in ("remainder_s", "remainder_s_") and isinstance(step["params"]["s"], float)
                                     and step["params"]["s"] in (0.0, math.inf, -math.inf) for step in program["steps"])


def _gather_over_an_empty_dim(program, mode, shapes) -> bool:
    return mode == "compile" and any(step["op"] in ("gather", "scatter", "scatter_add", "scatter_value", "scatter_")
                                     and 0 in operands[0] for step, operands in zip(program["steps"], shapes))


def _cumsum_to_8_bits(program, mode, shapes) -> bool:
    return any(step["op"] == "cumsum_dtype" and step["params"]["dtype"]["dtype"] in ("int8", "uint8")
                                     for step in program["steps"])


def _softmax_dim_out_of_range(program, mode, shapes) -> bool:
    return mode != "compile" and any(step["op"] in ("softmax", "softmax_f32") and operands
                                     and not -max(len(operands[0]), 1) <= step["params"]["dim"] < max(len(operands[0]), 1)
                                     for step, operands in zip(program["steps"], shapes))


CRASHES = [
    ("fuzz-1 - lowering: torch-mlir segfaults lowering remainder(x, 0.0 or inf)", _remainder_by_zero_or_inf),
    ("fuzz-11 - lowering: LLVM aborts on a compiled gather over a zero-size dim", _gather_over_an_empty_dim),
    ("fuzz-13 - lowering: torch-mlir segfaults lowering cumsum(dim, dtype=int8/uint8)", _cumsum_to_8_bits),
    ("fuzz-18 - lowering: eager softmax with a dim out of range lowers for minutes, growing", _softmax_dim_out_of_range),
]


def known_crash(program: dict, mode: str) -> str | None:
    """The reason ``program`` must not run in ``mode`` in this process, if it must not."""
    from tnx_fuzz_runner import operand_shapes

    shapes = operand_shapes(program)
    for reason, applies in CRASHES:
        if applies(program, mode, shapes):
            return reason
    return None
