"""The compiler pipeline: graph -> checks -> fusion groups -> per-group lowering -> Program -> NEFF."""

from __future__ import annotations

import functools
import importlib.util
import os

from neuron_sim import Architecture, Program, ProgramBuilder, ValidationError, get_architecture
from neuron_sim.fingerprint import tree_fingerprint
from neuron_sim.graph import Graph
from neuron_sim.graph.ops import VIEW_OPS
from neuron_sim.neff import Neff
from neuron_sim.timing import program_timing

from .aliasing import ALIASING_KEY, aliasing_facts
from .checks import check_graph
from .context import LoweringContext
from .errors import CompileError
from .fold import fold_constants
from .fusion import GENERATED_OPS, live_nodes, partition
from .integers import as_planned, as_views, check_integers
from .lower import LOWERINGS, builtin  # noqa: F401 (builtin registers the built-in lowerings)
from .lower.movement import materialize, materialize_value
from .sbuf import SpacedAllocator

COMPILER = "neuronx-cc"
VERSION = "2.32.0+sim"


@functools.cache
def code_fingerprint() -> str:
    """The fingerprint of the compiler code that shapes a NEFF: this package (fusion, tiling,
    lowering, the pipeline; not its test helpers) and its frontends (FX and StableHLO import).
    Computed once per process; the frontends are hashed where they are installed, unimported."""
    frontend = importlib.util.find_spec("neuronxcc.frontend")
    roots = [os.path.dirname(os.path.abspath(__file__)), *(frontend.submodule_search_locations if frontend else ())]
    return tree_fingerprint(*roots, exclude=("testing.py",))


def _arch(arch) -> Architecture:
    if arch is None or isinstance(arch, str):
        return get_architecture(arch)
    return arch


def compile_graph(graph: Graph, arch: Architecture | str | None = None, *, name: str | None = None) -> Program:
    """Lower ``graph`` to an ISA program for one NeuronCore.

    The program's tensor table binds the graph's named inputs (``input``) and outputs (``output``);
    scratch tensors are ``internal``; large constants are extra ``input`` tensors whose data is in
    ``program.metadata["constants"]`` (the runtime binds them at launch; see ``constant_arrays``
    for other launchers). ``program.graph`` is ``graph`` itself, for the fast executor (serialized
    only if the program is written to a NEFF). Raises CompileError for anything it cannot lower.
    """
    arch = _arch(arch)
    if isinstance(graph, dict):
        try:
            graph = Graph.from_dict(graph)
        except ValidationError as err:
            raise CompileError(err.rule, err.detail) from None
    check_graph(graph)
    nodes = as_views(live_nodes(graph))
    folded = fold_constants(nodes)
    nodes, integers = check_integers(nodes, graph, folded)
    nodes = as_planned(nodes, integers)
    groups = partition(nodes, folded, arch.sbuf_usable_bytes_per_partition)
    builder = ProgramBuilder(name or graph.name, arch)
    builder.sbuf_allocator = spaced = SpacedAllocator(builder.sbuf_allocator)
    ctx = LoweringContext(graph, arch, builder, nodes, folded)
    ctx.integer_alu = integers.integer_alu
    for group in groups:
        first = group.nodes[0]
        ctx.em.location = first.location
        spaced.new_group()
        try:
            LOWERINGS[group.kind](ctx, group)
        except CompileError:
            raise
        except ValidationError as err:  # a hardware rule the lowering broke: say which op
            raise CompileError(err.rule, err.detail, op=first.op, shapes=[str(v.type) for v in first.inputs],
                               location=first.location) from err
        except Exception as err:  # a compiler bug: still an error naming the op, never a crash
            raise CompileError("compile.internal", f"internal compiler error lowering a {group.kind} group "
                               f"({[n.op for n in group.nodes]}): {type(err).__name__}: {err}", op=first.op,
                               shapes=[str(v.type) for v in first.inputs], location=first.location) from err
        # Outputs that are views of what is computed by now are copied now: the copies overlap the
        # groups that follow instead of queueing up after the last one.
        ctx.groups_done += 1
        _finish_outputs(ctx, ready_only=True)
    _finish_outputs(ctx)
    metadata = {"compiler": f"{COMPILER} {VERSION}", "groups": ctx.group_log}
    if ctx.constants:
        metadata["constants"] = ctx.constants
    try:
        return builder.build(graph=graph, metadata=metadata)
    except ValidationError as err:
        raise CompileError(err.rule, f"internal compiler error: the lowered program is invalid: {err.detail}") from err


def _finish_outputs(ctx, ready_only: bool = False) -> None:
    """Graph outputs no group stored (views of inputs, constants, iotas) are copied into place
    (``ready_only``: those whose values are all computed already)."""
    input_names = {v.name for v in ctx.graph.inputs}
    for v in ctx.graph.outputs:
        if v.name in input_names or v.id in ctx.finished_outputs:
            continue
        if ready_only:
            if not _computed(ctx, v):
                continue
            # Copied one group later than it could be: the copy's trigger (in an engine's in-order
            # stream) then finds its source stored and holds up none of the next group's loads.
            if ctx.ready_since.setdefault(v.id, ctx.groups_done) >= ctx.groups_done:
                continue
        ctx.finished_outputs.add(v.id)
        node = ctx.producer.get(v.id)
        ctx.em.location = node.location if node is not None else None
        dest = ctx.destination(v)
        try:
            view = ctx.views.get(v.id)
            if view is None and node is not None and node.op == "reshape" and v.id not in ctx.folded:
                src = ctx.resolve(node.inputs[0])
                if src.reshape(tuple(v.type.shape)) is None:  # no strides say it: copy the source in
                    materialize_value(ctx, v, dest)
                    ctx.views[v.id] = dest
                    continue
            view = ctx.resolve(v)
            if view.kind == "hbm" and view.tensor == v.name and view.covers_tensor(v.type.num_elements):
                continue  # a group stored it in place
            materialize(ctx, view, dest)
        except CompileError:
            raise
        except Exception as err:
            raise CompileError("compile.internal", f"internal compiler error writing output {v.name!r}: "
                               f"{type(err).__name__}: {err}", op=node.op if node else "output",
                               location=node.location if node else None) from err
        ctx.views[v.id] = dest


def _computed(ctx, v) -> bool:
    """Whether ``v`` (a value seen through view ops) resolves without anything still to compute."""
    while v.id not in ctx.views and v.id not in ctx.folded:
        node = ctx.producer.get(v.id)
        if node is None:
            return True  # a graph input
        if node.op in GENERATED_OPS:
            return True
        if node.op not in VIEW_OPS:
            return False
        v = node.inputs[0]
    return True


def compile_neff(graph: Graph, arch: Architecture | str | None = None, *, name: str | None = None) -> Neff:
    """Compile ``graph`` and package it with its timing summary. The timing is computed once: this
    process's launches of the program reuse this result, other processes the stored summary."""
    arch = _arch(arch)
    program = compile_graph(graph, arch, name=name)
    timing = program_timing(program, arch)
    metadata = {"compiler": COMPILER, "version": VERSION, "target": arch.name,
                "instructions": len(program.instructions), "groups": len(program.metadata.get("groups", [])),
                ALIASING_KEY: aliasing_facts(graph)}
    return Neff(program, timing_summary=timing.summary, metadata=metadata)
