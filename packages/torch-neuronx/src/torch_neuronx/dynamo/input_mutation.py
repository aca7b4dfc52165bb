"""Which of a graph's input mutations the NEFF can write straight into the argument's memory.

AOTAutograd keeps a mutated argument's update in the graph as ``copy_(argument, new value)``
(an optimizer step: every parameter and state). Copying each new value in after the launch costs
a device copy per tensor; binding the NEFF's output buffer to the argument's memory costs none.
That is safe when nothing reads the old value after the new one may have been written:

* statically (``in_place_outputs``, on the compiled graph): every node that reads the argument,
  up to the new value, is elementwise over the argument's shape (element i of the result needs
  element i of the argument only, read before it is written), and no other output depends on the
  argument except through the new value (the compiler may run such a reader after the writer);
* at the call (``runtime``): the argument has the output's layout, and no other input or
  in-place output shares its memory (the rule of the eager path, ``compiled.launch``).
"""

from __future__ import annotations

from neuronxcc.compiler.lower.elementwise_ops import ELEMENTWISE_OPS

from ..compiled.tracing import is_row_major

# Ops computing element i of their result from element i of same-shaped operands.
_SAME_INDEX = {"constant", "iota", "copy"}


def in_place_outputs(graph, candidates: list[tuple[int, int | None]], in_specs: list) -> list[tuple[int, int | None]]:
    """The (output j, input i) pairs of ``candidates`` whose output may be written into input i's
    buffer (i None: the graph does not read the argument it writes)."""
    consumers: dict[int, list] = {}
    for node in graph.nodes:
        for v in node.inputs:
            consumers.setdefault(v.id, []).append(node)
    output_ids = {v.id: j for j, v in enumerate(graph.outputs)}
    safe = []
    for j, i in candidates:
        if i is None:
            safe.append((j, i))
            continue
        shape, strides, _dtype = in_specs[i]
        if not is_row_major(shape, strides):
            continue
        start, end = graph.inputs[i], graph.outputs[j]
        ok, seen, stack = True, set(), [start.id]
        while ok and stack:
            vid = stack.pop()
            if vid in seen or vid == end.id:
                continue
            seen.add(vid)
            if vid in output_ids:  # another output reads the old value
                ok = False
                break
            for node in consumers.get(vid, ()):
                if (node.op not in ELEMENTWISE_OPS and node.op not in _SAME_INDEX) or \
                        any(v.type.shape != start.type.shape for v in node.outputs):
                    ok = False
                    break
                stack.extend(v.id for v in node.outputs)
        if ok:
            safe.append((j, i))
    return safe
