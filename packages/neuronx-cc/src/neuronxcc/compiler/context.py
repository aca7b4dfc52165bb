"""State shared by the lowerings of one graph: tensors, where each value lives, and the emitter.

A value is *resolved* to a ``View`` (``views.py``) when a lowering needs it from outside its own
group: graph inputs are their HBM tensors; a group's stored results are the tensors it stored
them in; view ops apply to the view of their operand (a reshape that strides cannot express
first copies its operand into a contiguous scratch tensor); constants and iotas become scalar,
iota or HBM views (``constants.py``).
"""

from __future__ import annotations

import base64
from collections import defaultdict

from neuron_sim import Architecture, ProgramBuilder, dtypes
from neuron_sim.graph.ops import VIEW_OPS

from .constants import array_view
from .emitter import Emitter
from .errors import CompileError, node_error
from .fusion import Group, _through
from .lower.movement import materialize
from .views import View


class LoweringContext:
    def __init__(self, graph, arch: Architecture, builder: ProgramBuilder, nodes: list, folded: dict | None = None):
        self.graph = graph
        self.folded = folded or {}  # value id -> compile-time value (constants and what folds from them)
        self.arch = arch
        self.builder = builder
        self.em = Emitter(builder, arch)
        self.nodes = nodes
        self.producer = {v.id: n for n in nodes for v in n.outputs}
        self.consumers: dict[int, list] = defaultdict(list)
        for n in nodes:
            for v in n.inputs:
                self.consumers[v.id].append(n)
        self.output_names = {v.id: v.name for v in graph.outputs}
        self.views: dict[int, View] = {}
        self.integer_alu: set[int] = set()  # value ids computed on GpSimd's integer ALU (``integers.py``)
        self.constants: dict[str, dict] = {}  # program metadata: data of constant input tensors
        self.group_log: list[dict] = []
        self.names: set[str] = set()
        output_names = {v.name for v in graph.outputs}
        for v in graph.inputs:
            # An input returned as an output under its own name is both: already in place.
            self._declare(v.name, v.type.shape, v.type.dtype, "inout" if v.name in output_names else "input")
            self.views[v.id] = View.hbm(v.name, v.type.shape, v.type.dtype)
        input_names = self.input_names = {v.name for v in graph.inputs}
        self.claimed_outputs: set[int] = set()  # outputs some group stores straight into
        self.finished_outputs: set[int] = set()  # outputs copied into place (driver._finish_outputs)
        self.ready_since: dict[int, int] = {}  # output id -> groups lowered when it became computable
        self.groups_done = 0
        for v in graph.outputs:
            if v.name not in input_names:  # an input returned under its own name is already in place
                self._declare(v.name, v.type.shape, v.type.dtype, "output")

    # --- tensors -------------------------------------------------------------------------------
    def _declare(self, name: str, shape, dtype: str, kind: str) -> None:
        if name in self.names:
            raise CompileError("compile.duplicate_tensor", f"two graph tensors are named {name!r}")
        self.names.add(name)
        self.builder.tensor(name, tuple(shape), dtype, kind)

    def fresh_name(self, hint: str) -> str:
        name, k = hint, 0
        while name in self.names:
            k += 1
            name = f"{hint}_{k}"
        return name

    def internal(self, shape, dtype: str, hint: str) -> View:
        """A new scratch HBM tensor (``internal``: the runtime allocates it per launch)."""
        name = self.fresh_name(hint)
        self._declare(name, shape, dtype, "internal")
        return View.hbm(name, shape, dtype)

    def constant_input(self, array, hint: str) -> View:
        """A constant the program reads from an input tensor; its bytes go in the program metadata."""
        name = self.fresh_name(hint)
        dtype = dtypes.dtype_name(array.dtype)
        self._declare(name, array.shape, dtype, "input")
        self.constants[name] = {"dtype": dtype, "shape": list(array.shape),
                                "data": base64.b64encode(array.tobytes()).decode("ascii")}
        return View.hbm(name, array.shape, dtype)

    # --- values --------------------------------------------------------------------------------
    def stored_values(self, group: Group) -> list:
        """Values of ``group`` that must reach HBM: graph outputs and anything read outside it."""
        members = {id(n) for n in group.nodes}
        aliased = set(getattr(group, "aliases", {}))  # reshaped values its epilogue reads on chip

        def outside(v) -> bool:
            if v.id in self.output_names:
                return True
            for c in self.consumers[v.id]:
                if c.op in VIEW_OPS and c.outputs[0].id in aliased:
                    if outside(c.outputs[0]):
                        return True
                elif id(c) not in members:
                    return True
            return False

        return [v for n in group.nodes for v in n.outputs if outside(v)]

    def destination(self, v) -> View:
        """Where value ``v`` is stored: its graph output tensor, the output tensor it is returned as
        through reshapes (same bytes, so the output needs no copy afterwards), or a new scratch tensor."""
        if v.id in self.output_names:
            return View.hbm(self.output_names[v.id], v.type.shape, v.type.dtype)
        out = self._reshaped_output(v)
        if out is not None:
            self.claimed_outputs.add(out.id)
            return View.hbm(out.name, out.type.shape, out.type.dtype).reshape(tuple(v.type.shape))
        return self.internal(v.type.shape, v.type.dtype, f"_t{v.id}")

    def _reshaped_output(self, v):
        """A graph output that is ``v`` seen through view ops that keep its row-major order (reshapes,
        transposes that undo each other...: the same bytes), not claimed by another value yet."""
        stack = [(v, View.hbm("probe", v.type.shape, v.type.dtype))]
        while stack:
            x, view = stack.pop()
            for c in self.consumers[x.id]:
                if c.op not in VIEW_OPS:
                    continue
                o, seen = c.outputs[0], _through(view, c)
                if seen is None:
                    continue
                if (o.id in self.output_names and o.id not in self.claimed_outputs and o.type.dtype == v.type.dtype
                        and self.output_names[o.id] not in self.input_names and seen.offset == 0
                        and seen.is_contiguous() and seen.num_elements == v.type.num_elements):
                    return o
                stack.append((o, seen))
        return None

    def resolve(self, v) -> View:
        view = self.views.get(v.id)
        if view is not None:
            return view
        node = self.producer.get(v.id)
        if node is None:
            raise CompileError("compile.internal", f"value %{v.id} has no producer and is not a graph input")
        if v.id in self.folded:
            view = array_view(self, self.folded[v.id], v)
        elif node.op in VIEW_OPS:
            view = self._apply_view_op(node, self.resolve(node.inputs[0]))
        elif node.op == "iota":
            shape = tuple(node.attrs["shape"])
            view = View.iota(shape, node.attrs["dim"] % max(1, len(shape)), node.outputs[0].type.dtype)
        elif node.op == "random_words":
            view = self._random_words(node)
        else:
            raise node_error(node, "compile.internal", f"value %{v.id} of {node.op} is used before it was computed")
        self.views[v.id] = view
        return view

    def _random_words(self, node) -> View:
        """The generator's words, made on chip where a consumer reads them; the state is read from
        HBM by every loop that does (so it must be a graph input: fusion orders no group before it)."""
        state = node.inputs[0]
        if state.id in self.producer or state.name not in self.input_names:
            raise node_error(node, "compile.random_words_state",
                             f"the state of random_words is computed in the graph (%{state.id}); it must be a graph input")
        return View.random_words(state.name, node.attrs["count"])

    def _apply_view_op(self, node, src: View) -> View:
        a = node.attrs
        if node.op == "broadcast_in_dim":
            return src.broadcast(tuple(a["shape"]), tuple(a["dims"]))
        if node.op == "transpose":
            return src.transpose(tuple(a["perm"]))
        if node.op == "slice":
            return src.slice(list(a["start"]), list(a["limit"]), list(a.get("stride") or [1] * len(a["start"])))
        if node.op == "as_strided":
            if not src.is_contiguous() and src.kind == "hbm":  # strides of a strided view: copy it dense first
                dense = self.internal(src.shape, src.dtype, f"_s{node.outputs[0].id}")
                materialize(self, src, dense)
                src = dense
            return src.as_strided(tuple(a["shape"]), tuple(a["strides"]), int(a.get("offset", 0)))
        view = src.reshape(tuple(a["shape"]))
        if view is None:  # no strides express it: copy the operand into contiguous order first
            out = node.outputs[0]
            if out.id in self.output_names and self.output_names[out.id] not in self.input_names:
                # a graph output: the copy goes where the output must be anyway (no second copy)
                view = self.destination(out)
                materialize(self, src, view.reshape(tuple(src.shape)))
                return view
            dense = self.internal(src.shape, src.dtype, f"_r{out.id}")
            materialize(self, src, dense)
            view = dense.reshape(tuple(a["shape"]))
        return view
