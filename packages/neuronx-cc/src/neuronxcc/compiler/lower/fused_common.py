"""What the tile-loop lowerings of fused groups share (``elementwise``: fused groups, ``rowwise``:
row-wise ones, ``matmul``: epilogues, ``argreduce``, ``cumsum``): a view as a form over a group's
iteration space, buffer sharing by liveness within a tile, and groups over zero elements.
"""

from __future__ import annotations

from neuron_sim import dtypes

from ..emitter import onchip_dtype
from ..errors import node_error
from ..layout import Form
from ..views import View
from . import deferred
from .movement import materialize

IDENTITY = {"sum": 0.0, "prod": 1.0, "and": True, "or": False}


def reduce_form(dest: View, space, dims, keepdims: bool) -> Form:
    """The output of a reduction as a form over its input's space (stride 0 along ``dims``)."""
    if keepdims:
        strides = tuple(0 if d in dims else dest.strides[d] for d in range(len(space)))
    else:
        it = iter(dest.strides)
        strides = tuple(0 if d in dims else next(it) for d in range(len(space)))
    return Form(strides, dest.offset, dtypes.itemsize(dest.dtype))


def view_form(view: View) -> Form:
    return Form(view.strides, view.offset, dtypes.itemsize(view.dtype) if view.kind == "hbm" else 0)


def aliases(node) -> bool:
    """Whether a node's result is its operand's tile (copy, converts that do not change the on-chip type)."""
    if node.op == "copy":
        return True
    return node.op == "convert" and onchip_dtype(node.inputs[0].type.dtype) == onchip_dtype(node.outputs[0].type.dtype)


def share_buffers(nodes, stored: set, deferrable: set = frozenset(), reads_as: dict | None = None) -> tuple[dict, int]:
    """Assign node results to shared buffers by liveness within a tile.

    A value's buffer is free again once its last reader (or the last reader of a copy aliasing it)
    has been emitted; stored values live to the end of the tile. A buffer is reused only by a node
    *after* that reader - never by the reader itself, whose instructions may still read its
    operands after writing part of their result. Returns (value id -> role, bytes per element).
    """
    position = {}
    owner = {}  # value id -> the value whose buffer holds it (through aliasing copies)
    for k, n in enumerate(nodes):
        for v in n.outputs:
            position[v.id] = k
            owner[v.id] = owner.get(n.inputs[0].id, n.inputs[0].id) if aliases(n) else v.id
    last = {}
    end = len(nodes)
    reads_as = reads_as or {}  # value read -> the value it is (a matmul epilogue's reshaped reads)
    for k, n in enumerate(nodes):
        for v in n.inputs:
            vid = reads_as.get(v.id, v.id)
            if vid in owner:
                last[owner[vid]] = max(last.get(owner[vid], -1), k)
    for vid in stored:
        if vid in owner:
            last[owner[vid]] = end
    deferred.extend_liveness(nodes, deferrable, last, owner)
    roles, free, live, count = {}, {}, [], {}
    for k, n in enumerate(nodes):
        for vid, dtype, until in list(live):  # buffers whose values died before this node
            if until < k:
                live.remove((vid, dtype, until))
                free.setdefault(dtype, []).append(roles[vid])
        if n.op == "reduce" or aliases(n):
            continue
        v = n.outputs[0]
        dtype = onchip_dtype(v.type.dtype)
        if free.get(dtype):
            roles[v.id] = free[dtype].pop()
        else:
            roles[v.id] = ("value", dtype, count.get(dtype, 0))
            count[dtype] = count.get(dtype, 0) + 1
        live.append((v.id, dtype, last.get(v.id, k)))
    return roles, sum(dtypes.itemsize(d) * c for d, c in count.items())


def first_use_location(nodes, v):
    for n in nodes:
        if any(x.id == v.id for x in n.inputs):
            return n.location
    return None


def empty_group(ctx, reductions, stores) -> None:
    """A group over zero elements: stored values get their destinations, reductions their identity."""
    for v in stores:
        ctx.views[v.id] = ctx.destination(v)
    for n in reductions:
        out = n.outputs[0]
        dest = ctx.destination(out)
        ctx.views[out.id] = dest
        if out.type.num_elements == 0:
            continue
        kind = n.attrs["kind"]
        if kind not in IDENTITY:
            raise node_error(n, "compile.empty_reduce", f"reduce {kind} over zero elements has no identity")
        materialize(ctx, View.scalar(IDENTITY[kind], out.type.shape, out.type.dtype), dest)
