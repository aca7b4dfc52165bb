"""Fusion: partition a graph into groups, each lowered as one unit by its kind's lowering.

* **view ops** (broadcast_in_dim, transpose, slice, reshape) and **generators** (constant,
  iota, random_words) belong to no group: they become affine views (``views.py``) that the consumers' DMAs or
  on-chip generators read through.
* **fused** groups: elementwise nodes over one iteration shape, joined into one tile loop, plus
  optionally reductions of their values over one set of dims (a chain ending in a reduction).
  An elementwise node joins the groups of the elementwise producers it reads directly when they
  have its shape and no dependency path leaves the group and comes back (that would be a cycle);
  it may merge several independent such groups. A node that reads a group's reduction, or reads a
  group's value through a view op, starts a new group (those values must be complete in HBM first)
  - except in a **row-wise** group (below).
* **row-wise** fused groups (softmax, log_softmax, LayerNorm and their backwards): when whole rows
  of the reduced dims fit SBUF, every tile holds whole rows (rows on partitions, the reduced dims
  in the free dims), so a reduction is complete inside the tile that computed its input. Then the
  group also takes the *row nodes* - elementwise nodes over the reduction's (row) shape that read
  its results, e.g. ``sum / N``, ``rsqrt(var + eps)`` - and the elementwise nodes over the full
  space that read a row value broadcast back over its rows (``x - max``, ``e / sum``), and more
  reductions over the same dims. The input is loaded once per 128-row block instead of once per
  reduction: one HBM pass instead of two or three.
* **matmul** groups: a ``dot_general`` plus its *epilogue* - the elementwise nodes over the dot's
  result shape that read it (or read an epilogue value) directly. The epilogue runs on each output
  tile while it leaves PSUM (bias add, activation, scaling, dtype cast), so the raw product never
  makes an HBM round trip. Reductions and values read through view ops start new groups - except
  reshapes that keep the value's bytes in order (``[B*T, N] -> [B, T, N]``, every linear layer's
  output): the node runs on the product's tiles all the same (``Group.aliases``), unless a
  reduction reads it (then it would be stored for that reduction's group, which computes it on
  chip from the product it loads anyway). A fused group over the same shape reading graph inputs
  only, whose values nothing else reads (GELU's derivative of a saved activation), is absorbed into
  the epilogue that reads it: recomputed on the engines waiting for TensorE, no HBM round trip.
  Groups that share only constants are not fused horizontally (constants are never loaded).
* every other op is a group of its own kind (``argreduce``, ``cumsum``, ``concatenate``, ``pad``,
  ``gather``, ``scatter``, ...), looked up in ``OP_KINDS``; new lowerings register a kind there
  and a lowering in ``lower.LOWERINGS``.

Values a group produces that anything outside it reads (or that are graph outputs) are stored to
HBM; everything else stays in SBUF.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from neuron_sim import dtypes
from neuron_sim.graph.ops import ELEMENTWISE_OPS, LEAF_OPS, VIEW_OPS

from .errors import node_error
from .lower.elementwise_ops import temps_needed
from .views import View, contiguous_strides

# Values made on chip where they are read (affine views, ``views.py``): leaves, and the generator's
# random words (their state is a graph input, so no group has to run before them).
GENERATED_OPS = LEAF_OPS | {"random_words"}
OP_KINDS: dict[str, str] = {
    "argmax": "argreduce", "argmin": "argreduce", "argsort": "argsort", "cumsum": "cumsum", "concatenate": "concatenate", "pad": "pad",
    "dot_general": "matmul", "gather": "gather", "take_along_axis": "take_along_axis", "scatter": "scatter",
    "index_add": "index_add", "dma_cast": "dma_cast", "words64": "words64", "bitcast_convert": "bitcast",
}
# Group kinds whose groups absorb elementwise consumers of their result (an epilogue per output tile).
EPILOGUE_KINDS = frozenset({"matmul"})
MAX_FUSED_NODES = 128  # bounds the SBUF a tile of one group needs (tiles shrink as groups grow)
# Row-wise groups: the tile loop keeps BUFFERS (3) tiles in flight and falls back to fewer when a row
# does not fit; fusion admits a row-wise group only when two sets of its tiles fit this SBUF share.
ROW_SBUF_FRACTION = 0.7
ROW_FIT_BUFFERS = 2
ROW_REDUCE_KINDS = frozenset({"sum", "max", "min", "prod"})
DEFAULT_SBUF_BYTES = 212984  # trn2's usable SBUF bytes per partition (the smaller generation)


@dataclass(eq=False)
class Group:
    id: int
    kind: str
    nodes: list = field(default_factory=list)
    space: tuple | None = None  # fused: the iteration shape; matmul: the dot's result shape
    reduce_dims: tuple | None = None  # fused: dims its reductions reduce (one set per group)
    deps: set = field(default_factory=set)  # ids of the groups it depends on, transitively
    direct: set = field(default_factory=set)  # ids of the groups it reads from
    rowwise: bool = False  # fused: tiles hold whole rows; row values are read inside the group
    row_nodes: set = field(default_factory=set)  # fused: id(node) of nodes computed per row
    row_values: set = field(default_factory=set)  # fused: ids of per-row values (reductions, row nodes)
    # matmul: epilogue nodes may read the group's values through reshapes that keep their bytes
    # (``[B*T, N] -> [B, T, N]``): value id seen -> the group's value id, and the shapes they run over
    aliases: dict = field(default_factory=dict)
    alt_spaces: set = field(default_factory=set)

    def __repr__(self) -> str:
        return f"Group({self.id}, {self.kind}, {[n.op for n in self.nodes]})"


def live_nodes(graph) -> list:
    """Nodes some graph output depends on, in order."""
    producer = {v.id: n for n in graph.nodes for v in n.outputs}
    live, stack = set(), [v.id for v in graph.outputs]
    while stack:
        vid = stack.pop()
        node = producer.get(vid)
        if node is None or id(node) in live:
            continue
        live.add(id(node))
        stack.extend(v.id for v in node.inputs)
    return [n for n in graph.nodes if id(n) in live]


def reduce_dims_of(node) -> tuple:
    rank = node.inputs[0].type.rank
    return tuple(sorted({d % rank for d in node.attrs["dims"]})) if rank else ()


def view_chain(v, producer) -> tuple:
    """(root value, view nodes from the root to ``v``): ``v`` seen through its chain of view ops."""
    chain = []
    node = producer.get(v.id)
    while node is not None and node.op in VIEW_OPS:
        chain.append(node)
        v = node.inputs[0]
        node = producer.get(v.id)
    return v, chain[::-1]


def _through(view: View | None, node) -> View | None:
    """``view`` after view op ``node`` (None when strides cannot say it: the read is not row-wise)."""
    a = node.attrs
    if view is None:
        return None
    if node.op == "broadcast_in_dim":
        return view.broadcast(tuple(a["shape"]), tuple(a["dims"]))
    if node.op == "transpose":
        return view.transpose(tuple(a["perm"]))
    if node.op == "slice":
        return view.slice(list(a["start"]), list(a["limit"]), list(a.get("stride") or [1] * len(a["start"])))
    if node.op == "reshape":
        return view.reshape(tuple(a["shape"]))
    return None


def same_bytes_root(v, producer):
    """The value ``v`` is, seen through view ops that keep its row-major bytes (reshapes), or None."""
    root, chain = view_chain(v, producer)
    if not chain or root.type.num_elements != v.type.num_elements:
        return None
    view = View.hbm("probe", root.type.shape, root.type.dtype)
    for n in chain:
        view = _through(view, n)
        if view is None:
            return None
    if view.offset != 0 or not view.is_contiguous():
        return None
    return root


def row_count(g: Group) -> int:
    return math.prod(s for d, s in enumerate(g.space) if d not in g.reduce_dims)


def _row_capable(nodes: list, space, dims) -> bool:
    """Whether reductions over ``dims`` can be finished inside each tile (see the module docstring)."""
    if not dims or math.prod(space) == 0 or math.prod(space[d] for d in dims) <= 1:
        return False
    # The reduced dims must be the trailing ones: then a row is a contiguous run of every operand
    # (long DMA runs) and the tile reduces it in the order the multi-pass lowering did.
    if tuple(dims) != tuple(range(len(space) - len(dims), len(space))):
        return False
    return all(n.attrs["kind"] in ROW_REDUCE_KINDS and dtypes.is_float(n.outputs[0].type.dtype)
               for n in nodes if n.op == "reduce")


def _row_read_ok(root, chain, out_shape, g: Group) -> bool:
    """Whether ``root`` (a row value of ``g``) seen through ``chain`` is a row-wise read.

    Row values are ``row_count(g)`` numbers in the row-major order of the kept dims, whatever their
    shape. A node over the full space must see each row's number along that row (stride 0 along the
    reduced dims); a row node must see them in the same order (a reshape).
    """
    view = View.hbm("row", root.type.shape, root.type.dtype)
    for n in chain:
        view = _through(view, n)
    if view is None or tuple(view.shape) != tuple(out_shape) or view.offset != 0:
        return False
    if tuple(out_shape) != tuple(g.space):
        return view.is_contiguous()
    kept = contiguous_strides([s for d, s in enumerate(g.space) if d not in g.reduce_dims])
    it = iter(kept)
    expected = [0 if d in g.reduce_dims else next(it) for d in range(len(g.space))]
    return all(s == e for s, e, n in zip(view.strides, expected, g.space) if n != 1)


def _row_fits(nodes: list, row_ids: set, space, dims, producer, sbuf_bytes: int) -> bool:
    """Whether whole rows fit SBUF with ``nodes`` in one row-wise group: an upper bound of the tile
    loop's bytes per element (a buffer per full-space node, operand and temporary; row values are
    per row, not per element, and are left out)."""
    members = {id(n) for n in nodes}
    full = [n for n in nodes if id(n) not in row_ids]
    operands = set()
    for n in full:
        for v in n.inputs:
            root, _ = view_chain(v, producer)
            if id(producer.get(v.id)) not in members and id(producer.get(root.id)) not in members:
                operands.add(v.id)  # loaded (a row value read back through a view op is not)
    temps = max([temps_needed(n.op) for n in full] + [4])
    per_element = 4 * (sum(n.op != "reduce" for n in full) + len(operands) + temps)
    size = math.prod(space[d] for d in dims)
    return size * per_element * ROW_FIT_BUFFERS <= ROW_SBUF_FRACTION * sbuf_bytes


def partition(nodes: list, folded=(), sbuf_bytes: int = DEFAULT_SBUF_BYTES) -> list[Group]:
    """Groups in a valid execution order. ``folded``: ids of values known at compile time (leaves);
    ``sbuf_bytes``: usable SBUF bytes per partition (bounds the rows a row-wise group may hold)."""
    producer = {v.id: n for n in nodes for v in n.outputs}
    consumers: dict[int, list] = {}
    for n in nodes:
        for v in n.inputs:
            consumers.setdefault(v.id, []).append(n)
    position = {id(n): i for i, n in enumerate(nodes)}
    group_of: dict[int, Group] = {}  # id(node) -> group
    groups: dict[int, Group] = {}
    readers: dict[int, list[Group]] = {}  # value id -> fused groups reading it from HBM (graph inputs, ...)

    def sources(v, through_view=False):
        """(compute node, reached through a view op) pairs a value comes from."""
        node = producer.get(v.id)
        if node is None or node.op in GENERATED_OPS or v.id in folded:
            return []
        if node.op in VIEW_OPS:
            return [s for i in node.inputs for s in sources(i, True)]
        return [(node, through_view)]

    next_id = iter(range(len(nodes) + 1))  # ids are never reused (merged groups leave gaps)

    def new_group(kind, node, **kw) -> Group:
        g = Group(next(next_id), kind, [node], **kw)
        groups[g.id] = g
        group_of[id(node)] = g
        return g

    for node in nodes:
        if node.op in VIEW_OPS or node.op in GENERATED_OPS or node.outputs[0].id in folded:
            continue
        srcs = [s for v in node.inputs for s in sources(v)]
        src_groups = {group_of[id(n)].id for n, _ in srcs}
        if node.op in ELEMENTWISE_OPS or node.op == "reduce":
            space = node.inputs[0].type.shape if node.op == "reduce" else node.outputs[0].type.shape
            dims = reduce_dims_of(node) if node.op == "reduce" else None
            candidates = []
            # Producers' groups (vertical fusion), then groups already reading one of the same
            # values (horizontal fusion: the value is loaded once for both).
            direct = [n for n, via in srcs if not via]
            siblings = [g for v in node.inputs for g in readers.get(v.id, ())]
            # A matmul group's values read through reshapes that keep their bytes: the epilogue takes
            # the node over the product's tiles all the same (elementwise work does not care).
            aliased: dict[int, object] = {}  # value id read -> the group value it is
            reshaped = []
            # (Not a node feeding a reduction: it would be stored for it, where the reduction's own
            # group computes it on chip from the product it loads anyway.)
            if node.op != "reduce" and not any(c.op == "reduce" for c in consumers.get(node.outputs[0].id, ())):
                for v in node.inputs:
                    root = same_bytes_root(v, producer)
                    p = producer.get(root.id) if root is not None else None
                    if p is not None and id(p) in group_of and group_of[id(p)].kind in EPILOGUE_KINDS:
                        aliased[v.id] = root
                        reshaped.append(p)
            for g in [group_of[id(n)] for n in direct + reshaped] + siblings:
                if (g.space != space and tuple(space) not in g.alt_spaces
                        and not (g.kind in EPILOGUE_KINDS and any(group_of[id(p)] is g for p in reshaped)
                                 and math.prod(space) == math.prod(g.space))) or g in candidates:
                    continue
                if g.kind in EPILOGUE_KINDS:  # an epilogue: elementwise consumers of the product only
                    if node.op == "reduce":
                        continue
                elif g.kind != "fused" or (node.op == "reduce" and g.reduce_dims not in (None, dims)):
                    continue
                candidates.append(g)
            # Row-wise reads: this node reads a group's row values (its reductions, or row nodes')
            # along the rows they belong to. Such a group can take it when whole rows fit a tile.
            row_ok: dict[int, bool] = {}  # group id -> every row value of it this node reads is row-wise
            if node.op != "reduce":
                out_shape = tuple(node.outputs[0].type.shape)
                for v in node.inputs:
                    root, chain = view_chain(v, producer)
                    p = producer.get(root.id)
                    if p is None or id(p) not in group_of or root.id in folded:
                        continue
                    g = group_of[id(p)]
                    if root.id in g.row_values:
                        ok = g.kind == "fused" and _row_read_ok(root, chain, out_shape, g)
                        row_ok[g.id] = row_ok.get(g.id, True) and ok
            row_role = {gid for gid, ok in row_ok.items() if ok and tuple(groups[gid].space) != tuple(space)
                        and math.prod(space) == row_count(groups[gid])}
            row_cands = [groups[gid] for gid, ok in row_ok.items()
                         if ok and (gid in row_role or tuple(groups[gid].space) == tuple(space))]
            # A row node (its shape is the rows') joins the row group alone; a full-space node may also
            # join the groups of its other operands.
            candidates = [g for g in row_cands if g.id in row_role] + [g for g in candidates if g not in row_cands] + \
                [g for g in row_cands if g.id not in row_role]
            # Joining a matmul's epilogue wins over fused groups (those values are loaded instead).
            candidates.sort(key=lambda g: g.kind not in EPILOGUE_KINDS)
            chosen: list[Group] = []
            for g in candidates:
                if chosen and (g.kind in EPILOGUE_KINDS or chosen[0].kind in EPILOGUE_KINDS):
                    continue  # an epilogue joins one matmul group and never merges groups
                if chosen and (chosen[0].id in row_role or g.id in row_role):
                    continue  # a row node computes per row of one group
                # Reading g's reduction, or g's value through a view op, needs g complete in HBM first
                # (unless they are row-wise reads); another source depending on g would close a cycle.
                bad = any(_bad_read(n, via and not (g.kind in EPILOGUE_KINDS and n in reshaped), g, group_of, row_ok)
                          for n, via in srcs)
                bad = bad or any(g.id in groups[h].deps for h in src_groups if h != g.id)
                bad = bad or any(g.id in c.deps or c.id in g.deps for c in chosen)
                bad = bad or len(g.nodes) + sum(len(c.nodes) for c in chosen) >= MAX_FUSED_NODES
                if not bad and (row_ok.get(g.id) or g.rowwise or any(c.rowwise or row_ok.get(c.id) for c in chosen)):
                    members = g.nodes + [n for c in chosen for n in c.nodes] + [node]
                    row_ids = g.row_nodes.union(*(c.row_nodes for c in chosen))
                    if g.id in row_role:
                        row_ids = row_ids | {id(node)}
                    # the row group's reduced dims, whichever of the groups being joined holds them
                    rdims = g.reduce_dims or next((c.reduce_dims for c in chosen if c.reduce_dims), None) or dims
                    bad = not (_row_capable(members, g.space, rdims)
                               and _row_fits(members, row_ids, g.space, rdims, producer, sbuf_bytes))
                if not bad:
                    chosen.append(g)
            if chosen:
                target = chosen[0]
                if target.kind in EPILOGUE_KINDS:
                    for h in _absorbable(node, srcs, target, space, group_of, consumers):
                        _absorb(groups, group_of, readers, target, h)
                for other in chosen[1:]:
                    _merge(groups, group_of, target, other, position)
                    for lst in readers.values():
                        if other in lst:
                            lst.remove(other)
                            if target not in lst:
                                lst.append(target)
                target.nodes.append(node)
                group_of[id(node)] = target
                if target.kind in EPILOGUE_KINDS:
                    for vid, root in aliased.items():
                        if group_of.get(id(producer[root.id])) is target:
                            target.aliases[vid] = root.id
                    if tuple(space) != tuple(target.space):
                        target.alt_spaces.add(tuple(space))
                if dims is not None:
                    target.reduce_dims = dims
                if any(row_ok.get(c.id) for c in chosen):
                    target.rowwise = True
                if target.id in row_role:
                    target.row_nodes.add(id(node))
                    target.row_values.add(node.outputs[0].id)
            else:
                target = new_group("fused", node, space=space, reduce_dims=dims)
            if node.op == "reduce":
                target.row_values.add(node.outputs[0].id)
        else:
            kind = OP_KINDS.get(node.op)
            if kind is None:
                raise node_error(node, "compile.unsupported_op", f"no lowering for op {node.op!r} yet")
            target = new_group(kind, node, space=node.outputs[0].type.shape if kind in EPILOGUE_KINDS else None)
        if target.kind == "fused":
            for v in node.inputs:
                src = producer.get(v.id)
                if _generated(v, producer, folded):
                    continue  # constants cost no load: sharing one is no reason to fuse groups
                if src is None or group_of.get(id(src)) is not target:
                    readers.setdefault(v.id, [])
                    if target not in readers[v.id]:
                        readers[v.id].append(target)
        for h in {group_of[id(n)].id for n, _ in srcs}:
            if h != target.id:
                target.direct.add(h)
                target.deps |= {h} | groups[h].deps
    return _ordered(list(groups.values()), position)


def _absorbable(node, srcs, target: Group, space, group_of, consumers) -> list[Group]:
    """Fused groups an epilogue node reads that are better recomputed inside the epilogue: an
    elementwise chain over the node's shape on graph inputs only (GELU's derivative of a saved
    activation), read by nothing but this node. It then runs on the engines that wait for TensorE
    anyway, and its result never goes through HBM."""
    out = []
    for n, via in srcs:
        h = group_of[id(n)]
        if via or h is target or h in out or h.kind != "fused" or h.rowwise or h.deps or h.reduce_dims:
            continue
        if tuple(h.space) != tuple(space) or len(target.nodes) + len(h.nodes) + 1 >= MAX_FUSED_NODES:
            continue
        members = {id(m) for m in h.nodes} | {id(node)}
        if all(consumers.get(v.id) and all(id(c) in members for c in consumers[v.id])
               for m in h.nodes for v in m.outputs):
            out.append(h)
    return out


def _absorb(groups, group_of, readers, target: Group, h: Group) -> None:
    """Move ``h``'s nodes into epilogue group ``target``, right after its dot (they read no result
    of it, and nodes after them read theirs)."""
    target.nodes[1:1] = h.nodes
    for n in h.nodes:
        group_of[id(n)] = target
    del groups[h.id]
    for lst in readers.values():
        if h in lst:
            lst.remove(h)


def _generated(v, producer, folded) -> bool:
    """Whether ``v`` is a constant, iota or random words (seen through view ops): made on chip, never loaded."""
    root, _ = view_chain(v, producer)
    node = producer.get(root.id)
    return root.id in folded or (node is not None and node.op in GENERATED_OPS)


def _bad_read(n, via: bool, g: Group, group_of, row_ok: dict) -> bool:
    """Whether reading node ``n``'s value (through a view op: ``via``) keeps a node out of ``g``."""
    if group_of[id(n)] is not g:
        return False
    if n.outputs[0].id in g.row_values:
        return not row_ok.get(g.id, False) and (n.op == "reduce" or via)
    return n.op == "reduce" or via


