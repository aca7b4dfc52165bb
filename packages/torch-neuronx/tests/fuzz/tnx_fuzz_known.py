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

from tnx_fuzz_ops import OPS
from tnx_fuzz_programs import result_without_out


def _step_op(program, m) -> str | None:
    return program["steps"][m.step]["op"] if m.step is not None and m.step < len(program["steps"]) else None


def _empty_result(step, operands) -> bool:
    result = result_without_out(OPS[step["op"]], step.get("params", {}), operands)
    return result is not None and result.numel() == 0


KNOWN_ISSUES = [
    ("fuzz-4 - torchcore: a resized out= tensor is contiguous, CPU's takes the input's layout",
     lambda program, mode, m: m.kind == "layout" and (_step_op(program, m) or "").endswith(("_out", "_out_into"))),
    ("fuzz-14 - torchcore: an out-of-range gather index raises IndexError at sync, CPU's gather a RuntimeError",
     lambda program, mode, m: m.kind == "error type" and "CPU raised RuntimeError: index" in m.message
     and "neuron raised IndexOutOfBoundsError" in m.message),
    ("fuzz-15 - torchcore: argument errors come from the meta kernels, in another order than CPU's checks",
     lambda program, mode, m: m.kind == "error type" and mode != "compile"
     and "CPU raised RuntimeError: zero-dimensional tensor (at position 0) cannot be concatenated" in m.message
     and "neuron raised IndexError: " in m.message),
    ("fuzz-21 - torchcore: floor_divide_ of a smaller self resizes self to the broadcast shape (CPU raises)",
     lambda program, mode, m: m.kind == "missing error" and _step_op(program, m) == "floor_divide_"
     and "doesn't match the broadcast shape" in m.message),
    ("fuzz-22 - torchcore: an empty out= tensor that is also an input is resized to another empty shape (CPU raises)",
     lambda program, mode, m: m.kind == "missing error" and (_step_op(program, m) or "").endswith("_out_into")
     and any(t.numel() == 0 for t in m.operands)
     and ("doesn't match the broadcast shape" in m.message and program["steps"][m.step]["args"][-1] in program["steps"][m.step]["args"][:-1]
          or "refer to a single memory location" in m.message and m.operands[-1].numel() == 0)),
    ("fuzz-24 - torchcore: out= into its own input with an empty result is resized to empty (CPU raises: overlap)",
     lambda program, mode, m: m.kind == "missing error" and (_step_op(program, m) or "").endswith("_out_into")
     and "refer to a single memory location" in m.message
     and program["steps"][m.step]["args"][-1] in program["steps"][m.step]["args"][:-1]
     and _empty_result(program["steps"][m.step], m.operands)),
    ("fuzz-25 - torchcore: cumsum with a bool result (dtype= or out=) computes where CPU's kernel refuses Bool",
     lambda program, mode, m: m.kind == "missing error" and "\"cumsum_out_cpu\" not implemented for 'Bool'" in m.message),
    ("fuzz-26 - torchcore: neg(out=) of another floating dtype casts where CPU raises 'Found dtype ... but expected ...'",
     lambda program, mode, m: m.kind == "missing error" and _step_op(program, m) in ("neg_out", "neg_out_into")
     and "CPU raised RuntimeError: Found dtype" in m.message),
]

_NO_LOWERING = re.compile(r"NeuronCompileError: cannot compile '(aten|stablehlo)\.[a-z_0-9.]+' at .*(torch-mlir cannot lower it to "
                          r"StableHLO: failed to legalize operation 'torch\.operator' that was explicitly marked illegal|unsupported op)")
LIMITATIONS = [
    ("torch.compile: an op with no lowering raises NeuronCompileError (documented)",
     lambda program, mode, m: mode == "compile" and m.kind in ("neuron error", "error type") and bool(_NO_LOWERING.search(m.message))),
]


def _softmax_dim_out_of_range(program, mode, shapes) -> bool:
    return mode != "compile" and any(step["op"] in ("softmax", "softmax_f32") and operands
                                     and not -max(len(operands[0]), 1) <= step["params"]["dim"] < max(len(operands[0]), 1)
                                     for step, operands in zip(program["steps"], shapes))


CRASHES = [
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
