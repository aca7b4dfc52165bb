"""An evaluation plan for a graph: what the fast executor runs, prepared once per graph.

Interpreting a graph node by node allocated a fresh whole-tensor array for every intermediate
and kept them all alive until the end, so every launch paid the page faults of fresh memory for
each node (most of a large elementwise graph's time) and then copied each result into its output
buffer. A plan keeps the numerics of ``graph/ops.py`` exactly and changes only where results are stored:

* constants, and small or broadcast results of ops of constants alone, are evaluated once, when
  the plan is made;
* each value is dropped after its last reader, and temporaries of the ops below live in
  reusable buffers (``BufferPool``, kept by the executor across launches), written with ``out=``;
* float32 elementwise ops and fp32 matmuls evaluate through the same numpy calls as ``graph/ops.py``
  (the same ufunc loops on the same operands: bit-identical), only with ``out=``;
* a result a graph output takes as-is, or reshaped, is written straight into its output buffer
  when that buffer overlaps no other bound buffer, except inputs nothing reads afterwards (so no
  operand read later can see the early write; an in-place op's output is its input's buffer);
* a constant whose elements are all one (non-NaN) value feeds add/subtract/multiply/divide/
  maximum/minimum as a broadcast scalar (those loops give the same bits for a broadcast operand;
  NaN is excluded because which NaN's sign propagates depends on the loop);
* large runs of elementwise ops are evaluated as two halves at once while a core is free
  (``split.py``).

Every other op runs its definition, or its host-speed form of the same bits (``ops.py`` here).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ... import dtypes
from ...graph import Graph, folding
from ...graph import ops as graph_ops
from .ops import dot_into, evaluator
from .split import group_runs, raise_op_failure

_F32 = np.dtype(np.float32)

# The numpy ufuncs of ops.py's elementwise tables: their result does not depend on whether it is
# written with out= (checked bit for bit, including NaN/inf/-0/denormal operands, against a fresh
# result), so these steps run the same call into a reusable buffer.
_BINARY_UFUNCS = {name: fn for name, fn in graph_ops.BINARY.items() if isinstance(fn, np.ufunc)}
_UNARY_UFUNCS = {name: fn for name, fn in graph_ops.UNARY.items() if isinstance(fn, np.ufunc)}
# Binary ops that give the same bits when a non-NaN operand is a broadcast scalar.
_SPLAT_OK = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum"})
_DIRECT_MIN_ELEMENTS = 1 << 14  # 64 KiB of float32
_FOLD_MAX_ELEMENTS = folding.PLAN_FOLD_FACTOR * folding.FOLD_MAX_ELEMENTS  # host memory, kept per graph
_PAIRWISE_MAX = 64  # direct outputs x bound buffers compared pair by pair
_byte_bounds = getattr(getattr(np.lib, "array_utils", None), "byte_bounds", None) or np.byte_bounds  # numpy 2 / 1.26

POOL_MAX_BYTES = 256 << 20


class BufferPool:
    """Free temporaries by size, reused across launches so their pages are already mapped.
    Not thread-safe: one executor runs one program at a time."""

    def __init__(self, max_bytes: int = POOL_MAX_BYTES):
        self.max_bytes = max_bytes
        self._free: dict[int, list[np.ndarray]] = {}
        self._bytes = 0

    def take(self, nbytes: int) -> np.ndarray:
        free = self._free.get(nbytes)
        if free:
            self._bytes -= nbytes
            return free.pop()
        return np.empty(nbytes, np.uint8)

    def give(self, buf: np.ndarray) -> None:
        nbytes = buf.nbytes
        if self._bytes + nbytes > self.max_bytes:
            return
        self._free.setdefault(nbytes, []).append(buf)
        self._bytes += nbytes

    @property
    def pooled_bytes(self) -> int:
        return self._bytes


class _Lent:
    """Buffers handed out during one run: returned to the pool once nothing references them."""

    __slots__ = ("pool", "bufs")

    def __init__(self, pool: BufferPool):
        self.pool = pool
        self.bufs: list[np.ndarray] = []

    def array(self, shape: tuple, count: int, dtype: np.dtype = _F32) -> np.ndarray:
        buf = self.pool.take(count * dtype.itemsize)
        self.bufs.append(buf)
        return buf.view(dtype).reshape(shape)

    def recycle(self) -> None:
        bufs = self.bufs
        if not bufs:
            return
        keep = []
        for buf in bufs:
            # References: this loop's variable, the list, getrefcount's argument. Anything more is
            # a live view (a value still in use): keep the buffer lent.
            if sys.getrefcount(buf) > 3:
                keep.append(buf)
            else:
                self.pool.give(buf)
        buf = None
        self.bufs = keep

    def release_all(self) -> None:
        # At the end of a run nothing of the graph is alive: whatever is still referenced belongs
        # to someone else (an exception's traceback); only hand back unreferenced buffers.
        self.recycle()
        self.bufs = []


def _fold(node, arrays: list[np.ndarray]) -> list[np.ndarray] | None:
    """``node``'s results from constant operands, if worth keeping in the plan: a constant always;
    another op's only when its results are small or broadcast views (a plan keeps them for as long
    as its graph lives). None also when the op fails: it then fails when the plan runs, located."""
    try:
        results = folding.evaluate(node.op, arrays, node.attrs, [v.type for v in node.outputs])
    except Exception:
        if node.op == "constant":
            raise
        return None
    if node.op != "constant" and not all(r.size <= _FOLD_MAX_ELEMENTS or 0 in r.strides for r in results):
        return None
    return results


def _splat_scalar(value: np.ndarray):
    """The single element of a uniform, non-NaN float32 constant (bitwise), else None."""
    if value.dtype != _F32 or value.size == 0:
        return None
    flat = value.reshape(-1)
    first = flat[:1]
    if np.isnan(first[0]):
        return None
    bits = flat.view(np.uint32)
    if not (bits == bits[0]).all():
        return None
    return first.reshape(())


@dataclass(frozen=True)
class PlanSummary:
    """What a plan does with its graph (``explain``): why a graph runs as it does."""

    steps: tuple[str, ...]  # the op of each step, in order; a run evaluated in halves is "split[op,op,...]"
    folded_ops: int  # ops of constants alone, evaluated once when the plan was made
    kept_constant_bytes: int  # memory the plan holds for materialized results of constants
    scalar_constants: int  # uniform constants fed to their consumers as broadcast scalars
    in_place: Mapping[str, frozenset[str]]  # output -> the inputs whose buffer it may be computed into
    written_through: Mapping[str, tuple[int, ...]]  # output -> the shape of the value computed straight into it


class Plan:
    def __init__(self, graph: Graph):
        self.node_count = len(graph.nodes)
        self.inputs_snapshot = list(graph.inputs)
        self.outputs_snapshot = list(graph.outputs)
        nodes = graph.nodes
        size = max([graph._next] + [v.id + 1 for v in graph.inputs] + [v.id + 1 for n in nodes for v in n.outputs])
        self.size = size
        end = len(nodes)
        last_use = [-1] * size
        for i, node in enumerate(nodes):
            for v in node.inputs:
                last_use[v.id] = i
        for v in graph.outputs:
            last_use[v.id] = end  # kept to the end: written to its buffer there
        self.inputs = [(v.id, v.name, dtypes.to_numpy(v.type.dtype), v.type.num_elements, v.type.shape) for v in graph.inputs]
        self.outputs = [(v.id, v.name, dtypes.to_numpy(v.type.dtype), v.type.num_elements, v.type.shape, v.type.dtype)
                        for v in graph.outputs]
        output_names = {v.id: v.name for v in graph.outputs}
        # Constants and what depends on constants alone (broadcasts of scalars, iotas...), evaluated
        # once; uniform ones also as broadcast scalars for safe consumers.
        self.constants: dict[int, np.ndarray] = {}
        splats: dict[int, np.ndarray] = {}
        readers: dict[int, set[str]] = {}
        for node in nodes:
            for v in node.inputs:
                readers.setdefault(v.id, set()).add(node.op)
        folded = set()
        for node in nodes:
            if not all(v.id in self.constants for v in node.inputs):  # (constants, iotas: no operands)
                continue
            results = _fold(node, [self.constants[v.id] for v in node.inputs])
            if results is None:
                continue
            folded.add(id(node))
            for value, array in zip(node.outputs, results):
                self.constants[value.id] = array
                scalar = _splat_scalar(array)
                if scalar is not None and readers.get(value.id) and readers[value.id] <= _SPLAT_OK:
                    splats[value.id] = np.broadcast_to(scalar, array.shape)
        self.splats = splats
        self.folded_ops = len(folded)
        self.steps = []
        # An output that is a reshape of a value no output takes as-is (a saved activation, seen
        # by the backward in another shape): that value is computed into the output's buffer,
        # viewed in the value's shape ("written through"), and the reshape is then that buffer.
        self._through: dict[str, tuple] = {}
        through_keys: dict[int, tuple] = {}
        for node in nodes:
            out = node.outputs[0] if node.op == "reshape" else None
            if out is not None and out.id in output_names and out.type.dtype == "float32":
                src = node.inputs[0]
                if src.id not in output_names and src.id not in through_keys and src.type.dtype == "float32":
                    key = through_keys[src.id] = (output_names[out.id], src.type.shape)
                    self._through[output_names[out.id]] = key
        for i, node in enumerate(nodes):
            if id(node) in folded:
                continue
            dead = tuple(sorted({v.id for v in node.inputs if last_use[v.id] == i}))
            out = node.outputs[0] if len(node.outputs) == 1 else None
            # Only outputs big enough for the saved copy to outweigh the overlap check at each run
            # (a tiny op's launch paid ~45 us for it).
            direct = None
            if out is not None and out.type.dtype == "float32" and out.type.num_elements >= _DIRECT_MIN_ELEMENTS:
                direct = output_names.get(out.id) or through_keys.get(out.id)
            self.steps.append(self._step(node, dead, direct))
        step_readers: dict[int, list[int]] = {}
        for index, step in enumerate(self.steps):
            for v in step[8].inputs:
                step_readers.setdefault(v.id, []).append(index)
        self.steps = group_runs(self.steps, step_readers, set(output_names))
        self._direct_keys = [key for step in self.steps for key in _direct_keys_of(step)]
        self._outputs_by_name = {o[1]: o for o in self.outputs}
        self._overwritable = _overwritable_inputs(graph, nodes, last_use, self.steps)

    def summary(self) -> PlanSummary:
        steps = tuple(f"split[{','.join(s[8].op for s in step[1].steps)}]" if step[0] == "split" else step[8].op
                      for step in self.steps)
        kept = sum(a.nbytes for a in self.constants.values() if 0 not in a.strides)
        return PlanSummary(steps, self.folded_ops, kept, len(self.splats), dict(self._overwritable),
                           {name: shape for name, (_, shape) in self._through.items()})

    def _step(self, node, dead, direct):
        op = node.op
        in_ids = tuple(v.id for v in node.inputs)
        out_id = node.outputs[0].id if node.outputs else None
        out_type = node.outputs[0].type if len(node.outputs) == 1 else None
        if op in _BINARY_UFUNCS and out_type is not None and out_type.dtype == "float32":
            return ("binary", _BINARY_UFUNCS[op], in_ids, out_id, out_type.shape, out_type.num_elements, dead, direct, node)
        if op in _UNARY_UFUNCS and out_type is not None and out_type.dtype == "float32":
            return ("unary", _UNARY_UFUNCS[op], in_ids, out_id, out_type.shape, out_type.num_elements, dead, direct, node)
        if op == "dot_general" and out_type is not None and out_type.dtype == "float32":
            return ("dot", None, in_ids, out_id, out_type.shape, out_type.num_elements, dead, direct, node)
        return ("generic", evaluator(op), in_ids, tuple(v.id for v in node.outputs),
                [v.type for v in node.outputs], None, dead, None, node)

    def matches(self, graph: Graph) -> bool:
        return (self.node_count == len(graph.nodes) and self.outputs_snapshot == graph.outputs
                and self.inputs_snapshot == graph.inputs)

    def run(self, buffers: dict[str, np.ndarray], pool: BufferPool | None = None) -> None:
        lent = _Lent(pool if pool is not None else BufferPool())
        env: list = [None] * self.size
        for vid, name, np_dtype, count, shape in self.inputs:
            env[vid] = np.ndarray((count,), dtype=np_dtype, buffer=buffers[name]).reshape(shape)
        for vid, array in self.constants.items():
            env[vid] = array
        splats = self.splats
        targets = self._direct_targets(buffers)
        try:
            with np.errstate(all="ignore"):
                self._run_steps(self.steps, env, splats, lent, targets)
            for vid, name, np_dtype, count, shape, dtype in self.outputs:
                value = env[vid]
                target = targets.get(name)
                if target is not None and value is target:
                    continue
                through = self._through.get(name)
                if through is not None and _is_view_of_whole(value, targets.get(through)):
                    continue
                target = np.ndarray((count,), dtype=np_dtype, buffer=buffers[name]).reshape(shape)
                target[...] = dtypes.convert(np.asarray(value), dtype)
        finally:
            env = None
            lent.release_all()

    def _direct_targets(self, buffers) -> dict:
        """Output buffers results may be written into as they are computed: those overlapping no
        other bound buffer but inputs nothing reads after the result is computed (an in-place
        op's output is also its input: ``param.sub_(step)`` writes once ``param`` is read)."""
        keys = self._direct_keys
        if not keys:
            return {}
        targets = {}
        overwritable = self._overwritable
        # A few buffers: compare each pair's byte extents (may_share_memory; reading each address
        # through __array_interface__ cost ~1 us per buffer and launch). Many (an optimizer graph's
        # hundreds): sort the extents once instead of comparing every pair.
        overlaps = overlapping(buffers) if len(keys) * len(buffers) > _PAIRWISE_MAX else None
        for key in keys:
            name, shape = (key, None) if isinstance(key, str) else key
            buf = buffers[name]
            free = overwritable.get(key, ())
            if overlaps is not None:
                if any(other not in free for other in overlaps.get(name, ())):
                    continue
            elif any(np.may_share_memory(buf, other) for other_name, other in buffers.items()
                     if other_name != name and other_name not in free):
                continue
            out = self._outputs_by_name[name]
            targets[key] = np.ndarray((out[3],), dtype=out[2], buffer=buf).reshape(out[4] if shape is None else shape)
        return targets

    @classmethod
    def _run_steps(cls, steps, env, splats, lent, targets) -> None:
        """Run ``steps`` in order, dropping each value after its last reader."""
        for step in steps:
            if step[0] == "split":  # names its own failing op, drops its own dead values
                step[1].run(env, splats, lent, targets, cls._run_steps)
            else:
                try:
                    cls._run_step(step, env, splats, lent, targets)
                except Exception as err:  # an op's numpy form failed: name it
                    raise_op_failure(step[8], err)
            dead = step[6]
            if dead:  # a buffer is freed only by dropping a value (or, later, its views)
                for vid in dead:
                    env[vid] = None
                lent.recycle()

    @staticmethod
    def _run_step(step, env, splats, lent, targets) -> None:
        kind, fn, in_ids, out_id, shape, count, _dead, direct, node = step
        if kind == "binary":
            a, b = env[in_ids[0]], env[in_ids[1]]
            if a.dtype is _F32 or a.dtype == _F32:
                if b.dtype == _F32:
                    a = splats.get(in_ids[0], a)
                    b = splats.get(in_ids[1], b)
                    out = targets.get(direct) if direct else None
                    if out is None:
                        out = lent.array(shape, count)
                    fn(a, b, out=out)
                    env[out_id] = out
                    return
        elif kind == "unary":
            a = env[in_ids[0]]
            if a.dtype == _F32:
                out = targets.get(direct) if direct else None
                if out is None:
                    out = lent.array(shape, count)
                fn(a, out=out)
                env[out_id] = out
                return
        elif kind == "dot":
            arrays = [env[i] for i in in_ids]
            out = targets.get(direct) if direct else None
            if out is None:
                out = lent.array(shape, count)
            dot_into(arrays, node.attrs, out)
            env[out_id] = out
            return
        if kind == "generic":
            results = fn([env[i] for i in in_ids], node.attrs, shape)
            for vid, r in zip(out_id, results):
                env[vid] = r
            return
        # A fast step whose operands turned out not to be fp32: the op's own definition.
        results = evaluator(node.op)([env[i] for i in in_ids], node.attrs, [v.type for v in node.outputs])
        env[out_id] = results[0]


def _overwritable_inputs(graph: Graph, nodes, last_use: list[int], steps) -> dict:
    """For each output key an elementwise step writes directly: the graph inputs whose buffer it may
    share, because nothing reads the input (or a value that may view it) after that step. The
    step itself may read it: a numpy ufunc reads every operand element before writing it, or
    works on a copy where they overlap otherwise."""
    writers = {id(step[8]): step[7] for step in steps if step[0] in ("binary", "unary") and step[7] is not None}
    if not writers:
        return {}
    fresh = {id(step[8]) for step in steps if step[0] in ("binary", "unary", "dot")}  # ufuncs, matmuls
    # The inputs each value may be a view of: whatever another op (reshape, transpose, broadcast,
    # select's chosen operand...) makes from one.
    views: dict[int, frozenset] = {v.id: frozenset([v.name]) for v in graph.inputs}
    last_read = {v.name: last_use[v.id] for v in graph.inputs}
    result: dict[str, frozenset] = {}
    for i, node in enumerate(nodes):
        name = writers.get(id(node))
        if name is not None:
            result[name] = frozenset(n for n, last in last_read.items() if last <= i)
        if id(node) in fresh:
            continue
        seen = frozenset().union(*(views.get(v.id, frozenset()) for v in node.inputs))
        if seen:
            for out in node.outputs:
                views[out.id] = seen
                for n in seen:
                    last_read[n] = max(last_read[n], last_use[out.id])
    return result


def overlapping(buffers: dict[str, np.ndarray]) -> dict[str, list[str]]:
    """For each (flat, contiguous) buffer, the other buffers whose bytes overlap its own."""
    spans = []
    for name, buf in buffers.items():
        if buf.nbytes:
            if buf.flags.c_contiguous:
                start = buf.__array_interface__["data"][0]
                spans.append((start, start + buf.nbytes, name))
            else:
                spans.append((*_byte_bounds(buf), name))
    spans.sort()
    overlaps: dict[str, list[str]] = {}
    open_spans: list[tuple[int, str]] = []  # (end, name) of earlier spans
    for start, end, name in spans:
        open_spans = [(e, n) for e, n in open_spans if e > start]
        for _e, other in open_spans:
            overlaps.setdefault(name, []).append(other)
            overlaps.setdefault(other, []).append(name)
        open_spans.append((end, name))
    return overlaps


def _is_view_of_whole(value: np.ndarray, whole: np.ndarray | None) -> bool:
    """Whether ``value`` is ``whole``'s memory, all of it, in C order (a reshape of it)."""
    return (whole is not None and value.size == whole.size and value.flags.c_contiguous
            and value.__array_interface__["data"][0] == whole.__array_interface__["data"][0])


def _direct_keys_of(step) -> list:
    """The output buffers (by name, or (name, shape) when written through) a step writes into."""
    if step[0] == "split":
        return [direct for _dtype, direct in step[1].escaping.values() if direct is not None]
    return [step[7]] if step[7] is not None else []


def explain(graph: Graph) -> PlanSummary:
    """What the fast executor's plan for ``graph`` does (see ``PlanSummary``)."""
    return plan_of(graph).summary()


def plan_of(graph: Graph) -> Plan:
    plan = graph.__dict__.get("_plan")
    if plan is None or not plan.matches(graph):
        plan = graph._plan = Plan(graph)
    return plan
