"""A dot operand that is a *merging reshape* of a strided view (``[B, H, T, D]`` transposed, then
``[B*H, D, T]``; ``[B, T, H, D]`` -> ``[B*T, H*D]``) has no strides of its own, so resolving it would
copy it into a dense scratch tensor first (an HBM round trip, and a TensorE transpose pass when the
view is transposed). The dot's canonical form takes any number of axes per dim kind, so such an
operand is described instead by its source view: each operand dim is the list of source axes it
merges, ``[(size, stride), ...]`` outer to inner, and the other forms split that dim to match.
"""

from __future__ import annotations

import math

from .matmul_plan import Ax


def merge_groups(src_shape, shape) -> list[list[int]] | None:
    """For a reshape that only merges neighbouring dims: the source dims of each result dim (size-1
    source dims join a neighbour), else None."""
    groups, i = [], 0
    for n in shape:
        group, size = [], 1
        while i < len(src_shape) and size * src_shape[i] <= n and (size < n or src_shape[i] == 1):
            group.append(i)
            size *= src_shape[i]
            i += 1
        if size != n:
            return None
        groups.append(group)
    if any(src_shape[j] != 1 for j in range(i, len(src_shape))):
        return None
    return groups


def operand_dims(ctx, v):
    """(view, dims): the view a dot operand ``v`` is read through, and per operand dim its stride or
    the ``[(size, stride), ...]`` source axes it merges. Falls back to ``ctx.resolve`` (dims are the
    view's strides) for anything else."""
    node = ctx.producer.get(v.id)
    if (node is not None and node.op == "reshape" and v.id not in ctx.views and v.id not in ctx.folded
            and node.inputs[0].id not in ctx.folded):
        src = ctx.resolve(node.inputs[0])
        shape = tuple(v.type.shape)
        if src.kind == "hbm" and src.reshape(shape) is None:
            groups = merge_groups(src.shape, shape)
            if groups is not None:
                dims = []
                for group in groups:
                    axes = [(src.shape[i], src.strides[i]) for i in group if src.shape[i] != 1]
                    dims.append(axes if len(axes) > 1 else (axes[0][1] if axes else 0))
                return src, dims
    view = ctx.resolve(v)
    return view, list(view.strides)


def split_axis(size: int, entries: list) -> list[Ax] | None:
    """One dot dim as canonical axes: ``entries`` per form is a stride, or the source axes of a merged
    operand dim; forms with a single stride are split to the same sizes. None when two forms merge
    the dim differently."""
    sizes = None
    for e in entries:
        if isinstance(e, list):
            s = [n for n, _ in e]
            if sizes is not None and s != sizes:
                return None
            sizes = s
    if sizes is None:
        return [Ax(int(size), tuple(entries))]
    axes = []
    for j, n in enumerate(sizes):
        inner = math.prod(sizes[j + 1:])
        axes.append(Ax(int(n), tuple(e[j][1] if isinstance(e, list) else e * inner for e in entries)))
    return axes
