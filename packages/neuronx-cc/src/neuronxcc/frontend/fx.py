"""FX graphs -> StableHLO (torch-mlir) -> graph, with the fixes torch.compile graphs need.

    graph = from_fx(gm, example_inputs)          # a dynamo, AOTAutograd forward or backward graph
    graph.none_outputs                           # positions of the gm's ``None`` outputs, dropped

The three fixes (see the torch-mlir reference note):

1. **None outputs.** Backward graphs return ``None`` for inputs that need no gradient; torch-mlir
   cannot lower a ``!torch.none`` result. They are dropped for the import (the caller's graph
   module is restored afterwards) and their positions reported in ``graph.none_outputs`` so a
   runtime can re-insert them (``insert_none_outputs``).
2. **Decompositions.** Graphs that are not plain ATen (dynamo graphs) or that keep ops torch-mlir
   cannot lower (``threshold_backward`` keeps an int scalar) are re-traced with ``make_fx`` and
   torch-mlir's own decomposition table, under the example inputs' fake mode.
3. **SDPA.** Re-tracing happens under ``sdpa_kernel(SDPBackend.MATH)`` so attention decomposes into
   matmul/softmax. A backward graph that already holds the fused CPU kernel's backward cannot be
   fixed here: that raises ``UnsupportedOp`` saying to trace under ``sdpa_math()``
   (AOTAutograd backends: wrap the compiled call, and pass ``decompositions()`` to ``aot_autograd``).
"""

from __future__ import annotations

import contextlib
import operator
import re

from neuron_sim.graph import Graph

from .errors import MissingDependency, UnsupportedOp
from .stablehlo import import_module


def _torch():
    try:
        import torch
        from torch_mlir import fx, ir
        from torch_mlir.dialects import torch as torch_dialect
        from torch_mlir.extras.fx_importer import FxImporter
    except ImportError as err:
        raise MissingDependency("importing FX graphs", err) from None
    return torch, fx, ir, torch_dialect, FxImporter


def decompositions() -> dict:
    """torch-mlir's decomposition table, for ``aot_autograd(decompositions=...)``, plus our
    corrections of ops torch-mlir lowers with other semantics than PyTorch's."""
    torch = _torch()[0]
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    aten = torch.ops.aten
    # PyTorch's own decompositions of ops torch-mlir has no StableHLO lowering for, into ops it has.
    from torch._decomp import get_decompositions

    table.update(get_decompositions([aten.addmv, aten.elu, aten.logaddexp, aten.linalg_vector_norm, aten.constant_pad_nd]))
    # Ours where PyTorch's decompose into prims torch-mlir cannot import (prims.rev, prims.hypot...).
    table[aten.flip.default] = _flip
    table[aten.roll.default] = _roll
    table[aten.round.decimals] = _round_decimals
    table[aten.remainder.Tensor] = _remainder
    table[aten.remainder.Scalar] = _remainder
    table[aten.take.default] = _take
    return table


def _take(self, index):
    """torch.take counts negative indices from the end; torch-mlir's lowering gathers them as
    they are (an out-of-bounds error). Wrapped first, as CPU does."""
    torch = _torch()[0]
    flat = self.reshape(-1)
    wrapped = torch.where(index < 0, index + flat.shape[0], index)
    return torch.ops.aten.index_select(flat, 0, wrapped.reshape(-1)).reshape(index.shape)


def _flip(self, dims):
    """Each flipped dim read backwards by an index_select (a gather the compiler lowers)."""
    torch = _torch()[0]
    for d in dims:
        n = self.shape[d]
        self = torch.ops.aten.index_select(self, d, torch.arange(n - 1, -1, -1, device=self.device))
    return self


def _roll(self, shifts, dims=()):
    """The two slices of each rolled dim, concatenated in swapped order."""
    torch = _torch()[0]
    if not dims:
        return _roll(self.reshape(-1), shifts, [0]).reshape(self.shape)
    for shift, d in zip(shifts, dims):
        n = self.shape[d]
        s = shift % n if n else 0
        if s:
            self = torch.cat([self.narrow(d, n - s, s), self.narrow(d, 0, n - s)], dim=d)
    return self.clone() if not any(shifts) else self


def _round_decimals(self, decimals=0):
    """As CPU rounds to decimals: scale by 10**|decimals|, round half to even, scale back."""
    torch = _torch()[0]
    if decimals == 0:
        return torch.round(self)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return torch.round(self * scale) / scale
    return torch.round(self / scale) * scale


def _remainder(a, b):
    """torch.remainder takes the divisor's sign (Python's %); torch-mlir lowers it to
    stablehlo.remainder, which takes the dividend's (C's fmod). Corrected as CPU computes it:
    fmod, then plus the divisor where the signs differ and the result is not zero."""
    torch = _torch()[0]
    if not isinstance(b, torch.Tensor):  # a 0-dim tensor promotes as the scalar does
        b = torch.scalar_tensor(b, dtype=torch.float32 if isinstance(b, float) else torch.int64)
    mod = torch.fmod(a, b)
    return torch.where((mod != 0) & ((mod < 0) != (b < 0)), mod + b, mod)


