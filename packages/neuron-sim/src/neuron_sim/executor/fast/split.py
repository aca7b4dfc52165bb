"""Runs of elementwise plan steps, evaluated as two halves at once while a core is free.

A GELU, an Adam update or a dropout mask is a run of elementwise steps over one shape. While the
thread issuing ops waits for the device (``spare_core``), such a run is evaluated twice over: the
first half of its rows on the executor's thread and the second half on the spare core, each half
taking every step in order. numpy releases the GIL inside each whole-half call, so the halves
proceed at once: a run of ten multiplies over 1M elements took 0.74 ms instead of 1.54 ms, an erf
1.8 ms instead of 3.3 ms.

The arithmetic does not change. Every step is elementwise over operands of the run's shape, so an
element gets the same numpy loop on the same operand values whichever rows a call covers.
Broadcasts of values from before the run (scalars, a LayerNorm's row statistics) are views; they
are made once, whole, and sliced like any other operand. With no core free, the run's steps are
taken one by one, as the plan would have taken them.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ...errors import ExecutionError, NeuronSimError, ValidationError
from ...graph import ops as graph_ops
from . import spare_core
from .ops import evaluator

# Which runs are split. Each half's thread waits for the GIL between its numpy calls while the other
# holds it (tens of microseconds per hand-over), so a split pays off only when each call is long:
# ten multiplies over 1M elements took half the time split, over 256K elements longer than not.
MIN_ELEMENTS = 1 << 19
MIN_WORK = 1 << 22  # elements x step weights: a ufunc weighs 1, a composite activation (erf) 8
_COMPOSITE_WEIGHT = 8

_F32 = "float32"


def raise_op_failure(node, err: Exception):
    """Re-raise ``err``, raised while evaluating ``node``, located at the node and naming its op."""
    if isinstance(err, ValidationError):
        raise err.at(node.location) from None
    if isinstance(err, NeuronSimError):
        raise err
    raise ExecutionError(f"graph op {node.op} at {node.location or '?'} failed: {type(err).__name__}: {err}") from err


class SplitRun:
    """Consecutive plan steps over one shape (see the module doc). ``steps``: the plan steps, for
    the one-by-one evaluation; the rest describes the split one:

    * ``hoisted``: (node, evaluate, operand ids, output id) of broadcasts evaluated whole first;
    * ``members``: (node, fn, is_ufunc, ((inside the run?, id) per operand), output id, slot);
      a ufunc writes into ``slot`` (a reused whole-shape buffer), or, with slot None, into the
      value's own buffer because it escapes;
    * ``escaping``: id -> (numpy dtype, direct output name or None) of the values read after the
      run or bound to graph outputs, each written whole.
    """

    def __init__(self, steps, shape, hoisted, members, escaping, slot_count):
        self.steps = steps
        self.shape = shape
        self.count = math.prod(shape)
        self.hoisted = hoisted
        self.members = members
        self.escaping = escaping
        self.slot_count = slot_count
        self.outer_ids = sorted({vid for m in members for inside, vid in m[3] if not inside})
        axis = next(a for a, n in enumerate(shape) if n >= 2)
        lead = (slice(None),) * axis
        cut = shape[axis] // 2
        self.halves = ((*lead, slice(0, cut)), (*lead, slice(cut, None)))

    def run(self, env, splats, lent, targets, run_steps) -> None:
        """Evaluate the run; ``run_steps`` is the plan's own loop, for the one-by-one evaluation."""
        if not spare_core.available():
            run_steps(self.steps, env, splats, lent, targets)
            return
        node = self.hoisted[0][0] if self.hoisted else None
        try:
            for node, evaluate, in_ids, out_id in self.hoisted:
                env[out_id] = evaluate([env[i] for i in in_ids], node.attrs, [node.outputs[0].type])[0]
        except Exception as err:
            raise_op_failure(node, err)
        whole = {}
        for vid, (np_dtype, direct) in self.escaping.items():
            out = targets.get(direct) if direct else None
            whole[vid] = out if out is not None else lent.array(self.shape, self.count, np_dtype)
        slots = [lent.array(self.shape, self.count) for _ in range(self.slot_count)]
        operands = {vid: splats.get(vid, env[vid]) for vid in self.outer_ids}
        first, second = self.halves
        spare_core.run_halves(lambda: self._part(first, operands, whole, slots),
                              lambda: self._part(second, operands, whole, slots))
        for vid, array in whole.items():
            env[vid] = array
        for step in self.steps:
            for vid in step[6]:
                env[vid] = None

    def _part(self, idx, operands, whole, slots) -> None:
        local = {}
        node = None
        try:
            for node, fn, is_ufunc, sources, out_id, slot in self.members:
                args = [local[vid] if inside else operands[vid][idx] for inside, vid in sources]
                if is_ufunc:
                    out = (whole[out_id] if slot is None else slots[slot])[idx]
                    fn(*args, out=out)
                else:
                    out = fn(args, node.attrs, [v.type for v in node.outputs])[0]
                    if out_id in whole:
                        whole[out_id][idx] = out
                local[out_id] = out
        except Exception as err:
            raise_op_failure(node, err)


