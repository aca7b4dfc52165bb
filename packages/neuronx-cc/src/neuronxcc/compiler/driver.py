"""The compiler pipeline: graph -> checks -> fusion groups -> per-group lowering -> Program -> NEFF."""

from __future__ import annotations

import hashlib
import json

from neuron_sim import Architecture, Program, ProgramBuilder, ValidationError, get_architecture
from neuron_sim.graph import Graph
from neuron_sim.neff import Neff
from neuron_sim.timing import estimate

from .checks import check_graph
from .context import LoweringContext
from .errors import CompileError
from .fold import fold_constants
from .fusion import live_nodes, partition
from .lower import LOWERINGS, load_all
from .lower.movement import materialize

COMPILER = "neuronx-cc"
VERSION = "2.32.0+sim"


def _arch(arch) -> Architecture:
    if arch is None or isinstance(arch, str):
        return get_architecture(arch)
    return arch


def compile_graph(graph: Graph, arch: Architecture | str | None = None, *, name: str | None = None) -> Program:
    """Lower ``graph`` to an ISA program for one NeuronCore.

    The program's tensor table binds the graph's named inputs (``input``) and outputs (``output``);
    scratch tensors are ``internal``; large constants are extra ``input`` tensors whose data is in
    ``program.metadata["constants"]`` (the runtime binds them at launch; see ``constant_arrays``
    for other launchers). ``program.graph`` is the graph's
    dict form, for the fast executor. Raises CompileError for anything it cannot lower.
    """
    arch = _arch(arch)
    if isinstance(graph, dict):
        try:
            graph = Graph.from_dict(graph)
        except ValidationError as err:
            raise CompileError(err.rule, err.detail) from None
    check_graph(graph)
    load_all()
    nodes = live_nodes(graph)
    folded = fold_constants(nodes)
    groups = partition(nodes, folded, arch.sbuf_usable_bytes_per_partition)
    builder = ProgramBuilder(name or graph.name, arch)
    ctx = LoweringContext(graph, arch, builder, nodes, folded)
    for group in groups:
        first = group.nodes[0]
        ctx.em.location = first.location
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
    _finish_outputs(ctx)
    metadata = {"compiler": f"{COMPILER} {VERSION}", "groups": ctx.group_log}
    if ctx.constants:
        metadata["constants"] = ctx.constants
    try:
        return builder.build(graph=graph.to_dict(), metadata=metadata)
    except ValidationError as err:
        raise CompileError(err.rule, f"internal compiler error: the lowered program is invalid: {err.detail}") from err


def _finish_outputs(ctx) -> None:
    """Graph outputs no group stored (views of inputs, constants, iotas) are copied into place."""
    input_names = {v.name for v in ctx.graph.inputs}
    for v in ctx.graph.outputs:
        if v.name in input_names:
            continue
        view = ctx.views.get(v.id)
        if view is not None and view.kind == "hbm" and view.tensor == v.name and view.covers_tensor(v.type.num_elements):
            continue
        ctx.em.location = ctx.producer[v.id].location if v.id in ctx.producer else None
        try:
            materialize(ctx, ctx.resolve(v), ctx.destination(v))
        except CompileError:
            raise
        except Exception as err:
            node = ctx.producer.get(v.id)
            raise CompileError("compile.internal", f"internal compiler error writing output {v.name!r}: "
                               f"{type(err).__name__}: {err}", op=node.op if node else "output",
                               location=node.location if node else None) from err
        ctx.views[v.id] = ctx.destination(v)


def graph_hash(graph: Graph) -> str:
    return hashlib.sha256(json.dumps(graph.to_dict(), sort_keys=True, default=str).encode()).hexdigest()


def compile_neff(graph: Graph, arch: Architecture | str | None = None, *, name: str | None = None) -> Neff:
    """Compile ``graph`` and package it with its timing summary (computed once, reused per launch)."""
    arch = _arch(arch)
    program = compile_graph(graph, arch, name=name)
    timing = estimate(program, arch)
    metadata = {"compiler": COMPILER, "version": VERSION, "target": arch.name, "graph_hash": graph_hash(graph),
                "instructions": len(program.instructions), "groups": len(program.metadata.get("groups", []))}
    return Neff(program, timing_summary=timing.summary, metadata=metadata)
