"""Fusion: partition a graph into groups, each lowered as one unit by its kind's lowering.

* **view ops** (broadcast_in_dim, transpose, slice, reshape) and **leaf generators** (constant,
  iota) belong to no group: they become affine views (``views.py``) that the consumers' DMAs or
  on-chip generators read through.
* **fused** groups: elementwise nodes over one iteration shape, joined into one tile loop, plus
  optionally reductions of their values over one set of dims (a chain ending in a reduction).
  An elementwise node joins the groups of the elementwise producers it reads directly when they
  have its shape and no dependency path leaves the group and comes back (that would be a cycle);
  it may merge several independent such groups. A node that reads a group's reduction, or reads a
  group's value through a view op, starts a new group (those values must be complete in HBM first).
* **matmul** groups: a ``dot_general`` plus its *epilogue* - the elementwise nodes over the dot's
  result shape that read it (or read an epilogue value) directly. The epilogue runs on each output
  tile while it leaves PSUM (bias add, activation, scaling, dtype cast), so the raw product never
  makes an HBM round trip. Reductions and values read through view ops start new groups.
* every other op is a group of its own kind (``argreduce``, ``cumsum``, ``concatenate``, ``pad``,
  ``gather``, ``scatter``, ...), looked up in ``OP_KINDS``; new lowerings register a kind there
  and a lowering in ``lower.LOWERINGS``.

Values a group produces that anything outside it reads (or that are graph outputs) are stored to
HBM; everything else stays in SBUF.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import node_error
from .lower.elementwise_ops import ELEMENTWISE_OPS

VIEW_OPS = frozenset({"broadcast_in_dim", "transpose", "slice", "reshape", "as_strided"})
LEAF_OPS = frozenset({"constant", "iota"})
OP_KINDS: dict[str, str] = {
    "argmax": "argreduce", "argmin": "argreduce", "cumsum": "cumsum", "concatenate": "concatenate", "pad": "pad",
    "dot_general": "matmul", "gather": "gather", "take_along_axis": "take_along_axis", "scatter": "scatter",
    "index_add": "index_add",
}
# Group kinds whose groups absorb elementwise consumers of their result (an epilogue per output tile).
EPILOGUE_KINDS = frozenset({"matmul"})
MAX_FUSED_NODES = 48  # bounds the SBUF a tile of one group needs


@dataclass(eq=False)
class Group:
    id: int
    kind: str
    nodes: list = field(default_factory=list)
    space: tuple | None = None  # fused: the iteration shape; matmul: the dot's result shape
    reduce_dims: tuple | None = None  # fused: dims its reductions reduce (one set per group)
    deps: set = field(default_factory=set)  # ids of the groups it depends on, transitively
    direct: set = field(default_factory=set)  # ids of the groups it reads from

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


def partition(nodes: list, folded=()) -> list[Group]:
    """Groups in a valid execution order. ``folded``: ids of values known at compile time (leaves)."""
    producer = {v.id: n for n in nodes for v in n.outputs}
    position = {id(n): i for i, n in enumerate(nodes)}
    group_of: dict[int, Group] = {}  # id(node) -> group
    groups: dict[int, Group] = {}
    readers: dict[int, list[Group]] = {}  # value id -> fused groups reading it from HBM (graph inputs, ...)

    def sources(v, through_view=False):
        """(compute node, reached through a view op) pairs a value comes from."""
        node = producer.get(v.id)
        if node is None or node.op in LEAF_OPS or v.id in folded:
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
        if node.op in VIEW_OPS or node.op in LEAF_OPS or node.outputs[0].id in folded:
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
            for g in [group_of[id(n)] for n in direct] + siblings:
                if g.space != space or g in candidates:
                    continue
                if g.kind in EPILOGUE_KINDS:  # an epilogue: elementwise consumers of the product only
                    if node.op == "reduce":
                        continue
                elif g.kind != "fused" or (node.op == "reduce" and g.reduce_dims not in (None, dims)):
                    continue
                candidates.append(g)
            # Joining a matmul's epilogue wins over fused groups (those values are loaded instead).
            candidates.sort(key=lambda g: g.kind not in EPILOGUE_KINDS)
            chosen: list[Group] = []
            for g in candidates:
                if chosen and (g.kind in EPILOGUE_KINDS or chosen[0].kind in EPILOGUE_KINDS):
                    continue  # an epilogue joins one matmul group and never merges groups
                # Reading g's reduction, or g's value through a view op, needs g complete in HBM first;
                # another source depending on g would close a cycle.
                bad = any((n.op == "reduce" or via) and group_of[id(n)] is g for n, via in srcs)
                bad = bad or any(g.id in groups[h].deps for h in src_groups if h != g.id)
                bad = bad or any(g.id in c.deps or c.id in g.deps for c in chosen)
                bad = bad or len(g.nodes) + sum(len(c.nodes) for c in chosen) >= MAX_FUSED_NODES
                if not bad:
                    chosen.append(g)
            if chosen:
                target = chosen[0]
                for other in chosen[1:]:
                    _merge(groups, group_of, target, other, position)
                    for lst in readers.values():
                        if other in lst:
                            lst.remove(other)
                            if target not in lst:
                                lst.append(target)
                target.nodes.append(node)
                group_of[id(node)] = target
                if dims is not None:
                    target.reduce_dims = dims
            else:
                target = new_group("fused", node, space=space, reduce_dims=dims)
        else:
            kind = OP_KINDS.get(node.op)
            if kind is None:
                raise node_error(node, "compile.unsupported_op", f"no lowering for op {node.op!r} yet")
            target = new_group(kind, node, space=node.outputs[0].type.shape if kind in EPILOGUE_KINDS else None)
        if target.kind == "fused":
            for v in node.inputs:
                src = producer.get(v.id)
                if src is None or group_of.get(id(src)) is not target:
                    readers.setdefault(v.id, [])
                    if target not in readers[v.id]:
                        readers[v.id].append(target)
        for h in {group_of[id(n)].id for n, _ in srcs}:
            if h != target.id:
                target.direct.add(h)
                target.deps |= {h} | groups[h].deps
    return _ordered(list(groups.values()), position)


def _merge(groups, group_of, target: Group, other: Group, position) -> None:
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
    """Topological order of the groups (ties: by first node)."""
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
    return order