def sdpa_math():
    """Context manager: ``scaled_dot_product_attention`` runs (and traces) as its math decomposition."""
    torch = _torch()[0]
    return torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH)


def _output_node(gm):
    return next(n for n in reversed(gm.graph.nodes) if n.op == "output")


def strip_none_outputs(gm) -> list[int]:
    """Drop ``None`` outputs of ``gm`` in place (recompiling it); returns their positions."""
    out = _output_node(gm)
    values = out.args[0]
    if not isinstance(values, (tuple, list)):
        return []
    none_pos = [i for i, v in enumerate(values) if v is None]
    if none_pos:
        out.args = (type(values)(v for v in values if v is not None),)
        gm.recompile()
    return none_pos


def insert_none_outputs(outputs: list, none_positions: list[int]) -> list:
    """The inverse of ``strip_none_outputs`` on a list of results."""
    outputs = list(outputs)
    for p in none_positions:
        outputs.insert(p, None)
    return outputs


def _node_location(node) -> str | None:
    frames = re.findall(r'File "([^"]+)", line (\d+)', node.stack_trace or "")
    return f"{frames[-1][0]}:{frames[-1][1]}" if frames else None


def _is_aten_graph(gm, torch) -> bool:
    for n in gm.graph.nodes:
        if n.op in ("call_module", "call_method", "get_attr"):
            return False
        if n.op == "placeholder" and "val" not in n.meta:
            return False
        if n.op == "call_function" and n.target is not operator.getitem and not isinstance(n.target, torch._ops.OpOverload):
            return False
    return True


def _check_fused_sdpa_backward(gm) -> None:
    for n in gm.graph.nodes:
        name = str(n.target)
        if n.op == "call_function" and "_scaled_dot_product" in name and "backward" in name:
            raise UnsupportedOp(
                name, "the graph holds a fused scaled_dot_product_attention backward, which has no StableHLO lowering; "
                "trace the model under neuronxcc.frontend.fx.sdpa_math() (torch.nn.attention.sdpa_kernel(SDPBackend.MATH)) "
                "so attention decomposes to matmul/softmax before autograd records it", location=_node_location(n))