def group_runs(steps: list, readers: dict, graph_outputs: set) -> list:
    """``steps`` (plan step tuples, in order) with each run of elementwise steps over one shape,
    big enough to be worth splitting, replaced by a ("split", SplitRun, ...) step.

    ``readers``: value id -> indices (in ``steps``) of the steps reading it; ``graph_outputs``:
    ids of graph outputs."""
    grouped, run, positions = [], [], []
    shape = None

    def flush():
        if not run:
            return
        work = sum(1 if s[0] in ("binary", "unary") else _COMPOSITE_WEIGHT for s in run if s[8].op != "broadcast_in_dim")
        if work * math.prod(shape) >= MIN_WORK:
            grouped.append(_make_run(run, positions, readers, graph_outputs))
        else:
            grouped.extend(run)
        run.clear()
        positions.clear()

    for index, step in enumerate(steps):
        fits = _member_shape(step)
        if not (fits is not None and run and fits == shape and _joins(step, run)):
            flush()
            if fits is None:
                grouped.append(step)
                continue
            shape = fits
        run.append(step)
        positions.append(index)
    flush()
    return grouped


def _member_shape(step) -> tuple | None:
    """The shape of the run ``step`` could belong to, or None."""
    node = step[8]
    if node is None or len(node.outputs) != 1:
        return None
    out = node.outputs[0].type
    if out.num_elements < MIN_ELEMENTS:
        return None
    if node.op == "broadcast_in_dim":
        return out.shape
    # Elementwise ops (the registry's fact): generic ones read only the result dtype from their
    # output types, so they run unchanged on half of each operand.
    if not graph_ops.has(node.op, "elementwise") or any(v.type.shape != out.shape for v in node.inputs):
        return None
    return out.shape


def _joins(step, run) -> bool:
    """A broadcast joins a run (hoisted before it) only if its operand comes from before the run."""
    if step[8].op != "broadcast_in_dim":
        return True
    return step[8].inputs[0].id not in {s[8].outputs[0].id for s in run}


def _make_run(run, positions, readers, graph_outputs):
    shape = run[0][8].outputs[0].type.shape
    hoisted = [(s[8], graph_ops.OPS["broadcast_in_dim"].evaluate, (s[8].inputs[0].id,), s[8].outputs[0].id)
               for s in run if s[8].op == "broadcast_in_dim"]
    computed = [s for s in run if s[8].op != "broadcast_in_dim"]
    inside = {s[8].outputs[0].id for s in computed}
    last = positions[-1]
    escaping = {}
    for step in computed:
        out = step[8].outputs[0]
        if out.id in graph_outputs or any(r > last for r in readers.get(out.id, ())):
            escaping[out.id] = (np.dtype(dtypes.to_numpy(out.type.dtype)), step[7])
    # Slots: whole-shape buffers for the fp32 ufunc results read only inside the run, each reused
    # once its value's last reader is done (never by that reader: results are not written over
    # their own operands).
    last_reader = {}
    for i, step in enumerate(computed):
        for v in step[8].inputs:
            last_reader[v.id] = i
    free, slot_of, slot_count, members = [], {}, 0, []
    for i, step in enumerate(computed):
        node = step[8]
        out_id = node.outputs[0].id
        is_ufunc = step[0] in ("binary", "unary") and all(v.type.dtype == _F32 for v in node.inputs)
        slot = None
        if is_ufunc and out_id not in escaping:
            slot = free.pop() if free else slot_count
            slot_count = max(slot_count, slot + 1)
            slot_of[out_id] = slot
        fn = step[1] if is_ufunc else evaluator(node.op)
        members.append((node, fn, is_ufunc, tuple((v.id in inside, v.id) for v in node.inputs), out_id, slot))
        for v in {v.id for v in node.inputs}:
            if last_reader.get(v) == i and v in slot_of:
                free.append(slot_of.pop(v))
    return ("split", SplitRun(list(run), shape, hoisted, members, escaping, slot_count), (), None, None, None, (), None, None)
