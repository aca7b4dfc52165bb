"""``torch.compile(backend="neuron")``: dynamo graph -> AOTAutograd forward/backward graphs ->
one NEFF each (``runtime.CompiledGraph``).

Registered by name through the ``torch_dynamo_backends`` entry point, so ``backend="neuron"``,
``torch.compiler.set_default_backend("neuron")`` and ``torch.compiler.list_backends()`` work
without importing torch_neuronx first.

Options (``torch.compile(..., options={...})`` or the environment, docs/environment.md):

* ``fallback``: ``"error"`` (default) raises NeuronCompileError naming the op and its source line
  when a graph cannot be lowered; ``"eager"`` runs that graph op by op instead (with a warning).
  Environment: ``TORCH_NEURONX_COMPILE_FALLBACK``.

A graph with an integer op no engine computes exactly for the values it may hold (int64 cumsum,
argmin, multiply or division past 2**24; integer division by a value that may be zero, which CPU
refuses by value) runs op by op in either mode, with a ``NeuronCompileFallbackWarning``: eager
mode then runs just those ops through CPU fallback, giving CPU's values (or CPU's error), never a
rounding through fp32 and never an error CPU would not raise.

Shapes are static: a graph dynamo made dynamic (after a shape change, or ``dynamic=True``) is
refused with advice (``dynamic=False``, ``torch_neuronx.dynamo.pad_to_bucket``), or runs eagerly
under the eager fallback.
"""

from __future__ import annotations

import itertools
import os
import warnings

import torch
from neuronxcc.compiler import INEXACT_INTEGER
from neuronxcc.frontend.fx import sdpa_math

from . import metrics, opaque
from .decompositions import decompositions
from .errors import NeuronCompileError, NeuronDynamicShapeError
from .kernel_calls import GraphWithKernels, has_kernel_calls
from .runtime import CompiledGraph

FALLBACK_ENV = "TORCH_NEURONX_COMPILE_FALLBACK"
_FALLBACKS = ("error", "eager")
_graph_ids = itertools.count()
opaque.register_when_dynamo_loads()


class NeuronCompileFallbackWarning(UserWarning):
    """A graph could not be compiled for the NeuronCore and runs eagerly (op by op) instead."""


def _fallback_mode(options: dict) -> str:
    value = str(options.get("fallback", os.environ.get(FALLBACK_ENV, "error"))).strip().lower() or "error"
    if value not in _FALLBACKS:
        raise ValueError(f"neuron backend fallback={value!r}: expected one of {list(_FALLBACKS)} "
                         f"(option 'fallback' or {FALLBACK_ENV})")
    return value


def _is_dynamic(example_inputs) -> bool:
    for x in example_inputs:
        if isinstance(x, torch.SymInt | torch.SymFloat | torch.SymBool):
            return True
        if isinstance(x, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in (*x.shape, *x.stride())):
            return True
    return False


def neuron_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None, **_ignored):
    """The dynamo backend. Returns the compiled callable for ``gm``."""
    # dynamo's own modules load with the first compile, not with ``import torch``'s autoload.
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd


    options = dict(options or {})
    unknown = set(options) - {"fallback"}
    if unknown:
        raise ValueError(f"neuron backend: unknown options {sorted(unknown)} (known: ['fallback'])")
    fallback = _fallback_mode(options)
    graph_id = next(_graph_ids)
    if _is_dynamic(example_inputs):
        err = NeuronDynamicShapeError(f"graph{graph_id}")
        if fallback == "error":
            raise err
        _warn_fallback(f"graph{graph_id}", gm, err)
        return gm.forward

    def compile_device_graph(aot_gm, aot_inputs, name: str, kind: str):
        try:
            return CompiledGraph(aot_gm, aot_inputs, name, kind)
        except NeuronCompileError as err:
            if fallback == "error" and err.rule != INEXACT_INTEGER:
                raise
            _warn_fallback(name, aot_gm, err)
            return make_boxed_func(aot_gm.forward)

    def compiler(kind: str):
        def compile_graph(aot_gm, aot_inputs):
            name = f"graph{graph_id}_{kind}"
            if has_kernel_calls(aot_gm):  # NKI kernel ops: the graph is split around their launches
                return GraphWithKernels(aot_gm, name, kind, compile_device_graph)
            return compile_device_graph(aot_gm, aot_inputs, name, kind)

        return compile_graph

    # Argument mutations stay in the graph (copy_ nodes): the NEFF writes them in place where it can.
    backend = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                           inference_compiler=compiler("inference"), decompositions=decompositions(),
                           keep_inference_input_mutations=True)
    # Attention traces as matmul/softmax: the fused CPU kernel's backward has no StableHLO lowering.
    with sdpa_math():
        return backend(gm, example_inputs)


def _warn_fallback(name: str, gm, err: Exception) -> None:
    ops = sum(n.op == "call_function" for n in gm.graph.nodes)
    metrics.record(metrics.GraphRecord(name, "fallback", ops, "eager", 0.0))
    warnings.warn(f"{name} runs eagerly (fallback): {err}", NeuronCompileFallbackWarning, stacklevel=2)