def _lift_dim_ops_over_0dim(gm) -> None:
    """torch-mlir 20261001 segfaults lowering an op with a ``dim`` argument over a 0-dim tensor
    (``sum(x, 0, keepdim=True)`` with ``x.dim() == 0``), so such an op runs over the tensor viewed
    as ``[1]`` (dims 0 and -1 name that axis, as they name the 0-dim tensor's) and its result is
    viewed back to its own shape: same values. An op that cannot be rewritten so (several tensor
    operands or results) is refused rather than crashing the process."""
    import torch
    from torch.utils._pytree import tree_map

    graph = gm.graph
    for n in list(graph.nodes):
        schema = getattr(n.target, "_schema", None)
        if n.op != "call_function" or schema is None or not n.args:
            continue
        if not any(a.name == "dim" for a in schema.arguments):
            continue
        first = n.args[0]
        val = getattr(first, "meta", {}).get("val") if hasattr(first, "meta") else None
        if val is None or getattr(val, "dim", lambda: 1)() != 0:
            continue
        tensor_inputs = [a for a in n.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        result = n.meta.get("val")
        # One tensor result, or several read through getitem (max.dim's values and indices).
        readers = [n] if isinstance(result, torch.Tensor) else list(n.users)
        if tensor_inputs != [first] or not all(
                r is n or (r.target is operator.getitem and isinstance(r.meta.get("val"), torch.Tensor)) for r in readers):
            raise UnsupportedOp(str(n.target), "a dim argument over a 0-dim tensor (torch-mlir cannot import it)",
                                location=_node_location(n))
        shapes = [list(r.meta["val"].shape) for r in readers]
        with graph.inserting_before(n):
            lifted = graph.call_function(torch.ops.aten.view.default, (first, [1]))
        lifted.meta["val"] = val.view(1)
        n.args = (lifted, *n.args[1:])
        values = tree_map(lambda a: a.meta["val"] if isinstance(a, torch.fx.Node) else a, (n.args, n.kwargs))
        n.meta["val"] = n.target(*values[0], **values[1])
        for reader, shape in zip(readers, shapes):
            if reader is not n:
                reader.meta["val"] = n.meta["val"][reader.args[1]]
            with graph.inserting_after(reader):
                back = graph.call_function(torch.ops.aten.view.default, (reader, shape))
            back.meta["val"] = reader.meta["val"].view(shape)
            reader.replace_all_uses_with(back, delete_user_cb=lambda user, back=back: user is not back)
    gm.recompile()


def _retrace(gm, example_inputs, torch):
    if example_inputs is None:
        raise UnsupportedOp("fx.GraphModule", "this graph needs re-tracing to ATen with decompositions, "
                            "which needs example_inputs")
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode = detect_fake_mode(list(example_inputs))
    with fake_mode if fake_mode is not None else contextlib.nullcontext(), sdpa_math():
        return make_fx(gm, decomposition_table=decompositions(),
                       tracing_mode="real" if fake_mode is not None else "fake")(*example_inputs)


class _LoweringFailed(Exception):
    def __init__(self, diagnostics: list[tuple[str, str]], err: Exception):
        super().__init__(str(err))
        self.diagnostics = diagnostics
        self.err = err


def _lower(gm, name: str, torch_deps):
    torch, fx, ir, torch_dialect, FxImporter = torch_deps
    _lift_dim_ops_over_0dim(gm)
    ctx = ir.Context()
    torch_dialect.register_dialect(ctx)
    diagnostics: list[tuple[str, str]] = []

    def on_diagnostic(d):  # keep torch-mlir's errors for our message instead of printing them
        diagnostics.append((str(d.location), str(d.message)))
        return True

    handler = ctx.attach_diagnostic_handler(on_diagnostic)
    try:
        module = fx.stateless_fx_import(gm, output_type="torch", fx_importer=FxImporter(context=ctx), model_name=name)
        _to_stablehlo(module)
        return module
    except Exception as err:
        raise _LoweringFailed(diagnostics, err) from err
    finally:
        handler.detach()


# torch-mlir's StableHLO pipeline legalizes chlo.erf into a ~40-op rational polynomial (116
# instructions and 250 us for a 1M-element erf, the bulk of gelu), where the NeuronCore has erf as
# one ScalarE activation. So the torch ops are converted first, each chlo.erf is swapped for a
# custom call the legalization leaves alone (read back as erf by our StableHLO importer), and the
# whole pipeline then runs as torch-mlir defines it (its first pass finds nothing left to convert).
ERF_CALL_TARGET = "neuron.erf"


def _to_stablehlo(module) -> None:
    from torch_mlir import ir
    from torch_mlir.compiler_utils import run_pipeline_with_repro_report

    run_pipeline_with_repro_report(
        module, "builtin.module(func.func(convert-torch-to-stablehlo{allow-non-finites=true}))",
        "Converting Torch ops to StableHLO and CHLO")
    erfs = []
    _walk(module.operation, lambda op: erfs.append(op) if op.name == "chlo.erf" else None)
    for erf in erfs:
        with ir.InsertionPoint(erf), erf.location:
            call = ir.Operation.create("stablehlo.custom_call", results=[erf.results[0].type], operands=list(erf.operands),
                                       attributes={"call_target_name": ir.StringAttr.get(ERF_CALL_TARGET)})
        erf.results[0].replace_all_uses_with(call.results[0])
        erf.erase()
    run_pipeline_with_repro_report(
        module, "builtin.module(torch-backend-to-stablehlo-backend-pipeline{allow-non-finites=true})",
        "Lowering Torch Backend IR -> StableHLO Backend IR")


def _walk(op, visit) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                visit(inner.operation)
                _walk(inner.operation, visit)


def _lowering_error(failure: _LoweringFailed) -> UnsupportedOp:
    from .mlir import describe_location

    for loc, message in failure.diagnostics:
        m = re.search(r"torch\.operator\"?\(?\)?\s*\"([^\"]+)\"", message) or re.search(r"operation '([^']+)'", message)
        if m:
            return UnsupportedOp(m.group(1), f"torch-mlir cannot lower it to StableHLO: {message.splitlines()[0][:300]}",
                                 location=describe_location(loc))
    detail = "; ".join(m for _, m in failure.diagnostics) or str(failure.err).strip().splitlines()[0]
    return UnsupportedOp("torch-mlir", f"lowering to StableHLO failed: {detail[:500]}")


def from_fx(gm, example_inputs=None, *, func_name: str = "main") -> Graph:
    """Import an FX ``GraphModule`` (ATen graphs from AOTAutograd, or dynamo graphs plus their
    example inputs) into a graph. Graph inputs are named after the gm's placeholders, outputs
    ``output0...`` over the non-None outputs; ``graph.none_outputs`` lists the dropped positions."""
    deps = _torch()
    torch = deps[0]
    _check_fused_sdpa_backward(gm)
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    out = _output_node(gm)
    saved_args = out.args
    none_pos = strip_none_outputs(gm)
    try:
        if _is_aten_graph(gm, torch):
            try:
                module = _lower(gm, func_name, deps)
            except _LoweringFailed as failure:
                if example_inputs is None:
                    raise _lowering_error(failure) from None
                module = None
        else:
            module = None
        if module is None:
            traced = _retrace(gm, example_inputs, torch)
            _check_fused_sdpa_backward(traced)
            try:
                module = _lower(traced, func_name, deps)
            except _LoweringFailed as failure:
                raise _lowering_error(failure) from None
    finally:
        if none_pos:
            out.args = saved_args
            gm.recompile()
    graph = import_module(module, func_name=func_name)
    if len(graph.inputs) == len(placeholders):
        for v, name in zip(graph.inputs, placeholders):
            v.name = name
    graph.none_outputs = none_pos
    return graph
