"""Value ranges of a graph's integers: what each integer (or bool) value may hold, from its dtype,
compile-time values, positions (iota, argmax) and interval arithmetic through each op. The integer
check (``integers.py``) decides from them where the engines' fp32 datapath is exact (every value
within +-2**24).
"""

from __future__ import annotations

import numpy as np
from neuron_sim import dtypes
from neuron_sim.graph.ops import DATA_MOVEMENT_OPS, LEAF_OPS

FP32_EXACT = 1 << 24  # every integer of magnitude <= 2**24 is an fp32 value
INDEXED = {"gather": 1, "take_along_axis": 1, "scatter": 1, "index_add": 1}  # op -> index operand
# Ops whose results are operand bytes moved (views, copies, gathers...) or made from nothing: exact
# for every dtype. select moves data too, but through the engines' Select datapath, not as bytes.
MOVES = (DATA_MOVEMENT_OPS - {"select"}) | LEAF_OPS
Range = tuple[int, int]


def bounds(dtype: str) -> Range:
    if dtype == "bool":
        return (0, 1)
    info = np.iinfo(dtypes.to_numpy(dtype))
    return (int(info.min), int(info.max))


def magnitude(r: Range) -> int:
    return max(abs(r[0]), abs(r[1]))


def small(r: Range | None) -> bool:
    return r is not None and magnitude(r) <= FP32_EXACT


def strictly_small(r: Range | None) -> bool:
    return r is not None and magnitude(r) < FP32_EXACT


def is_integer(v) -> bool:
    return dtypes.is_int(v.type.dtype) or v.type.dtype == "bool"


def fits(r: Range, dtype: str) -> bool:
    """Whether the mathematical results lie in ``dtype``: the graph would not wrap them (the
    engines' write saturates instead)."""
    if not dtypes.is_int(dtype):
        return True  # floats round, bool is a nonzero test: the same on the engines
    lo, hi = bounds(dtype)
    return lo <= r[0] and r[1] <= hi


def union(*ranges: Range) -> Range:
    return (min(r[0] for r in ranges), max(r[1] for r in ranges))


def _products(a: Range, b: Range) -> Range:
    p = [x * y for x in a for y in b]
    return (min(p), max(p))


def _abs(r: Range) -> Range:
    lo, hi = r
    if lo >= 0:
        return r
    if hi <= 0:
        return (-hi, -lo)
    return (0, max(-lo, hi))


def result_range(op: str, rs: list[Range], node) -> Range | None:
    """The mathematical result's range (before any wrap), or None when unknown."""
    if op == "add":
        return (rs[0][0] + rs[1][0], rs[0][1] + rs[1][1])
    if op == "subtract":
        return (rs[0][0] - rs[1][1], rs[0][1] - rs[1][0])
    if op == "multiply":
        return _products(rs[0], rs[1])
    if op in ("maximum", "minimum"):
        f = max if op == "maximum" else min
        return (f(rs[0][0], rs[1][0]), f(rs[0][1], rs[1][1]))
    if op == "abs":
        return _abs(rs[0])
    if op == "negate":
        return (-rs[0][1], -rs[0][0])
    if op == "square":
        m = _abs(rs[0])
        return (m[0] * m[0], m[1] * m[1])
    if op == "relu":
        return (max(rs[0][0], 0), max(rs[0][1], 0))
    if op == "sign":
        return (-1 if rs[0][0] < 0 else 0 if rs[0][0] == 0 else 1, 1 if rs[0][1] > 0 else 0 if rs[0][1] == 0 else -1)
    if op in ("floor", "ceil", "round", "trunc"):
        return rs[0]
    if op == "divide":
        return (-magnitude(rs[0]), magnitude(rs[0]))
    if op in ("remainder", "fmod"):
        m = max(magnitude(rs[1]) - 1, 0)
        return (-m, m)
    if op == "power":
        base, exp = magnitude(rs[0]), max(rs[1][1], 0)
        if exp > 64 or base > 1 and exp * base.bit_length() > 128:
            return None
        p = base ** exp
        return (-p, p)
    if op == "reduce":
        kind = node.attrs["kind"]
        count = node.inputs[0].type.num_elements // max(node.outputs[0].type.num_elements, 1)
        if kind == "sum":
            return (min(rs[0][0] * count, rs[0][0]), max(rs[0][1] * count, rs[0][1]))
        if kind in ("max", "min"):
            return rs[0]
        if kind == "prod":
            m = magnitude(rs[0])
            return None if count * max(m, 1).bit_length() > 128 else (-(m ** count), m ** count)
        return (0, 1)
    if op == "cumsum":
        n = node.inputs[0].type.shape[node.attrs["dim"] % node.inputs[0].type.rank]
        return (min(rs[0][0] * n, rs[0][0], 0), max(rs[0][1] * n, rs[0][1], 0))
    if op == "dot_general":
        k = 1
        lhs = node.inputs[0].type
        for d in node.attrs.get("lhs_contract", ()):
            k *= lhs.shape[d]
        p = _products(rs[0], rs[1])
        return (min(p[0] * k, p[0]), max(p[1] * k, p[1]))
    return None


