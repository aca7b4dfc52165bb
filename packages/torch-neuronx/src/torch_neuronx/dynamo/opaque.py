"""The device's own machinery is opaque to Dynamo, from the first frame it traces.

Dynamo inlines every Python function a compiled frame calls unless ``torch._dynamo.trace_rules``
skips its file, and it compiles every new frame that starts while its frame hook is set (eager
neuron ops run inside a compiled frame call our Python kernels). Traced, our code is nonsense to
it: the C++ shim's functions ("Dynamo does not know how to trace the builtin
`torch_neuronx._C...`"), the dispatcher's ``lru_cache`` and locks - graph breaks and empty
host-only graphs, and once a RecursionError (an out= tensor resized after a compiled graph traced
the eager op build, which called the compiled function again). PyTorch's own device code
(``torch/cuda``, the dispatcher) is in the skip list for the same reason; ours is added to it.

The rules must be in place before Dynamo traces its first frame, which may be before any graph
reaches the backend (``torch.neuron.synchronize()`` then a graph break, in a fresh process).
Importing Dynamo with torch_neuronx would cost seconds on every ``import torch``, so the rules
are added when ``torch._dynamo.trace_rules`` is imported (at once if it already is).
"""

from __future__ import annotations

import importlib.util
import pkgutil
import sys
import threading

from ..integrations.after_import import run_after_import

# Everything of ours but the user-facing frontends that run user code (``torch_neuronx.dynamo``'s
# padding helper, nki_op's wrappers call the user's kernel), plus the packages below torch_neuronx.
NOT_TRACED = (
    "torch_neuronx.device",
    "torch_neuronx.execution",
    "torch_neuronx.ops",
    "torch_neuronx.compiled",
    "torch_neuronx.kernels",
    "torch_neuronx.nki_integration",
    "torch_neuronx.dynamo.backend",
    "torch_neuronx.dynamo.runtime",
    "torch_neuronx.dynamo.graph_cache",
    "torch_neuronx.dynamo.lowering",
    "torch_neuronx.dynamo.partition",
    "torch_neuronx.dynamo.host_operands",
    "torch_neuronx.dynamo.kernel_calls",
    "torch_neuronx.dynamo.metrics",
    "torch_neuronx.dynamo.opaque",
    "torch_neuronx.distributed",
    "torch_neuronx.profiling",
    "neuron_sim",
    "nki",
    "neuronxcc",
    "torch_mlir",
)
TRACE_RULES = "torch._dynamo.trace_rules"

_lock = threading.Lock()
_registered = False


def register(trace_rules=None) -> None:
    """Add ``NOT_TRACED`` to Dynamo's skip list (once)."""
    global _registered
    with _lock:
        if _registered:
            return
        if trace_rules is None:
            from torch._dynamo import trace_rules
        for name in NOT_TRACED:
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin is None and spec.submodule_search_locations:
                # A namespace package (no __init__.py): dynamo skips by module file, so name each module.
                for info in pkgutil.iter_modules(spec.submodule_search_locations):
                    trace_rules.add(f"{name}.{info.name}")
            elif spec is not None:
                trace_rules.add(name)
        _registered = True


def register_when_dynamo_loads() -> None:
    """``register`` now if Dynamo's trace rules are loaded, else right after they load."""
    if TRACE_RULES in sys.modules:
        register(sys.modules[TRACE_RULES])
    else:
        run_after_import(TRACE_RULES, register)
