"""Integer exactness: which integer ops the lowering computes exactly, and the refusal of the rest.

A graph's integer ops are exact by definition (``neuron_sim.graph.ops``). The engines are not: the
Vector/Scalar datapath computes in fp32 (integers exact up to 2**24), DMA casts between dtypes go
through fp32, and only GpSimd's integer ALU computes 32-bit integers exactly (int32/uint32 tiles,
``neuron_sim.isa.ops.INTEGER_ALU_OPS``). int64 has no engine type: on chip it is an int32 loaded
and stored by DMA casts, or its two 32-bit words moved as they are. From the value ranges the graph
allows (``integer_ranges.py``):

* moves are exact for every dtype: views, copies, concatenate and pad of stored values, gathers
  (8-byte elements move as int32 word pairs) and constants (written by words);
* an op computed on chip is exact in fp32 when its operands and result lie within +-2**24
  ("small") and the result needs no wrap - a dot_general (TensorE, fp32 PSUM) when every partial
  sum of its products does; an int64 operand outside that range arrives rounded (a
  monotone rounding: order is kept, nothing becomes equal to a small value it was not), so a
  compare is exact when either side is strictly below 2**24 in magnitude, whatever the other;
* int32/uint32 add, subtract, multiply, min/max, abs, negate, square, relu, sign and compares of
  any range run on GpSimd's integer ALU (``IntegerPlan.integer_alu``);
* int64 add, subtract, multiply, negate, abs, min/max, compares, select and bitwise ops of any
  range go by 32-bit words on that ALU (``IntegerPlan.words64``, ``lower/words64.py``);
* integer reductions, arg-reductions and cumsum this check would refuse, and 8/16-bit arithmetic
  that wraps, are first rewritten into exact steps (``integer_expand.py``, ``plan_exact``);
* argsort of any integer range compares its keys on that ALU (int32/uint32 as they are, int64 by
  its words: ``lower/sort.py``, told by ``IntegerPlan.integer_alu``); its result is a position
  chosen by comparing values (``POSITION_OPS``), so it is never computed as an "index only" value;
* conversions that would round or wrap an int64 on chip are DMA casts or word moves instead
  (``IntegerPlan.dma_casts``: int64 <-> float, integers to narrower ones, integers to int64);
* an integer value only used as an index (through integer ops) may be computed through fp32: a
  valid index is small, and an invalid one stays out of range, so the gather raises as it should.

Anything else is refused: ``check_integers`` raises ``CompileError(INEXACT_INTEGER)`` naming the
op, the dtypes and the ranges (integer matmuls whose sums may pass 2**24 or wrap, integer division
beyond it), and eager
mode runs that op through CPU fallback; ``integer_refusals`` lists every refused node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuron_sim import dtypes
from neuron_sim.graph import Node
from neuron_sim.graph.ops import EXACT_ON_INTEGERS_OPS, IDENTITY_ON_INTEGERS

from .emitter import onchip_dtype
from .errors import node_error
from .fold import fold_constants
from .fusion import live_nodes
from .integer_expand import expand, expandable
from .integer_ranges import (
    FP32_EXACT,
    INDEXED,
    MOVES,
    Range,
    bounds,
    fits,
    is_integer,
    result_range,
    scatter_total,
    small,
    strictly_small,
    union,
    value_ranges,
)
from .lower.elementwise_ops import INTEGER_ALU_OPS  # what the integer-ALU lowering computes
from .lower.words64 import OPS as WORDS64_OPS  # what the 32-bit-word lowering computes

INEXACT_INTEGER = "compile.inexact_integer"
INTEGER_ALU_DTYPES = ("int32", "uint32")
WIDENED = frozenset({"bool", "int8", "uint8", "int16", "uint16", "int32"})  # -> int64 by words (sign-extended)
# Results that are positions chosen by comparing the operand's values: rounding the operand changes
# which position (never whether it is valid), so they are never "index only" computations.
POSITION_OPS = frozenset({"argmax", "argmin", "argsort"})


def as_views(nodes) -> list:
    """``nodes`` with the ops that leave integers unchanged - copies, same-dtype converts, rounding
    of integers - as same-shape reshapes (views): nothing is computed, and 8-byte values then move
    HBM to HBM instead of through a DMA cast onto the chip. The graph itself is not changed."""
    out = []
    for node in nodes:
        x = node.inputs[0] if len(node.inputs) == 1 else None
        same = x is not None and x.type.dtype == node.outputs[0].type.dtype
        if same and is_integer(x) and (node.op in IDENTITY_ON_INTEGERS or node.op == "convert"):
            node = Node("reshape", [x], node.outputs, {"shape": tuple(x.type.shape)}, node.location)
        out.append(node)
    return out


def index_only_values(nodes, outputs) -> set[int]:
    """Values used only as the index operand of a gather/scatter (through integer ops), whose
    indexed dimensions are all small: such values may be computed through fp32 (a valid index is
    small, an invalid one stays out of range)."""
    uses: dict[int, list] = {}
    for node in nodes:
        for pos, v in enumerate(node.inputs):
            uses.setdefault(v.id, []).append((node, pos))
    output_ids = {v.id for v in outputs}
    index_only: set[int] = set()
    for node in reversed(nodes):
        for v in node.outputs:
            if v.id in output_ids or v.id not in uses or not is_integer(v):
                continue
            ok = True
            for user, pos in uses[v.id]:
                if user.op in POSITION_OPS:
                    ok = False
                elif user.op in INDEXED and pos == INDEXED[user.op]:
                    axis = user.attrs["axis"] % user.inputs[0].type.rank
                    ok = ok and user.inputs[0].type.shape[axis] <= FP32_EXACT
                else:
                    ok = ok and all(o.id in index_only for o in user.outputs)
            if ok:
                index_only.add(v.id)
    return index_only


@dataclass
class IntegerPlan:
    ranges: dict[int, Range]
    integer_alu: set[int] = field(default_factory=set)  # value ids computed on GpSimd's integer ALU
    dma_casts: set[int] = field(default_factory=set)  # conversions lowered as DMA casts or by words
    words64: set[int] = field(default_factory=set)  # int64 add/subtract/min/max/compares by 32-bit words
    refusals: list = field(default_factory=list)  # (node, reason)


def plan_integers(nodes, graph, folded: dict) -> IntegerPlan:
    """Ranges, GpSimd integer-ALU nodes and refusals of ``nodes`` (see the module docstring)."""
    plan = IntegerPlan(value_ranges(nodes, graph.inputs, folded))
    index_only = index_only_values(nodes, graph.outputs)
    truncated = {v.id for n in nodes if n.op == "trunc" for v in n.inputs}
    for node in nodes:
        data = [v for k, v in enumerate(node.inputs) if not (node.op in INDEXED and k == INDEXED[node.op])]
        if not any(is_integer(v) for v in data) and not any(dtypes.is_int(v.type.dtype) for v in node.outputs):
            continue  # no integer data (float compares, gathers of floats by integer indices...)
        if all(v.id in folded for v in node.outputs):
            continue  # computed at compile time, with the graph's own exact definitions
        if node.outputs and all(v.id in index_only for v in node.outputs) and node.op not in POSITION_OPS:
            continue
        reason = _error_by_value(node, plan.ranges, truncated) or _verdict(node, plan)
        if reason is not None:
            plan.refusals.append((node, reason))
    return plan


def _describe(v, ranges) -> str:
    r = ranges.get(v.id)
    return f"{v.type.dtype} in [{r[0]}, {r[1]}]" if r is not None else v.type.dtype


def _verdict(node, plan: IntegerPlan) -> str | None:
    """Why ``node`` would not give the graph's integer result, or None (possibly adding it to
    ``plan.integer_alu``)."""
    ranges = plan.ranges
    op = node.op
    out = node.outputs[0]
    out_range = ranges.get(out.id)
    if op == "iota" and dtypes.itemsize(out.type.dtype) == 8 and not small(out_range):
        return f"an int64 iota to {out_range[1]}: generated as int32 and stored through fp32"
    if op in MOVES or op == "bitcast_convert":
        return None  # bytes move: exact for every dtype
    ins = [ranges.get(v.id) for v in node.inputs]
    onchip = [onchip_dtype(v.type.dtype) for v in node.inputs]
    # int64 reaches the chip through a DMA cast (fp32): rounded unless small; leaves it the same way.
    rounded = any(v.type.dtype == "int64" and not small(r) for v, r in zip(node.inputs, ins))
    stored_int64 = out.type.dtype == "int64" and not small(out_range)

    def operands() -> str:
        return ", ".join(_describe(v, ranges) for v in node.inputs)

    if op == "compare":
        if strictly_small(ins[0]) or strictly_small(ins[1]):
            return None  # fp32's rounding is monotone: the order against a small value is kept
        if not rounded and onchip[0] == onchip[1] and onchip[0] in INTEGER_ALU_DTYPES:
            plan.integer_alu.add(out.id)
            return None
    data = node.inputs[1:] if op == "select" else node.inputs
    if op in WORDS64_OPS and all(v.type.dtype == "int64" for v in data) and (rounded or stored_int64):
        plan.words64.add(out.id)  # by 32-bit words on the integer ALU (``lower/words64.py``)
        return None
    if op == "argsort":
        if is_integer(node.inputs[0]) and not small(ins[0]):
            plan.integer_alu.add(out.id)  # keys compared on GpSimd's integer ALU (int64 by words: ``lower/sort.py``)
        return None
    if op == "compare":
        return f"compare of {operands()}: only GpSimd's integer ALU compares these exactly (fp32 is exact to 2**24)"
    if op == "convert":
        return _convert_verdict(node, plan, ins[0], rounded, stored_int64)
    # a dot_general with a float operand or result is the graph's fp32 product (integers loaded as fp32)
    float_dot = op == "dot_general" and not (all(is_integer(v) for v in node.inputs) and is_integer(out))
    if op in ("select", "and", "or", "xor", "not", "shift_left", "shift_right") or op not in EXACT_ON_INTEGERS_OPS or float_dot:
        # moved or computed bit for bit on chip (select, bitwise), or defined through fp32 by the
        # graph itself (no exact_on_integers fact): exact as long as no int64 value passes a DMA cast
        if rounded or stored_int64:
            return f"{op} of {operands()} -> {_describe(out, ranges)}: int64 moves on and off the chip through fp32"
        return None
    if op in ("scatter", "index_add"):
        data = [r for k, r in enumerate(ins) if k != INDEXED[op]]
        if op == "scatter" and node.attrs.get("mode", "set") == "set" and dtypes.itemsize(out.type.dtype) <= 4:
            return None  # values moved as they are
        total = scatter_total(node, data) if op == "index_add" or node.attrs.get("mode") == "add" else union(*data)
        if all(small(r) for r in data) and small(total) and fits(total, out.type.dtype):
            return None
        return f"{op} of {operands()}: the scatter moves and adds integers in fp32 (exact to 2**24)"
    if op == "reduce" and node.attrs["kind"] in ("and", "or"):
        return None  # nonzero tests
    result = result_range(op, ins, node) if all(r is not None for r in ins) else None
    if result is None:
        result = out_range  # positions (argmax of floats), or an integer result's bounds
    if (all(small(r) for r in ins if r is not None) and small(result) and not stored_int64
            and fits(result, out.type.dtype)):
        return None  # fp32 is exact here (and the result needs no wrap)
    if (op in INTEGER_ALU_OPS and not rounded and not stored_int64 and len(set(onchip)) == 1
            and onchip[0] in INTEGER_ALU_DTYPES and onchip_dtype(out.type.dtype) == onchip[0]):
        plan.integer_alu.add(out.id)
        return None
    what = f"reduce {node.attrs.get('kind')}" if op == "reduce" else op
    extra = "; int64 moves on and off the chip through fp32" if rounded or stored_int64 else ""
    if op == "dot_general":
        return (f"integer dot_general of {operands()} -> {_describe(out, ranges)}: TensorE multiplies and "
                f"accumulates in fp32, exact only while every partial sum is within 2**24 and the result "
                f"needs no wrap{extra}")
    return (f"integer {what} of {operands()}: fp32 is exact to 2**24 and GpSimd's integer ALU computes only "
            f"int32/uint32 {sorted(INTEGER_ALU_OPS)}{extra}")


def _error_by_value(node, ranges, truncated: set[int]) -> str | None:
    """Why CPU may raise for some values of an integer op, or None. PyTorch refuses integer
    division by zero (ZeroDivisionError) and integer powers with a negative number as exponent
    (tensor exponents give 1 / x**n, rounded toward zero); the engines return other values. Such an op is not lowered where its
    operand ranges allow that value: run through CPU, it raises as it should. An integer division
    is a ``divide`` of integers with an integer result, or one whose float quotient is truncated
    (``truncated``: torch-mlir's form of ``torch.div(a, b, rounding_mode="trunc")``)."""
    if node.op not in ("divide", "remainder", "fmod", "power") or len(node.inputs) != 2:
        return None
    out, second = node.outputs[0], node.inputs[1]
    if not (dtypes.is_int(out.type.dtype) or node.op == "divide" and out.id in truncated and is_integer(second)):
        return None
    lo, hi = ranges.get(second.id, bounds(second.type.dtype))
    if node.op != "power" and lo <= 0 <= hi:
        return f"integer {node.op} by {_describe(second, ranges)}: CPU raises ZeroDivisionError for a zero divisor"
    if node.op == "power" and lo < 0:
        return (f"integer power with exponent {_describe(second, ranges)}: CPU refuses a negative number as "
                "exponent and computes negative tensor exponents as 1 / x**n rounded toward zero")
    return None


def _convert_verdict(node, plan: IntegerPlan, src_range, rounded: bool, stored_int64: bool) -> str | None:
    src, dst = node.inputs[0].type.dtype, node.outputs[0].type.dtype
    what = f"{src} -> {dst} conversion of {_describe(node.inputs[0], plan.ranges)}"
    out = node.outputs[0]
    if dst == "bool":
        return None  # a nonzero test: exact
    if dst == "int64" and not small(plan.ranges.get(out.id)) and (dtypes.is_float(src) or src in WIDENED):
        plan.dma_casts.add(out.id)  # a DMA cast from fp32, or the value's words (``lower_dma_cast``)
        return None
    if src == "bool" or not dtypes.is_int(src):  # 0/1, or the engines' float -> integer write (RNE, saturating)
        return None
    if rounded and (dtypes.is_float(dst) or dst in ("int32", "uint32")):
        plan.dma_casts.add(out.id)  # a DMA cast int64 -> fp32 -> float, or the low words
        return None
    if dtypes.is_float(dst):
        return None  # int32 -> fp32 on chip: rounded once
    lo, hi = bounds(dst)
    if not rounded and not stored_int64 and (onchip_dtype(src) == onchip_dtype(dst) or (
            lo <= src_range[0] and src_range[1] <= hi and small(src_range))):
        return None  # the same int32 on chip, or a cast of small values that fit
    if dtypes.itemsize(dst) <= dtypes.itemsize(src):
        plan.dma_casts.add(out.id)  # the graph wraps: the low bytes of each element, moved
        return None
    return f"{what}: int64 moves on and off the chip through fp32"


def as_planned(nodes, plan: IntegerPlan) -> list:
    """``nodes`` with what ``plan`` lowers its own way as compiler-internal ops: conversions made
    by a DMA cast or by words (``dma_cast``: ``lower.movement.lower_dma_cast``) and int64
    arithmetic by words (``words64``: ``lower.words64``)."""
    out = []
    for node in nodes:
        vid = node.outputs[0].id if node.outputs else None
        if node.op == "convert" and vid in plan.dma_casts:
            node = Node("dma_cast", node.inputs, node.outputs, {}, node.location)
        elif vid in plan.words64:
            node = Node("words64", node.inputs, node.outputs, {"op": node.op, **node.attrs}, node.location)
        out.append(node)
    return out


def plan_exact(nodes, graph, folded: dict) -> tuple[list, IntegerPlan]:
    """``nodes`` with the integer reductions, arg-reductions and scans the plan would refuse
    rewritten as trees of exact steps (``integer_expand.py``), and the plan of the result."""
    plan = plan_integers(nodes, graph, folded)
    chosen = {id(node) for node, _ in plan.refusals if expandable(node)}
    if not chosen:
        return nodes, plan
    # new values are numbered after every value of the graph (dead nodes' too) and of ``nodes``
    taken = [v.id for n in (*graph.nodes, *nodes) for v in (*n.inputs, *n.outputs)] + [v.id for v in graph.inputs]
    nodes = expand(nodes, chosen, 1 + max(taken, default=-1))
    return nodes, plan_integers(nodes, graph, folded)


def integer_refusals(graph) -> list[tuple]:
    """(node, reason) for every live node of ``graph`` the lowering would not compute exactly - the
    compiler's integer verdict, for a backend that runs such nodes elsewhere."""
    nodes = as_views(live_nodes(graph))
    return plan_exact(nodes, graph, fold_constants(nodes))[1].refusals


def check_integers(nodes, graph, folded: dict) -> tuple[list, IntegerPlan]:
    """``nodes`` as they are lowered (``plan_exact``) and their integer plan; raises
    CompileError(INEXACT_INTEGER) for the first refusal."""
    nodes, plan = plan_exact(nodes, graph, folded)
    if plan.refusals:
        node, reason = plan.refusals[0]
        raise node_error(node, INEXACT_INTEGER, f"{reason}; run it on CPU (eager mode falls back by itself)")
    return nodes, plan