def value_ranges(nodes, inputs, folded: dict) -> dict[int, Range]:
    """The range of every integer (and bool) value: exact for compile-time values, the dtype's for
    graph inputs, propagated through each op (intersected with the result dtype's bounds)."""
    ranges: dict[int, Range] = {}
    for v in inputs:
        if is_integer(v):
            ranges[v.id] = bounds(v.type.dtype)
    for node in nodes:
        for out in node.outputs:
            if not is_integer(out):
                continue
            if out.id in folded:
                a = np.asarray(folded[out.id])
                ranges[out.id] = (int(a.min()), int(a.max())) if a.size else (0, 0)
                continue
            ranges[out.id] = _value_range(node, out, ranges)
    return ranges


def _value_range(node, out, ranges) -> Range:
    """``out``'s range from its operands' (``ranges``)."""
    full = bounds(out.type.dtype)
    op = node.op
    ins = [ranges.get(v.id) for v in node.inputs]
    if out.type.dtype == "bool":
        return (0, 1)
    if op == "iota":
        n = tuple(node.attrs["shape"])[node.attrs["dim"]]
        r = (0, max(n - 1, 0))
    elif op in ("argmax", "argmin", "argsort"):
        r = (0, max(node.inputs[0].type.shape[node.attrs["dim"] % node.inputs[0].type.rank] - 1, 0))
    elif op in MOVES or op in ("select", "scatter"):
        data = [r for v, r in zip(node.inputs, ins) if r is not None and not (op in INDEXED and v is node.inputs[1])]
        if op == "select":
            data = ins[1:]
        if op == "pad":
            value = int(np.asarray(node.attrs.get("value", 0)).item())
            data = data + [(value, value)]
        r = union(*data) if data and all(d is not None for d in data) else full
        if op == "scatter" and node.attrs.get("mode") == "add":
            r = full
    elif op == "convert":
        src = ins[0]
        r = src if src is not None and full[0] <= src[0] and src[1] <= full[1] else full
    elif op == "index_add":
        r = full
    elif all(r is not None for r in ins) and ins:
        r = result_range(op, ins, node) or full
    else:
        r = full
    return r if full[0] <= r[0] and r[1] <= full[1] else full  # a result that may wrap: anywhere in the dtype


def scatter_total(node, data: list[Range]) -> Range:
    """The range of an accumulating scatter's results: the operand plus every update one element can
    receive (index_add: every index may name one row; scatter: every index along the axis)."""
    operand, updates = data[0], data[-1]
    if node.op == "index_add":
        count = node.inputs[1].type.num_elements
        alpha = abs(float(node.attrs.get("alpha", 1.0)))
        updates = (int(np.floor(updates[0] * alpha)) if updates[0] < 0 else 0, int(np.ceil(updates[1] * alpha)))
    else:
        count = node.inputs[1].type.shape[node.attrs["axis"] % node.inputs[1].type.rank]
    return (operand[0] + count * min(updates[0], 0), operand[1] + count * max(updates[1], 0))
