"""Constant folding: a graph op evaluated over constant operands with the graph's own definitions
(``ops.py``), so a folded value has the bits a run would compute. Three layers fold, each for its
own reason, all through ``evaluate`` here and against one size limit, ``FOLD_MAX_ELEMENTS``:

* the StableHLO importer (``neuronxcc.frontend``) turns ops over constants into constants, so the
  graph it hands on names the values torch-mlir computed from literals (index arithmetic, splats)
  and its pattern matching sees them - an op whose result is no bigger than its operands (it
  replaces them), or an iota of at most ``FOLD_MAX_ELEMENTS``;
* the compiler (``neuronxcc.compiler.fold``) takes a graph's compile-time values as immediates,
  generated or stored constants instead of instructions (the graph itself is not changed) -
  uniform values of any size (computed on one element), others of at most ``FOLD_MAX_ELEMENTS``;
* the fast executor's plan (``neuron_sim.executor.fast.plan``) evaluates a graph's constant-only
  parts once, when the plan is made, instead of at every launch - host time only, nothing the
  device computes changes. What it keeps lives in host memory as long as the graph does, not in
  a program, so it keeps results up to ``PLAN_FOLD_FACTOR`` times the limit (and broadcast views
  of any size).
"""

from __future__ import annotations

import numpy as np

from .ops import OPS

# The largest result, in elements, a fold materializes when its values are not all one value.
FOLD_MAX_ELEMENTS = 4096
PLAN_FOLD_FACTOR = 16


def evaluate(op: str, arrays: list[np.ndarray], attrs: dict, out_types) -> list[np.ndarray]:
    """Graph op ``op``'s results from constant ``arrays`` (floating-point exceptions are values
    here, as they are on the engines)."""
    with np.errstate(all="ignore"):
        results = OPS[op].evaluate(arrays, attrs, list(out_types))
    return [np.asarray(r) for r in results]


def is_uniform(a: np.ndarray) -> bool:
    """Every element of ``a`` has the same bits (a broadcast view, or equal values)."""
    if a.size <= 1:
        return True
    if a.strides and all(s == 0 for s in a.strides):
        return True
    flat = np.ascontiguousarray(a).reshape(-1)
    bits = flat.view(f"u{flat.dtype.itemsize}")
    return bool(np.all(bits == bits[0]))
