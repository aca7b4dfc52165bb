"""Integer reductions, scans and arg-reductions of any range, as trees of exact elementwise steps.

No engine reduces or scans integers beyond 2**24 exactly: VectorE's tensor_reduce and scans
compute in fp32, TensorE accumulates in fp32. GpSimd's integer ALU (int32/uint32 tensor_tensor)
and the 32-bit-word lowering of int64 (``lower/words64.py``) compute elementwise ops exactly, so
a node the integer check would refuse is rewritten here into such steps over halves of the
reduced dim (the graph itself is not changed: the fast executor still evaluates the node):

* ``reduce`` sum/max/min/prod: ``x[0::2] op x[1::2]`` until one element is left (an odd one out
  is carried to the next step), dim by dim; the operand is first converted to the result dtype
  (PyTorch sums int32 into int64), so each step wraps as the graph's integers do;
* ``argmax``/``argmin``: the same pairs carry (value, position); the right element wins only when
  strictly greater (smaller), so ties keep the first position, as PyTorch's do;
* ``cumsum``: Hillis-Steele, ``y[k] += y[k - s]`` for s = 1, 2, 4, ... (log2(n) adds);
* 8/16-bit add/subtract/multiply/negate/abs/square, whose results the graph wraps and the
  engines' writes would saturate: computed in int32 (exact: fp32 for small values, else the
  integer ALU), then narrowed by a conversion, which moves the low bytes (``lower_dma_cast``).

Each step is an ordinary graph node (slices and concatenates move bytes; add/maximum/compare/
select run on the integer ALU or by words), so the integer check then plans the pieces as it plans
any other node. ``EXPANDABLE`` says which refused nodes are rewritten.
"""

from __future__ import annotations

from neuron_sim import dtypes
from neuron_sim.graph import Node, Value
from neuron_sim.graph.ops import infer

REDUCE_STEP = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply"}
ARG_WINNER = {"argmax": "GT", "argmin": "LT"}  # the right element wins when strictly this
WIDENED_OPS = frozenset({"add", "subtract", "multiply", "negate", "abs", "square"})


def expandable(node) -> bool:
    """Whether ``node`` is an integer reduction, arg-reduction or scan this module rewrites."""
    x = node.inputs[0] if node.inputs else None
    if x is None or not dtypes.is_int(x.type.dtype) or any(s == 0 for s in x.type.shape):
        return False
    out = node.outputs[0].type.dtype
    if node.op in WIDENED_OPS:
        return (
            dtypes.is_int(out)
            and dtypes.itemsize(out) < 4
            and all(dtypes.is_int(v.type.dtype) and dtypes.itemsize(v.type.dtype) < 4 for v in node.inputs)
        )
    if node.op == "reduce":
        return node.attrs["kind"] in REDUCE_STEP and dtypes.is_int(out) and x.type.rank > 0
    if node.op == "cumsum":
        return dtypes.is_int(out) and x.type.rank > 0
    return node.op in ARG_WINNER and dtypes.is_int(out) and x.type.rank > 0


class _Builder:
    """New nodes and values with ids after every id of the graph."""

    def __init__(self, next_id: int, location):
        self.next_id = next_id
        self.location = location
        self.nodes: list[Node] = []

    def add(self, op: str, inputs: list[Value], out: Value | None = None, **attrs) -> Value:
        if out is None:
            (type_,) = infer(op, [v.type for v in inputs], attrs)
            out = Value(self.next_id, type_)
            self.next_id += 1
        self.nodes.append(Node(op, list(inputs), [out], attrs, self.location))
        return out

    def slice(self, x: Value, dim: int, start: int, limit: int, stride: int = 1) -> Value:
        shape = x.type.shape
        return self.add(
            "slice",
            [x],
            start=[start if d == dim else 0 for d in range(len(shape))],
            limit=[limit if d == dim else s for d, s in enumerate(shape)],
            stride=[stride if d == dim else 1 for d in range(len(shape))],
        )

    def concat(self, parts: list[Value], dim: int) -> Value:
        return parts[0] if len(parts) == 1 else self.add("concatenate", parts, dim=dim)

    def pairs(self, x: Value, dim: int):
        """(even elements, odd elements, the odd one out or None) of ``x`` along ``dim``."""
        n = x.type.shape[dim]
        half = n // 2
        rest = self.slice(x, dim, n - 1, n) if n % 2 else None
        return self.slice(x, dim, 0, 2 * half, 2), self.slice(x, dim, 1, 2 * half, 2), rest


def _reduce(b: _Builder, node) -> None:
    x, out = node.inputs[0], node.outputs[0]
    if x.type.dtype != out.type.dtype:
        x = b.add("convert", [x], dtype=out.type.dtype)
    step = REDUCE_STEP[node.attrs["kind"]]
    for dim in sorted({d % x.type.rank for d in node.attrs["dims"]}):
        while x.type.shape[dim] > 1:
            even, odd, rest = b.pairs(x, dim)
            x = b.concat([b.add(step, [even, odd])] + ([rest] if rest is not None else []), dim)
    b.add("reshape", [x], out, shape=tuple(out.type.shape))


def _arg(b: _Builder, node) -> None:
    x, out = node.inputs[0], node.outputs[0]
    dim = node.attrs["dim"] % x.type.rank
    where = b.add("iota", [], shape=tuple(x.type.shape), dim=dim, dtype=out.type.dtype)
    while x.type.shape[dim] > 1:
        (v0, v1, vr), (i0, i1, ir) = b.pairs(x, dim), b.pairs(where, dim)
        right = b.add("compare", [v1, v0], direction=ARG_WINNER[node.op])
        x = b.concat([b.add("select", [right, v1, v0])] + ([vr] if vr is not None else []), dim)
        where = b.concat([b.add("select", [right, i1, i0])] + ([ir] if ir is not None else []), dim)
    b.add("reshape", [where], out, shape=tuple(out.type.shape))


def _cumsum(b: _Builder, node) -> None:
    y, out = node.inputs[0], node.outputs[0]
    if y.type.dtype != out.type.dtype:
        y = b.add("convert", [y], dtype=out.type.dtype)
    dim = node.attrs["dim"] % y.type.rank
    n = y.type.shape[dim]
    shift = 1
    while shift < n:
        summed = b.add("add", [b.slice(y, dim, shift, n), b.slice(y, dim, 0, n - shift)])
        y = b.concat([b.slice(y, dim, 0, shift), summed], dim)
        shift *= 2
    b.add("reshape", [y], out, shape=tuple(out.type.shape))


def _widened(b: _Builder, node) -> None:
    wide = b.add(node.op, [b.add("convert", [v], dtype="int32") for v in node.inputs], **node.attrs)
    b.add("convert", [wide], node.outputs[0], dtype=node.outputs[0].type.dtype)


_EXPAND = {"reduce": _reduce, "cumsum": _cumsum, "argmax": _arg, "argmin": _arg, **{op: _widened for op in WIDENED_OPS}}


def expand(nodes: list, chosen: set[int], next_id: int) -> list:
    """``nodes`` with each node whose ``id()`` is in ``chosen`` replaced by its exact steps."""
    out = []
    for node in nodes:
        if id(node) not in chosen:
            out.append(node)
            continue
        b = _Builder(next_id, node.location)
        _EXPAND[node.op](b, node)
        next_id = b.next_id
        out.extend(b.nodes)
    return out
