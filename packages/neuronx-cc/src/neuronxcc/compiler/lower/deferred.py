"""Deferred tensor_scalar ops: an fp32 ``x op c`` (c an immediate or a per-partition column) read by
exactly one elementwise node of the same tile is not emitted on its own; its consumer folds it
into its own instruction:

* another tensor_scalar: the ALU's second stage (``(x op0 a) op1 b``, the cost of one op);
* an activation: ScalarE's ``func(x * scale + bias)`` (multiply -> scale, add/subtract -> bias);
* a tensor_tensor: ``scalar_tensor_tensor`` (``(x op0 a) op1 y``), one pass instead of two.

Engines compute in fp32 and round each stage to fp32, exactly as the fp32 intermediate did, so
results are bit-identical; what goes away is an instruction per fold (its fixed costs, its pass
over the tile, and its semaphore hop to the consumer). Anything that cannot fold writes the value
out first (``materialize``).
"""

from __future__ import annotations

from dataclasses import dataclass

from neuron_sim.graph.ops import ELEMENTWISE_OPS
from neuron_sim.isa import TensorScalar

from ..emitter import Operand
from ..sbuf import column

# Graph ops whose tile lowering is one tensor_scalar when an operand is a number per partition.
DEFERRABLE_OPS = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum", "negate"})
MAX_STAGES = 2  # a tensor_scalar has two ALU stages


@dataclass(frozen=True)
class Pending:
    src: object  # AccessPattern the stages read
    stages: tuple  # ((alu, operand, reverse), ...): operand an immediate or a [P, 1] column


def deferrable_values(nodes, consumers, stored: set, same_kind=None) -> set:
    """Ids of fp32 values of ``nodes`` that may stay deferred: produced by a deferrable op, not
    stored, read once, directly, by an elementwise node of the group (``same_kind(producer,
    consumer)``: e.g. both per-row in a row-wise group)."""
    members = {id(n) for n in nodes}
    out = set()
    for n in nodes:
        if n.op not in DEFERRABLE_OPS:
            continue
        v = n.outputs[0]
        if v.type.dtype != "float32" or v.id in stored:
            continue
        readers = consumers.get(v.id, ())
        if len(readers) != 1:
            continue
        c = readers[0]
        if id(c) not in members or c.op not in ELEMENTWISE_OPS or (same_kind is not None and not same_kind(n, c)):
            continue
        out.add(v.id)
    return out


def extend_liveness(nodes, deferrable: set, last: dict, owner: dict) -> None:
    """A deferred value's operand is read by the instruction that finally computes it: keep the
    operand's buffer alive until that consumer (``last``: value id -> position of its last reader)."""
    position = {id(n): k for k, n in enumerate(nodes)}
    reader = {}
    for n in nodes:
        for v in n.inputs:
            reader.setdefault(v.id, n)
    reach = {}
    for n in reversed(nodes):
        v = n.outputs[0] if n.outputs else None
        if v is None or v.id not in deferrable or v.id not in reader:
            continue
        c = reader[v.id]
        cv = c.outputs[0].id if c.outputs else None
        reach[v.id] = reach.get(cv, position[id(c)])
        for x in n.inputs:
            if x.id in owner:
                key = owner[x.id]
                last[key] = max(last.get(key, -1), reach[v.id])


def materialize(tc, op: Operand) -> Operand:
    """``op`` with its deferred stages written out (one tensor_scalar), or ``op`` itself."""
    if op.pending is None:
        return op
    p = op.pending
    stages = list(p.stages) + [(None, None, False)] * (MAX_STAGES - len(p.stages))
    (op0, a0, r0), (op1, a1, r1) = stages[:2]
    tc.emit(TensorScalar(dst=op.ap, src=p.src, op0=op0, operand0=a0, reverse0=r0, op1=op1, operand1=a1, reverse1=r1))
    return Operand(op.dtype, ap=op.ap)


def stages_of(op: Operand) -> tuple:
    return op.pending.stages if op.pending is not None else ()


def source(op: Operand):
    return op.pending.src if op.pending is not None else op.ap


def scale_bias(tc, stages: tuple):
    """(scale, bias) with ``func(x * scale + bias)`` equal to ``func`` of the stages applied to x,
    or None. Subtracting c is adding -c (exact); ``c - x`` is ``x * -1 + c``."""
    scale, bias = 1.0, None
    rest = list(stages)
    if rest and rest[0][0] == "multiply":
        scale = rest.pop(0)[1]
    elif rest and rest[0][0] == "subtract" and rest[0][2] and len(rest) == 1:
        return -1.0, rest[0][1]
    if rest:
        alu, operand, reverse = rest.pop(0)
        if alu == "add":
            bias = operand
        elif alu == "subtract" and not reverse:
            bias = _negated(tc, operand)
        else:
            return None
    if rest:
        return None
    return scale, bias


def _negated(tc, operand):
    if isinstance(operand, (int, float)):
        return -float(operand)
    # One [P, 1] buffer per ring slot: program order (and the dependencies it implies) keeps two
    # negations of one tile apart.
    col = column(tc.buffer(("negated",), "float32", free=1), tc.pc)
    tc.emit(TensorScalar(dst=col, src=operand, op0="multiply", operand0=-1.0))
    return col