def _merge(groups, group_of, target: Group, other: Group, position) -> None:
    target.rowwise = target.rowwise or other.rowwise
    target.row_nodes |= other.row_nodes
    target.row_values |= other.row_values
    target.nodes.extend(other.nodes)
    target.nodes.sort(key=lambda n: position[id(n)])
    for n in other.nodes:
        group_of[id(n)] = target
    target.deps |= other.deps
    target.direct |= other.direct
    if other.reduce_dims is not None:
        target.reduce_dims = other.reduce_dims
    del groups[other.id]
    for g in groups.values():
        for s in (g.deps, g.direct):
            if other.id in s:
                s.discard(other.id)
                if g is not target:
                    s.add(target.id)
    target.deps.discard(target.id)
    target.direct.discard(target.id)


def _ordered(groups: list[Group], position) -> list[Group]:
    """The groups as soon as their inputs are computed: by dependency level (a group after every
    group it reads), and within a level the one with the longest chain of groups still to follow
    first (then by first node). Independent work (a weight gradient, a parameter's update) then
    comes early, where it overlaps the critical path instead of trailing it (engines run their
    instruction streams in order, so program order is the schedule)."""
    by_id = {g.id: g for g in groups}
    done, order = set(), []

    def first(g: Group) -> int:
        return position[id(g.nodes[0])]

    def visit(g: Group):
        if g.id in done:
            return
        done.add(g.id)
        for d in sorted(g.direct, key=lambda i: first(by_id[i])):
            visit(by_id[d])
        order.append(g)

    for g in sorted(groups, key=first):
        visit(g)
    level, height = {}, {}
    for g in order:  # topological: every direct dependency comes earlier
        level[g.id] = 1 + max((level[d] for d in g.direct), default=0)
    for g in reversed(order):
        height.setdefault(g.id, 1)
        for d in g.direct:
            height[d] = max(height.get(d, 1), height[g.id] + 1)
    order.sort(key=lambda g: (level[g.id], -height[g.id], first(g)))
    return order
