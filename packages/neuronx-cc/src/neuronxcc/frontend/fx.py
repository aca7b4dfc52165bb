"""FX graphs -> StableHLO (torch-mlir) -> graph, with the fixes torch.compile graphs need.

The graph is imported to the Torch dialect here; torch-mlir's pass pipeline then runs in the
bounded worker of ``pipeline`` (a crash or a runaway is ``LoweringStopped``, not a dead process),
after ``fx_rewrites`` rewrote the patterns it is known to mishandle.

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
import io
import operator
import re

from neuron_sim.graph import Graph

from . import fx_rewrites, pipeline
from .errors import MissingDependency, UnsupportedOp
from .pipeline_worker import PipelineError
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

    table.update(get_decompositions([aten.addmv, aten.elu, aten.logaddexp, aten.linalg_vector_norm]))
    # Ours where PyTorch's decompose into prims torch-mlir cannot import (prims.rev, prims.hypot...).
    table[aten.flip.default] = _flip
    table[aten.roll.default] = _roll
    table[aten.round.decimals] = _round_decimals
    table[aten.remainder.Tensor] = _remainder
    table[aten.remainder.Scalar] = _remainder
    table[aten.fmod.Scalar] = _fmod_scalar
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
    if not isinstance(b, torch.Tensor):
        b = _number_tensor(torch, b)
    mod = torch.fmod(a, b)
    return torch.where((mod != 0) & ((mod < 0) != (b < 0)), mod + b, mod)


def _fmod_scalar(a, b):
    """fmod by a number: torch-mlir leaves the number of ``fmod.Scalar`` as an unlowered
    ``torch.constant.float`` / ``int``; by a 0-dim tensor (which promotes as the number does) it
    lowers ``fmod.Tensor``."""
    torch = _torch()[0]
    return torch.fmod(a, _number_tensor(torch, b))


def _number_tensor(torch, b):
    """A Python number as the 0-dim tensor that promotes with a tensor as the number does."""
    return torch.scalar_tensor(b, dtype=torch.float32 if isinstance(b, float) else torch.int64)


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
                "so attention decomposes to matmul/softmax before autograd records it", location=fx_rewrites.node_location(n))


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


def _lower(gm, name: str):
    """The StableHLO module (bytecode) of ``gm``: rewritten (``fx_rewrites``), imported to the
    Torch dialect here, lowered by torch-mlir's pipeline in the bounded worker (``pipeline``)."""
    pipeline.start()  # the worker's first startup overlaps the import below
    fx_rewrites.rewrite(gm)
    return pipeline.lower(torch_dialect_module(gm, name), name)


def torch_dialect_module(gm, name: str = "main") -> bytes:
    """``gm`` imported by torch-mlir's FX importer, as is: the Torch-dialect module (bytecode)
    ``pipeline.lower`` takes. Raises ``PipelineError`` naming torch-mlir's diagnostics."""
    _torch_module, _fx, ir, torch_dialect, FxImporter = _torch()
    ctx = ir.Context()
    torch_dialect.register_dialect(ctx)
    diagnostics: list[tuple[str, str]] = []

    def on_diagnostic(d):  # keep torch-mlir's errors for our message instead of printing them
        diagnostics.append((str(d.location), str(d.message)))
        return True

    handler = ctx.attach_diagnostic_handler(on_diagnostic)
    try:
        importer = FxImporter(context=ctx)
        importer.import_stateless_graph(gm.graph, func_name=name)
        torch_module = io.BytesIO()
        importer.module.operation.write_bytecode(torch_module)
    except Exception as err:
        raise PipelineError("importing the FX graph", str(err).strip().splitlines()[0] if str(err).strip()
                            else type(err).__name__, diagnostics) from err
    finally:
        handler.detach()
    return torch_module.getvalue()


def _lowering_error(failure: PipelineError) -> UnsupportedOp:
    from .mlir import describe_location

    for loc, message in failure.diagnostics:
        m = re.search(r"torch\.operator\"?\(?\)?\s*\"([^\"]+)\"", message) or re.search(r"operation '([^']+)'", message)
        if m:
            return UnsupportedOp(m.group(1), f"torch-mlir cannot lower it to StableHLO: {message.splitlines()[0][:300]}",
                                 location=describe_location(loc))
    detail = "; ".join(m for _, m in failure.diagnostics) or failure.message
    return UnsupportedOp("torch-mlir", f"lowering to StableHLO failed: {detail[:500]}")


def from_fx(gm, example_inputs=None, *, func_name: str = "main") -> Graph:
    """Import an FX ``GraphModule`` (ATen graphs from AOTAutograd, or dynamo graphs plus their
    example inputs) into a graph. Graph inputs are named after the gm's placeholders, outputs
    ``output0...`` over the non-None outputs; ``graph.none_outputs`` lists the dropped positions."""
    torch = _torch()[0]
    _check_fused_sdpa_backward(gm)
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    out = _output_node(gm)
    saved_args = out.args
    none_pos = strip_none_outputs(gm)
    try:
        if _is_aten_graph(gm, torch):
            try:
                module = _lower(gm, func_name)
            except PipelineError as failure:
                if example_inputs is None:
                    raise _lowering_error(failure) from None
                module = None
        else:
            module = None
        if module is None:
            traced = _retrace(gm, example_inputs, torch)
            _check_fused_sdpa_backward(traced)
            try:
                module = _lower(traced, func_name)
            except PipelineError as failure:
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
